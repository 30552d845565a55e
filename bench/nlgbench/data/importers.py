"""Importers: turn a local copy of a public human-judgment release into nlgbench's own-data JSONL.

Three layouts: SummEval's ``model_annotations.aligned.paired.jsonl`` (:func:`import_summeval`),
a WMT DA segment-level folder like ``DAseg-wmt16`` (:func:`import_wmt_da`), and any CSV/TSV/Parquet
table with named columns (:func:`import_table`). Each writes one JSON object per item,

    {"lp", "seg_id", "system", "doc_id"?, "source", "references": [...], "hypothesis", "human"}

where ``human`` is a number or a mapping dimension -> number or null (missing). The output is
written atomically (temporary file, then rename). Bad input raises a one-line
:class:`nlgbench.foundations.errors.UserError` naming the file, line or row, and field. No data is bundled:
the user downloads the release and points the importer at it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from nlgbench.data.dataset import json_object, read_text, tsv_table
from nlgbench.foundations.errors import UserError, closest, unknown_name

Record = dict[str, Any]  # one output object, in the field order written

FORMATS = ("summeval", "wmt-da", "table")
#: SummEval's annotator groups: 3 experts and 5 crowd workers (Mechanical Turk) per summary.
ANNOTATORS = {"expert": "expert_annotations", "turker": "turker_annotations"}
#: The fields of a DA file name ``DAseg.<testset>.<field>.<lp>`` and the item field each fills.
DA_FIELDS = {"source": "source", "reference": "references", "mt-system": "hypothesis", "human": "human"}
_DA_NAME = re.compile(r"^DAseg\.(?P<testset>.+)\.(?P<field>source|reference|mt-system|human)\.(?P<lp>[^.]+)$")
#: Item fields a table column can fill (``references`` takes several comma-separated columns).
TABLE_FIELDS = ("lp", "seg_id", "system", "doc_id", "source", "hypothesis", "references", "human")
_TABLE_READERS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".parquet": None, ".pq": None}
_INTEGER = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True)
class ImportSummary:
    """What an importer wrote: counts a user checks against the release's documentation."""

    out: Path
    items: int
    systems: int  # distinct non-empty system names
    documents: int  # distinct doc_id values (0: the format has none)
    references_min: int  # references per item, fewest
    references_max: int  # references per item, most
    dimensions: tuple[str, ...]  # human dimensions; () when human is one number per item
    missing: Mapping[str, int]  # dimension ('human' when it is one number per item) -> items whose value is null
    notes: tuple[str, ...] = ()  # what the user should know (e.g. no source texts in the file)

    def line(self, fmt: str) -> str:
        """One line for the terminal."""
        refs = str(self.references_min) if self.references_min == self.references_max else (
            f"{self.references_min}-{self.references_max}")
        if self.dimensions:
            missing = ", ".join(f"{d} {n}" for d, n in self.missing.items() if n) or "none"
            human = f"human dimensions {', '.join(self.dimensions)} (missing: {missing})"
        else:
            unscored = self.missing.get("human", 0)
            human = "human: one score per item" + (f" (missing: {unscored})" if unscored else "")
        notes = "".join(f"; note: {note}" for note in self.notes)
        return (f"{fmt}: wrote {self.items} items to {self.out} ({self.systems} systems, {self.documents} documents, "
                f"{refs} reference{'' if refs == '1' else 's'} per item, {human}){notes}")


# --------------------------------------------------------------------------- SummEval


