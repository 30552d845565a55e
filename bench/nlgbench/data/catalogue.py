"""The dataset catalogue and its download cache. Catalogue datasets (``datasets/catalogue.yaml``, with
the user's own catalogue files from ``$NLGBENCH_CATALOGUE`` or a spec's ``catalogue_file`` merged over
it) are fetched from their public source, or from ``$NLGBENCH_DATA_MIRROR``, into
``$NLGBENCH_CACHE/datasets/<folder>/``, every file checked against its sha256."""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from nlgbench.foundations.digests import file_sha256
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.lazyregistry import Registry, UserFiles, read_registry_file
from nlgbench.foundations.package import cache_root, package_file

MIRROR_ENV = "NLGBENCH_DATA_MIRROR"
USER_CATALOGUES = UserFiles("NLGBENCH_CATALOGUE")  # the user's catalogue files, merged over the packaged one
_CHUNK = 1 << 20
_DOWNLOAD_TIMEOUT_S = 60

Progress = Callable[[str], None]

# --------------------------------------------------------------------------- catalogue


def catalogue_path() -> Path:
    """The packaged catalogue: `datasets/catalogue.yaml`, shipped in the package as `nlgbench/catalogue.yaml`."""
    return package_file("catalogue.yaml")


def load_catalogue(path: Path | None = None) -> dict[str, Any]:
    """The catalogue document ``{datasets: {...}}`` of the file `path`, or (default) of the packaged
    catalogue with the user's catalogue files merged over it (a user entry replaces a same-named one)."""
    datasets: dict[str, Any] = {}
    for file in [path] if path else [catalogue_path(), *USER_CATALOGUES.paths()]:
        for name, entry in read_registry_file(file, "datasets", "dataset catalogue").items():
            if not isinstance(entry, dict):
                raise UserError(f"dataset catalogue {file}: entry {name!r} must be a mapping, got {entry!r}")
            _check_cache_names(entry, f"dataset catalogue {file}: entry {name!r}")
            datasets[str(name)] = entry
    return {"datasets": datasets}


def _check_cache_names(entry: dict[str, Any], where: str) -> None:
    """Refuse a `folder` or `files` name that would put a download outside the dataset's cache folder:
    an absolute name, or one that climbs out with '..' after normalisation (`a/../b` is fine)."""
    files = entry.get("files")
    names = [("folder", entry.get("folder"))] + [("file", rel) for rel in (files if isinstance(files, dict) else {})]
    for what, value in names:
        if value is None:
            continue
        text = str(value)
        norm = posixpath.normpath(text)
        if not text.strip() or posixpath.isabs(text) or norm == ".." or norm.startswith("../"):
            raise UserError(
                f"{where}: {what} name {text!r} lies outside the dataset cache "
                "(names must be relative, without climbing out by '..')"
            )


def add_catalogue_file(path: Path) -> None:
    """Merge a user's catalogue file (a sweep spec's `catalogue_file`) over the catalogue from now on; checked first."""
    load_catalogue(path.expanduser().resolve())
    USER_CATALOGUES.add(path)


def catalogue_registry(catalogue: dict[str, Any] | None = None) -> Registry[dict]:
    """The datasets of `catalogue` (default: `load_catalogue()`) as a registry, read afresh on each call."""
    doc = catalogue if catalogue is not None else load_catalogue()
    if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), dict):
        raise UserError("dataset catalogue has no 'datasets' mapping")
    registry: Registry[dict] = Registry("dataset", dict)
    for name, entry in doc["datasets"].items():
        registry.register(name, entry)
    return registry


def dataset_names(catalogue: dict[str, Any] | None = None) -> list[str]:
    """Names of the catalogue datasets, sorted."""
    return catalogue_registry(catalogue).names()


def names_a_file(text: str, catalogue: dict[str, Any] | None = None) -> bool:
    """Whether a dataset given as one string (import-scores' --dataset) is a file path: not a catalogue
    name, and with an extension (any case: `BASE.JSONL`) or a folder part."""
    return text not in dataset_names(catalogue) and (bool(Path(text).suffix) or "/" in text or os.sep in text)


def unknown_dataset(name: str, catalogue: dict[str, Any] | None = None) -> UserError:
    """The error for a catalogue name that is none: a file name is told to be given as a path,
    anything else gets the closest catalogue names."""
    if names_a_file(name, catalogue):
        return UserError(
            f"dataset {name!r} is not in the catalogue and looks like a file: give own data as "
            f"`path: {name}` (a .jsonl or .tsv file), not as a name"
        )
    return unknown_name("dataset", name, dataset_names(catalogue))


