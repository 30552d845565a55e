"""Content digests of files: `file_sha256` reads a file's bytes in chunks; `cached_file_sha256` keeps
the digest under the cache root (`digests/`), keyed by the file's resolved path and the stat fields
any write changes (device, inode, size, modification and change times), so a model's gigabytes are
read once per machine, not once per cell, while a file rewritten in place is read again."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic
from nlgbench.foundations.package import cache_root

CHUNK = 1 << 20
DIGESTS_FOLDER = "digests"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (read in chunks); a UserError naming the file if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()


def digest_entry(path: Path) -> Path:
    """The cache file holding the digest of `path` as it is now on disk (its name hashes the stat key)."""
    real = Path(path).resolve()
    try:
        stat = real.stat()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    key = [str(real), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
    name = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
    return cache_root() / DIGESTS_FOLDER / name


def cached_file_sha256(path: Path) -> str:
    """`file_sha256` of `path`, from the digest cache where the file is unchanged since it was read
    (same path, inode, size, mtime and ctime), else read now and remembered."""
    entry = digest_entry(path)
    try:
        known = entry.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        known = ""
    if _HEX64.match(known):
        return known
    digest = file_sha256(path)
    _store(entry, digest)  # under the stat taken before reading: a file changed meanwhile misses it
    return digest


def remember_sha256(path: Path, digest: str) -> None:
    """Record `digest` as the sha256 of `path` as it is now, for a file whose bytes were just hashed
    elsewhere (written in a temporary folder, then renamed): `cached_file_sha256` then reads nothing."""
    try:
        _store(digest_entry(path), digest)
    except UserError:  # gone already: nothing to remember
        pass


def _store(entry: Path, digest: str) -> None:
    """Write a digest cache entry; a cache that cannot be written only costs a reading later."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(entry, digest + "\n")
    except OSError:
        pass
