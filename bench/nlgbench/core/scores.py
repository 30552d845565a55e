"""scores.csv, a cell's scores item by item beside the human judgments: written by `write_scores`, read
back by `read_scores`, checked against result.json's record of the file (row count and sha256)."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RESULT_FILE
from nlgbench.core.result import CellResult
from nlgbench.data.items import HUMAN, Item
from nlgbench.data.text import seg_id_values
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text, write_atomic

HUMAN_COLUMN_PREFIX = "human."  # scores.csv's column of a named human dimension
ITEM_COLUMN_PREFIX = "item."  # scores.csv's column of a further data column the spec carries through
TEXT_SCORE_COLUMNS = ("lp", "seg_id", "system", "doc_id")  # scores.csv's ids; `item.*` columns are texts too


def human_columns(items: Sequence[Item]) -> list[str]:
    """The named human dimensions of `items` in order of first appearance; [] for data with one
    human score per item (its `human` column says it all)."""
    dims = list(dict.fromkeys(dim for it in items for dim in it.humans))
    return [] if dims in ([], [HUMAN]) else dims


def write_scores(
    path: Path, items: Sequence[Item], score: Sequence[float], extra: Mapping[str, Sequence[float]] | None = None
) -> dict[str, Any]:
    """scores.csv: one row per item in dataset order: `lp, seg_id, system, score, human` (`score` the
    metric's primary output, `human` the primary human dimension), then `doc_id` where items name
    documents, `human.DIM` per named human dimension (blank: missing), `item.NAME` per column the spec
    carries (`DatasetRef.columns`), then the metric's further outputs (`extra`); numbers as `repr` (exact).
    Returns result.json's record of the file (`scores_record`), so that a reader can tell it is whole."""
    extra = extra or {}
    docs = any(it.doc_id for it in items)
    dims = human_columns(items)
    carried = list(dict.fromkeys(c for it in items for c in it.extra))
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(
        [
            "lp",
            "seg_id",
            "system",
            "score",
            "human",
            *(["doc_id"] if docs else []),
            *(f"{HUMAN_COLUMN_PREFIX}{d}" for d in dims),
            *(f"{ITEM_COLUMN_PREFIX}{c}" for c in carried),
            *extra,
        ]
    )
    for i, it in enumerate(items):
        w.writerow(
            [
                it.lp,
                it.seg_id,
                it.system,
                repr(score[i]),
                repr(it.human),
                *([it.doc_id] if docs else []),
                *(repr(it.humans[d]) if d in it.humans else "" for d in dims),
                *(it.extra.get(c, "") for c in carried),
                *(repr(extra[c][i]) for c in extra),
            ]
        )
    write_atomic(path, text.getvalue())
    return scores_record(text.getvalue().encode("utf-8"), len(items))


def scores_record(data: bytes, rows: int) -> dict[str, Any]:
    """result.json's `scores_csv`: the file's row count and sha256, checked when it is read back."""
    return {"rows": rows, "sha256": hashlib.sha256(data).hexdigest()}


@dataclass
class UncheckedScores:
    """The scores.csv files one reader (a run's data, a repair, a load) read unchecked, each named in one
    warning line the first time: their result.json (an older nlgbench's) records neither their rows nor
    their sha256, so an edit since cannot be told. The reader owns it, so a file it reads twice is named once."""

    named: set[Path] = field(default_factory=set)

    def warn(self, path: Path) -> None:
        """The warning line for `path`, unless this reader has named it already."""
        if path in self.named:
            return
        self.named.add(path)
        print(
            f"warning: {path}: unchecked, {RESULT_FILE} (written by an older nlgbench) records no sha256 of it, "
            "so an edit since the cell wrote it cannot be told; `nlgbench repair --upgrade` on its run folder "
            "records it where the store holds the same scores, or run the cell again to have it checked",
            file=sys.stderr,
            flush=True,
        )


def read_scores(
    path: Path, result: CellResult | None, *, unchecked: UncheckedScores
) -> tuple[list[str], list[dict[str, Any]]]:
    """scores.csv's columns and rows, checked against `result` (the cell's result.json; None: nothing to
    check against): its recorded row count (else `n_segments`, in results written before the record)
    and sha256, so a truncated or edited file is refused, not read as a smaller or other cell (an older
    result.json, without that record: read with one warning line, `unchecked.warn`). Ids and
    texts stay text (seg_ids integers only where all are plain integers: `seg_id_values`), the other
    columns are numbers (blank: NaN). Every problem is one UserError naming the file (and row, column)."""
    data = read_bytes(path)
    reader = csv.DictReader(io.StringIO(utf8_text(path, data), newline=""))
    columns = list(reader.fieldnames or [])
    missing = [c for c in ("lp", "seg_id", "system", "score", "human") if c not in columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)}")
    raw = [(reader.line_num, row) for row in reader]
    record = result.scores_csv if result is not None else None
    expected = record["rows"] if record is not None else (result.n_segments if result is not None else None)
    if expected is not None and len(raw) != expected:
        raise UserError(
            f"{path}: {len(raw)} row(s) where {RESULT_FILE} records {expected} (truncated or changed "
            "since the cell wrote it); run the cell again"
        )
    if record is not None and hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise UserError(
            f"{path}: its sha256 is not the one {RESULT_FILE} records (changed since the cell wrote "
            "it); run the cell again"
        )
    if result is not None and record is None:
        unchecked.warn(path)
    ids = seg_id_values([row["seg_id"] or "" for _, row in raw])
    rows = []
    for (line, row), seg_id in zip(raw, ids, strict=True):
        if None in row or any(value is None for value in row.values()):
            raise UserError(f"{path}:{line}: {len(row)} field(s) where the header has {len(columns)}")
        out: dict[str, Any] = {}
        for column, value in row.items():
            if column in TEXT_SCORE_COLUMNS or column.startswith(ITEM_COLUMN_PREFIX):
                out[column] = value
                continue
            try:
                out[column] = float(value) if value != "" else math.nan
            except ValueError:
                raise UserError(f"{path}:{line}: column {column!r}: {value!r} is not a number") from None
        rows.append({**out, "seg_id": seg_id})
    return columns, rows
