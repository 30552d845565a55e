"""Loading a Hugging Face dataset (`nlgbench.data.hubsource.HubSource`) through the `datasets` library
(extra ``hf``): from the Hub or a local folder, filtered, exploded and mapped onto the item fields, then
checked as own data is (`nlgbench.data.userfile.records_dataset`: one owner of the checks).

The rows become the records a JSONL file holds; their sha256 (`content_sha256`, over the records in
order) is the dataset's identity in the cell id, beside the revision as requested, so a changed dataset
makes new cells even when the revision names a branch that moved.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nlgbench.data.hubsource import DEFAULT_LP, INSTALL_HINT, HubSource
from nlgbench.data.items import HUMAN, Dataset
from nlgbench.data.userfile import records_dataset
from nlgbench.foundations.errors import UserError, closest, unknown_name

SAVED_MARKERS = (("state.json", "dataset_info.json"), ("dataset_dict.json",))  # written by save_to_disk
_VALUES_SHOWN = 12  # distinct values a filter message lists

Where = str  # a row's location in messages: "NAME row 7" (exploded: "NAME row 7[2]")
_FINGERPRINTS: dict[str, str] = {}  # `_cache_key` -> content sha256 of the sources loaded in this process


def load_hub(source: HubSource) -> Dataset:
    """The dataset `source` names: opened (`open_table`), filtered, exploded, mapped onto records and
    checked as own data; its `files` hold {source.key: content sha256}."""
    origin = f"hf dataset {source.label}"
    records = hub_records(source)
    sha = content_sha256([record for _, record in records])
    _FINGERPRINTS[_cache_key(source)] = sha
    return records_dataset(origin, source.label, records, (), {source.key: sha})


def hub_fingerprint(source: HubSource) -> str:
    """`sha256:` and the content hash of `source`'s records (loaded once per process and state of a
    local folder): what a cell's `inputs` holds for it."""
    key = _cache_key(source)
    if key not in _FINGERPRINTS:
        load_hub(source)
    return "sha256:" + _FINGERPRINTS[key]


