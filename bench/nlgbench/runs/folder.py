"""The run folder: its layout (the one place its file and folder names are spelled), and the folder
opened for writing: created if needed, writable, and held by one process at a time.

Layout: `results.sqlite` (the store, `nlgbench.runs.store`), its views `results.csv` and
`correlations.csv` (their format in `format.json`: `nlgbench.runs.migrate`),
`cells/<id>/` (one folder per cell: config.json, result.json, scores.csv, ...;
`nlgbench.core.cell` names those files), `report/` (`nlgbench report`), `slurm/` (the Slurm
launcher's book, and submitit's files in `slurm/submitit/`) and the lock file `.lock`.

`nlgbench run`, `import-scores` and `repair` write a run folder; each holds an exclusive advisory
lock on `DIR/.lock` (`fcntl.flock`) while it does, with its pid written into the file. The kernel
drops the lock when the process ends, however it ends (kill -9 included), so a dead sweep never
leaves a stale lock behind. A second writer exits with one line naming the holder's pid, or waits
(`wait=True`). Readers (report, compare) take no lock: the store's transactions keep what they
read consistent. File-system faults (no permission, read-only, disk full) become one line.

Nothing nlgbench writes into a run folder follows a link out of it: the lock is opened with
O_NOFOLLOW (and refused when it is a hard link to another file), files are written to a fresh
temporary in their own folder and renamed over the target (`write_atomic`: a link in the target's
place is replaced, never written through), and the folders written into (`cells/<id>/`, `report/`,
`slurm/`) are refused when they are symbolic links (`check_links`, `own_folder`), so `--force`
never deletes files somewhere else. The store checks its own files (`nlgbench.runs.store`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nlgbench.foundations.errors import UserError

STORE_FILE = "results.sqlite"
CSV_FILE = "results.csv"
CORRELATIONS_FILE = "correlations.csv"
FORMAT_FILE = "format.json"  # the format of results.csv and correlations.csv (nlgbench.runs.migrate)
CELLS = "cells"
REPORT = "report"
SLURM = "slurm"
SUBMITIT = "submitit"  # inside slurm/
LOCK_FILE = ".lock"
# Folders of a run folder that nlgbench writes into (`cells/<id>/` too): never symbolic links.
WRITTEN_FOLDERS = (CELLS, REPORT, SLURM, f"{SLURM}/{SUBMITIT}")


def cells_dir(folder: Path) -> Path:
    """`DIR/cells/`: one folder per cell."""
    return folder / CELLS


def cell_dir(folder: Path, cell_id: str) -> Path:
    """`DIR/cells/<id>/`: the cell's config.json, result.json, scores.csv (and slurm.json on Slurm)."""
    return folder / CELLS / cell_id


def report_dir(folder: Path) -> Path:
    """`DIR/report/`: what `nlgbench report` writes (and a committed report publishes)."""
    return folder / REPORT


def slurm_dir(folder: Path) -> Path:
    """`DIR/slurm/`: the Slurm launcher's submissions book."""
    return folder / SLURM


def submitit_dir(folder: Path) -> Path:
    """`DIR/slurm/submitit/` (absolute: the batch scripts name it): submitit's scripts, pickles and the tasks' logs."""
    return folder.resolve() / SLURM / SUBMITIT


def refuse_link(path: Path) -> None:
    """One line when `path` is a symbolic link: writing (or deleting) through it would change
    files outside the run folder."""
    if path.is_symlink():
        raise UserError(
            f"{path} is a symbolic link; nlgbench does not write through links in a run folder (it "
            "could change files elsewhere): replace it with the file or folder itself, or remove it"
        )


def own_folder(path: Path) -> Path:
    """`path` as a folder of the run folder to write into: created if missing, refused when it is a
    symbolic link (or a file)."""
    refuse_link(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{path} is a file, not a folder; move it aside")
    path.mkdir(parents=True, exist_ok=True)
    refuse_link(path)  # a link put in its place meanwhile
    return path


def check_links(folder: Path) -> None:
    """Refuse a run folder whose written-into folders (`cells/`, every `cells/<id>/`, `report/`,
    `slurm/`) are symbolic links, before anything is written or deleted."""
    for name in WRITTEN_FOLDERS:
        refuse_link(folder / name)
    if cells_dir(folder).is_dir():
        for path in sorted(cells_dir(folder).iterdir()):
            refuse_link(path)


def make_folder(folder: Path) -> None:
    """Create the run folder (and parents) and check it can be written; one line when not."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a run folder; give a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the run folder {folder}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write to the run folder {folder}: permission denied or read-only")


def lock_holder(folder: Path) -> str:
    """The pid written into the folder's lock file ('unknown' when it cannot be read)."""
    try:
        pid = (folder / LOCK_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return "unknown"
    return pid if pid.isdigit() else "unknown"


def open_lock(path: Path) -> int:
    """The lock file, opened for writing without following a link; refused (one line) when it is a
    symbolic link, not a regular file, or a hard link to another file (its pid is written into it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise UserError(f"cannot write to the run folder {path.parent}: {exc.strerror}") from None
    info = os.fstat(fd)
    why = (
        "is not a regular file"
        if not stat.S_ISREG(info.st_mode)
        else f"is a hard link ({info.st_nlink} names for one file)"
        if info.st_nlink > 1
        else None
    )
    if why is not None:
        os.close(fd)
        raise UserError(f"{path} {why}; nlgbench writes its pid into it: remove it (a new one is created)")
    return fd


@contextmanager
def locked(folder: Path, *, wait: bool = False, log: Callable[[str], None] = print) -> Iterator[None]:
    """Hold the run folder's exclusive lock for the block (creating the folder first).

    When another process holds it: a one-line UserError naming its pid, or with `wait` one
    log line and a blocking wait until it is released."""
    make_folder(folder)
    fd = open_lock(folder / LOCK_FILE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(folder)
            if not wait:
                raise UserError(
                    f"{folder} is in use by another nlgbench process (pid {holder}); run again when it "
                    "has finished (`nlgbench run --wait` waits for it)"
                ) from None
            log(f"waiting for pid {holder} to finish with {folder} ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        check_links(folder)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race with a waiting process)
