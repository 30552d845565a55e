"""Human-judgment datasets: the catalogue, a sha256-checked download cache, and loaders.

Catalogue datasets (``datasets/catalogue.yaml``, with the user's own catalogue files from
``$NLGBENCH_CATALOGUE`` or a spec's ``catalogue_file`` merged over it) are fetched from their
public source, or from ``$NLGBENCH_DATA_MIRROR``, into ``$NLGBENCH_CACHE/datasets/<folder>/``
and parsed per format (``da`` or ``mqm``). User files (``.jsonl`` / ``.tsv``) are read directly; they
may give several references per item and several human dimensions (`USER_FORMAT`). Every dataset is
a list of :class:`Item` in a stable order: language pair (sorted by name), then ``seg_id``, then
``system``. Bad input raises :class:`nlgbench.foundations.errors.UserError` (one line).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from nlgbench.foundations.package import package_file
from nlgbench.foundations.errors import UserError, closest, unknown_name
from nlgbench.foundations.registry import Registry, UserFiles, read_registry_file

CACHE_ENV = "NLGBENCH_CACHE"
MIRROR_ENV = "NLGBENCH_DATA_MIRROR"
USER_CATALOGUES = UserFiles("NLGBENCH_CATALOGUE")  # the user's catalogue files, merged over the packaged one

#: Columns of the user format; ``system``, ``source`` and ``doc_id`` may be left out (default "").
#: Several references: JSONL ``references: [..]`` (``reference`` is the one-reference shorthand), TSV
#: columns ``reference``, ``reference_2``, ``reference_3`` ... Several human dimensions: JSONL ``human:
#: {"relevance": 4.3, "coherence": null}`` (null or absent: missing), TSV columns ``human.relevance`` ...
USER_COLUMNS = ("lp", "seg_id", "system", "doc_id", "source", "reference", "hypothesis", "human")
OPTIONAL_USER_COLUMNS = ("system", "source", "doc_id")
#: The human dimension of data with one human score per item (DA, MQM, a plain ``human`` number).
HUMAN = "human"
#: A spec's ``human:`` value selecting every dimension.
ALL_DIMENSIONS = "all"
TSV_HUMAN_PREFIX = "human."
TSV_REFERENCE_PREFIX = "reference_"
#: Item fields that :func:`check_nonblank` can test.
TEXT_FIELDS = ("lp", "source", "reference", "hypothesis")
#: DA file field name (in the catalogue ``pattern``) for each item field.
_DA_FIELDS = {"source": "source", "reference": "reference", "hypothesis": "mt-system", "human": "human"}
NAN = float("nan")
_CHUNK = 1 << 20
_DOWNLOAD_TIMEOUT_S = 60

Progress = Callable[[str], None]


SegId = int | str  # an integer (line number) or, in user files, a string id such as "dm-test-8764fb95"


@dataclass(frozen=True)
class Item:
    """One judged output, identified by ``(lp, seg_id, system)``.

    `reference` is the first of `references` (all of them; metrics declare how they use several);
    `humans` maps each human dimension to its score (a missing score is absent), and `human` is the
    score of the dataset's primary dimension (NaN where this item lacks it)."""

    lp: str
    seg_id: SegId  # catalogue data: the 1-based line number in that lp's text files
    system: str  # "" for DA data
    source: str
    reference: str
    hypothesis: str
    human: float
    references: tuple[str, ...] = ()  # () means (reference,)
    humans: dict[str, float] = field(default_factory=dict)  # {} means {HUMAN: human}
    doc_id: str = ""  # the document (summary level groups by it); "" when none
    extra: dict[str, str] = field(default_factory=dict)  # further columns a spec asked to carry into scores.csv

    def __post_init__(self) -> None:
        if not self.references:
            object.__setattr__(self, "references", (self.reference,))
        if not self.humans and math.isfinite(self.human):
            object.__setattr__(self, "humans", {HUMAN: self.human})

    @property
    def key(self) -> tuple[str, SegId, str]:
        """The item's identity ``(lp, seg_id, system)``, also its sort key."""
        return (self.lp, self.seg_id, self.system)


