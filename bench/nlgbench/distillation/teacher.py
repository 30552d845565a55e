"""The teacher of `nlgbench distill` and its labels: the teacher cell's config (`Teacher`), checked as
a spec's metric entry; its scores of the pairs, computed as a sweep cell computes them, in shards
cached as they are scored (`nlgbench.distillation.shards`: a killed labelling resumes, a rerun
reads every shard and labels nothing). Shards are keyed by their pairs' texts, the teacher's config
and the versions that change scores (as a cell id); device and batch size are not in the keys
(they change scores by rounding only)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nlgbench.core.cell import metric_versions, score_versions
from nlgbench.core.labels import metric_label, options_label
from nlgbench.core.recipe import Recipe
from nlgbench.core.result import json_safe
from nlgbench.data.catalogue import cache_dir
from nlgbench.data.items import Item
from nlgbench.distillation.pairs import Pair, pairs_sha256
from nlgbench.distillation.shards import (
    SHARD_SIZE,
    Progress,
    Shard,
    plan_shards,
    read_shard,
    teacher_folder,
    write_shard,
)
from nlgbench.distillation.steplog import Log, log_stderr
from nlgbench.encoders.registry import WEIGHTS_PREFIX, EncoderRef, resolve_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
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
        recipe = Recipe.parse(metric, encoder, options, aligner, "teacher")
        return cls(metric, recipe.options, recipe.encoder, recipe.aligner)

    @property
    def recipe(self) -> Recipe:
        """The teacher's scorer recipe: built and signed as a sweep cell's."""
        return Recipe(get_metric(self.metric), self.encoder, self.options, self.aligner)

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


@dataclass
class Labels:
    """The teacher's primary score per pair, and how it was obtained."""

    scores: list[float]
    cached: bool  # every score came from the cache (nothing labelled by this run)
    seconds: float  # of the labelling (summed over its shards; also when read from the cache)
    device: str  # of this run (the shards record the device each was labelled on)
    batch_size: int
    scorer: dict[str, Any]  # the scorer's own description (params, layer, ...)
    shards: int  # shards of the labelling
    shards_labelled: int  # of them, labelled by this run (the rest read from the cache)
    shard_folder: str  # relative to $NLGBENCH_CACHE


ShardHook = Callable[[int], None]  # called after each shard written, with the shards labelled so far by this run


def shards_key(pairs: Sequence[Pair], teacher: Teacher) -> dict[str, Any]:
    """What every shard's labels depend on: the teacher config, the score versions and, for a metric
    whose corpus state these options use (idf), the whole pair list."""
    info = get_metric(teacher.metric)
    corpus = info.corpus_state and bool(teacher.options.get("idf", True))
    return {
        "teacher": teacher.to_dict(),
        "versions": {**score_versions(), **metric_versions(teacher.metric)},
        "corpus": pairs_sha256(pairs) if corpus else None,
    }


def teacher_labels(
    pairs: Sequence[Pair],
    teacher: Teacher,
    *,
    device: str,
    batch_size: int,
    shard_size: int = SHARD_SIZE,
    log: Log = log_stderr,
    on_shard: ShardHook | None = None,
) -> Labels:
    """The teacher's scores of `pairs`, shard by shard (`nlgbench.distillation.shards`): the shards
    already on disk are read, the others scored and written as they are done, so an interrupted
    labelling resumes where it stopped and a rerun labels nothing."""
    plan = plan_shards(pairs, shard_size)
    relative = teacher_folder(shards_key(pairs, teacher))
    folder = cache_dir() / relative
    records = {s.key: r for s in plan if (r := read_shard(folder, s, log)) is not None}
    todo = [s for s in plan if s.key not in records]
    done = sum(s.size for s in plan if s.key in records)
    log(
        f"labels: {len(pairs)} pairs by {teacher.label} in {len(plan)} shards (about {shard_size} pairs each) "
        f"in {folder}; {len(plan) - len(todo)} shards ({done} pairs) already labelled, {len(todo)} to label "
        f"on {device}, batch {batch_size}"
    )
    scorer: dict[str, Any] = {}
    if todo:
        progress = Progress(len(pairs), done, len(plan), len(plan) - len(todo), log)
        labelled = 0

        def write(shard: Shard, scores: list[float], seconds: float, described: dict[str, Any]) -> None:
            nonlocal labelled
            record = {"labels": scores, "seconds": seconds, "device": device, "batch_size": batch_size}
            write_shard(folder, shard, {**record, "scorer": described})
            records[shard.key] = record
            labelled += 1
            progress.advance(shard.size)
            if on_shard is not None:
                on_shard(labelled)

        scorer = _run_teacher(pairs, teacher, device, batch_size, todo, write)
    scores = [v for s in plan for v in records[s.key]["labels"]]
    seconds = sum(float(records[s.key]["seconds"]) for s in plan)
    scorer = scorer or dict(records[plan[0].key].get("scorer") or {})
    log(f"labels: done, {len(todo)} of {len(plan)} shards labelled by this run ({seconds:.0f} s of labelling in all)")
    return Labels(scores, not todo, seconds, device, batch_size, scorer, len(plan), len(todo), relative)


ShardWriter = Callable[[Shard, list[float], float, dict[str, Any]], None]


def _run_teacher(
    pairs: Sequence[Pair], teacher: Teacher, device: str, batch_size: int, todo: Sequence[Shard], write: ShardWriter
) -> dict[str, Any]:
    """Score the shards `todo` of `pairs` as a sweep cell scores (`Recipe.build` with the cell's
    encoder, variant included, and batch size; `prepare` over all pairs; `score`), one `score` call
    per shard, each written (`write`) as soon as it is scored; returns the scorer's `describe()`."""
    items = [
        Item(lp="", seg_id=i + 1, system="", source="", reference=p.reference, hypothesis=p.candidate, human=math.nan)
        for i, p in enumerate(pairs)
    ]
    scorer = teacher.recipe.build(device, batch_size, CellContext())  # a context of its own: its own records
    scorer.prepare(items)  # corpus state (idf) over all pairs, as a cell over its whole dataset
    described = json_safe(scorer.describe())
    for shard in todo:
        start = time.perf_counter()
        scores = [float(v) for v in scorer.score(items[shard.start : shard.end], PhaseTimer()).score]
        write(shard, scores, time.perf_counter() - start, described)
    return described
