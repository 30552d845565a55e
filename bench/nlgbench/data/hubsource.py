"""A spec's Hugging Face dataset entry (`hf:`): `HubSource`, its `columns:` mapping (`HubColumns`),
their checks at spec time, their JSON form (part of the cell id) and the warning for an unpinned
revision. Loading is `nlgbench.data.hubdata`'s."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.foundations.errors import UserError, unknown_name

#: Keys of an `hf:` dataset entry besides the common ones (max_segments, sample, human) and `columns`.
HUB_KEYS = ("hf", "config", "split", "revision", "filter", "explode", "lp")
#: Item fields `columns:` maps to dataset columns; the first three are required.
COLUMN_FIELDS = ("hypothesis", "reference", "human", "source", "lp", "system", "doc_id", "seg_id")
REQUIRED_FIELDS = ("hypothesis", "reference", "human")
DEFAULT_LP = "all"  # every item's lp when neither `columns.lp` nor `lp:` is given
INSTALL_HINT = "pip install 'nlgbench[hf]'"
INPUT_PREFIX = "hf:"  # a cell's `inputs` key (and results.csv's dataset_path) of an hf dataset
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_LOCAL_START = ("/", "./", "../", "~", ".\\", "..\\")

Scalar = str | int | float | bool


@dataclass(frozen=True)
class HubColumns:
    """Which dataset column fills each item field: `reference` one column (text, or a list of texts:
    several references) or several columns; `human` one column (the dimension `human`) or
    ((dimension, column), ...); the optional fields None where not mapped."""

    hypothesis: str
    reference: tuple[str, ...]
    human: str | tuple[tuple[str, str], ...]
    source: str | None = None
    lp: str | None = None
    system: str | None = None
    doc_id: str | None = None
    seg_id: str | None = None  # None: the row's position among the kept rows of its lp, from 1

    def to_dict(self) -> dict[str, Any]:
        """The spec's form: only the fields mapped."""
        out: dict[str, Any] = {
            "hypothesis": self.hypothesis,
            "reference": self.reference[0] if len(self.reference) == 1 else list(self.reference),
            "human": self.human if isinstance(self.human, str) else dict(self.human),
        }
        for name in ("source", "lp", "system", "doc_id", "seg_id"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def parse(cls, raw: Any, where: str) -> HubColumns:
        """`columns:` of an hf entry: {field: column}, checked for its shape (the columns themselves are
        checked against the dataset when it loads)."""
        if not isinstance(raw, Mapping):
            raise UserError(
                f"{where} must map item fields to dataset columns, e.g. {{hypothesis: mt, reference: ref, "
                f"human: score}}, got {raw!r}"
            )
        for key in raw:
            if key not in COLUMN_FIELDS:
                raise UserError(f"{where}: {unknown_name('item field', str(key), COLUMN_FIELDS)}")
        absent = [name for name in REQUIRED_FIELDS if raw.get(name) is None]
        if absent:
            raise UserError(f"{where}: map {', '.join(absent)} to a dataset column (required)")
        reference = raw["reference"]
        refs = (reference,) if isinstance(reference, str) else tuple(reference) if isinstance(reference, list) else ()
        if not refs or not all(_name(c) for c in refs):
            raise UserError(f"{where}.reference must be a column or a list of columns, got {reference!r}")
        human = raw["human"]
        if isinstance(human, Mapping):
            if not human or not all(_name(d) and d != "all" and _name(c) for d, c in human.items()):
                raise UserError(f"{where}.human must map each dimension name (not 'all') to a column, got {human!r}")
            dims: str | tuple[tuple[str, str], ...] = tuple((str(d), str(c)) for d, c in human.items())
        elif _name(human):
            dims = human
        else:
            raise UserError(f"{where}.human must be a column or a mapping {{dimension: column}}, got {human!r}")
        for name in ("hypothesis", "source", "lp", "system", "doc_id", "seg_id"):
            value = raw.get(name)
            if value is not None and not _name(value):
                raise UserError(f"{where}.{name} must be a column name, got {value!r}")
        return cls(
            hypothesis=raw["hypothesis"],
            reference=refs,
            human=dims,
            source=raw.get("source"),
            lp=raw.get("lp"),
            system=raw.get("system"),
            doc_id=raw.get("doc_id"),
            seg_id=raw.get("seg_id"),
        )

    def named(self) -> list[tuple[str, str]]:
        """(role, column) of every column named, roles as the spec writes them (`human.relevance`)."""
        out = [("hypothesis", self.hypothesis)]
        out += [("reference", c) for c in self.reference]
        out += [("human", self.human)] if isinstance(self.human, str) else [(f"human.{d}", c) for d, c in self.human]
        out += [(n, getattr(self, n)) for n in ("source", "lp", "system", "doc_id", "seg_id") if getattr(self, n)]
        return out


@dataclass(frozen=True)
class HubSource:
    """An `hf:` dataset entry: a Hub dataset id or a local folder (absolute; Parquet/CSV/JSON files as
    the Hub holds them, or a folder written by `save_to_disk`), its config, split and revision, the
    rows kept (`filter`: column -> accepted values), list columns exploded into one row per element
    (`explode`, in parallel), and the columns of the item fields; `lp` a constant language pair."""

    name: str
    columns: HubColumns
    config: str | None = None
    split: str | None = None
    revision: str | None = None
    filter: tuple[tuple[str, tuple[Scalar, ...]], ...] = ()
    explode: tuple[str, ...] = ()
    lp: str | None = None

    @property
    def local(self) -> bool:
        """Whether `name` is a local folder (an absolute path) rather than a Hub id."""
        return Path(self.name).is_absolute()

    @property
    def key(self) -> str:
        """Its key in a cell's `inputs` and results.csv's dataset_path: `hf:` and the id (or folder)."""
        return INPUT_PREFIX + self.name

    @property
    def label(self) -> str:
        """How results name it: the id's last part (a folder's name), with the config: `summeval`,
        `wmt-da-human-evaluation`, `glue.mrpc`."""
        base = Path(self.name).name if self.local else self.name.rsplit("/", 1)[-1]
        return f"{base}.{self.config}" if self.config else base

    @property
    def pinned(self) -> bool:
        """Whether the revision names one commit (40 hex digits): branches and tags move."""
        return self.revision is not None and bool(_COMMIT.match(self.revision))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (part of the cell id); keys only where set."""
        out: dict[str, Any] = {"hf": self.name}
        for key in ("config", "split", "revision", "lp"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.filter:
            out["filter"] = {column: list(values) for column, values in self.filter}
        if self.explode:
            out["explode"] = list(self.explode)
        out["columns"] = self.columns.to_dict()
        return out

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str, base: Path) -> HubSource:
        """A spec's `hf:` entry (its common keys taken out), checked for its shape; a relative local
        folder is resolved against `base` (the spec's folder)."""
        return cls._build(raw, _dataset_name(raw.get("hf"), f"{where}.hf", base), where)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> HubSource:
        """`to_dict`'s form, as config.json and result.json hold it (the folder need not exist any more)."""
        return cls._build(raw, str(raw["hf"]), "hf")

    @classmethod
    def _build(cls, raw: Mapping[str, Any], name: str, where: str) -> HubSource:
        unknown = [key for key in raw if key not in (*HUB_KEYS, "columns")]
        if unknown:
            raise UserError(f"{where}: {unknown_name('key of an hf dataset', str(unknown[0]), (*HUB_KEYS, 'columns'))}")
        texts = {}
        for key in ("config", "split", "revision", "lp"):
            value = raw.get(key)
            if value is not None and not _name(value):
                raise UserError(f"{where}.{key} must be a non-empty text, got {value!r}")
            texts[key] = value.strip() if isinstance(value, str) else None
        if Path(name).is_absolute() and texts["revision"] is not None:
            raise UserError(
                f"{where}.revision: {name} is a local folder, which has no revision (its content's sha256 is "
                "in the cell id)"
            )
        if "columns" not in raw:
            raise UserError(f"{where}: give columns: {{hypothesis: COLUMN, reference: COLUMN, human: COLUMN, ...}}")
        columns = HubColumns.parse(raw["columns"], f"{where}.columns")
        if columns.lp is not None and texts["lp"] is not None:
            raise UserError(f"{where}: give lp either as a column (columns.lp) or as a constant (lp:), not both")
        explode = raw.get("explode") or []
        if not isinstance(explode, list) or not all(_name(c) for c in explode):
            raise UserError(f"{where}.explode must be a list of list-valued columns, got {explode!r}")
        return cls(
            name=name,
            columns=columns,
            filter=_filter(raw.get("filter"), f"{where}.filter"),
            explode=tuple(dict.fromkeys(explode)),
            **texts,
        )


def _name(value: Any) -> bool:
    """A non-empty text (a column, dimension or key name)."""
    return isinstance(value, str) and bool(value.strip())


def _dataset_name(raw: Any, where: str, base: Path) -> str:
    """A local folder (resolved, absolute) or a Hub dataset id (`owner/name`)."""
    if not _name(raw):
        raise UserError(f"{where} must be a Hub dataset id (owner/name) or a local folder, got {raw!r}")
    text = str(raw).strip()
    folder = Path(text).expanduser()
    folder = folder if folder.is_absolute() else base / folder
    if folder.is_dir():
        return str(folder.resolve())
    if text.startswith(_LOCAL_START) or Path(text).is_absolute():
        raise UserError(f"{where}: no folder {folder}")
    if not _HUB_ID.match(text):
        raise UserError(f"{where}: {text!r} is neither a local folder nor a Hub dataset id (owner/name)")
    return text


def _filter(raw: Any, where: str) -> tuple[tuple[str, tuple[Scalar, ...]], ...]:
    """`filter: {column: value or [values]}`: rows kept where every column holds one of its values;
    columns and values in a fixed order (by name, by repr)."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise UserError(f"{where} must map columns to the values kept, e.g. {{year: 2022, lp: [en-de, zh-en]}}")
    out = []
    for column, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not _name(column) or not values or not all(isinstance(v, (str, int, float)) for v in values):
            raise UserError(f"{where}.{column} must be a value or a list of values (texts or numbers), got {value!r}")
        out.append((str(column), tuple(sorted(dict.fromkeys(values), key=repr))))
    return tuple(sorted(out))  # one order, so the same rows give the same cell id however the spec lists them


def check_library(where: str) -> None:
    """The `datasets` library is installed (a spec checks this before anything runs)."""
    try:
        importlib.metadata.version("datasets")
    except importlib.metadata.PackageNotFoundError:
        raise UserError(f"{where}: Hugging Face datasets need the datasets library: {INSTALL_HINT}") from None


def hub_warnings(source: HubSource) -> list[str]:
    """The warning that a Hub dataset's revision is not one commit (none, or a branch or tag, which move)."""
    if source.local or source.pinned:
        return []
    given = f"revision {source.revision!r} is not a commit" if source.revision else "no revision is given"
    return [
        f"hf dataset {source.name}: {given}, so the data is not pinned; the cell id holds its content's sha256 "
        "(changed data makes new cells), but to reproduce this run pin revision: <40-hex commit>"
    ]
