"""The user's own data files (``.jsonl`` / ``.tsv``, `USER_COLUMNS`): read directly, with several
references per item and several human dimensions where given, checked row by row; every problem is one
UserError naming the file and line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from nlgbench.data.items import ALL_DIMENSIONS, HUMAN, NAN, Dataset, Item, SegId
from nlgbench.data.text import jsonl_records, parse_score, seg_id_values, tsv_table
from nlgbench.foundations.errors import UserError, closest
from nlgbench.foundations.files import BOM, read_bytes, utf8_text
from nlgbench.foundations.names import refuse_name
from nlgbench.foundations.spreadsheet import refuse_formula

#: Columns of the user format; ``system``, ``source`` and ``doc_id`` may be left out (default "").
#: Several references: JSONL ``references: [..]`` (``reference`` is the one-reference shorthand), TSV
#: columns ``reference``, ``reference_2``, ``reference_3`` ... Several human dimensions: JSONL ``human:
#: {"relevance": 4.3, "coherence": null}`` (null or absent: missing), TSV columns ``human.relevance`` ...
USER_COLUMNS = ("lp", "seg_id", "system", "doc_id", "source", "reference", "hypothesis", "human")
OPTIONAL_USER_COLUMNS = ("system", "source", "doc_id")
TSV_HUMAN_PREFIX = "human."
TSV_REFERENCE_PREFIX = "reference_"


def check_user_file(path: Path) -> None:
    """A user data file that exists, is a regular file and is ``.jsonl`` or ``.tsv``; else a UserError
    (a spec checks this before anything runs, `--dry-run` included)."""
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".tsv"):
        raise UserError(f"data file {path}: unsupported type {suffix or '(none)'!r}; use .jsonl or .tsv")
    if path.is_dir():
        raise UserError(f"data file {path} is a directory, not a .jsonl or .tsv file")
    if not path.is_file():
        raise UserError(f"missing file {path}")


def load_user_file(path: Path, columns: tuple[str, ...] = ()) -> Dataset:
    """Read a user ``.jsonl`` or ``.tsv`` file into a dataset in stable order; `columns` are carried."""
    check_user_file(path)
    suffix = path.suffix.lower()
    data = read_bytes(path)
    sha = hashlib.sha256(data).hexdigest()
    text = utf8_text(path, data, data_file=True).removeprefix(BOM)
    records = list(jsonl_records(path, text) if suffix == ".jsonl" else _tsv_records(path, text))
    return records_dataset(str(path), path.stem, records, columns, {str(path): sha})


def records_dataset(
    origin: str, name: str, records: list[tuple[str, dict[str, Any]]], columns: tuple[str, ...], files: dict[str, str]
) -> Dataset:
    """The dataset of user records, (location, record) each, as a JSONL line holds them: every record
    checked (`_user_item`), ids unique, one form of human score, at least one score; stable order.
    The one owner of these checks, for own files and for other sources turned into such records
    (Hugging Face datasets: `nlgbench.data.hubdata`). `origin` names the source in messages."""
    reserved = [c for c in columns if c in USER_COLUMNS or c == "references"]
    if reserved:
        raise UserError(f"{origin}: columns {', '.join(reserved)} are item fields, not further columns to carry")
    _check_carried(origin, columns, records)
    refuse_name(name, "the dataset's name", origin)
    items = [(where, _with_extra(_user_item(record, where), record, columns, where)) for where, record in records]
    if not items:
        raise UserError(f"{origin} has no items")
    for where, item in items:
        check_item_names(item, where)
    items = _uniform_seg_ids(items)
    where_of: dict[tuple[str, SegId, str], str] = {}
    for where, item in items:
        if item.key in where_of:
            raise UserError(
                f"{where}: duplicate item lp={item.lp!r} seg_id={item.seg_id!r} system={item.system!r} "
                f"(first at {where_of[item.key]})"
            )
        where_of[item.key] = where
    dims = list(dict.fromkeys(dim for _, item in items for dim in item.humans))
    scored = [(where, item) for where, item in items if item.humans]  # an item without any score has no form
    scalar = [where for where, item in scored if item.humans.keys() == {HUMAN}]
    if scalar and len(scalar) < len(scored):
        other = next(where for where, item in scored if item.humans.keys() != {HUMAN})
        raise UserError(
            f"{origin}: human is a single number at {scalar[0]} but named dimensions at {other}; use one form"
        )
    if not dims:
        raise UserError(f"{origin}: no item has a human score")
    ordered = sorted((item for _, item in items), key=lambda item: item.key)
    ordered = [replace(item, human=item.humans.get(dims[0], NAN)) for item in ordered]
    has_systems = any(item.system for item in ordered)
    return Dataset(name=name, items=ordered, has_systems=has_systems, files=files, human_dims=dims)


def check_item_names(item: Item, where: str) -> None:
    """Refuse (one line naming `where` and the field) an item's name that nlgbench would write into its
    reports, terminal lines and CSV files unfit to be a name (`refuse_name`: a control character, a
    spreadsheet formula): lp, system, doc_id, a text seg_id, a human dimension; and a carried column's
    value a spreadsheet would run as a formula (a value is data, scores.csv's only, not a name). Texts
    (source, reference, hypothesis) may hold any character."""
    for what, value in (("lp", item.lp), ("system", item.system), ("doc_id", item.doc_id), ("seg_id", item.seg_id)):
        if isinstance(value, str):
            refuse_name(value, what, where)
    for dim in item.humans:
        refuse_name(dim, "human dimension", where)
    for column, value in item.extra.items():
        refuse_formula(value, f"column {column!r}", where)


def _check_carried(origin: str, columns: tuple[str, ...], records: list[tuple[str, dict[str, Any]]]) -> None:
    """Refuse a column to carry that no record has (it would be carried as '' everywhere)."""
    present = list(
        dict.fromkeys(key for _, record in records for key in record if key not in USER_COLUMNS and key != "references")
    )
    for column in columns:
        if column not in present:
            hits = closest(column, present)
            hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
            raise UserError(
                f"{origin}: no column {column!r} to carry{hint} (further columns: {', '.join(present) or 'none'})"
            )


def _with_extra(item: Item, record: dict[str, Any], columns: tuple[str, ...], where: str) -> Item:
    """`item` with the record's `columns` as text ('' where a record lacks one; numbers as written)."""
    if not columns:
        return item
    extra = {}
    for column in columns:
        value = record.get(column)
        if isinstance(value, (dict, list)):
            raise UserError(f"{where}: column {column!r} must be text or a number to carry, got {value!r}")
        extra[column] = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    return replace(item, extra=extra)


def _uniform_seg_ids(items: list[tuple[str, Item]]) -> list[tuple[str, Item]]:
    """Items whose seg_ids are all integers (JSON numbers, or texts in plain integer form: `plain_int`)
    keep integer ids (numeric order); otherwise every id is text as written (text order), so the
    stable order rule holds either way and "007" and "7" stay two items."""
    ids = seg_id_values([str(item.seg_id) for _, item in items])
    return [(where, replace(item, seg_id=value)) for (where, item), value in zip(items, ids, strict=True)]


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _tsv_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, record) per non-blank TSV line after the header row (`tsv_table`); ``reference_N``
    columns become the record's ``references``, ``human.DIM`` columns its ``human`` mapping (an
    empty cell: missing)."""
    header, rows = tsv_table(path, text)
    dims = [name for name in header if name.startswith(TSV_HUMAN_PREFIX)]
    if dims and HUMAN in header:
        raise UserError(f"{path}: give either one 'human' column or 'human.DIM' columns, not both")
    extra_refs = sorted(
        (name for name in header if name.startswith(TSV_REFERENCE_PREFIX)),
        key=lambda name: _int_or_none(name[len(TSV_REFERENCE_PREFIX) :]) or 0,
    )
    for name in extra_refs:
        if (_int_or_none(name[len(TSV_REFERENCE_PREFIX) :]) or 0) < 2:
            raise UserError(f"{path}: column {name!r}: further references are named reference_2, reference_3, ...")
    present = set(header) | ({HUMAN} if dims else set())
    missing = [c for c in USER_COLUMNS if c not in OPTIONAL_USER_COLUMNS and c not in present]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)} (header has: {', '.join(header)})")
    for number, values in rows:
        where = f"{path} line {number}"
        row: dict[str, Any] = dict(zip(header, values, strict=True))
        if extra_refs:
            row["references"] = [row.pop("reference"), *(row.pop(name) for name in extra_refs)]
            while len(row["references"]) > 1 and not row["references"][-1].strip():
                row["references"].pop()  # fewer references on this row
        if dims:
            row[HUMAN] = {name[len(TSV_HUMAN_PREFIX) :]: (row.pop(name).strip() or None) for name in dims}
        yield where, row


def _user_item(record: dict[str, Any], where: str) -> Item:
    """An Item from one user record (JSON object or TSV row)."""
    present = set(record) | ({"reference"} if "references" in record else set())
    missing = [c for c in USER_COLUMNS if c not in OPTIONAL_USER_COLUMNS and c not in present]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    if "reference" in record and "references" in record:
        raise UserError(f"{where}: give 'reference' (one) or 'references' (a list), not both")

    def text(column: str) -> str:
        value = record.get(column)
        if value is None and column in OPTIONAL_USER_COLUMNS:
            return ""
        if not isinstance(value, str):
            raise UserError(f"{where}: column {column!r} must be text, got {value!r}")
        return value

    lp = text("lp").strip()
    if not lp:
        raise UserError(f"{where}: column 'lp' is empty")
    seg_raw = record["seg_id"]
    if (
        isinstance(seg_raw, bool)
        or not isinstance(seg_raw, (int, str))
        or (isinstance(seg_raw, str) and not seg_raw.strip())
    ):
        raise UserError(f"{where}: seg_id must be an integer or a non-empty text, got {seg_raw!r}")
    seg_id: SegId = seg_raw if isinstance(seg_raw, int) else seg_raw.strip()
    if "references" in record:
        refs = record["references"]
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise UserError(f"{where}: references must be a non-empty list of texts, got {refs!r}")
        references = tuple(refs)
    else:
        references = (text("reference"),)
    humans = _human_scores(record["human"], where)
    return Item(
        lp,
        seg_id,
        text("system").strip(),
        text("source"),
        references[0],
        text("hypothesis"),
        humans.get(HUMAN, NAN),
        references=references,
        humans=humans,
        doc_id=text("doc_id").strip(),
    )


def _human_scores(raw: Any, where: str) -> dict[str, float]:
    """{dimension: score} of one record: a number is the single dimension `human`; a mapping names
    dimensions; null (or an empty TSV cell), as the whole value or a dimension's, marks a missing score."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, dict):
        if not raw:
            raise UserError(f"{where}: human is an empty mapping (name at least one dimension)")
        scores = {}
        for dim, value in raw.items():
            if not str(dim).strip() or dim == ALL_DIMENSIONS:
                raise UserError(f"{where}: human dimension name {dim!r} is not allowed")
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise UserError(f"{where}: human.{dim} must be a number or null, got {value!r}")
            scores[str(dim)] = parse_score(str(value), f"{where}: human.{dim}")
        return scores
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise UserError(f"{where}: human must be a number or a mapping of dimension -> number, got {raw!r}")
    return {HUMAN: parse_score(str(raw), where)}
