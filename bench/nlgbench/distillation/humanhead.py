"""`nlgbench distill --teacher-metric human --student-kind head`: a feature head fitted on human scores.

The labels are the human scores of the `--pairs` datasets (their primary dimension, or the one
`human` names), z-scored per dataset by default so that datasets on different scales (DA z-scores,
MQM penalties) can be pooled, or on each dataset's own scale. Every item of those datasets is a
training pair (hypothesis, first reference); `--holdout` removes items touching a held-out text first.
The frozen student encoder, cut to the layer read, embeds them once (`encode_features`, the pass the
scorer runs), the head is chosen and fitted (`nlgbench.distillation.headfit`), and the folder is
written: the cut encoder (config, weights, tokenizer), `head.json`, `distill.json` and the training
texts' hashes that the leakage guard reads. Cheap to rerun: one encoder pass and a closed-form fit.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlgbench.core.result import json_safe
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.data.training_texts import DISTILL_FILE, TEXT_FORM, TEXTS_FILE, training_hashes, units_text
from nlgbench.distillation.headfit import fit_head, layer_sets
from nlgbench.distillation.holdout import Holdout, holdout_names, own_data_file
from nlgbench.distillation.pipeline import check_out_folder, log_written, record_header, replace_folder
from nlgbench.distillation.steplog import Log, log_stderr
from nlgbench.encoders.hfcache import HEAD_FILE, load_options
from nlgbench.encoders.registry import EncoderRef, default_layer, without_machine_paths
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.devices import check_device
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.featurehead import encode_features

SCALES = ("z", "raw")  # the labels: z-scores per dataset, or each dataset's own scale


@dataclass
class HumanPair:
    """A training item as the holdout sees it (reference, candidate) and the item itself."""

    reference: str
    candidate: str
    item: Item
    dataset: str


@dataclass
class HeadResult:
    out: Path
    record: dict[str, Any]


def human_pairs(
    sources: Sequence[str], human: str | None, holdout: Holdout, log: Log
) -> tuple[list[HumanPair], list[dict[str, Any]]]:
    """Every item with a finite human score of each source dataset, minus those touching a held-out
    text; and what each source read (name, kind, files' sha256, items kept)."""
    pairs: list[HumanPair] = []
    read = []
    for source in sources:
        own = own_data_file(source)
        dataset = (
            load_dataset(path=Path(source).expanduser(), human=human) if own else load_dataset(source, human=human)
        )
        scored = [it for it in dataset.items if math.isfinite(it.human)]
        kept = holdout.remove([HumanPair(it.reference, it.hypothesis, it, dataset.name) for it in scored])
        if not kept:
            raise UserError(f"--pairs {source}: no item with a human score is left to learn from")
        pairs += kept
        read.append(
            {
                "name": dataset.name,
                "kind": "own data file" if own else "catalogue dataset",
                "files": dict(dataset.files),
                "dimension": dataset.human_dims[0],
                "items": len(dataset.items),
                "scored": len(scored),
                "kept": len(kept),
            }
        )
        log(f"labels: {len(kept)} items of {dataset.name} with a human score ({len(scored) - len(kept)} held out)")
    return pairs, read


def targets_of(pairs: Sequence[HumanPair], scale: str) -> np.ndarray:
    """The human scores, z-scored within each dataset (`scale` z) or as given (raw)."""
    values = np.array([p.item.human for p in pairs], dtype=np.float64)
    if scale == "raw":
        return values
    out = values.copy()
    for name in {p.dataset for p in pairs}:
        rows = np.array([p.dataset == name for p in pairs])
        spread = values[rows].std()
        out[rows] = (values[rows] - values[rows].mean()) / (spread if spread > 0 else 1.0)
    return out


def distill_head(
    sources: Sequence[str],
    student: str,
    out: str | os.PathLike[str],
    *,
    layers: int | None = None,
    human: str | None = None,
    scale: str = "z",
    device: str = "cpu",
    batch_size: int = 64,
    threads: int | None = None,
    holdout: Sequence[str] = (),
    allow_overlap: bool = False,
    log: Log = log_stderr,
) -> HeadResult:
    """Human-labelled pairs -> features of the frozen student encoder -> chosen, fitted head -> student folder."""
    import torch

    started = time.perf_counter()
    if scale not in SCALES:
        raise UserError(f"--label-scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if batch_size < 1 or (threads is not None and threads < 1) or (layers is not None and layers < 1):
        raise UserError("batch size, threads and student layers must be >= 1")
    check_device(device)
    if threads is not None:
        torch.set_num_threads(threads)
    folder = Path(out).expanduser()
    check_out_folder(folder)
    held = Holdout.load(holdout, sources)
    pairs, read = human_pairs(sources, human, held, log)
    if held.datasets:
        held.check(pairs)
        log(held.summary())
    ref = EncoderRef(name=student, num_layers=layers)
    encoder = load_encoder(ref, device, needed_layer=default_layer(ref, "bertscore"))  # BERTScore's layer of it
    log(f"features: {len(pairs)} pairs through {encoder.layers_run} layers of {student}")
    timer = PhaseTimer()
    every = sorted({layer for layers in layer_sets(encoder.layers_run) for layer in layers})
    features = encode_features(encoder, every, [p.item for p in pairs], batch_size, timer)
    featured = time.perf_counter()
    groups = [f"{p.dataset}:{p.item.lp}" for p in pairs]
    fit = fit_head(features, targets_of(pairs, scale), groups)
    chosen = fit.record["chosen"]
    log(
        f"head: layers {chosen['layers']}, {chosen['components']} axes per family, alpha {chosen['alpha']:.3g}, "
        f"leave-one-pair-out Pearson {chosen['cv_pearson']:.4f} over {len(fit.record['groups'])} language pairs"
    )
    texts = training_hashes((ref_text, p.candidate) for p in pairs for ref_text in p.item.references)
    texts_text = units_text(texts)
    record: dict[str, Any] = {
        **record_header(),
        "teacher": {"metric": "human", "label": "human scores", "scale": scale, "dimension": human},
        "student": {
            "kind": "head",
            "base": student,
            "layers": encoder.layers_run,
            "base_layers": encoder.total_layers,
            "params": encoder.params_run + fit.head.params,
            "head_params": fit.head.params,
        },
        "data": {
            "sources": read,
            "pairs": len(pairs),
            "reference": "the first reference of each item",
            "holdout": holdout_names(holdout),
            "held_out": held.counts(),
            "texts_file": TEXTS_FILE,
            "texts_form": TEXT_FORM,
            "texts": len(texts),
        },
        "head": fit.record,
        "threads": torch.get_num_threads(),
        "seconds": {
            "features": round(featured - started, 2),
            "fit": round(time.perf_counter() - featured, 2),
        },
        "allow_overlap": allow_overlap,
    }
    record["seconds"]["total"] = round(time.perf_counter() - started, 2)
    record = without_machine_paths(record)

    def fill(tmp: Path) -> None:
        _save_encoder(encoder, tmp)
        encoder.tokenizer.save_pretrained(tmp)
        (tmp / HEAD_FILE).write_text(json.dumps(json_safe(fit.head.to_dict()), indent=1) + "\n", encoding="utf-8")
        (tmp / TEXTS_FILE).write_text(texts_text, encoding="utf-8")
        (tmp / DISTILL_FILE).write_text(json.dumps(json_safe(record), indent=2) + "\n", encoding="utf-8")

    replace_folder(folder, fill)
    log_written(folder, allow_overlap, log)
    return HeadResult(folder, record)


def _save_encoder(encoder: Encoder, folder: Path) -> None:
    """The cut encoder's config and weights, with the base checkpoint's pooler (which the metric never
    runs) put back, so that loading the student reports no missing weight."""
    from transformers import AutoModel

    base = AutoModel.from_pretrained(encoder.source, **load_options(encoder.source))
    pooler = getattr(base, "pooler", None)
    if pooler is not None:
        encoder.model.pooler = pooler
    try:
        encoder.model.save_pretrained(folder)
    finally:
        if pooler is not None:
            encoder.model.pooler = None