@dataclass
class Dataset:
    """A loaded dataset: items in stable order plus provenance of the files read."""

    name: str  # catalogue name, or the user file's stem
    items: list[Item]  # stable order: lp sorted by name, then seg_id, then system
    has_systems: bool
    files: dict[str, str] = field(default_factory=dict)  # relative path (or file path) -> sha256
    human_dims: list[str] = field(default_factory=lambda: [HUMAN])  # selected dimensions; the first is primary
    warnings: list[str] = field(default_factory=list)  # e.g. a head subset of a file sorted by human score
    drawn_whole: bool = False  # `sample: {n}` drew every item (no language pair holds more than n units)

    @property
    def language_pairs(self) -> list[str]:
        """The language pairs present, sorted."""
        return sorted({item.lp for item in self.items})

    @property
    def has_docs(self) -> bool:
        """Whether items name their document (the item / summary level needs it)."""
        return any(item.doc_id for item in self.items)

    @property
    def max_references(self) -> int:
        return max((len(item.references) for item in self.items), default=0)

    def missing_human(self, dim: str) -> int:
        """Items without a score on human dimension `dim`."""
        return sum(1 for item in self.items if dim not in item.humans)


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
            raise UserError(f"{where}: {what} name {text!r} lies outside the dataset cache "
                            "(names must be relative, without climbing out by '..')")


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
        return UserError(f"dataset {name!r} is not in the catalogue and looks like a file: give own data as "
                         f"`path: {name}` (a .jsonl or .tsv file), not as a name")
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
    """The cache root: ``$NLGBENCH_CACHE`` or ``~/.cache/nlgbench``."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "nlgbench"


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
        raise UserError(f"{MIRROR_ENV}={mirror!r}: unsupported URL scheme {scheme!r} (use a directory, file://, http:// or https://)")
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
    """Hex sha256 of a file's bytes (read in chunks); a UserError naming the file if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# --------------------------------------------------------------------------- loading


