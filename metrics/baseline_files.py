"""BERTScore's rescaling baselines as files: bert_score's baseline file format read and checked, the cache
of computed baselines (`baselines/<fingerprint>.tsv` and its record), and what a cell's `inputs` hold for
the baseline it reads. Imports no torch: the sweep's checks and cell ids read baselines before any model
loads (the computation is `nlgbench.metrics.baselines`).

A baseline b rescales a score s to (s - b) / (1 - b). Every baseline (each of P, R and F per layer) must lie
in [LOWEST_BASELINE, HIGHEST_BASELINE] = [-1, 0.999]:

- b >= -1: the scores are idf-weighted means of cosine similarities, which lie in [-1, 1], and so is a
  mean of them over pairs; a lower b is no mean of scores (-1e308 would make every score 1.0).
- b <= 1 - 1e-3: rescaling multiplies by 1 / (1 - b), here at most 1000, so the float32 rounding of a
  score (6e-8) stays below 1e-4 after rescaling, under the 4 decimals a table shows, and scores in
  [-1, 1] map into [-1999, 1]. A b nearer 1 blows rounding up into the shown digits (0.9999999999999999
  gives F about -9.0e15). bert_score's own files reach 0.9844 (xlm-roberta-base, Spanish, layer 12:
  a factor of 64).

Numbers and layers are read with the data loader's rules (`nlgbench.data.text`): plain decimal numbers
(no `0.4_5`, no other scripts' digits, no nan or inf) and plain integer layers, one row per layer.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.data.text import parse_score, plain_int
from nlgbench.encoders.hfcache import content_fingerprint, local_snapshot
from nlgbench.encoders.registry import ResolvedEncoder
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import BOM, read_bytes, utf8_text, write_atomic
from nlgbench.foundations.package import cache_root

BASELINES_FOLDER = "baselines"  # under the cache root
HEADER = ("LAYER", "P", "R", "F")  # bert_score's baseline file
LOWEST_BASELINE = -1.0  # cosine similarities, and so their means, are >= -1
HIGHEST_BASELINE = 1 - 1e-3  # rescaling multiplies by 1 / (1 - b) <= 1000
BOUNDS = f"[{LOWEST_BASELINE:g}, {HIGHEST_BASELINE:g}]"
CACHE_KEY = "cache:"  # a cell's `inputs` key of the cached baseline: cache:baselines/<fingerprint>.tsv
TABLE_DIGEST = "table_sha256"  # the record's digest of the cached table


@dataclass(frozen=True)
class Baseline:
    """One layer's baselines of P, R and F, and a short digest of them (the signature's `rescaled:`)."""

    precision: float
    recall: float
    f1: float

    @property
    def digest(self) -> str:
        values = f"{self.precision!r},{self.recall!r},{self.f1!r}"
        return hashlib.sha256(values.encode()).hexdigest()[:7]

    def rescale(self, column: str, values: Sequence[float]) -> list[float]:
        """(s - b) / (1 - b) for every value of the output `column` (precision, recall, f1)."""
        b = {"precision": self.precision, "recall": self.recall, "f1": self.f1}[column]
        return [(s - b) / (1 - b) for s in values]


def in_bounds(value: float) -> bool:
    """Whether `value` may be a baseline: within `BOUNDS` (so finite)."""
    return LOWEST_BASELINE <= value <= HIGHEST_BASELINE


def check_baseline(value: float, where: str, what: str) -> float:
    """`value` if within `BOUNDS`, else one line saying the bound and why (the module's docstring)."""
    if not in_bounds(value):
        raise UserError(
            f"{where}: baseline {what} {value!r} is outside {BOUNDS}: a mean of cosine similarities is >= -1, "
            f"and one above {HIGHEST_BASELINE:g} makes (s - b) / (1 - b) blow rounding up into the shown digits"
        )
    return value


def parse_baselines(text: str, where: str) -> dict[int, Baseline]:
    """The rows of a baseline file in bert_score's format: layer -> Baseline; one clear error otherwise
    (a row not of four fields, a layer not a plain integer >= 0 or given twice, a number not plain
    decimal or out of `BOUNDS`)."""
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UserError(f"{where}: not a baseline file in bert_score's format ({exc})") from None
    if not rows or tuple(c.strip() for c in rows[0]) != HEADER:
        raise UserError(
            f"{where}: not a baseline file: its first line must be {','.join(HEADER)} (bert_score's format)"
        )
    out: dict[int, Baseline] = {}
    lines: dict[int, int] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        at = f"{where} line {number}"
        if len(row) != len(HEADER):
            raise UserError(f"{at}: expected LAYER,P,R,F (an integer, three numbers), got {len(row)} fields")
        layer = plain_int(row[0].strip())
        if layer is None or layer < 0:
            raise UserError(f"{at}: layer {row[0]!r} is not a plain integer >= 0 (ASCII digits)")
        if layer in out:
            raise UserError(f"{at}: a second row for layer {layer} (the first is line {lines[layer]}): one row a layer")
        p, r, f = (
            check_baseline(parse_score(value, at, f"baseline {name}"), at, name)
            for name, value in zip(HEADER[1:], row[1:], strict=True)
        )
        out[layer], lines[layer] = Baseline(p, r, f), number
    return out


def read_table(path: Path, what: str = "baseline file") -> tuple[dict[int, Baseline], str]:
    """Every layer's baselines of the file `path` (`parse_baselines`) and the sha256 of its bytes, read
    once; one clear line for a missing file, a folder, a FIFO or a device."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder: give the file itself (bert_score's LAYER,P,R,F format)")
    if not path.exists():
        raise UserError(f"{what} not found: {path}" + (" (a dangling link)" if path.is_symlink() else ""))
    if not path.is_file():
        raise UserError(f"{what} {path} is not a regular file (a FIFO or a device: not read)")
    data = read_bytes(path)
    table = parse_baselines(utf8_text(path, data, data_file=True).removeprefix(BOM), str(path))
    return table, hashlib.sha256(data).hexdigest()


def layer_of(table: Mapping[int, Baseline], layer: int, where: Path) -> Baseline:
    """Layer `layer`'s row (the row bert_score takes: its files list layers 0, 1, ... in order)."""
    if layer not in table:
        raise UserError(f"{where} has no baseline for layer {layer} (it lists layers {sorted(table)})")
    return table[layer]


def read_baseline(path: Path, layer: int) -> Baseline:
    """Layer `layer`'s baselines from a file in bert_score's format."""
    return layer_of(read_table(path)[0], layer, path)


def cached_baseline_file(source: str) -> Path:
    """Where `nlgbench baseline` stores the baseline of the model `source` (it may not exist yet): keyed
    by the content fingerprint of its local files (`content_fingerprint`: config, tokenizer, weights)."""
    folder = local_snapshot(source)
    if folder is None:
        raise UserError(f"{source}: no local model files, so no fingerprint to key a baseline by")
    return cache_root() / BASELINES_FOLDER / f"{content_fingerprint(folder)}.tsv"


def record_file(table_file: Path) -> Path:
    """The record beside a cached table: corpus sha256, lines, pairs, seed and the table's sha256."""
    return table_file.with_suffix(".json")


def recorded_digest(table_file: Path) -> str | None:
    """The table's sha256 its record holds; None where the record is missing, unreadable or holds none."""
    try:
        record = json.loads(record_file(table_file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    digest = record.get(TABLE_DIGEST) if isinstance(record, dict) else None
    return digest if isinstance(digest, str) else None


def cached_table(source: str) -> tuple[Path, dict[int, Baseline], str]:
    """The cached baseline of model `source`: (file, layers, sha256), its bytes checked against the digest
    its record holds; one line saying how to compute it where there is none or it was changed."""
    path = cached_baseline_file(source)
    recompute = f"nlgbench baseline CORPUS --encoder {source}"
    if not (path.exists() or path.is_symlink()):
        raise UserError(
            f"no baseline for {source}: give baseline_path=FILE (bert_score's format, e.g. one of its "
            f"rescale_baseline/ files) or compute one: {recompute}"
        )
    if not path.is_file():
        raise UserError(f"the cache holds no baseline table at {path} (a folder or a dangling link): {recompute}")
    table, digest = read_table(path, "cached baseline")
    recorded = recorded_digest(path)
    if recorded is None:
        raise UserError(
            f"the cached baseline {path} has no readable record ({record_file(path).name}) with its sha256: "
            f"compute it again: {recompute}"
        )
    if recorded != digest:
        raise UserError(
            f"the cached baseline {path} does not match the sha256 its record ({record_file(path).name}) holds: "
            f"edited or damaged; compute it again: {recompute}"
        )
    return path, table, digest


def find_baseline(source: str, layer: int, path: str | None) -> Baseline:
    """Layer `layer`'s baseline from `path` when given, else from the cache (computed by `nlgbench
    baseline` for this model's files, its digest checked)."""
    if path is not None:
        return read_baseline(Path(path), layer)
    cached, table, _ = cached_table(source)
    return layer_of(table, layer, cached)


def baseline_input(options: Mapping[str, Any], model: ResolvedEncoder | None) -> dict[str, str]:
    """What a BERTScore cell's `inputs` hold for the baseline it rescales with, so its id follows the
    baseline's content: `baseline_path` (as given) or `cache:baselines/<fingerprint>.tsv` -> `sha256:` of
    the file's bytes, the file read and checked whole now, before any model loads. {} without rescaling,
    or for a cached baseline of a model with no local files yet (the cell says what is missing)."""
    if not options.get("rescale_with_baseline"):
        return {}
    given = options.get("baseline_path")
    if given is not None:
        return {str(given): "sha256:" + read_table(Path(str(given)))[1]}
    if model is None or model.snapshot is None:
        return {}
    path, _, digest = cached_table(model.source)
    return {f"{CACHE_KEY}{BASELINES_FOLDER}/{path.name}": "sha256:" + digest}


def store_baseline(source: str, table: str, record: Mapping[str, Any]) -> tuple[Path, dict[str, Any] | None]:
    """Keep a computed baseline in the cache under the model's fingerprint, with its record beside it
    (the table's sha256 added); (where, the record of the baseline it replaced, None where there was none)."""
    path = cached_baseline_file(source)
    for taken in (path, record_file(path)):
        if taken.is_dir():
            raise UserError(
                f"the cache holds a folder at {taken}, where the baseline goes: remove it (nothing was written)"
            )
    replaced: dict[str, Any] | None = None
    if path.exists():
        try:
            old = json.loads(record_file(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            old = None
        replaced = old if isinstance(old, dict) else {}
    digest = hashlib.sha256(table.encode()).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    # the record first: a table written without its record, or either cut off, fails its digest check
    write_atomic(record_file(path), json.dumps({**record, TABLE_DIGEST: digest}, indent=2, sort_keys=True) + "\n")
    write_atomic(path, table)
    return path, replaced
