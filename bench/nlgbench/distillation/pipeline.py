"""The whole `nlgbench distill` run: pairs -> teacher labels (cached) -> trained student -> model folder.

The student (`nlgbench.distillation.student`) is trained on the teacher's score, negated for a
lower-is-better teacher (the student, like the `frugalscore` metric, is higher-is-better), on a
split by reference. The output folder (config, tokenizer, safetensors) is usable as an encoder of
`frugalscore` by path; it holds `distill.json` (teacher, data hashes, hyper-parameters, validation
MSE and Pearson with the teacher, the training record and validation curve, times), the curve's
figure (`training_curve.png`) and `training_texts.sha256` (hashes of every training
reference and pair, `nlgbench.data.training_texts`), which the leakage guard compares with evaluation data.
Training is checkpointed into `OUT.partial` beside the output folder (`nlgbench.distillation.checkpoint`),
removed once the student is written; `resume` continues an interrupted run from there.
distill.json travels with the student (copied into reports, imported into other caches), so it names
no folder of the machine that made it: absolute paths (a local student or teacher folder, a pairs
file) are recorded by their last part, the labels' cache file relative to `$NLGBENCH_CACHE`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nlgbench.core.result import json_safe
from nlgbench.data.training_texts import (
    DISTILL_FILE,
    DISTILL_FORMAT,
    TEXT_FORM,
    TEXTS_FILE,
    training_hashes,
    units_text,
)
from nlgbench.distillation.checkpoint import Checkpoints, check_checkpoints, checkpoint_folder
from nlgbench.distillation.config import TrainConfig
from nlgbench.distillation.curve import CURVE_FILE, plot_curve
from nlgbench.distillation.holdout import holdout_names
from nlgbench.distillation.pairs import Pair, gather_pairs, kinds, pairs_sha256, split_by_reference
from nlgbench.distillation.shards import SHARD_SIZE
from nlgbench.distillation.steplog import Log, log_stderr
from nlgbench.distillation.student import INPUT_ORDER, Example, check_student
from nlgbench.distillation.teacher import Labels, Teacher, shards_key, teacher_labels
from nlgbench.distillation.training import Trained, train_student
from nlgbench.encoders.registry import without_machine_paths
from nlgbench.encoders.variants import count_params
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import refuse_output_link
from nlgbench.foundations.version import __version__
from nlgbench.measurement.devices import check_device

Row = tuple[Pair, float]  # a pair and its target: the teacher's score, negated for a lower-is-better teacher


@dataclass
class DistillResult:
    out: Path
    record: dict[str, Any]  # distill.json
    val_pairs: list[Pair]
    val_targets: list[float]
    val_predictions: list[float]


def distill(
    sources: Sequence[str],
    teacher: Teacher,
    cfg: TrainConfig,
    out: str | os.PathLike[str],
    *,
    device: str = "cpu",
    teacher_batch_size: int = 64,
    augment: int = 0,
    max_pairs: int | None = None,
    allow_overlap: bool = False,
    threads: int | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    random_share: float = 0.0,
    holdout: Sequence[str] = (),
    label_shard_size: int = SHARD_SIZE,
    log: Log = log_stderr,
) -> DistillResult:
    """Pairs -> teacher labels (cached) -> trained student -> model folder `out` with distill.json and
    the validation curve's figure. `threads`: CPU threads of torch (None: as torch chooses, all cores).
    Training is checkpointed into `OUT.partial` beside `out` (`nlgbench.distillation.checkpoint`) at each
    validation and every `checkpoint_every` optimizer steps; `resume` continues from there."""
    import torch

    folder = _check_inputs(cfg, out, device, teacher_batch_size, augment, max_pairs, threads)
    checkpoints = Checkpoints(checkpoint_folder(folder), checkpoint_every, resume)
    check_checkpoints(checkpoints)
    pairs, read, counts = gather_pairs(
        sources,
        max_pairs=max_pairs,
        augment=augment,
        seed=cfg.seed,
        random_share=random_share,
        holdout=holdout,
        log=log,
    )
    labels = teacher_labels(
        pairs, teacher, device=device, batch_size=teacher_batch_size, shard_size=label_shard_size, log=log
    )
    rows = _targets(pairs, labels, teacher, log)
    train_idx, val_idx = split_by_reference([p for p, _ in rows], cfg.val_fraction, cfg.seed)
    train, val = [rows[i] for i in train_idx], [rows[i] for i in val_idx]
    trained = train_student(_examples(train), _examples(val), cfg, device, log, checkpoints)
    texts = training_hashes([(p.reference, p.candidate) for p, _ in rows])
    texts_text = units_text(texts)
    record: dict[str, Any] = {
        **record_header(),
        "input_order": INPUT_ORDER,
        "teacher": _teacher_record(teacher, labels, pairs),
        "student": _student_record(cfg, trained),
        "data": {
            "sources": [asdict(s) for s in read],
            "counts": counts,
            "augment": augment,
            "max_pairs": max_pairs,
            "random_share": random_share,
            "holdout": holdout_names(holdout),
            **_data_record(rows, train, val, cfg),
            **_texts_record(texts, texts_text),
        },
        "threads": torch.get_num_threads(),
        "labels": {
            "cached": labels.cached,
            "seconds": round(labels.seconds, 2),
            "shards": labels.shards,
            "shards_labelled": labels.shards_labelled,
            "shard_folder": labels.shard_folder,
        },
        "hyperparameters": asdict(cfg),
        **trained.record,
        "history": trained.history,
        "allow_overlap": allow_overlap,
    }
    record = without_machine_paths(record)
    _write_student(folder, trained, record, texts_text)
    shutil.rmtree(checkpoints.folder, ignore_errors=True)  # the student is complete: nothing left to resume
    log_written(folder, allow_overlap, log)
    return DistillResult(folder, record, [p for p, _ in val], [y for _, y in val], trained.val_predictions)


def _check_inputs(
    cfg: TrainConfig,
    out: str | os.PathLike[str],
    device: str,
    teacher_batch_size: int,
    augment: int,
    max_pairs: int | None,
    threads: int | None,
) -> Path:
    """Every check before the pairs are read (and torch's threads set): the output folder, as a Path."""
    import torch

    cfg.check()
    check_device(device)  # cpu, or a CUDA device this machine has: before any model loads
    if augment < 0 or (max_pairs is not None and max_pairs < 1) or teacher_batch_size < 1:
        raise UserError("augment must be >= 0, max-pairs and teacher-batch-size >= 1")
    if threads is not None:
        if threads < 1:
            raise UserError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    folder = Path(out).expanduser()
    check_out_folder(folder)
    check_student(cfg)
    return folder


def _targets(pairs: Sequence[Pair], labels: Labels, teacher: Teacher, log: Log) -> list[Row]:
    """Each pair with a finite teacher score, and its target (higher is better)."""
    sign = 1.0 if teacher.higher_is_better else -1.0
    rows = [(p, sign * y) for p, y in zip(pairs, labels.scores, strict=True) if math.isfinite(y)]
    if len(rows) < len(pairs):
        log(f"labels: {len(pairs) - len(rows)} pairs without a finite teacher score left out")
    return rows


def _examples(rows: Sequence[Row]) -> list[Example]:
    return [(p.reference, p.candidate, y) for p, y in rows]


def _teacher_record(teacher: Teacher, labels: Labels, pairs: Sequence[Pair]) -> dict[str, Any]:
    """distill.json's `teacher`: its config, how it labelled, and the versions its labels depend on."""
    return {
        **teacher.to_dict(),
        "label": teacher.label,
        "device": labels.device,
        "batch_size": labels.batch_size,
        "higher_is_better": teacher.higher_is_better,
        "target": "score"
        if teacher.higher_is_better
        else "-score (the teacher is lower-is-better; the student is higher-is-better)",
        "scorer": labels.scorer,
        "versions": shards_key(pairs, teacher)["versions"],
    }


def _student_record(cfg: TrainConfig, trained: Trained) -> dict[str, Any]:
    return {
        "base": cfg.student,
        "source": trained.source,
        "layers": cfg.student_layers or trained.layers,
        "base_layers": trained.layers,
        "params": count_params(trained.model),
        "architecture": type(trained.model).__name__,
    }


def record_header() -> dict[str, Any]:
    """distill.json's first fields, the same for every student kind: its format, the version, when, the metric."""
    return {
        "format": DISTILL_FORMAT,
        "nlgbench": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "metric": "frugalscore",
    }


def log_written(folder: Path, allow_overlap: bool, log: Log) -> None:
    """The closing line of a distill: where the student is and how a spec names it."""
    log(
        f"student written to {folder} (use it as `metric: frugalscore` with `encoders: [{folder}]`"
        f"{'' if not allow_overlap else '; --allow-overlap recorded: the leakage guard is off for it'})"
    )


def _texts_record(texts: Sequence[str], texts_text: str) -> dict[str, Any]:
    """distill.json's pointer to the training texts' hashes (the leakage guard's input)."""
    return {
        "texts_file": TEXTS_FILE,
        "texts_form": TEXT_FORM,  # hashed in Unicode NFC, whitespace runs as one space
        "texts_sha256": hashlib.sha256(texts_text.encode()).hexdigest(),
        "texts": len(texts),
    }


def _data_record(rows: Sequence[Row], train: Sequence[Row], val: Sequence[Row], cfg: TrainConfig) -> dict[str, Any]:
    """distill.json's `data` on the labelled pairs: counts by origin, their hash, the split, the target range."""
    targets = [y for _, y in rows]
    return {
        "pairs": len(rows),
        "by_origin": dict(Counter(p.origin for p, _ in rows)),
        "by_kind": kinds([p for p, _ in rows]),
        "pairs_sha256": pairs_sha256([p for p, _ in rows]),
        "train_pairs": len(train),
        "val_pairs": len(val),
        "split": f"by reference, {cfg.val_fraction} of them held out, seed {cfg.seed}",
        "target_range": [min(targets), max(targets)],
    }


def check_out_folder(out: Path) -> None:
    """`out` may be created or replaced: not a link, not a file, not a non-empty folder other than a
    student's; its checkpoint folder beside it (`OUT.partial`) not a link either."""
    refuse_output_link(out, "--out")
    refuse_output_link(checkpoint_folder(out), "the checkpoint folder")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the student")
    if out.is_dir() and any(out.iterdir()) and not (out / DISTILL_FILE).is_file():
        raise UserError(
            f"--out {out} is a non-empty folder without {DISTILL_FILE}; give a new folder "
            "(only a previous student's folder is replaced)"
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out.parent}: {exc.strerror or exc}") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise UserError(f"cannot write to {out.parent}: permission denied or read-only")


def _write_student(out: Path, trained: Trained, record: dict[str, Any], texts: str) -> None:
    """The cross-encoder student's folder: model, tokenizer, training texts' hashes, record, curve."""

    def fill(tmp: Path) -> None:
        trained.model.save_pretrained(tmp)
        trained.tokenizer.save_pretrained(tmp)
        (tmp / TEXTS_FILE).write_text(texts, encoding="utf-8")
        (tmp / DISTILL_FILE).write_text(json.dumps(json_safe(record), indent=2) + "\n", encoding="utf-8")
        plot_curve(record["training"]["curve"], record["training"]["best_step"], tmp / CURVE_FILE)

    replace_folder(out, fill)


def replace_folder(out: Path, fill: Callable[[Path], None]) -> None:
    """A student's whole folder, written by `fill` into a temporary folder beside `out`, then renamed
    into place (a previous student there is replaced only once the new one is complete)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fill(tmp)
        for path in tmp.iterdir():  # plain readable files, whatever the writers' temporary files were made with
            path.chmod(0o644)
        tmp.chmod(0o755)
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
