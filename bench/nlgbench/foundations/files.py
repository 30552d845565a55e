"""Files written whole or not at all: `write_atomic` (no half-written file, no link followed) and
`write_fault`, the one line for a write the file system refused."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from nlgbench.foundations.errors import UserError

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


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, newlines as given) to `path` so that readers never see half a
    file and no link is followed: a fresh temporary (O_EXCL, in the same folder) renamed over
    `path`. A link at `path` is replaced by the file, its target left as it was. An OSError names
    `path` (not the temporary), for `write_fault`'s one line."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        exc.filename = str(path)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results from the rest of a group
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            exc.filename = str(path)
        raise
