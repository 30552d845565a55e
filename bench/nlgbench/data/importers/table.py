"""Any CSV / TSV / Parquet table with named columns, one item per row; the user maps item fields to
columns. TSV and CSV are read by the rules of `nlgbench.data.text` (`tsv_table`, `csv_table`)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.data.importers.output import ImportSummary, Record, write_items
from nlgbench.data.text import bounded_score, csv_table, parse_score, tsv_table
from nlgbench.foundations.errors import UserError, closest, unknown_name
from nlgbench.foundations.files import read_text

if TYPE_CHECKING:
    import pandas as pd

#: Item fields a table column can fill (``references`` takes several comma-separated columns).
TABLE_FIELDS = ("lp", "seg_id", "system", "doc_id", "source", "hypothesis", "references", "human")
_TABLE_READERS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".parquet": None, ".pq": None}
_INTEGER = re.compile(r"^[+-]?\d+$")


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
    language pair (or domain label) for tables without one. An empty source, hypothesis or reference
    cell is an empty text (an empty system output is data: each metric scores or refuses it,
    docs/reference/metrics.md); an empty further reference cell means fewer references on that row. Name cells (lp,
    system, doc_id, seg_id) must be present. Rows are counted from 1, header excluded.
    """
    path = Path(src)
    table = _read_table(path)
    available = [str(c) for c in table.columns]
    mapping, ref_columns = _column_mapping(path, available, columns or {}, human, lp)
    seg_ids = _seg_ids(table[mapping["seg_id"]].tolist(), path, mapping["seg_id"])
    records: list[Record] = []
    first_at: dict[tuple[str, int | str, str], int] = {}
    for index, row in enumerate(table.itertuples(index=False)):
        n = index + 1
        where = f"{path} row {n}"
        cells = dict(zip(available, row, strict=True))
        record = _row_record(cells, seg_ids[index], mapping, ref_columns, human, lp, where)
        key = (record["lp"], record["seg_id"], record["system"])
        if key in first_at:
            raise UserError(
                f"{where}: duplicate item lp={key[0]!r} seg_id={key[1]!r} system={key[2]!r} "
                f"(first at row {first_at[key]})"
            )
        first_at[key] = n
        records.append(record)
    if not records:
        raise UserError(f"{path} has no rows")
    if not human and all(r["human"] is None for r in records):
        raise UserError(f"{path}: column {mapping['human']!r} (human) is empty in every row")
    return records


def _column_mapping(
    path: Path, available: list[str], columns: Mapping[str, str], human: Mapping[str, str] | None, lp: str | None
) -> tuple[dict[str, str], list[str]]:
    """Item field -> column (the user's mapping, then same-named columns), and the reference columns;
    every problem with the mapping is one UserError (see `table_records`)."""
    mapping = dict(columns)
    if "reference" in mapping:  # one-reference shorthand
        if "references" in mapping:
            raise UserError("map either 'reference' or 'references', not both")
        mapping["references"] = mapping.pop("reference")
    for field in mapping:
        if field not in TABLE_FIELDS:
            raise unknown_name("item field", field, TABLE_FIELDS)
    if human and "human" in mapping:
        raise UserError(
            "give human scores either as one column (human=COLUMN) or as dimensions (--human DIM=COLUMN), not both"
        )
    if lp is not None and "lp" in mapping:
        raise UserError("give the language pair either as a constant (--lp) or as a column (lp=COLUMN), not both")
    defaults = {field: field for field in TABLE_FIELDS} | {"references": "reference"}
    for field, name in defaults.items():
        if (
            field not in mapping
            and name in available
            and not (field == "lp" and lp is not None)
            and not (field == "human" and human)
        ):
            mapping[field] = name
    required = ["seg_id", "hypothesis", "references"] + ([] if lp is not None else ["lp"])
    required += [] if human else ["human"]
    absent = [f for f in required if f not in mapping]
    if absent:
        raise UserError(
            f"{path}: no column for {', '.join(absent)} (map with --column FIELD=COLUMN; "
            f"columns: {', '.join(available)})"
        )
    if lp is not None and not lp.strip():
        raise UserError("--lp must not be empty")
    if lp is not None and "lp" in available:
        raise UserError(f"{path} has an 'lp' column: map it (lp=COLUMN is the default) or drop --lp")
    ref_columns = [c.strip() for c in mapping.pop("references").split(",")]
    for name in [*mapping.values(), *ref_columns, *(human or {}).values()]:
        if name not in available:
            hits = closest(name, available)
            hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
            raise UserError(f"{path}: no column {name!r}{hint} (columns: {', '.join(available)})")
    return mapping, ref_columns