def catalogue_entry(name: str, catalogue: dict[str, Any] | None = None) -> dict[str, Any]:
    """The catalogue entry of dataset `name` (unknown names: error with the closest ones)."""
    entry = catalogue_registry(catalogue).get(name)
    required = ("source", "folder", "format", "language_pairs", "files")
    missing = [key for key in required if key not in entry]
    if missing:
        raise UserError(f"dataset catalogue: entry {name!r} lacks {', '.join(repr(k) for k in missing)}")
    if entry["format"] not in ("da", "mqm"):
        raise UserError(f"dataset catalogue: entry {name!r} has unknown format {entry['format']!r} (valid: da, mqm)")
    return entry


# --------------------------------------------------------------------------- fetching


def cache_dir() -> Path:
    """The cache root: ``$NLGBENCH_CACHE`` or ``~/.cache/nlgbench`` (`nlgbench.foundations.package.cache_root`)."""
    return cache_root()


def fetch(name: str, progress: Progress | None = None, *, catalogue: dict[str, Any] | None = None) -> Path:
    """Make sure every file of dataset `name` is in the cache with the right sha256.

    Files already cached with the right checksum are not fetched again; a cached file
    with a wrong checksum is fetched again. Downloads go to a temporary file that is
    renamed into place only after its checksum matched. Returns the local folder.
    """
    entry = catalogue_entry(name, catalogue)
    folder = str(entry["folder"])
    local = cache_dir() / "datasets" / folder
    root: Path | str | None = None
    _check_cache_names(entry, f"dataset catalogue: entry {name!r}")
    for rel, sha in entry["files"].items():
        target = local / rel
        key = f"{folder}/{rel}"
        if target.is_file():
            if sha256_file(target) == sha:
                continue
            _say(progress, f"{key}: cached copy has the wrong sha256, fetching it again")
        if root is None:
            root = _source_root(str(entry["source"]))
        _fetch_file(root, key, target, str(sha), progress)
    return local


def _source_root(public: str) -> Path | str:
    """The root to fetch from: the mirror (a directory or a URL) if set, else the public URL."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if not mirror:
        return public.rstrip("/")
    parsed = urllib.parse.urlparse(mirror)
    scheme = parsed.scheme.lower()
    if scheme in ("http", "https"):
        return mirror.rstrip("/")
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UserError(f"{MIRROR_ENV}={mirror!r}: only local file:// URLs are supported")
        path = Path(urllib.request.url2pathname(parsed.path))
    elif len(scheme) > 1:
        raise UserError(
            f"{MIRROR_ENV}={mirror!r}: unsupported URL scheme {scheme!r} "
            "(use a directory, file://, http:// or https://)"
        )
    else:
        path = Path(mirror).expanduser()
    if not path.is_dir():
        raise UserError(f"{MIRROR_ENV}={mirror!r}: no such directory {path}")
    return path


def _fetch_file(root: Path | str, key: str, target: Path, sha: str, progress: Progress | None) -> None:
    """Copy ``root/key`` to `target` through a temporary file, checking its sha256."""
    if isinstance(root, Path):
        origin = str(root / key)
    else:
        origin = f"{root}/{urllib.parse.quote(key)}"
    _say(progress, f"fetching {key} from {origin}")
    cache = (cache_dir() / "datasets").resolve()
    if not target.resolve().is_relative_to(cache):  # the last guard before anything is written
        raise UserError(f"refusing to write {key}: {target.resolve()} lies outside the dataset cache {cache}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise UserError(f"cannot write to the dataset cache {target.parent}: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, _open_source(root, key, origin) as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        got = digest.hexdigest()
        if got != sha:
            raise UserError(f"checksum mismatch for {key} from {origin}: expected sha256 {sha}, got {got}")
        tmp.chmod(0o644)  # mkstemp makes it private; cached data is plain readable data
        os.replace(tmp, target)
    except UserError:
        tmp.unlink(missing_ok=True)
        raise
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot fetch {origin} into {target}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _open_source(root: Path | str, key: str, origin: str) -> BinaryIO:
    """Open one source file for reading (a local file or a URL)."""
    if isinstance(root, Path):
        path = root / key
        if not path.is_file():
            raise UserError(f"missing file {path} in the dataset mirror ({MIRROR_ENV}={root})")
        try:
            return path.open("rb")
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    hint = f"; offline? set {MIRROR_ENV} to a local copy" if MIRROR_ENV not in os.environ else ""
    try:
        return urllib.request.urlopen(origin, timeout=_DOWNLOAD_TIMEOUT_S)  # noqa: S310 (http/https/file only)
    except urllib.error.HTTPError as exc:
        raise UserError(f"cannot fetch {origin}: HTTP {exc.code} {exc.reason}{hint}") from None
    except urllib.error.URLError as exc:
        raise UserError(f"cannot fetch {origin}: {exc.reason}{hint}") from None
    except OSError as exc:
        raise UserError(f"cannot fetch {origin}: {exc.strerror or exc}{hint}") from None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes (`nlgbench.foundations.digests.file_sha256`: read in chunks, a
    UserError naming the file if it cannot be read)."""
    return file_sha256(path)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