def load_dataset(
    name: str | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    max_segments: int | None = None,
    human: str | None = None,
    sample: tuple[int, int] | None = None,
    columns: Sequence[str] = (),
    catalogue: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> Dataset:
    """Load a catalogue dataset (`name`) or a user file (`path`); exactly one of them.

    `sample` = (n, seed) keeps a seeded random subset instead of the head (`sample_items`).
    `columns` names further columns of a user file to carry through to scores.csv (`Item.extra`).

    `human` selects the human dimension(s) to correlate with: one name, or None / ``all`` for
    every dimension of the data (the first is primary: `Item.human`).

    `max_segments` keeps the first N items of each language pair in the stable order
    (for MQM data that is N items, i.e. (segment, system) pairs, not N segments).
    A catalogue dataset is always parsed whole first, and its item count checked
    against the catalogue's ``expected_items``.
    """
    if (name is None) == (path is None):
        raise UserError("load a dataset by exactly one of a catalogue name or a file path")
    if max_segments is not None and (
        isinstance(max_segments, bool) or not isinstance(max_segments, int) or max_segments < 1
    ):
        raise UserError(f"max_segments must be a positive integer, got {max_segments!r}")
    if path is not None:
        dataset = _load_user_file(Path(path), tuple(columns))
    else:
        assert name is not None
        if columns:
            raise UserError(f"dataset {name!r}: columns are carried from own data files only")
        dataset = _load_catalogue_dataset(name, catalogue, progress)
    if max_segments is not None and sample is not None:
        raise UserError("give max_segments (the first N per language pair) or sample (a random N), not both")
    if max_segments is not None:
        dataset.items = _first_per_lp(dataset.items, max_segments)
        dataset.warnings = sorted_head_warnings(dataset)
    if sample is not None:
        dataset.drawn_whole = all(len(units) <= sample[0] for units in _sample_units(dataset.items).values())
        dataset.warnings = sample_warnings(dataset, *sample)
        dataset.items = sample_items(dataset.items, *sample)
    return select_human(dataset, human)


SORTED_HEAD_SPEARMAN = 0.5  # above this |Spearman(row order, human)|, a head subset is not a fair sample
_MIN_HEAD = 10  # fewer rows say nothing about the order


def sorted_head_warnings(dataset: Dataset) -> list[str]:
    """Per language pair whose kept head is visibly ordered by the human score (|Spearman of row
    order vs human| above SORTED_HEAD_SPEARMAN; e.g. WMT17's DA files are sorted by score), the
    warning that `max_segments` keeps a biased subset and `sample` should be used."""
    from scipy.stats import spearmanr

    warnings = []
    for lp in dataset.language_pairs:
        human = [it.human for it in dataset.items if it.lp == lp and math.isfinite(it.human)]
        if len(human) < _MIN_HEAD or len(set(human)) < 2:
            continue
        rho = float(spearmanr(range(len(human)), human)[0])
        if abs(rho) > SORTED_HEAD_SPEARMAN:
            warnings.append(f"dataset {dataset.name!r}, {lp}: the first {len(human)} items are ordered by human score "
                            f"(Spearman {rho:+.2f} of row order vs human), so max_segments keeps a biased subset; "
                            f"use sample: {{n: {len(human)}, seed: 0}}")
    return warnings


def _sample_units(items: list[Item]) -> dict[str, list[tuple[str, int]]]:
    """Per language pair, the units `sample` draws from: each document named by a `doc_id` (sorted),
    then each item without one as a document of its own (its position)."""
    units: dict[str, list[tuple[str, int]]] = {}
    for lp in sorted({it.lp for it in items}):
        positions = [i for i, it in enumerate(items) if it.lp == lp]
        docs = sorted({items[i].doc_id for i in positions if items[i].doc_id})
        units[lp] = [(doc, -1) for doc in docs] + [("", i) for i in positions if not items[i].doc_id]
    return units


def sample_items(items: list[Item], n: int, seed: int) -> list[Item]:
    """A seeded random subset, stratified per language pair: n units of each pair, a unit being a
    document (all items naming one `doc_id`, so the item level keeps whole documents) or an item
    without a `doc_id`. Order kept; the draw of a pair depends only on (seed, lp), not on other pairs."""
    import random

    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"sample needs n (an integer >= 1) and seed (an integer), got n={n!r}, seed={seed!r}")
    chosen: set[tuple[str, int]] = set()
    for lp, units in _sample_units(items).items():
        chosen.update(random.Random(f"{seed}/{lp}").sample(units, min(n, len(units))))
    return [it for i, it in enumerate(items) if (it.doc_id, -1) in chosen or ("", i) in chosen]


def sample_warnings(dataset: Dataset, n: int, seed: int) -> list[str]:
    """The warning that `sample: {n, seed}` asks for more than a language pair has (that pair is kept
    whole, and where no pair has n the label's ~n overstates what was drawn), with the counts drawn."""
    short = {lp: len(units) for lp, units in _sample_units(dataset.items).items() if len(units) < n}
    if not short:
        return list(dataset.warnings)
    counts = ", ".join(f"{lp}: {count}" for lp, count in short.items())
    return [*dataset.warnings, f"dataset {dataset.name!r}: sample n={n} (seed {seed}) is more than "
            f"{'every' if len(short) == len(dataset.language_pairs) else 'some'} language pair holds, so these are "
            f"kept whole ({counts} items or documents)"]


