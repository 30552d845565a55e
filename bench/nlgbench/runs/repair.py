"""`nlgbench repair DIR`: rebuild a run folder's results.sqlite from its cell folders; with `--upgrade`,
also write the folder in this nlgbench's format (`nlgbench.runs.migrate`).

Every finished cell leaves `cells/<id>/result.json` (and, when ok, `scores.csv`) before the store
records it, so the cell folders hold everything the store does except the run history. A
corrupt store is moved aside (`results.sqlite.corrupt`, kept for inspection) and a new one is
built from them; a readable store gets the cells it is missing (a sweep killed, or a disk that
filled up, between a worker's result and its record). `nlgbench run` never repairs by itself: a
corrupt store means something outside nlgbench went wrong, and the user should know before a
file is replaced.

`--upgrade` rewrites what an older nlgbench wrote in the current format: the store (`Store.upgrade`),
each older `cells/<id>/result.json` (its time kept: the store is rebuilt in the order of those times)
and results.csv with its format.json. Readers upgrade on read already; this makes the files say it.
A finished cell of format 1 records no sha256 of its scores.csv: the upgrade records it where the
file holds the very scores the store recorded for the cell (else the file stays unchecked).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT, SCORES_FILE
from nlgbench.core.result import CellResult
from nlgbench.core.scores import read_scores, scores_record
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text
from nlgbench.runs.folder import CELLS, CSV_FILE, STORE_FILE, cell_dir, cells_dir, locked
from nlgbench.runs.resultfile import result_from_json
from nlgbench.runs.store import STORE_SIDE_FILES, Store, StoreCorrupt, scan_cells


@dataclass
class Repair:
    """What `repair` did: where the corrupt store went (None if it was readable) and the cells added;
    with `--upgrade`, whether the store was of an older format and the result.json files rewritten."""

    moved_to: Path | None
    added: list[CellResult]
    store_upgraded: bool = False
    results_upgraded: list[Path] = field(default_factory=list)


def move_aside(folder: Path) -> Path:
    """Rename the corrupt store (and its journal files) to a free `results.sqlite.corrupt[N]` name."""
    path = folder / STORE_FILE
    n = 0
    while True:
        target = folder / f"{STORE_FILE}.corrupt{n or ''}"
        if not target.exists():
            break
        n += 1
    os.replace(path, target)
    for suffix in STORE_SIDE_FILES:  # a stale journal must never be applied to the new store
        side = folder / f"{STORE_FILE}{suffix}"
        if side.exists():
            os.replace(side, Path(f"{target}{suffix}"))
    return target


def same_scores(stored: Sequence[tuple[Any, ...]], rows: Sequence[dict[str, Any]]) -> bool:
    """Whether scores.csv's rows hold the (lp, seg_id, system, score, human) the store recorded, in order."""

    def key(lp: Any, seg_id: Any, system: Any, score: Any, human: Any) -> tuple[Any, ...]:
        numbers = [None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x) for x in (score, human)]
        return (lp, str(seg_id), system or "", *numbers)

    found = [key(r["lp"], r["seg_id"], r["system"], r["score"], r["human"]) for r in rows]
    return [key(*row) for row in stored] == found


def with_scores_record(result: CellResult, cell: Path, store: Store) -> CellResult:
    """A finished format-1 result with the record of its scores.csv (rows, sha256) where the file holds
    the scores the store recorded for the cell; else as it is."""
    path = cell / SCORES_FILE
    if not result.ok or result.scores_csv is not None or not path.is_file():
        return result
    data = read_bytes(path)
    _, rows = read_scores(path, result, unchecked=store.unchecked)
    if not same_scores(store.segment_scores(result.cell_id), rows):
        return result
    return replace(result, scores_csv=scores_record(data, len(rows)))


