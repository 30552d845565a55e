"""Resumable labelling: the pairs cut into shards, each shard's teacher scores a file of its own in
the label cache, named by content, so a killed labelling resumes from the shards on disk and a
changed pair list reuses every shard whose pairs are unchanged.

Layout: `$NLGBENCH_CACHE/distill/shards/<teacher key>/<shard key>.json`. The teacher key (20 hex
digits) hashes the teacher's config and the versions that change scores, and, for a metric with
corpus state (idf over all references), the hash of the whole pair list (its scores depend on
every pair). The shard key (20 hex digits) hashes the shard's pair texts in order. Shard
boundaries are content-defined: a shard ends after a pair whose hash is 0 modulo the shard size
(so shards average that size), or at twice the size, so an inserted or removed pair changes only
its own shard (and, at most, the next). Each file is written atomically once its shard is scored.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.core.result import json_safe
from nlgbench.distillation.pairs import Pair, pairs_sha256
from nlgbench.distillation.steplog import BAR_INTERVAL, Log
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic

SHARD_SIZE = 512  # pairs per shard, on average
SHARDS_DIR = "distill/shards"  # under $NLGBENCH_CACHE
# No teacher scores beyond it (the metrics range over [-1, 1], [0, 100] or per-token log-probabilities):
# a cached label beyond it is a damaged file, and standardising it would overflow into NaN.
LABEL_BOUND = 1e6


@dataclass(frozen=True)
class Shard:
    """Pairs [start, end) of the list, and the name of their file."""

    start: int
    end: int
    key: str

    @property
    def size(self) -> int:
        return self.end - self.start


def pair_hash(pair: Pair) -> int:
    """A pair's content as an integer (the first 8 bytes of the sha256 of its two texts)."""
    digest = hashlib.sha256(json.dumps([pair.reference, pair.candidate]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def plan_shards(pairs: Sequence[Pair], size: int) -> list[Shard]:
    """The content-defined shards of `pairs` (see the module's docstring), in order, covering all."""
    if size < 1:
        raise UserError(f"label-shard-size must be >= 1, got {size}")
    shards: list[Shard] = []
    start = 0
    for i, pair in enumerate(pairs):
        if pair_hash(pair) % size == 0 or i + 1 - start >= 2 * size or i + 1 == len(pairs):
            shards.append(Shard(start, i + 1, pairs_sha256(pairs[start : i + 1])[:20]))
            start = i + 1
    return shards


def teacher_folder(teacher_key: dict[str, Any]) -> str:
    """The teacher's shard folder, relative to $NLGBENCH_CACHE (no machine path: distill.json records it)."""
    digest = hashlib.sha256(json.dumps(teacher_key, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{SHARDS_DIR}/{digest[:20]}"


def read_shard(folder: Path, shard: Shard, log: Log) -> dict[str, Any] | None:
    """A shard's cached record (`labels`, `seconds`, `device`, `batch_size`, `scorer`), or None where
    it is missing or unreadable, or holds a label that is neither null (no score) nor a finite number
    within `LABEL_BOUND` (then it is labelled again)."""
    path = folder / f"{shard.key}.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw["shard"] != shard.key or len(raw["labels"]) != shard.size:
            raise ValueError("its key or length differs")
        raw["labels"] = [math.nan if v is None else label_value(v) for v in raw["labels"]]
        return dict(raw)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log(f"labels: ignoring the unreadable shard {path} ({exc}); labelling it again")
        return None


def label_value(value: Any) -> float:
    """A cached label as a float: a finite number within `LABEL_BOUND`, else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= LABEL_BOUND:
        raise ValueError(f"the label {value!r} is not a finite number within +-{LABEL_BOUND:g}")
    return float(value)


def write_shard(folder: Path, shard: Shard, record: dict[str, Any]) -> None:
    """A shard's record, written atomically (a kill leaves the old state or the whole file)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{shard.key}.json", json.dumps(json_safe({"shard": shard.key, **record})))


class Progress:
    """`labels: DONE/TOTAL pairs (S/N shards), R pairs/s, ETA M min` on the log, at most every
    BAR_INTERVAL seconds and at the end; the rate counts only pairs labelled by this run."""

    def __init__(self, total: int, done: int, shards: int, shards_done: int, log: Log) -> None:
        self.total, self.done, self.shards, self.shards_done, self.log = total, done, shards, shards_done, log
        self.start = self.last = time.perf_counter()
        self.labelled = 0

    def advance(self, pairs: int) -> None:
        self.done += pairs
        self.labelled += pairs
        self.shards_done += 1
        now = time.perf_counter()
        if now - self.last < BAR_INTERVAL and self.done < self.total:
            return
        self.last = now
        rate = self.labelled / max(now - self.start, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        self.log(
            f"labels: {self.done}/{self.total} pairs ({self.shards_done}/{self.shards} shards), "
            f"{rate:.1f} pairs/s, ETA {eta / 60:.1f} min"
        )