def _cache_key(source: HubSource) -> str:
    """The source, and for a local folder the size and time of each file in it (an edited folder is
    read again)."""
    stamp: list[Any] = []
    if source.local:
        stamp = sorted(
            (str(p.relative_to(source.name)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in Path(source.name).rglob("*")
            if p.is_file()
        )
    return json.dumps([source.to_dict(), stamp], sort_keys=True)


def content_sha256(records: Sequence[Mapping[str, Any]]) -> str:
    """sha256 over the records in order (one sorted-key JSON line each): the dataset's content identity."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def open_table(source: HubSource) -> Any:
    """The `datasets.Dataset` of `source`'s split: `load_from_disk` for a folder `save_to_disk` wrote,
    else `datasets.load_dataset(name, config, split=, revision=)`, the Hub's own code path, which also
    reads a local folder of Parquet/CSV/JSON files. Library errors become one UserError line."""
    datasets = _library(source)
    where = f"hf dataset {source.name}"
    if source.local and _saved(Path(source.name)):
        if source.config is not None:
            raise UserError(f"{where}: a folder written by save_to_disk has no config; drop config")
        try:
            loaded = datasets.load_from_disk(source.name)
        except (OSError, ValueError) as exc:
            raise UserError(f"{where}: cannot load it: {_first_line(exc)}") from None
        return _split(loaded, datasets, source, where)
    try:
        loaded = datasets.load_dataset(source.name, source.config, split=source.split, revision=source.revision)
    except ConnectionError as exc:
        why = (
            "offline (HF_HUB_OFFLINE=1) and not in the local cache: run it once online, or unset HF_HUB_OFFLINE"
            if getattr(datasets.config, "HF_HUB_OFFLINE", False)
            or getattr(datasets.config, "HF_DATASETS_OFFLINE", False)
            else "the Hugging Face Hub cannot be reached and it is not in the local cache (HF_HUB_OFFLINE=1 reads "
            "the cache only)"
        )
        raise UserError(f"{where}: {why}: {_first_line(exc)}") from None
    except (OSError, ValueError, _library_error(datasets)) as exc:
        raise UserError(f"{where}: cannot load it: {_first_line(exc)}") from None
    return _split(loaded, datasets, source, where)


def _library(source: HubSource) -> Any:
    """The `datasets` module, or a UserError naming the extra to install."""
    missing = UserError(f"hf dataset {source.name}: Hugging Face datasets need the datasets library: {INSTALL_HINT}")
    try:
        import datasets
    except ImportError:
        raise missing from None
    if not hasattr(datasets, "load_dataset"):  # a folder named datasets on the path, not the library
        raise missing
    return datasets


def _library_error(datasets: Any) -> type[Exception]:
    """The base class of the library's own errors (`datasets.exceptions.DatasetsError`, from 2.14 on)."""
    error = getattr(getattr(datasets, "exceptions", None), "DatasetsError", OSError)
    return error if isinstance(error, type) and issubclass(error, Exception) else OSError


def _saved(folder: Path) -> bool:
    """Whether `folder` was written by `Dataset.save_to_disk` / `DatasetDict.save_to_disk`."""
    return any(all((folder / name).is_file() for name in marker) for marker in SAVED_MARKERS)


def _split(loaded: Any, datasets: Any, source: HubSource, where: str) -> Any:
    """One split of what the library loaded: a dataset as it is, or the split of a dictionary of
    splits (the only one where `split` is not given)."""
    if not isinstance(loaded, datasets.DatasetDict):  # one Dataset
        if source.split is not None and source.local and _saved(Path(source.name)):
            raise UserError(f"{where}: holds one dataset (Dataset.save_to_disk), no splits; drop split")
        return loaded
    splits = list(loaded.keys())
    if source.split is None:
        if len(splits) != 1:
            raise UserError(f"{where}: has splits {', '.join(splits)}; give split:")
        return loaded[splits[0]]
    if source.split not in splits:
        raise UserError(f"{where}: {unknown_name('split', source.split, splits)}")
    return loaded[source.split]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def hub_records(source: HubSource) -> list[tuple[Where, dict[str, Any]]]:
    """(location, record) per kept row (per element of the exploded lists), in the dataset's order,
    each record shaped as an own-data JSONL line (`nlgbench.data.userfile.USER_COLUMNS`)."""
    table = open_table(source)
    label = f"hf dataset {source.label}"
    _check_columns(source, list(table.column_names), label)
    positions = _kept_rows(table, source, label)
    named = [column for _, column in source.columns.named()]
    needed = list(dict.fromkeys([*named, *source.explode]))
    if len(positions) < len(table):
        table = table.select(positions, keep_in_memory=True)
    values: dict[str, list[Any]] = table.select_columns(needed).to_dict()
    rows = _exploded(values, positions, source.explode, label)
    return _mapped(rows, source)


def _check_columns(source: HubSource, available: list[str], label: str) -> None:
    """Every column the entry names exists; else one line with the closest real names."""
    roles = [*source.columns.named(), *((f"filter.{c}", c) for c, _ in source.filter)]
    roles += [("explode", c) for c in source.explode]
    missing = []
    for role, column in roles:
        if column not in available:
            hits = closest(column, available)
            hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
            missing.append(f"{column!r} ({role}{hint})")
    if missing:
        raise UserError(f"{label}: no column {', '.join(missing)}; its columns: {', '.join(available)}")


def _kept_rows(table: Any, source: HubSource, label: str) -> list[int]:
    """Positions of the rows every `filter` column accepts; a value no row holds is refused (a typo
    would silently keep nothing of that value), with the closest values the column holds."""
    positions = list(range(len(table)))
    for column, wanted in source.filter:
        values = table.select_columns([column]).to_dict()[column]
        present = {_hashable(v, column, label) for v in values}
        for value in wanted:
            if value not in present:
                shown = sorted((repr(v) for v in present), key=str)
                hits = closest(repr(value), shown)
                hint = f"; did you mean {', '.join(hits)}?" if hits else ""
                listed = ", ".join(shown[:_VALUES_SHOWN]) + (", ..." if len(shown) > _VALUES_SHOWN else "")
                raise UserError(f"{label}: filter {column}: no row holds {value!r}{hint} (values: {listed})")
        accepted = set(wanted)
        positions = [i for i in positions if values[i] in accepted]
    if not positions:
        raise UserError(f"{label}: the filter keeps no row" if source.filter else f"{label} has no rows")
    return positions


def _hashable(value: Any, column: str, label: str) -> Any:
    if isinstance(value, (list, dict)):
        raise UserError(f"{label}: filter {column}: the column holds lists or mappings; filter on a plain column")
    return value


def _exploded(
    values: Mapping[str, list[Any]], positions: list[int], explode: tuple[str, ...], label: str
) -> list[tuple[Where, dict[str, Any]]]:
    """(location, row) per kept row; with `explode`, one row per element of those list columns, taken
    in parallel (each row's lists of one length), the other columns repeated."""
    out = []
    for index, position in enumerate(positions):
        row = {column: column_values[index] for column, column_values in values.items()}
        where = f"{label} row {position + 1}"
        if not explode:
            out.append((where, row))
            continue
        lists = {column: row[column] for column in explode}
        for column, value in lists.items():
            if not isinstance(value, list):
                raise UserError(f"{where}: explode {column}: not a list, got {value!r}")
        lengths = {column: len(value) for column, value in lists.items()}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{c}: {n}" for c, n in lengths.items())
            raise UserError(f"{where}: the exploded lists differ in length ({listed})")
        for k in range(next(iter(lengths.values()))):
            out.append((f"{where}[{k}]", {**row, **{column: value[k] for column, value in lists.items()}}))
    return out


def _mapped(rows: list[tuple[Where, dict[str, Any]]], source: HubSource) -> list[tuple[Where, dict[str, Any]]]:
    """Each row as an own-data record: names (lp, system, doc_id) as text, a missing score (None, NaN)
    as null, several reference columns as `references` (trailing empty ones dropped, as the TSV and
    table readers do), and seg_id the row's position within its lp (from 1) where no column gives it."""
    cols = source.columns
    seen: dict[str, int] = {}
    out = []
    for where, row in rows:
        lp = _label(row[cols.lp]) if cols.lp else (source.lp or DEFAULT_LP)
        seen[str(lp)] = seen.get(str(lp), 0) + 1
        record: dict[str, Any] = {
            "lp": lp,
            "seg_id": row[cols.seg_id] if cols.seg_id else seen[str(lp)],
            "system": _label(row[cols.system]) if cols.system else None,
            "doc_id": _label(row[cols.doc_id]) if cols.doc_id else None,
            "source": row[cols.source] if cols.source else None,
            "hypothesis": row[cols.hypothesis],
        }
        if len(cols.reference) == 1 and isinstance(row[cols.reference[0]], list):
            record["references"] = row[cols.reference[0]]
        elif len(cols.reference) == 1:
            record["reference"] = row[cols.reference[0]]
        else:
            refs = [row[c] for c in cols.reference]
            while len(refs) > 1 and (refs[-1] is None or (isinstance(refs[-1], str) and not refs[-1].strip())):
                refs.pop()  # fewer references on this row
            record["references"] = refs
        if isinstance(cols.human, str):
            record[HUMAN] = _score(row[cols.human])
        else:
            record[HUMAN] = {dim: _score(row[column]) for dim, column in cols.human}
        out.append((where, record))
    return out


def _label(value: Any) -> Any:
    """A name cell as text: an integer id (a Parquet int column) written out; anything else as it is
    (the record checks refuse what is not text)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _score(value: Any) -> Any:
    """A human score cell: None and NaN are a missing score (null)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value