def summeval_records(src: str | os.PathLike[str], *, annotators: str = "expert") -> tuple[list[Record], list[str]]:
    """Items of SummEval's ``model_annotations.aligned(.paired).jsonl`` and notes for the user.

    One item per line: seg_id and doc_id = ``id`` (the CNN/DM story), system = ``model_id``,
    hypothesis = ``decoded``, references = ``references`` (CNN/DM highlights first, then 10 crowd
    references), source = ``text`` (only in the *paired* file; else ""), human = per dimension the
    mean over the chosen annotators (``expert``: 3, the usual choice in papers; ``turker``: 5).
    """
    if annotators not in ANNOTATORS:
        raise unknown_name("SummEval annotator group", annotators, ANNOTATORS)
    path = Path(src)
    key = ANNOTATORS[annotators]
    records: list[Record] = []
    first_at: dict[tuple[str, str], int] = {}
    without_text = 0
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        obj = json_object(line, where)
        missing = [k for k in ("id", "model_id", "decoded", "references", key) if k not in obj]
        if missing:
            raise UserError(f"{where}: missing field(s) {', '.join(missing)} (not SummEval's annotation layout?)")
        doc_id, system = _json_text(obj, "id", where), _json_text(obj, "model_id", where)
        if (doc_id, system) in first_at:
            raise UserError(f"{where}: duplicate summary id={doc_id!r} model_id={system!r} (first at line {first_at[doc_id, system]})")
        first_at[doc_id, system] = number
        if "text" in obj:
            source = _json_text(obj, "text", where)
        else:
            source = ""
            without_text += 1
        records.append({
            "lp": "en", "seg_id": doc_id, "system": system, "doc_id": doc_id, "source": source,
            "references": _json_references(obj.get("references"), where),
            "hypothesis": _json_text(obj, "decoded", where),
            "human": _mean_annotations(obj[key], f"{where}: {key}"),
        })
    if not records:
        raise UserError(f"{path} has no summaries")
    dimensions = sorted({d for r in records for d in r["human"]})
    for r in records:  # every item names every dimension; one nobody rated is null
        r["human"] = {d: r["human"].get(d) for d in dimensions}
    notes = []
    if without_text:
        notes.append(f"{without_text} lines have no 'text' (the unpaired file?): source left empty; "
                     "SummEval's data_processing/pair_data.py adds the CNN/DM articles")
    return records, notes


def import_summeval(src: str | os.PathLike[str], out: str | os.PathLike[str], *, annotators: str = "expert") -> ImportSummary:
    """Import SummEval's annotation file `src` into the JSONL file `out` (see :func:`summeval_records`)."""
    records, notes = summeval_records(src, annotators=annotators)
    return write_items(records, out, src=src, notes=notes)


def _mean_annotations(value: Any, where: str) -> dict[str, float | None]:
    """Per dimension, the mean of the annotators' scores that are present (null if none is)."""
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: expected a non-empty list of annotations, got {value!r}")
    scores: dict[str, list[float]] = {}
    for index, annotation in enumerate(value):
        if not isinstance(annotation, dict):
            raise UserError(f"{where}[{index}]: expected an object of dimension scores, got {annotation!r}")
        for dim, score in annotation.items():
            scores.setdefault(str(dim), [])
            if score is None:
                continue
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise UserError(f"{where}[{index}].{dim}: score {score!r} is not a finite number")
            scores[str(dim)].append(float(score))
    return {dim: (sum(values) / len(values) if values else None) for dim, values in scores.items()}


def _json_text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise UserError(f"{where}: field {key!r} must be text, got {value!r}")
    return value