def select_human(dataset: Dataset, human: str | None) -> Dataset:
    """`dataset` with only the human dimension `human` (None or ``all``: every one; order kept);
    each item's `human` becomes its score on the first selected dimension (NaN where missing)."""
    if human is None or human == ALL_DIMENSIONS:
        dims = list(dataset.human_dims)
    elif human in dataset.human_dims:
        dims = [human]
    else:
        raise UserError(f"dataset {dataset.name!r}: {unknown_name('human dimension', human, dataset.human_dims)}")
    if dims == dataset.human_dims:
        return dataset  # loaders already made the first dimension primary
    primary = dims[0]
    items = [replace(it, human=it.humans.get(primary, NAN), humans={d: it.humans[d] for d in dims if d in it.humans})
             for it in dataset.items]
    return replace(dataset, items=items, human_dims=dims)


def check_nonblank(dataset: Dataset, fields: Sequence[str]) -> None:
    """Raise a UserError naming the first item whose field (one of `fields`) is empty or whitespace."""
    for name in fields:
        if name not in TEXT_FIELDS:
            raise unknown_name("item field", name, TEXT_FIELDS)
    for item in dataset.items:
        for name in fields:
            texts = item.references if name == "reference" else (getattr(item, name),)
            if any(not text.strip() for text in texts):
                raise UserError(
                    f"dataset {dataset.name!r}: empty {name} in item lp={item.lp!r} "
                    f"seg_id={item.seg_id} system={item.system!r}"
                )


def _first_per_lp(items: list[Item], limit: int) -> list[Item]:
    """The first `limit` items of each language pair, order kept."""
    seen: dict[str, int] = {}
    kept = []
    for item in items:
        count = seen.get(item.lp, 0)
        if count < limit:
            kept.append(item)
            seen[item.lp] = count + 1
    return kept


def _load_catalogue_dataset(name: str, catalogue: dict[str, Any] | None, progress: Progress | None) -> Dataset:
    """Fetch and parse a catalogue dataset, then check its item count."""
    entry = catalogue_entry(name, catalogue)
    local = fetch(name, progress, catalogue=catalogue)
    reader = _CatalogueReader(name, entry, local)
    lps = sorted(str(lp) for lp in entry["language_pairs"])
    items: list[Item] = []
    for lp in lps:
        items.extend(reader.da(lp) if entry["format"] == "da" else reader.mqm(lp))
    items.sort(key=lambda item: item.key)
    expected = entry.get("expected_items")
    if expected is not None and len(items) != expected:
        raise UserError(f"dataset {name!r}: expected {expected} items (catalogue), got {len(items)} from {local}")
    return Dataset(name=name, items=items, has_systems=entry["format"] == "mqm", files=reader.files)


