"""Run-folder formats: which format each file of a run folder is in, and its upgrade to this nlgbench's
format when it is read, so that every reader (report, compare, run's resume, repair, the API) sees one
shape: the current one. `nlgbench repair --upgrade DIR` writes the upgraded folder.

Each file says its format: result.json its `format` field (report/cells.jsonl, one result.json per line,
likewise), results.sqlite its `PRAGMA user_version` (read and upgraded by `nlgbench.runs.store`, which
holds the SQL), results.csv and correlations.csv the sidecar `format.json` (the CSV files stay plain
tables). Files written before format numbers existed say nothing; the `*_format` functions below tell
their format by the one difference that marks it, the only place a format is read from what a file
holds. A file of a format newer than this nlgbench's is refused in one line naming both (`check_known`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RUN_FORMAT
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text
from nlgbench.foundations.version import __version__
from nlgbench.runs.csvfiles import LEGACY_COLUMNS, RESULTS_COLUMNS
from nlgbench.runs.folder import FORMAT_FILE

# Every run-folder format, oldest first, each with what changed from the one before (RUN_FORMAT, in
# nlgbench.core.cell, is the last: what this nlgbench writes).
FORMATS: dict[int, str] = {
    1: (
        "nlgbench 0.1.0 (2026-11-23): results.sqlite declares segment_scores.seg_id INTEGER (a seg_id "
        "'007' was stored as 7) and has no warnings table; result.json records neither scores.csv's rows "
        "and sha256 nor data warnings; results.csv names its figures pearson, pearson_pooled, system_pearson "
        "... and its memory *_mb"
    ),
    2: (
        "nlgbench 0.2.0 (2026-11-26): seg_id untyped and a warnings table; result.json `scores_csv` (scores.csv "
        "checked by every reader) and `warnings`; results.csv names `<method>_<level>` and `*_mib`, the older "
        "names kept after them (LEGACY_COLUMNS)"
    ),
    3: (
        "format numbers: result.json `format`, results.sqlite `user_version`, format.json beside results.csv; "
        "results.csv gains timing_unstable, peak_uss_mib and bootstrap_unit; result.json's memory section "
        "may hold pass_s and allocator_policy, its timing section repeat_passes"
    ),
}


def check_known(found: int, where: object) -> None:
    """One UserError line where `where` (a file) is in a format newer than this nlgbench reads."""
    if found > RUN_FORMAT:
        raise UserError(
            f"{where} is in run-folder format {found}, newer than nlgbench {__version__} reads (format "
            f"{RUN_FORMAT}): read it with the nlgbench that wrote it, or a newer one"
        )


def format_number(value: Any, where: object) -> int:
    """A recorded format number (a positive integer), checked (`check_known`); one line where it is none."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{where}: format {json.dumps(value)[:40]} is not a run-folder format number")
    check_known(value, where)
    return value


# ----------------------------------------------------------------------------- result.json


def result_format(raw: Mapping[str, Any], where: object) -> int:
    """The format of a result.json's content: its `format`; unmarked, 2 where it records scores.csv's
    sha256 or data warnings (0.2.0 wrote them), else 1. Failed cells of 0.2.0 read as 1: the two formats
    differ in those two fields only, which a failed cell never has."""
    if "format" in raw:
        return format_number(raw["format"], where)
    return 2 if "scores_csv" in raw or "warnings" in raw else 1


def upgrade_result(raw: Any, where: object) -> dict[str, Any]:
    """A result.json's content in this nlgbench's format. Up to format 3 only the number changes: the
    fields added over time are optional, absent where an older nlgbench did not record them (a format-1
    result has no `scores_csv`: its scores.csv is read unchecked, with a warning)."""
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: not a result (a JSON object), got {type(raw).__name__}")
    result_format(raw, where)
    return {"format": RUN_FORMAT, **{k: v for k, v in raw.items() if k != "format"}}


# ----------------------------------------------------------------------------- results.csv


def csv_format(folder: Path, header: list[str]) -> int:
    """The format of the folder's results.csv (and correlations.csv): format.json's; without one, 2
    where results.csv names `pearson_global` (0.2.0's names), else 1."""
    sidecar = folder / FORMAT_FILE
    if sidecar.is_file():
        try:
            recorded = json.loads(utf8_text(sidecar, read_bytes(sidecar)))
        except json.JSONDecodeError as exc:
            raise UserError(f"{sidecar}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(recorded, Mapping) or "format" not in recorded:
            raise UserError(f"{sidecar}: no field 'format' (not nlgbench's format record)")
        return format_number(recorded["format"], sidecar)
    return 2 if "pearson_global" in header else 1


def current_names(row: dict[str, str]) -> dict[str, str]:
    """A format-1 results.csv row (figures and memory under the older names only) with the current
    names too (LEGACY_COLUMNS: the same values); a newer row as it is."""
    return {**{new: row[old] for old, new in LEGACY_COLUMNS.items() if old in row and new not in row}, **row}


def upgrade_results_csv(folder: Path, text: str) -> str:
    """results.csv's text (of `folder`) in this nlgbench's columns: as it is in the current format;
    an older one's rows under today's header (RESULTS_COLUMNS, then any column it has that today's has
    not), the figures of format 1 under their new names too (`current_names`), columns added since
    blank, the rows and their values unchanged."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = list(reader.fieldnames or [])
    if csv_format(folder, header) == RUN_FORMAT:
        return text
    rows = [current_names(row) for row in reader]
    out = io.StringIO(newline="")
    columns = [*RESULTS_COLUMNS, *(c for c in header if c not in RESULTS_COLUMNS)]
    writer = csv.DictWriter(out, fieldnames=columns, restval="", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
