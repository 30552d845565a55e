"""The teacher of `nlgbench distill` and its labels: the teacher cell's config (`Teacher`), checked as
a spec's metric entry; its scores of the pairs, computed as a sweep cell computes them and cached
under `$NLGBENCH_CACHE/distill/` by the sha256 of the pairs, the teacher's config and the versions
that change scores (as a cell id), so a rerun does not relabel. Device and batch size are not in
the key (they change scores by rounding only)."""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.core.cell import metric_versions, score_versions
from nlgbench.core.labels import metric_label, options_label
from nlgbench.core.result import json_safe
from nlgbench.core.spec import parse_metric_entry
from nlgbench.data.catalogue import cache_dir
from nlgbench.data.model import Item
from nlgbench.distillation.pairs import Pair, pairs_sha256
from nlgbench.distillation.progress import BAR_INTERVAL, Log, log_stderr
from nlgbench.encoders.registry import WEIGHTS_PREFIX, EncoderRef, resolve_encoder
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic
from nlgbench.metrics import default_encoder, get_metric
from nlgbench.metrics.base import PhaseTimer


@dataclass(frozen=True)
class Teacher:
    """The teacher cell's config: metric, options (as a cell runs them), encoder, aligner."""

    metric: str
    options: dict[str, Any]
    encoder: EncoderRef
    aligner: str | None

    @classmethod
    def parse(
        cls, metric: str, encoder: str | dict[str, Any] | None, options: dict[str, Any], aligner: str | None = None
    ) -> Teacher:
        """Checked as a spec's metric entry is (unknown names, options, model kinds: one line)."""
        info = get_metric(metric)
        if "source" in info.needs:
            raise UserError(f"teacher metric {metric!r} reads sources; distillation pairs are (reference, candidate)")
        if not info.reads_references(options):
            raise UserError(
                f"teacher metric {metric!r} with these options reads no reference; "
                "distillation pairs are (reference, candidate)"
            )
        raw: dict[str, Any] = {
            "metric": metric,
            "options": dict(options),
            "encoders": [encoder if encoder is not None else default_encoder(metric)],
        }
        if aligner is not None:
            raw["aligners"] = [aligner]
        entry = parse_metric_entry(raw, "teacher", Path.cwd())
        return cls(metric, entry.options, entry.encoders[0], entry.aligners[0])

    @property
    def higher_is_better(self) -> bool:
        return get_metric(self.metric).higher_is_better

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; a local encoder folder carries its weights fingerprint (as a cell's `inputs`)."""
        out: dict[str, Any] = {
            "metric": self.metric,
            "options": dict(sorted(self.options.items())),
            "encoder": self.encoder.to_dict(),
            "aligner": self.aligner,
        }
        fingerprint = resolve_encoder(self.encoder.name).fingerprint()
        if fingerprint is not None:
            out["inputs"] = {self.encoder.name: WEIGHTS_PREFIX + fingerprint}
        return out

    @property
    def label(self) -> str:
        metric = metric_label(self.metric, self.aligner, options_label(self.metric, self.options))
        return f"{metric} | {self.encoder.label}"


def labels_key(pairs: Sequence[Pair], teacher: Teacher) -> dict[str, Any]:
    """What the teacher's labels depend on: the pairs, the teacher config and the score versions."""
    return {
        "pairs_sha256": pairs_sha256(pairs),
        "teacher": teacher.to_dict(),
        "versions": {**score_versions(), **metric_versions(teacher.metric)},
    }


def labels_cache_name(key: dict[str, Any]) -> str:
    """The labels' cache file, relative to $NLGBENCH_CACHE (as distill.json records it: no machine path)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    return f"distill/labels-{digest[:20]}.json"


def labels_cache_file(key: dict[str, Any]) -> Path:
    return cache_dir() / labels_cache_name(key)


@dataclass
class Labels:
    """The teacher's primary score per pair, and how it was obtained."""

    scores: list[float]
    cached: bool
    seconds: float  # of the labelling run (also when read from the cache)
    device: str
    batch_size: int
    scorer: dict[str, Any]  # the scorer's own description (params, layer, ...)
    cache_file: str  # relative to $NLGBENCH_CACHE


def teacher_labels(
    pairs: Sequence[Pair], teacher: Teacher, *, device: str, batch_size: int, log: Log = log_stderr
) -> Labels:
    """The teacher's scores of `pairs`, from the cache when the same pairs, teacher and versions
    were labelled before, else computed (and cached, atomically)."""
    key = labels_key(pairs, teacher)
    path = labels_cache_file(key)
    cached = _read_labels(path, key, len(pairs), log)
    if cached is not None:
        log(
            f"labels: cache hit, {len(pairs)} teacher scores from {path} (labelled in {cached.seconds:.0f} s "
            f"on {cached.device}); not relabelled"
        )
        return cached
    log(f"labels: {len(pairs)} pairs by {teacher.label} on {device}, batch {batch_size}")
    start = time.perf_counter()
    scores, scorer = _run_teacher(pairs, teacher, device, batch_size)
    labels = Labels(scores, False, time.perf_counter() - start, device, batch_size, scorer, labels_cache_name(key))
    _write_json(
        path,
        {
            "key": key,
            "labels": scores,
            "seconds": labels.seconds,
            "device": device,
            "batch_size": batch_size,
            "scorer": scorer,
        },
    )
    log(
        f"labels: done in {labels.seconds:.0f} s ({len(pairs) / max(labels.seconds, 1e-9):.1f} pairs/s); "
        f"cached in {path}"
    )
    return labels


def _read_labels(path: Path, key: dict[str, Any], n: int, log: Log) -> Labels | None:
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw["key"] != key or len(raw["labels"]) != n:
            raise ValueError("its key or length differs")
        scores = [math.nan if v is None else float(v) for v in raw["labels"]]
        return Labels(
            scores,
            True,
            float(raw["seconds"]),
            str(raw["device"]),
            int(raw["batch_size"]),
            dict(raw.get("scorer") or {}),
            labels_cache_name(key),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log(f"labels: ignoring the unreadable cache file {path} ({exc}); labelling again")
        return None


def _run_teacher(
    pairs: Sequence[Pair], teacher: Teacher, device: str, batch_size: int
) -> tuple[list[float], dict[str, Any]]:
    """Score the pairs as a sweep cell does (`MetricInfo.make`, `prepare` over all pairs, `score`),
    in chunks of a few batches so progress shows; returns the primary scores and `describe()`."""
    from tqdm.auto import tqdm

    info = get_metric(teacher.metric)
    items = [
        Item(lp="", seg_id=i + 1, system="", source="", reference=p.reference, hypothesis=p.candidate, human=math.nan)
        for i, p in enumerate(pairs)
    ]
    extra = {"aligner": teacher.aligner} if info.accepts_aligners else {}
    scorer = info.make(teacher.encoder, teacher.options, device, batch_size, **extra)
    scorer.prepare(items)  # corpus state (idf) over all pairs, as a cell over its whole dataset
    chunk = batch_size * 8
    scores: list[float] = []
    with tqdm(total=len(items), unit="pair", desc="teacher", file=sys.stderr, mininterval=BAR_INTERVAL) as bar:
        for start in range(0, len(items), chunk):
            part = items[start : start + chunk]
            scores += [float(v) for v in scorer.score(part, PhaseTimer()).score]
            bar.update(len(part))
    return scores, json_safe(scorer.describe())


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    """A JSON file (strict: NaN as null) written atomically, its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(json_safe(payload)))