def upgrade_results(folder: Path, store: Store) -> list[Path]:
    """Rewrite every readable `cells/*/result.json` of an older format in the current one (atomically,
    its modification time kept), with its scores.csv record where it had none (`with_scores_record`,
    also into the store); the files rewritten. Unreadable ones are left as they are (`scan_cells`
    names them)."""
    rewritten = []
    for path in sorted(cells_dir(folder).glob(f"*/{RESULT_FILE}")):
        try:
            text = utf8_text(path, read_bytes(path))
            result = result_from_json(text, path)
        except UserError:
            continue
        try:
            recorded = with_scores_record(result, path.parent, store)
        except UserError:
            recorded = result  # a scores.csv that does not read stays unchecked (`scan_cells` names it)
        if recorded != result and store.result(result.cell_id) == result:
            store.replace_result(recorded)
        result = recorded
        upgraded = result.to_json()
        if upgraded != text:
            times = path.stat()
            result.write(path.parent)
            os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
            rewritten.append(path)
    return rewritten


def repair(folder: Path, *, upgrade: bool = False, log: Callable[[str], None] = print) -> Repair:
    """Rebuild (corrupt) or complete (readable) the folder's store from `cells/`, holding its lock; with
    `upgrade`, write the store and the cells' results in this nlgbench's format too."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    if not any((folder / name).exists() for name in (CELLS, CSV_FILE, STORE_FILE)):
        raise UserError(f"{folder} is not a run folder (no {CELLS}/, {CSV_FILE} or {STORE_FILE}); nothing to repair")
    if not (folder / STORE_FILE).exists() and not any(cells_dir(folder).glob("*/result.json")):
        # A published folder (results.csv and report/ only) or one whose cells are gone: a new, empty
        # store would rewrite results.csv without its rows.
        raise UserError(
            f"{folder} has no {STORE_FILE} and no {CELLS}/*/result.json: nothing to rebuild the store from "
            f"(results.csv is left as it is; `nlgbench report` reads a published folder's report/cells.jsonl)"
        )
    with locked(folder, log=log):
        moved_to = None
        try:
            Store(folder).close()
        except StoreCorrupt:
            moved_to = move_aside(folder)
        with Store(folder) as store:
            store_upgraded = store.upgrade() if upgrade else False
            stored = {r.cell_id: r.status for r in store.results()}
            cells, skipped = scan_cells(folder, store.unchecked)
            for reason in skipped:
                log(f"skipped: {reason}")
            todo = [r for r in cells if stored.get(r.cell_id) != r.status]
            if todo or moved_to is not None:
                run_id = store.start_run("repair", {"repair": str(folder)}, {})
                for result in todo:
                    scores = cell_dir(folder, result.cell_id) / SCORES_FILE
                    store.record(run_id, store.next_seq(), result, scores if result.ok else None)
                store.finish_run(run_id)
            rewritten = upgrade_results(folder, store) if upgrade else []
            store.write_csv()
    return Repair(moved_to=moved_to, added=todo, store_upgraded=store_upgraded, results_upgraded=rewritten)


def describe(folder: Path, done: Repair) -> str:
    """The command's one-line summary (and, after `--upgrade`, one line on the format)."""
    line = _describe_store(folder, done)
    if done.store_upgraded or done.results_upgraded:
        what = [str(folder / STORE_FILE)] if done.store_upgraded else []
        what += [f"{len(done.results_upgraded)} {RESULT_FILE} file(s)"] if done.results_upgraded else []
        return f"{line}\nupgraded to format {RUN_FORMAT}: {' and '.join(what)}"
    return line


def _describe_store(folder: Path, done: Repair) -> str:
    n_ok = sum(r.ok for r in done.added)
    added = f"{len(done.added)} cell(s) from {cells_dir(folder)} ({n_ok} ok, {len(done.added) - n_ok} not ok)"
    if done.moved_to is not None:
        return f"repaired {folder / STORE_FILE}: rebuilt with {added}; the corrupt file is kept as {done.moved_to}"
    if done.added:
        return f"repaired {folder / STORE_FILE}: added {added} it was missing"
    return f"nothing to repair: {folder / STORE_FILE} is readable and holds every finished cell of {cells_dir(folder)}"
