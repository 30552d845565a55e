"""A run folder opened for writing: created if needed, writable, and held by one process at a time.

`nlgbench run`, `import-scores` and `repair` write a run folder; each holds an exclusive advisory
lock on `DIR/.lock` (`fcntl.flock`) while it does, with its pid written into the file. The kernel
drops the lock when the process ends, however it ends (kill -9 included), so a dead sweep never
leaves a stale lock behind. A second writer exits with one line naming the holder's pid, or waits
(`wait=True`). Readers (report, compare) take no lock: the store's transactions keep what they
read consistent. File-system faults (no permission, read-only, disk full) become one line.
"""

from __future__ import annotations

import errno
import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from nlgbench.errors import UserError

LOCK_FILE = ".lock"

# errno values that say "the file system refuses this write", not "the program is wrong".
NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}


def write_fault(exc: OSError) -> UserError | None:
    """The one-line error for a write the file system refused (disk full, read-only, no
    permission); None for any other OSError (a bug or an unexpected fault: keep its traceback)."""
    where = exc.filename or "a file"
    if exc.errno in NO_SPACE:
        return UserError(f"no space left on the device while writing {where}; free some space and run the same "
                         "command again (finished cells are kept)")
    if exc.errno in NOT_WRITABLE:
        return UserError(f"cannot write {where}: {exc.strerror}")
    return None


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


@contextmanager
def locked(folder: Path, *, wait: bool = False, log: Callable[[str], None] = print) -> Iterator[None]:
    """Hold the run folder's exclusive lock for the block (creating the folder first).

    When another process holds it: a one-line UserError naming its pid, or with `wait` one
    log line and a blocking wait until it is released."""
    make_folder(folder)
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UserError(f"cannot write to the run folder {folder}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(folder)
            if not wait:
                raise UserError(f"{folder} is in use by another nlgbench process (pid {holder}); run again when it "
                                "has finished (`nlgbench run --wait` waits for it)") from None
            log(f"waiting for pid {holder} to finish with {folder} ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race with a waiting process)
