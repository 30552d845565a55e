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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, CellResult, read_scores
from nlgbench.foundations.errors import UserError
from nlgbench.runs.folder import locked
from nlgbench.runs.store import CSV_FILE, STORE_FILE, Store, StoreCorrupt, has_store

CELLS = "cells"


@dataclass
class Repair:
    """What `repair` did: where the corrupt store went (None if it was readable) and the cells added."""

    moved_to: Path | None
    added: list[CellResult]


def scan_cells(folder: Path) -> tuple[list[CellResult], list[str]]:
    """The results in `cells/*/result.json` that can be recorded (readable, written for the cell of
    their folder, when ok with a whole scores.csv: `read_scores`), in the order they were written;
    and a line per cell folder left out, naming it and why (half a file cannot be the cause: both
    are written atomically, so the file was cut or changed since)."""
    found: list[tuple[float, str, CellResult]] = []
    skipped: list[str] = []
    for path in sorted((folder / CELLS).glob(f"*/{RESULT_FILE}")):
        try:
            result = CellResult.read(path.parent)
            if result.cell_id != path.parent.name:
                raise UserError(f"{path} is the result of cell {result.cell_id}, not of its folder's")
            if result.ok:
                read_scores(path.parent / SCORES_FILE, result)
            found.append((path.stat().st_mtime, result.cell_id, result))
        except (UserError, OSError) as exc:
            skipped.append(str(exc))
    return [result for _, _, result in sorted(found, key=lambda t: (t[0], t[1]))], skipped


def finished_cells(folder: Path) -> list[CellResult]:
    """The results of `scan_cells` that can be recorded (the others left out)."""
    return scan_cells(folder)[0]


def check_store(folder: Path) -> None:
    """Refuse to write a run folder whose store is missing or empty while its cells are finished:
    a new empty store would hide them (`repair` brings them back)."""
    if not has_store(folder) and finished_cells(folder):
        raise UserError(f"{folder} has finished cells but no {STORE_FILE} (deleted or emptied); rebuild it from the "
                        f"cell folders with `nlgbench repair {folder}`")


def open_store(folder: Path) -> Store:
    """The folder's store, for a writer holding its lock: checked (`check_store`) and opened."""
    check_store(folder)
    return Store(folder)


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
    for suffix in ("-journal", "-wal", "-shm"):  # a stale journal must never be applied to the new store
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
                    scores = folder / CELLS / result.cell_id / SCORES_FILE
                    store.record(run_id, store.next_seq(), result, scores if result.ok else None)
                store.finish_run(run_id)
            store.write_csv()
    return Repair(moved_to=moved_to, added=todo)


def describe(folder: Path, done: Repair) -> str:
    """The command's one-line summary."""
    n_ok = sum(r.ok for r in done.added)
    added = f"{len(done.added)} cell(s) from {folder / CELLS} ({n_ok} ok, {len(done.added) - n_ok} not ok)"
    if done.moved_to is not None:
        return f"repaired {folder / STORE_FILE}: rebuilt with {added}; the corrupt file is kept as {done.moved_to}"
    if done.added:
        return f"repaired {folder / STORE_FILE}: added {added} it was missing"
    return f"nothing to repair: {folder / STORE_FILE} is readable and holds every finished cell of {folder / CELLS}"

