"""Reading a cell's result.json: its text parsed, upgraded to this nlgbench's format
(`nlgbench.runs.migrate.upgrade_result`), its shape checked (`check_shape`) and made a `CellResult`.
Every reader of a run's results (report, compare, run's resume, repair, the store, the launchers, the
API) comes through here, so an edited or foreign file stops at one line naming it and its field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT
from nlgbench.core.result import FAILED, OK, OOM, CellResult
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text
from nlgbench.runs.migrate import upgrade_result

CORRELATION_FIGURES = ("pearson", "kendall", "pearson_pooled", "kendall_pooled")  # what results.csv reads of a section


def check_shape(raw: Any) -> None:
    """A ValueError naming the first field of a result.json that is not what its readers take it to be
    (an edited or foreign file): so `report`, `repair` and the store stop at one line, not at a
    TypeError deep inside. A finished cell needs its sections; a measured one its timing and memory."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"not a result (a JSON object), got {type(raw).__name__}")

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise ValueError(f"field {field!r} must be {what}, got {json.dumps(raw.get(field))[:80]}")

    # an older file is upgraded before it gets here (upgrade_result); no format: a result made in memory
    need(raw.get("format", RUN_FORMAT) == RUN_FORMAT, "format", f"{RUN_FORMAT}, this nlgbench's format")

    for key in ("cell_id", "label", "status"):
        need(isinstance(raw.get(key), str), key, "a text")
    need(raw["status"] in (OK, FAILED, OOM), "status", f"one of {OK}, {FAILED}, {OOM}")
    need(isinstance(raw.get("config"), Mapping), "config", "an object")
    if raw["status"] != OK:
        startup = raw.get("startup_s")
        seconds = isinstance(startup, int | float) and not isinstance(startup, bool)
        need(startup is None or seconds, "startup_s", "seconds")
        return
    n = raw.get("n_segments")
    need(isinstance(n, int) and not isinstance(n, bool) and n >= 0, "n_segments", "a count")
    measured = [] if raw.get("imported") else ["timing", "memory", "repeat_agreement", "scorer"]
    for key in ["metric", "dataset", "correlation", *measured]:
        need(isinstance(raw.get(key), Mapping), key, "an object")
    record = raw.get("scores_csv")
    need(
        record is None
        or (
            isinstance(record, Mapping)
            and isinstance(record.get("rows"), int)
            and isinstance(record.get("sha256"), str)
        ),
        "scores_csv",
        "an object with rows and sha256",
    )
    found = raw.get("warnings", [])
    need(isinstance(found, list) and all(isinstance(w, str) for w in found), "warnings", "a list of texts")
    dims = raw["correlation"].get("dimensions")
    sections = list(dims.values()) if isinstance(dims, Mapping) and dims else [raw["correlation"]]
    need(
        all(
            isinstance(section, Mapping)
            and all(
                k in section
                and (section[k] is None or (isinstance(section[k], (int, float)) and not isinstance(section[k], bool)))
                for k in CORRELATION_FIGURES
            )
            for section in sections
        ),
        "correlation",
        f"an object with the numbers {', '.join(CORRELATION_FIGURES)}",
    )


def result_from_dict(raw: Any, where: object) -> CellResult:
    """The CellResult a result.json's content holds, upgraded and checked; one UserError naming `where`
    (and the field) where it is not one."""
    try:
        upgraded = upgrade_result(raw, where)
        check_shape(upgraded)
        return CellResult.from_dict(upgraded)
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{where}: {exc if not isinstance(exc, KeyError) else f'no field {exc}'}") from None


def result_from_json(text: str, where: object) -> CellResult:
    """The CellResult a result.json's text holds, upgraded and checked; one UserError naming `where`."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return result_from_dict(raw, where)


def read_result(cell_dir: Path) -> CellResult:
    """A cell folder's result.json, of any format this nlgbench knows, in the current shape."""
    path = cell_dir / RESULT_FILE
    return result_from_json(utf8_text(path, read_bytes(path)), path)