def _json_references(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: field 'references' must be a non-empty list of texts")
    return list(value)


# --------------------------------------------------------------------------- WMT DA folders


def wmt_da_records(src: str | os.PathLike[str], *, lps: Sequence[str] | None = None) -> list[Record]:
    """Items of a WMT DA segment-level folder: per language pair the four parallel line files
    ``DAseg.<testset>.{source,reference,mt-system,human}.<lp>``; line i of each is one item.

    seg_id = the 1-based line number, system = "" (DA files name no systems), human = the number
    on the line (WMT15/16: z-scored DA averaged per segment). `lps` keeps only those pairs.
    Items come sorted by language pair, then line.
    """
    folder = Path(src)
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (expected a WMT DA folder of DAseg.<testset>.<field>.<lp> files)")
    found: dict[str, dict[str, Path]] = {}  # lp -> field -> file
    testsets: set[str] = set()
    for path in sorted(folder.iterdir()):
        match = _DA_NAME.match(path.name)
        if match and path.is_file():
            testsets.add(match["testset"])
            found.setdefault(match["lp"], {})[match["field"]] = path
    if not found:
        raise UserError(f"{folder}: no DAseg.<testset>.{{source,reference,mt-system,human}}.<lp> files")
    if len(testsets) > 1:
        raise UserError(f"{folder}: files of several test sets ({', '.join(sorted(testsets))}); keep one per folder")
    wanted = sorted(found) if not lps else sorted(set(lps))
    for lp in wanted:
        if lp not in found:
            raise unknown_name("language pair", lp, found)
    testset = next(iter(testsets))
    records: list[Record] = []
    for lp in wanted:
        files = found[lp]
        absent = [f"DAseg.{testset}.{fld}.{lp}" for fld in DA_FIELDS if fld not in files]
        if absent:
            raise UserError(f"{folder}: language pair {lp} lacks {', '.join(absent)}")
        columns = {fld: _lines(files[fld]) for fld in DA_FIELDS}
        counts = {fld: len(lines) for fld, lines in columns.items()}
        fewest = min(counts, key=lambda fld: counts[fld])
        most = max(counts, key=lambda fld: counts[fld])
        if counts[fewest] != counts[most]:
            raise UserError(f"{files[most]} line {counts[fewest] + 1}: no matching line in {files[fewest].name} "
                            f"({counts[most]} lines vs {counts[fewest]})")
        for i in range(counts["human"]):
            where = f"{files['human']} line {i + 1}"
            records.append({
                "lp": lp, "seg_id": i + 1, "system": "", "source": columns["source"][i],
                "references": [columns["reference"][i]], "hypothesis": columns["mt-system"][i],
                "human": _number(columns["human"][i], where),
            })
    return records


def import_wmt_da(src: str | os.PathLike[str], out: str | os.PathLike[str], *, lps: Sequence[str] | None = None) -> ImportSummary:
    """Import the WMT DA folder `src` into the JSONL file `out` (see :func:`wmt_da_records`)."""
    return write_items(wmt_da_records(src, lps=lps), out, src=src)


# --------------------------------------------------------------------------- tables (CSV, TSV, Parquet)


def table_records(
    src: str | os.PathLike[str],
    *,
    columns: Mapping[str, str] | None = None,
    human: Mapping[str, str] | None = None,
    lp: str | None = None,
) -> list[Record]:
    """Items of a table (``.csv``, ``.tsv``, ``.parquet``), one per row, read with pandas.

    `columns` maps item fields (lp, seg_id, system, doc_id, source, hypothesis, references, human)
    to column names; ``references`` takes several, comma-separated. A field not mapped is read
    from a column of the same name if there is one (``references`` from ``reference``). `human`
    maps dimension -> column for several dimensions; else the ``human`` field is one number per
    item. An empty or NaN score cell is null: that item's score is missing. `lp` is a constant
    language pair (or domain label) for tables without one. Every text cell used must be present.
    Rows are counted from 1, header excluded.
    """
    path = Path(src)
    table = _read_table(path)
    available = [str(c) for c in table.columns]
    mapping = {field: spec for field, spec in (columns or {}).items()}
    if "reference" in mapping:  # one-reference shorthand
        if "references" in mapping:
            raise UserError("map either 'reference' or 'references', not both")
        mapping["references"] = mapping.pop("reference")
    for field in mapping:
        if field not in TABLE_FIELDS:
            raise unknown_name("item field", field, TABLE_FIELDS)
    if human and "human" in mapping:
        raise UserError("give human scores either as one column (human=COLUMN) or as dimensions (--human DIM=COLUMN), not both")
    if lp is not None and "lp" in mapping:
        raise UserError("give the language pair either as a constant (--lp) or as a column (lp=COLUMN), not both")
    defaults = {field: field for field in TABLE_FIELDS} | {"references": "reference"}
    for field, name in defaults.items():
        if field not in mapping and name in available and not (field == "lp" and lp is not None) and not (field == "human" and human):
            mapping[field] = name
    required = ["seg_id", "hypothesis", "references"] + ([] if lp is not None else ["lp"]) + ([] if human else ["human"])
    absent = [f for f in required if f not in mapping]
    if absent:
        raise UserError(f"{path}: no column for {', '.join(absent)} (map with --column FIELD=COLUMN; "
                        f"columns: {', '.join(available)})")
    if lp is not None and not lp.strip():
        raise UserError("--lp must not be empty")
    if lp is not None and "lp" in available:
        raise UserError(f"{path} has an 'lp' column: map it (lp=COLUMN is the default) or drop --lp")
    ref_columns = [c.strip() for c in mapping.pop("references").split(",")]
    used = [*mapping.values(), *ref_columns, *(human or {}).values()]
    for name in used:
        if name not in available:
            hits = closest(name, available)
            hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
            raise UserError(f"{path}: no column {name!r}{hint} (columns: {', '.join(available)})")
    seg_ids = _seg_ids(table[mapping["seg_id"]].tolist(), path, mapping["seg_id"])
    records: list[Record] = []
    first_at: dict[tuple[str, int | str, str], int] = {}
    for index, row in enumerate(table.itertuples(index=False)):
        cells = dict(zip(available, row))
        n = index + 1
        where = f"{path} row {n}"
        record: Record = {
            "lp": lp.strip() if lp is not None else _cell_label(cells, mapping["lp"], where),
            "seg_id": seg_ids[index],
            "system": _cell_label(cells, mapping["system"], where) if "system" in mapping else "",
        }
        if "doc_id" in mapping:
            record["doc_id"] = _cell_label(cells, mapping["doc_id"], where)
        record["source"] = _cell_text(cells, mapping["source"], where) if "source" in mapping else ""
        record["references"] = [_cell_text(cells, c, where) for c in ref_columns]
        record["hypothesis"] = _cell_text(cells, mapping["hypothesis"], where)
        if human:
            record["human"] = {dim: _cell_score(cells, col, where) for dim, col in human.items()}
        else:
            record["human"] = _cell_score(cells, mapping["human"], where)  # None (an empty cell): missing
        key = (record["lp"], record["seg_id"], record["system"])
        if key in first_at:
            raise UserError(f"{where}: duplicate item lp={key[0]!r} seg_id={key[1]!r} system={key[2]!r} "
                            f"(first at row {first_at[key]})")
        first_at[key] = n
        records.append(record)
    if not records:
        raise UserError(f"{path} has no rows")
    if not human and all(r["human"] is None for r in records):
        raise UserError(f"{path}: column {mapping['human']!r} (human) is empty in every row")
    return records


def import_table(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    columns: Mapping[str, str] | None = None,
    human: Mapping[str, str] | None = None,
    lp: str | None = None,
) -> ImportSummary:
    """Import the table `src` into the JSONL file `out` (see :func:`table_records`)."""
    return write_items(table_records(src, columns=columns, human=human, lp=lp), out, src=src)


def _read_table(path: Path) -> "pd.DataFrame":
    """The table as a DataFrame; CSV/TSV cells as text, only empty cells missing (so "NA" stays text).

    TSV is read by the own-data loader's rule (`nlgbench.data.dataset.tsv_table`: fields verbatim, no quoting);
    CSV by pandas with CSV quoting. A column name given twice is refused (pandas would rename the second)."""
    import pandas as pd  # here, not at import: the CLI starts without pandas

    suffix = path.suffix.lower()
    if suffix not in _TABLE_READERS:
        raise UserError(f"{path}: unsupported table type {suffix or '(none)'!r} (use {', '.join(_TABLE_READERS)})")
    if not path.is_file():
        raise UserError(f"missing file {path}")
    sep = _TABLE_READERS[suffix]
    if sep == "\t":
        header, rows = tsv_table(path, read_text(path))
        return pd.DataFrame([[cell or None for cell in fields] for _, fields in rows], columns=header, dtype=object)
    try:
        if sep is None:
            table = pd.read_parquet(path)
        else:
            table = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8",
                                header=None)  # the header row as data: its names exactly as written
            if len(table):
                table = table.iloc[1:].set_axis([str(name) for name in table.iloc[0]], axis=1).reset_index(drop=True)
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: reading Parquet needs pyarrow (pip install 'nlgbench[parquet]'): {first}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})") from None
    except (ValueError, OSError) as exc:  # pandas' parser errors are ValueErrors; pyarrow's too
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read table {path}: {message}") from None
    names = [str(name) for name in table.columns]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise UserError(f"{path}: duplicate column(s) {', '.join(duplicated)} in the header row")
    return table


