"""Files read and written by every layer. Reading: `read_bytes`, `utf8_text`, `read_text`, `read_lines`,
`read_named` (a file that cannot be read, or is no regular file, is one UserError naming it). Writing:
`write_atomic` and `write_atomic_with` (whole or not at all, no link followed), `write_new` (a new file
only: nothing there is replaced), `write_output` (the file a user names with a command's `--out`: checked
first by `check_output_file`, links refused) and `write_fault`, the one line for a write the file system
refused."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from nlgbench.foundations.errors import UserError

BOM = "\ufeff"  # a UTF-8 byte-order mark, removed from the start of a text file's text
# errno values that say "the file system refuses this write", not "the program is wrong".
NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}
TOO_LARGE = errno.EFBIG  # over the process's file size limit (`ulimit -f`) or the file system's largest file


def write_fault(exc: OSError) -> UserError | None:
    """The one-line error for a write the file system refused (disk full, a file over the size limit,
    read-only, no permission); None for any other OSError (a bug or an unexpected fault: keep its
    traceback)."""
    where = exc.filename or "a file"
    if exc.errno in NO_SPACE:
        return UserError(
            f"no space left on the device while writing {where}; free some space and run the same "
            "command again (finished cells are kept)"
        )
    if exc.errno == TOO_LARGE:
        return UserError(
            f"cannot write {where}: file too large for the file size limit (`ulimit -f`) or the file system; "
            "raise the limit or write elsewhere, then run the same command again"
        )
    if exc.errno in NOT_WRITABLE:
        return UserError(f"cannot write {where}: {exc.strerror}")
    return None


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, newlines as given) to `path` so that readers never see half a
    file and no link is followed (`write_atomic_with`)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    write_atomic_with(path, lambda fh: fh.write(payload))


def write_atomic_with(path: Path, write: Callable[[BinaryIO], object], *, sync: bool = False) -> None:
    """Have `write` fill a fresh temporary file (O_EXCL, in the same folder), flushed to disk first where
    `sync` (a training checkpoint must survive a crash), then renamed over `path`: readers never see half
    a file, and a link at `path` is replaced by the file, its target left as it was. An OSError names
    `path` (not the temporary), for `write_fault`'s one line."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        exc.filename = str(path)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results from the rest of a group
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            exc.filename = str(path)
        raise


def write_new(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) into a new file at `path`; one UserError where anything is there already
    (a file, a folder, a link, dangling or not: never followed, never replaced) or its folder is missing.
    The file is created with O_EXCL, so a file that appears meanwhile is not overwritten either; a write
    that fails half-way removes what it wrote."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; refusing to write through it (give the path of a new file)")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        raise UserError(f"{path} exists already; refusing to overwrite it (remove it or give another name)") from None
    except FileNotFoundError:
        raise UserError(f"cannot write {path}: its folder does not exist") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    except BaseException as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            exc.filename = str(path)
        raise


def refuse_output_link(path: Path, option: str) -> None:
    """One line when the output `path` a user named is a symbolic link, or a file with a second name
    (a hard link): writing it would change a file elsewhere, which nlgbench never does behind the
    user's back."""
    if path.is_symlink():
        raise UserError(
            f"{option} {path} is a symbolic link; nlgbench does not write through links (it could change "
            "the file it points to): remove it or give another name"
        )
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise UserError(
            f"{option} {path} is a hard link ({info.st_nlink} names for one file); nlgbench does not write "
            "through links (it could change the file under its other name): remove it or give another name"
        )


def check_output_file(path: Path, option: str) -> None:
    """The file a user named with `option` (`--out FILE`) may be created or replaced: not a link
    (`refuse_output_link`), not a folder, in an existing, writable folder. Checked before the work, so
    a long run does not end in a refused write."""
    refuse_output_link(path, option)
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder; give the name of a file (in it or elsewhere)")
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: folder {folder} is not writable")


def write_output(path: Path, data: str | bytes, option: str, *, new_only: bool = False) -> None:
    """Write the file a user named with `option`: checked (`check_output_file`), then written to a
    temporary file and renamed over `path` (`write_atomic`), so no link is ever written through, even
    one that appeared since the check; with `new_only` a new file only (`write_new`: nothing there is
    replaced). The one writer of every command's output file."""
    if new_only:
        refuse_output_link(path, option)
        write_new(path, data)
        return
    check_output_file(path, option)
    write_atomic(path, data)


#: what a path that is no regular file is, by its type bits (os.stat's st_mode), for the messages
_SPECIAL_FILES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_special_file(path: Path, what: str = "") -> None:
    """One UserError where `path` (its link followed, as a read follows it) is a folder, a FIFO, a device or a
    socket: reading a FIFO waits for a writer, forever where there is none, and a device such as /dev/zero never
    ends, so every input file is a regular file, checked before it is opened. A missing path passes (the reader
    says it is missing). `what` names the file's role in the message ("cannot read spec file PATH: ...")."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    for test, kind in _SPECIAL_FILES:
        if test(mode):
            raise UserError(f"cannot read {what + ' ' if what else ''}{path}: it is {kind}, not a regular file")


def read_bytes(path: Path) -> bytes:
    """A file's bytes; one UserError naming it where it is missing, no regular file (`refuse_special_file`) or
    unreadable."""
    refuse_special_file(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"missing file {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_named(path: Path, what: str) -> str:
    """The UTF-8 text of the file a user named as `what` (a "spec file"), newlines as Python reads them; one
    UserError where it is missing ("WHAT not found: PATH"), no regular file (`refuse_special_file`) or
    unreadable ("cannot read WHAT PATH: REASON")."""
    refuse_special_file(path, what)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc}") from None


def utf8_text(path: Path, data: bytes, *, data_file: bool = False) -> str:
    """`data` (read from `path`) as UTF-8 text, as it is (a byte-order mark kept); one UserError naming the
    file and the bad byte where it is not UTF-8: "PATH: not UTF-8 text (REASON at byte N)" for the files
    nlgbench writes (results, scores), "PATH is not UTF-8 text (bad byte at offset N)" with `data_file`
    (data and imported files)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data_file:
            raise UserError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})") from None
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_text(path: Path) -> str:
    """A UTF-8 data file's text, a leading byte-order mark removed; one UserError naming the file where it is
    missing, a folder, unreadable or not UTF-8 (`read_bytes`, `utf8_text`)."""
    return utf8_text(path, read_bytes(path), data_file=True).removeprefix(BOM)


def split_lines(text: str) -> list[str]:
    """Lines split on '\\n' only (not on U+0085, U+2028 or a form feed, which str.splitlines splits on), a
    '\\r' at line ends removed; no line after a final '\\n'."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: Path) -> list[str]:
    """A UTF-8 data file's lines (`read_text`, then `split_lines`): a text holding U+0085, U+2028 or a
    form feed stays one line, so line files stay aligned."""
    return split_lines(read_text(path))