class _CatalogueReader:
    """Reads one catalogue dataset's cached files, recording what was read."""

    def __init__(self, name: str, entry: dict[str, Any], local: Path) -> None:
        self.name = name
        self.entry = entry
        self.local = local
        self.files: dict[str, str] = {}

    def lines(self, rel: str) -> list[str]:
        """Lines of a cached catalogue file, re-checking its sha256."""
        sums = self.entry["files"]
        if rel not in sums:
            raise UserError(f"dataset catalogue: {self.name!r} uses {rel!r} but does not list it under 'files'")
        key = f"{self.entry['folder']}/{rel}"
        data = _read_bytes(self.local / rel)
        sha = hashlib.sha256(data).hexdigest()
        if sha != sums[rel]:
            raise UserError(f"checksum mismatch for {self.local / rel}: expected sha256 {sums[rel]}, got {sha}")
        self.files[key] = sha
        return _split_lines(_decode(data, self.local / rel))

    def check_counts(self, lp: str, columns: dict[str, list[str]]) -> int:
        """The common line count of `columns` (rel -> lines), or an error listing them."""
        counts = {rel: len(lines) for rel, lines in columns.items()}
        if len(set(counts.values())) != 1:
            listing = ", ".join(f"{rel}: {n}" for rel, n in counts.items())
            raise UserError(f"dataset {self.name!r}, {lp}: files have unequal line counts ({listing})")
        return next(iter(counts.values()))

    def da(self, lp: str) -> list[Item]:
        """Items of one DA language pair: four parallel files, seg_id = line number."""
        pattern = self.entry.get("pattern")
        if not isinstance(pattern, str):
            raise UserError(f"dataset catalogue: DA entry {self.name!r} lacks a 'pattern'")
        rels = {fld: pattern.format(field=stem, lp=lp) for fld, stem in _DA_FIELDS.items()}
        cols = {rel: self.lines(rel) for rel in rels.values()}
        n = self.check_counts(lp, cols)
        src, ref, hyp, hum = (cols[rels[f]] for f in ("source", "reference", "hypothesis", "human"))
        items = []
        for i in range(n):
            where = f"{self.entry['folder']}/{rels['human']} line {i + 1}"
            items.append(Item(lp, i + 1, "", src[i], ref[i], hyp[i], _parse_float(hum[i], where)))
        return items

    def mqm(self, lp: str) -> list[Item]:
        """Items of one MQM language pair: rated (segment, system) pairs from the score file."""
        layout = (self.entry.get("layout") or {}).get(lp)
        if not isinstance(layout, dict) or not all(k in layout for k in ("source", "reference", "scores", "systems")):
            raise UserError(
                f"dataset catalogue: MQM entry {self.name!r} needs layout.{lp} with source, reference, scores, systems"
            )
        systems: dict[str, str] = {str(s): str(rel) for s, rel in layout["systems"].items()}
        cols = {rel: self.lines(rel) for rel in [layout["source"], layout["reference"], *systems.values()]}
        n = self.check_counts(lp, cols)
        src, ref = cols[layout["source"]], cols[layout["reference"]]
        scores_rel = str(layout["scores"])
        score_lines = self.lines(scores_rel)
        where_file = f"{self.entry['folder']}/{scores_rel}"
        if not score_lines or score_lines[0].split()[:1] != ["system"]:
            raise UserError(f"{where_file}: expected a header line starting with 'system'")
        items = []
        seen: set[tuple[str, int]] = set()
        for number, line in enumerate(score_lines[1:], start=2):
            where = f"{where_file} line {number}"
            parts = line.split()
            if len(parts) != 3:
                raise UserError(f"{where}: expected 'system score seg_id', got {line!r}")
            system, score, seg_text = parts
            if system not in systems:
                raise UserError(f"{where}: system {system!r} has no output file in the catalogue (known: {', '.join(systems)})")
            seg_id = _parse_seg_id(seg_text, where)
            if not 1 <= seg_id <= n:
                raise UserError(f"{where}: seg_id {seg_id} is outside 1..{n} (the text files' lines)")
            if (system, seg_id) in seen:
                raise UserError(f"{where}: duplicate score for system {system!r} seg_id {seg_id}")
            seen.add((system, seg_id))
            if score == "None":
                continue  # unrated segment: documented to be dropped
            hyp = cols[systems[system]][seg_id - 1]
            items.append(Item(lp, seg_id, system, src[seg_id - 1], ref[seg_id - 1], hyp, _parse_float(score, where)))
        return items


# --------------------------------------------------------------------------- user files


def check_user_file(path: Path) -> None:
    """A user data file that exists, is a regular file and is ``.jsonl`` or ``.tsv``; else a UserError
    (a spec checks this before anything runs, `--dry-run` included)."""
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".tsv"):
        raise UserError(f"data file {path}: unsupported type {suffix or '(none)'!r}; use .jsonl or .tsv")
    if path.is_dir():
        raise UserError(f"data file {path} is a directory, not a .jsonl or .tsv file")
    if not path.is_file():
        raise UserError(f"missing file {path}")