def _row_record(
    cells: Mapping[str, Any],
    seg_id: int | str,
    mapping: Mapping[str, str],
    ref_columns: list[str],
    human: Mapping[str, str] | None,
    lp: str | None,
    where: str,
) -> Record:
    """One row's output object (fields in the order written)."""
    record: Record = {
        "lp": lp.strip() if lp is not None else _cell_label(cells, mapping["lp"], where),
        "seg_id": seg_id,
        "system": _cell_label(cells, mapping["system"], where) if "system" in mapping else "",
    }
    if "doc_id" in mapping:
        record["doc_id"] = _cell_label(cells, mapping["doc_id"], where)
    record["source"] = _cell_text(cells, mapping["source"], where, blank=True) if "source" in mapping else ""
    references = [_cell_text(cells, c, where, blank=True) for c in ref_columns]
    while len(references) > 1 and not references[-1].strip():
        references.pop()  # fewer references on this row, as the own-data TSV loader reads reference_N
    record["references"] = references
    record["hypothesis"] = _cell_text(cells, mapping["hypothesis"], where, blank=True)
    if human:
        record["human"] = {dim: _cell_score(cells, col, where) for dim, col in human.items()}
    else:
        record["human"] = _cell_score(cells, mapping["human"], where)  # None (an empty cell): missing
    return record


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


def _read_table(path: Path) -> pd.DataFrame:
    """The table as a DataFrame; CSV/TSV cells as text, only empty cells missing (so "NA" stays text).

    TSV and CSV are read by the rules of `nlgbench.data.text` (`tsv_table`: fields verbatim, no quoting;
    `csv_table`: CSV quoting), every row with the header's field count; Parquet by pandas. A column
    name given twice is refused (pandas would rename the second)."""
    import pandas as pd  # here, not at import: the CLI starts without pandas

    suffix = path.suffix.lower()
    if suffix not in _TABLE_READERS:
        raise UserError(f"{path}: unsupported table type {suffix or '(none)'!r} (use {', '.join(_TABLE_READERS)})")
    if not path.is_file():
        raise UserError(f"missing file {path}")
    sep = _TABLE_READERS[suffix]
    if sep is not None:
        header, rows = (tsv_table if sep == "\t" else csv_table)(path, read_text(path))
        return pd.DataFrame([[cell or None for cell in fields] for _, fields in rows], columns=header, dtype=object)
    try:
        table = pd.read_parquet(path)
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: reading Parquet needs pyarrow (pip install 'nlgbench[parquet]'): {first}") from None
    except (ValueError, OSError) as exc:  # pyarrow's errors are ValueErrors or OSErrors
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


def _cell_text(cells: Mapping[str, Any], column: str, where: str, blank: bool = False) -> str:
    """A text cell; an empty one is "" where `blank` (a text), else refused (a name must be there)."""
    value = cells[column]
    if _is_missing(value):
        if blank:
            return ""
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
        return parse_score(value, f"{where}: column {column!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise UserError(f"{where}: column {column!r}: human score {value!r} is not a number")
    return bounded_score(float(value), value, f"{where}: column {column!r}")


def _seg_ids(values: list[Any], path: Path, column: str) -> list[int | str]:
    """seg_ids of a column: integers if every value is one (5, 5.0, "5"), else texts."""
    for index, value in enumerate(values):
        if _is_missing(value) or (isinstance(value, str) and not value.strip()):
            raise UserError(f"{path} row {index + 1}: column {column!r} (seg_id) is empty")
        if isinstance(value, bool):
            raise UserError(
                f"{path} row {index + 1}: column {column!r} (seg_id) must be an integer or text, got {value!r}"
            )
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