def _is_missing(value: Any) -> bool:
    import pandas as pd

    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT


def _cell_text(cells: Mapping[str, Any], column: str, where: str) -> str:
    value = cells[column]
    if _is_missing(value):
        raise UserError(f"{where}: column {column!r} is empty")
    if not isinstance(value, str):
        raise UserError(f"{where}: column {column!r} must be text, got {value!r}")
    return value


def _cell_label(cells: Mapping[str, Any], column: str, where: str) -> str:
    """A name (lp, system, doc_id): text, or an integer written as text (Parquet id columns)."""
    value = cells[column]
    if not _is_missing(value) and not isinstance(value, (bool, str)) and hasattr(value, "__index__"):
        value = str(int(value))
    label = _cell_text(cells, column, where).strip()
    if not label:
        raise UserError(f"{where}: column {column!r} is empty")
    return label


def _cell_score(cells: Mapping[str, Any], column: str, where: str) -> float | None:
    """A finite number, or None for an empty cell."""
    value = cells[column]
    if _is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return _number(value, f"{where}: column {column!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise UserError(f"{where}: column {column!r}: human score {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise UserError(f"{where}: column {column!r}: human score {value!r} is not a finite number")
    return number


def _seg_ids(values: list[Any], path: Path, column: str) -> list[int | str]:
    """seg_ids of a column: integers if every value is one (5, 5.0, "5"), else texts."""
    for index, value in enumerate(values):
        if _is_missing(value) or (isinstance(value, str) and not value.strip()):
            raise UserError(f"{path} row {index + 1}: column {column!r} (seg_id) is empty")
        if isinstance(value, bool):
            raise UserError(f"{path} row {index + 1}: column {column!r} (seg_id) must be an integer or text, got {value!r}")
    as_text = [v.strip() if isinstance(v, str) else v for v in values]
    if all(isinstance(v, str) and _INTEGER.match(v) for v in as_text) or all(not isinstance(v, str) for v in as_text):
        out: list[int | str] = []
        for index, value in enumerate(as_text):
            try:
                whole = isinstance(value, str) or float(value) == int(value)
            except (TypeError, ValueError, OverflowError):
                whole = False
            if not whole:
                raise UserError(f"{path} row {index + 1}: column {column!r} (seg_id) {value!r} is not an integer")
            out.append(int(value))
        return out
    return [str(v) for v in as_text]


# --------------------------------------------------------------------------- writing


def write_items(
    records: Sequence[Record],
    out: str | os.PathLike[str],
    *,
    src: str | os.PathLike[str] | None = None,
    notes: Iterable[str] = (),
) -> ImportSummary:
    """Write `records` as JSONL to `out` atomically (temporary file in the same folder, then rename).

    `out` must end in ``.jsonl`` (the loader's type) and must not be the input `src`.
    """
    target = Path(out)
    if target.suffix.lower() != ".jsonl":
        raise UserError(f"output {target}: must end in .jsonl (nlgbench reads own data as .jsonl)")
    if src is not None and target.exists() and target.resolve() == Path(src).resolve():
        raise UserError(f"output {target} is the input file; choose another --out")
    if target.is_dir():
        raise UserError(f"output {target} is a folder")
    if not records:
        raise UserError(f"nothing to write to {target}: the input has no items")
    summary = summarize(records, target, notes)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        tmp.chmod(0o644)  # mkstemp makes it private; this is plain data
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return summary


def summarize(records: Sequence[Record], out: Path, notes: Iterable[str] = ()) -> ImportSummary:
    """Counts of `records` for the summary line."""
    ref_counts = [len(r["references"]) for r in records] or [0]
    dimensions = sorted({d for r in records if isinstance(r["human"], dict) for d in r["human"]})
    missing = {d: sum(1 for r in records if isinstance(r["human"], dict) and r["human"].get(d) is None) for d in dimensions}
    if not dimensions:
        missing = {"human": sum(1 for r in records if r["human"] is None)}
    return ImportSummary(
        out=out,
        items=len(records),
        systems=len({r["system"] for r in records if r["system"]}),
        documents=len({r["doc_id"] for r in records if "doc_id" in r}),
        references_min=min(ref_counts),
        references_max=max(ref_counts),
        dimensions=tuple(dimensions),
        missing=missing,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- command line


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``nlgbench datasets import FORMAT SRC --out FILE.jsonl``."""
    p.add_argument("format", choices=FORMATS, help="summeval: model_annotations.aligned.paired.jsonl; "
                   "wmt-da: a DAseg-wmtNN folder; table: a .csv, .tsv or .parquet file")
    p.add_argument("src", help="the downloaded file or folder")
    p.add_argument("--out", required=True, help="the JSONL file to write (replaced atomically)")
    p.add_argument("--annotators", choices=sorted(ANNOTATORS),
                   help="summeval: whose scores to average per dimension (default expert: 3 per summary)")
    p.add_argument("--lp", action="append", metavar="LP",
                   help="wmt-da: only these language pairs (repeatable or comma-separated); "
                        "table: the language pair (or domain label) of every row")
    p.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                   help=f"table: the column of an item field ({', '.join(TABLE_FIELDS)}); references=COL1,COL2,...")
    p.add_argument("--human", action="append", default=[], metavar="DIM=COLUMN",
                   help="table: a human dimension and its column (repeatable); empty cells are missing values")


def cmd_import(args: argparse.Namespace) -> int:
    """Run ``datasets import``: write the JSONL file and print a summary line to stderr."""
    fmt = args.format
    _only_for(fmt, "summeval", "--annotators", args.annotators is not None)
    _only_for(fmt, "table", "--column", bool(args.column))
    _only_for(fmt, "table", "--human", bool(args.human))
    lps = [lp.strip() for value in (args.lp or []) for lp in value.split(",") if lp.strip()]
    if args.lp and not lps:
        raise UserError("--lp is empty")
    if fmt == "summeval":
        if lps:
            raise UserError("--lp applies to wmt-da and table, not summeval (its items are English: lp 'en')")
        summary = import_summeval(args.src, args.out, annotators=args.annotators or "expert")
    elif fmt == "wmt-da":
        summary = import_wmt_da(args.src, args.out, lps=lps or None)
    else:
        if len(lps) > 1:
            raise UserError(f"table: --lp is one constant language pair, got {', '.join(lps)}")
        summary = import_table(args.src, args.out, columns=_pairs(args.column, "--column"),
                               human=_pairs(args.human, "--human") or None, lp=lps[0] if lps else None)
    print(summary.line(fmt), file=sys.stderr)
    return 0


def _only_for(fmt: str, allowed: str, option: str, given: bool) -> None:
    if given and fmt != allowed:
        raise UserError(f"{option} applies to {allowed} only, not {fmt}")


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; a repeated NAME or a value without '=' is an error."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        name, rest = name.strip(), rest.strip()
        if not sep or not name or not rest:
            raise UserError(f"{option} {value!r}: expected NAME=COLUMN")
        if name in out:
            raise UserError(f"{option} {name} given twice")
        out[name] = rest
    return out


# --------------------------------------------------------------------------- helpers


def _lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file split on '\\n' only ('\\r' at line ends and a BOM removed)."""
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"missing file {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _number(text: str, where: str) -> float:
    """A finite float from text, or a UserError naming the location."""
    try:
        number = float(text.strip())
    except ValueError:
        raise UserError(f"{where}: human score {text!r} is not a number") from None
    if not math.isfinite(number):
        raise UserError(f"{where}: human score {text!r} is not a finite number")
    return number