def _load_user_file(path: Path, columns: tuple[str, ...] = ()) -> Dataset:
    """Read a user ``.jsonl`` or ``.tsv`` file into a dataset in stable order; `columns` are carried."""
    check_user_file(path)
    suffix = path.suffix.lower()
    data = _read_bytes(path)
    sha = hashlib.sha256(data).hexdigest()
    text = _decode(data, path).removeprefix("\ufeff")
    records = list(jsonl_records(path, text) if suffix == ".jsonl" else _tsv_records(path, text))
    reserved = [c for c in columns if c in USER_COLUMNS or c == "references"]
    if reserved:
        raise UserError(f"{path}: columns {', '.join(reserved)} are item fields, not further columns to carry")
    _check_carried(path, columns, records)
    items = [(where, _with_extra(_user_item(record, where), record, columns, where)) for where, record in records]
    if not items:
        raise UserError(f"data file {path} has no items")
    items = _uniform_seg_ids(path, items)
    where_of: dict[tuple[str, SegId, str], str] = {}
    for where, item in items:
        if item.key in where_of:
            raise UserError(
                f"{where}: duplicate item lp={item.lp!r} seg_id={item.seg_id!r} system={item.system!r} "
                f"(first at {where_of[item.key]})"
            )
        where_of[item.key] = where
    dims = list(dict.fromkeys(dim for _, item in items for dim in item.humans))
    scored = [(where, item) for where, item in items if item.humans]  # an item without any score has no form
    scalar = [where for where, item in scored if item.humans.keys() == {HUMAN}]
    if scalar and len(scalar) < len(scored):
        other = next(where for where, item in scored if item.humans.keys() != {HUMAN})
        raise UserError(f"{path}: human is a single number at {scalar[0]} but named dimensions at {other}; use one form")
    if not dims:
        raise UserError(f"{path}: no item has a human score")
    ordered = sorted((item for _, item in items), key=lambda item: item.key)
    ordered = [replace(item, human=item.humans.get(dims[0], NAN)) for item in ordered]
    has_systems = any(item.system for item in ordered)
    return Dataset(name=path.stem, items=ordered, has_systems=has_systems, files={str(path): sha}, human_dims=dims)


def _check_carried(path: Path, columns: tuple[str, ...], records: list[tuple[str, dict[str, Any]]]) -> None:
    """Refuse a column to carry that no record has (it would be carried as '' everywhere)."""
    present = list(dict.fromkeys(key for _, record in records for key in record
                                 if key not in USER_COLUMNS and key != "references"))
    for column in columns:
        if column not in present:
            hits = closest(column, present)
            hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
            raise UserError(f"{path}: no column {column!r} to carry{hint} (further columns: {', '.join(present) or 'none'})")


def _with_extra(item: Item, record: dict[str, Any], columns: tuple[str, ...], where: str) -> Item:
    """`item` with the record's `columns` as text ('' where a record lacks one; numbers as written)."""
    if not columns:
        return item
    extra = {}
    for column in columns:
        value = record.get(column)
        if isinstance(value, (dict, list)):
            raise UserError(f"{where}: column {column!r} must be text or a number to carry, got {value!r}")
        extra[column] = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    return replace(item, extra=extra)


