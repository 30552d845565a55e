"""`nlgbench repair DIR`: rebuild a run folder's results.sqlite from its cell folders.

Every finished cell leaves `cells/<id>/result.json` (and, when ok, `scores.csv`) before the store
records it, so the cell folders hold everything the store does except the run history. A
corrupt store is moved aside (`results.sqlite.corrupt`, kept for inspection) and a new one is
built from them; a readable store gets the cells it is missing (a sweep killed, or a disk that
filled up, between a worker's result and its record). `nlgbench run` never repairs by itself: a
corrupt store means something outside nlgbench went wrong, and the user should know before a
file is replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nlgbench.core.cell import SCORES_FILE
from nlgbench.core.result import CellResult
from nlgbench.foundations.errors import UserError
from nlgbench.runs.folder import CELLS, CSV_FILE, STORE_FILE, cell_dir, cells_dir, locked
from nlgbench.runs.store import STORE_SIDE_FILES, Store, StoreCorrupt, scan_cells


@dataclass
class Repair:
    """What `repair` did: where the corrupt store went (None if it was readable) and the cells added."""

    moved_to: Path | None
    added: list[CellResult]


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


def repair(folder: Path, *, log: Callable[[str], None] = print) -> Repair:
    """Rebuild (corrupt) or complete (readable) the folder's store from `cells/`, holding its lock."""
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
            stored = {r.cell_id: r.status for r in store.results()}
            cells, skipped = scan_cells(folder)
            for reason in skipped:
                log(f"skipped: {reason}")
            todo = [r for r in cells if stored.get(r.cell_id) != r.status]
            if todo or moved_to is not None:
                run_id = store.start_run("repair", {"repair": str(folder)}, {})
                for result in todo:
                    scores = cell_dir(folder, result.cell_id) / SCORES_FILE
                    store.record(run_id, store.next_seq(), result, scores if result.ok else None)
                store.finish_run(run_id)
            store.write_csv()
    return Repair(moved_to=moved_to, added=todo)


def describe(folder: Path, done: Repair) -> str:
    """The command's one-line summary."""
    n_ok = sum(r.ok for r in done.added)
    added = f"{len(done.added)} cell(s) from {cells_dir(folder)} ({n_ok} ok, {len(done.added) - n_ok} not ok)"
    if done.moved_to is not None:
        return f"repaired {folder / STORE_FILE}: rebuilt with {added}; the corrupt file is kept as {done.moved_to}"
    if done.added:
        return f"repaired {folder / STORE_FILE}: added {added} it was missing"
    return f"nothing to repair: {folder / STORE_FILE} is readable and holds every finished cell of {cells_dir(folder)}"