def _uniform_seg_ids(path: Path, items: list[tuple[str, Item]]) -> list[tuple[str, Item]]:
    """Items whose seg_ids are all integers (JSON numbers, or texts in plain integer form: `plain_int`)
    keep integer ids (numeric order); otherwise every id is text as written (text order), so the
    stable order rule holds either way and "007" and "7" stay two items."""
    ids = seg_id_values([str(item.seg_id) for _, item in items])
    return [(where, replace(item, seg_id=value)) for (where, item), value in zip(items, ids)]


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def plain_int(text: str) -> int | None:
    """The integer `text` writes in plain form (ASCII digits, a '-' at most, no leading zeros), else None:
    int() would also read "007", "+5", "1_0", " 7" and "٧" (an Arabic-Indic digit), which are other ids."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if str(value) == text else None


def seg_id_values(texts: Sequence[str]) -> list[SegId]:
    """seg_ids of one file (data, scores.csv) as written: integers if every one is a plain integer
    (`plain_int`), else every one the text it is, so no two ids become one."""
    ints = [plain_int(text) for text in texts]
    if all(value is not None for value in ints):
        return [value for value in ints if value is not None]
    return list(texts)


def json_object(line: str, where: str) -> dict[str, Any]:
    """The JSON object on one JSONL line; a key repeated at any depth is refused (json.loads would
    silently keep the last one), as are invalid JSON and anything but an object."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise UserError(f"{where}: duplicate key {key!r}")
            obj[key] = value
        return obj

    try:
        value = json.loads(line, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def jsonl_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, object) per non-blank JSONL line."""
    for number, line in enumerate(_split_lines(text), start=1):
        if line.strip():
            where = f"{path} line {number}"
            yield where, json_object(line, where)


def tsv_table(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (names stripped) and the (line number, fields) rows of a tab-separated text.

    The one TSV rule of the loader and the table importer: no quoting, so every field is verbatim
    (a `"` is a character like any other); lines end at '\n' or '\r\n' only (`_split_lines`; a
    U+2028 or form feed is text); blank lines are skipped. An empty text, a repeated column name or
    a row whose field count differs from the header's is refused, naming the line."""
    numbered = [(n, line) for n, line in enumerate(_split_lines(text), start=1) if line.strip()]
    if not numbered:
        raise UserError(f"{path} is empty (expected a header row)")
    header = [name.strip() for name in numbered[0][1].split("\t")]
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise UserError(f"{path}: duplicate column(s) {', '.join(duplicated)} in the header row")
    rows = []
    for number, line in numbered[1:]:
        fields = line.split("\t")
        if len(fields) != len(header):
            raise UserError(f"{path} line {number}: {len(fields)} tab-separated fields, header has {len(header)}")
        rows.append((number, fields))
    return header, rows


def _tsv_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, record) per non-blank TSV line after the header row (`tsv_table`); ``reference_N``
    columns become the record's ``references``, ``human.DIM`` columns its ``human`` mapping (an
    empty cell: missing)."""
    header, rows = tsv_table(path, text)
    dims = [name for name in header if name.startswith(TSV_HUMAN_PREFIX)]
    if dims and HUMAN in header:
        raise UserError(f"{path}: give either one 'human' column or 'human.DIM' columns, not both")
    extra_refs = sorted((name for name in header if name.startswith(TSV_REFERENCE_PREFIX)),
                        key=lambda name: _int_or_none(name[len(TSV_REFERENCE_PREFIX):]) or 0)
    for name in extra_refs:
        if (_int_or_none(name[len(TSV_REFERENCE_PREFIX):]) or 0) < 2:
            raise UserError(f"{path}: column {name!r}: further references are named reference_2, reference_3, ...")
    present = set(header) | ({HUMAN} if dims else set())
    missing = [c for c in USER_COLUMNS if c not in OPTIONAL_USER_COLUMNS and c not in present]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)} (header has: {', '.join(header)})")
    for number, values in rows:
        where = f"{path} line {number}"
        row: dict[str, Any] = dict(zip(header, values))
        if extra_refs:
            row["references"] = [row.pop("reference"), *(row.pop(name) for name in extra_refs)]
            while len(row["references"]) > 1 and not row["references"][-1].strip():
                row["references"].pop()  # fewer references on this row
        if dims:
            row[HUMAN] = {name[len(TSV_HUMAN_PREFIX):]: (row.pop(name).strip() or None) for name in dims}
        yield where, row


def _user_item(record: dict[str, Any], where: str) -> Item:
    """An Item from one user record (JSON object or TSV row)."""
    present = set(record) | ({"reference"} if "references" in record else set())
    missing = [c for c in USER_COLUMNS if c not in OPTIONAL_USER_COLUMNS and c not in present]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    if "reference" in record and "references" in record:
        raise UserError(f"{where}: give 'reference' (one) or 'references' (a list), not both")

    def text(column: str) -> str:
        value = record.get(column)
        if value is None and column in OPTIONAL_USER_COLUMNS:
            return ""
        if not isinstance(value, str):
            raise UserError(f"{where}: column {column!r} must be text, got {value!r}")
        return value

    lp = text("lp").strip()
    if not lp:
        raise UserError(f"{where}: column 'lp' is empty")
    seg_raw = record["seg_id"]
    if isinstance(seg_raw, bool) or not isinstance(seg_raw, (int, str)) or (isinstance(seg_raw, str) and not seg_raw.strip()):
        raise UserError(f"{where}: seg_id must be an integer or a non-empty text, got {seg_raw!r}")
    seg_id: SegId = seg_raw if isinstance(seg_raw, int) else seg_raw.strip()
    if "references" in record:
        refs = record["references"]
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise UserError(f"{where}: references must be a non-empty list of texts, got {refs!r}")
        references = tuple(refs)
    else:
        references = (text("reference"),)
    humans = _human_scores(record["human"], where)
    return Item(lp, seg_id, text("system").strip(), text("source"), references[0], text("hypothesis"),
                humans.get(HUMAN, NAN), references=references, humans=humans, doc_id=text("doc_id").strip())


def _human_scores(raw: Any, where: str) -> dict[str, float]:
    """{dimension: score} of one record: a number is the single dimension `human`; a mapping names
    dimensions; null (or an empty TSV cell), as the whole value or a dimension's, marks a missing score."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, dict):
        if not raw:
            raise UserError(f"{where}: human is an empty mapping (name at least one dimension)")
        scores = {}
        for dim, value in raw.items():
            if not str(dim).strip() or dim == ALL_DIMENSIONS:
                raise UserError(f"{where}: human dimension name {dim!r} is not allowed")
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise UserError(f"{where}: human.{dim} must be a number or null, got {value!r}")
            scores[str(dim)] = _parse_float(str(value), f"{where}: human.{dim}")
        return scores
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise UserError(f"{where}: human must be a number or a mapping of dimension -> number, got {raw!r}")
    return {HUMAN: _parse_float(str(raw), where)}


# --------------------------------------------------------------------------- helpers


def _read_bytes(path: Path) -> bytes:
    """A file's bytes, or a UserError naming it."""
    if path.is_dir():
        raise UserError(f"cannot read {path}: it is a directory")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"missing file {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_text(path: Path) -> str:
    """A UTF-8 text file's text, a leading byte-order mark removed; one UserError naming the file otherwise."""
    return _decode(_read_bytes(path), path).removeprefix("\ufeff")


def _decode(data: bytes, path: Path) -> str:
    """UTF-8 text of a file, or a UserError naming the bad byte's offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})") from None


def _split_lines(text: str) -> list[str]:
    """Lines split on '\\n' only (not on Unicode line separators), '\\r' at line ends removed."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _parse_float(value: str, where: str) -> float:
    """A finite float, or a UserError naming the location."""
    try:
        number = float(value.strip())
    except ValueError:
        raise UserError(f"{where}: human score {value!r} is not a number") from None
    if not math.isfinite(number):
        raise UserError(f"{where}: human score {value!r} is not a finite number")
    return number


def _parse_seg_id(value: str, where: str) -> int:
    """An integer seg_id, or a UserError naming the location."""
    try:
        return int(value.strip())
    except ValueError:
        raise UserError(f"{where}: seg_id {value!r} is not an integer") from None



def read_text_lines(path: Path) -> list[str]:
    """A UTF-8 text file's lines, split as the data loader splits (`_split_lines`: on '\\n' only, so a
    text holding U+0085, U+2028 or a form feed stays one line, as str.splitlines would not keep it);
    one UserError naming the file when it is missing, a folder or not UTF-8."""
    return _split_lines(_decode(_read_bytes(path), path))
