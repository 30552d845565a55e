"""Train the student (`nlgbench.distillation.student`) to predict a teacher's scores, for `nlgbench distill`.

MSE on standardised targets; AdamW with linear warm-up and decay over the optimizer steps (FrugalScore's
schedule); gradient norm clipped at 1; `accumulate` batches per optimizer step (the effective batch).
Validation MSE (and Pearson with the teacher) is measured `evals_per_epoch` times per epoch and at the
end; training stops after `patience` validations without improvement (counted from the end of the
first epoch) and the best weights are kept; a loss or validation that is not a finite number stops
it with one line (no student is written). Checkpoints (`nlgbench.distillation.checkpoint`) are
written before training, at each validation and every `Checkpoints.every` steps; a resumed run
continues where the last one stopped, mid-epoch included, and on CPU ends with the same weights as
an uninterrupted one. Finally the standardisation is folded into the regression head (y = std * z + mean), so the saved
model outputs the teacher's scale.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.distillation.checkpoint import (
    Checkpoints,
    capture_rng,
    fingerprint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from nlgbench.distillation.config import AUTO, TrainConfig
from nlgbench.distillation.steplog import BAR_INTERVAL, Log, log_stderr
from nlgbench.distillation.student import (
    Data,
    Example,
    Runner,
    encode_pairs,
    length_batches,
    load_student,
    pearson,
    to_teacher_scale,
)
from nlgbench.encoders.variants import count_params
from nlgbench.foundations.errors import UserError
from nlgbench.statistics.correlation import spearman

if TYPE_CHECKING:
    import torch

CURVE_KEYS = ("step", "pairs_seen", "val_mse", "val_pearson", "lr")  # distill.json's `training.curve`


@dataclass
class Trained:
    """A trained student (head already in the teacher's scale) and its record."""

    model: Any
    tokenizer: Any
    source: str
    layers: int | None  # the base checkpoint's depth, where its config says
    history: list[dict[str, Any]] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)
    val_predictions: list[float] = field(default_factory=list)


def train_student(
    train: Sequence[Example],
    val: Sequence[Example],
    cfg: TrainConfig,
    device: str,
    log: Log = log_stderr,
    checkpoints: Checkpoints | None = None,
) -> Trained:
    """Fine-tune the student to predict the targets, keeping the best weights (checkpointed, resumable
    where `checkpoints` says); then fold the standardisation into the head."""
    model, tokenizer, source, depth = load_student(cfg, device)
    kept = cfg.student_layers or depth
    log(
        f"student: {cfg.student} ({type(model).__name__}, {kept} of {depth} layers, "
        f"{count_params(model) / 1e6:.1f} M parameters) on {device}; new one-output regression head"
    )
    data = encode_pairs(tokenizer, model, train, val, cfg)
    if cfg.max_length == AUTO:
        m = data.max_length
        log(
            f"max length: {m['value']} tokens (the {m['percentile']}th percentile of the training pairs is "
            f"{m['percentile_tokens']} tokens, the longest {m['longest_tokens']}, the model's maximum {m['model_max']})"
        )
    runner = Runner(model, tokenizer, device, cfg.batch_size)
    fit = fit_student(runner, data, cfg, log, checkpoints, fingerprint(cfg, [*train, *val], source))
    model.load_state_dict(fit.best_state)
    to_teacher_scale(model, data.mean, data.std)
    model.eval()
    pred = runner.predict(data.val, len(data.y_val))  # the saved model's own outputs
    record, validation = summaries(fit, data, pred, cfg)
    problems = [f"{name} {validation[name]}" for name in ("mse", "pearson") if not math.isfinite(validation[name])]
    if not np.isfinite(pred).all():
        problems.insert(0, "a prediction that is not a finite number")
    if problems:
        raise UserError(diverged(f"the trained student's validation is not finite ({', '.join(problems)})"))
    log(
        f"train: {fit.step} steps in {fit.seconds:.0f} s ({record['pairs_per_second']} pairs/s), "
        f"{record['stop_reason']}; "
        f"best at step {fit.best_step}: val MSE {validation['mse']:.5g} "
        f"(predicting the mean: {validation['mse_constant']:.5g}), Pearson with the teacher {validation['pearson']:.4f}"
    )
    return Trained(
        model,
        tokenizer,
        source,
        depth,
        fit.history,
        {"training": record, "validation": validation},
        [float(v) for v in pred],
    )


@dataclass
class Fit:
    """The training loop's course: where it is, the validations, the best one's weights, why it stopped."""

    history: list[dict[str, Any]]
    best_mse: float
    best_state: dict[str, Any]
    steps_per_epoch: int
    total: int  # optimizer steps planned
    best_step: int = 0
    stale: int = 0  # validations since the best one (after the first epoch)
    step: int = 0  # optimizer steps done
    epoch: int = 0  # the epoch in progress
    batch: int = 0  # batches of that epoch done
    stopped: bool = False
    seen: int = 0  # pairs trained on
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)  # the last steps' training losses
    resumed_from: list[dict[str, int]] = field(default_factory=list)

    def keep_if_best(self, point: dict[str, Any], model: Any) -> None:
        """After a validation: the best weights so far kept, else one more stale validation."""
        if point["val_mse"] < self.best_mse:
            self.best_mse, self.best_step, self.stale = point["val_mse"], point["step"], 0
            self.best_state = model_state(model)
        elif self.step >= self.steps_per_epoch:  # no stopping inside the first epoch (warm-up, a new head)
            self.stale += 1

    def course(self) -> dict[str, Any]:
        """What a checkpoint keeps of the loop (the best weights are those of the best checkpoint)."""
        return {**{k: getattr(self, k) for k in COURSE_TYPES}, "losses": list(self.losses)}


# A checkpoint's `fit` (`Fit.course`): each key and the type its value must have to be resumed from.
COURSE_TYPES: dict[str, type | tuple[type, ...]] = {
    "history": list,
    "best_mse": float,
    "best_step": int,
    "stale": int,
    "step": int,
    "epoch": int,
    "batch": int,
    "stopped": bool,
    "seen": int,
    "seconds": float,
    "losses": list,
    "resumed_from": list,
}


def check_course(course: dict[str, Any]) -> None:
    """A checkpoint's `fit` has the keys and value types `Fit.course` writes; TypeError naming what differs."""
    if set(course) != set(COURSE_TYPES):
        raise TypeError(f"its fit has keys {sorted(map(str, course))}, expected {sorted(COURSE_TYPES)}")
    for key, kind in COURSE_TYPES.items():
        value = course[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"its fit's {key} is {value!r:.60}, not of type {kind}")


def model_state(model: Any) -> dict[str, Any]:
    """A copy of the weights on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def fit_student(
    runner: Runner,
    data: Data,
    cfg: TrainConfig,
    log: Log,
    checkpoints: Checkpoints | None,
    expected: dict[str, Any],
) -> Fit:
    """The training loop (see the module's docstring), from the last checkpoint where it resumes."""
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    model = runner.model
    targets = torch.tensor((data.y_train - data.mean) / data.std, dtype=torch.float32)
    n_train = len(data.y_train)
    lengths = [len(ids) for ids in data.train["input_ids"]]
    steps_per_epoch = math.ceil(math.ceil(n_train / cfg.batch_size) / cfg.accumulate)
    total = steps_per_epoch * cfg.epochs
    every = max(1, steps_per_epoch // cfg.evals_per_epoch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_fraction * total), total)
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # dropout
    saved = load_checkpoint(checkpoints, expected, log) if checkpoints is not None and checkpoints.resume else None
    order: list[list[int]] | None = None
    if saved is not None:
        try:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            schedule.load_state_dict(saved["schedule"])
            restore_rng(saved["rng"], generator)
            order = saved["order"]
            check_course(saved["fit"])
            fit = Fit(best_state=saved["best_state"], steps_per_epoch=steps_per_epoch, total=total, **saved["fit"])
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            raise UserError(
                f"--resume: the checkpoint in {checkpoints.folder if checkpoints else ''} does not fit this run "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); delete it to start again"
            ) from None
        fit.resumed_from.append({"step": fit.step, "pairs_seen": fit.seen})
        log(f"train: resumed from the checkpoint at step {fit.step} of {total} ({fit.seen} pairs seen)")
    else:
        first: dict[str, Any] = {
            "step": 0,
            "pairs_seen": 0,
            "epoch": 0.0,
            "lr": 0.0,
            "train_loss": None,
            "pairs_per_s": None,
        }
        first.update(runner.validate(data))
        fit = Fit([first], first["val_mse"], model_state(model), steps_per_epoch, total)
        if checkpoints is not None:  # the state before training: the best one until a validation improves on it
            save_checkpoint(checkpoints, training_state(expected, model, optimizer, schedule, generator, order, fit))
    log(
        f"train: {n_train} pairs, validation {len(data.y_val)}; {cfg.epochs} epochs x {steps_per_epoch} steps of "
        f"{cfg.effective_batch} ({cfg.accumulate} x {cfg.batch_size}); validating every {every} steps; "
        f"before training: val MSE {fit.history[0]['val_mse']:.5g}, Pearson {fit.history[0]['val_pearson']:.4f}"
    )
    model.train()
    start = last = time.perf_counter()
    seconds_before, seen_since = fit.seconds, 0
    with tqdm(
        total=cfg.epochs * n_train,
        initial=fit.seen,
        unit="pair",
        desc="student",
        file=sys.stderr,
        mininterval=BAR_INTERVAL,
    ) as bar:
        while fit.epoch < cfg.epochs and not fit.stopped:
            if order is None:
                order = length_batches(lengths, cfg.batch_size, generator)
            while fit.batch < len(order) and not fit.stopped:
                group = order[fit.batch : fit.batch + cfg.accumulate]
                lr = float(optimizer.param_groups[0]["lr"])
                loss = step(runner, data, targets, group, optimizer, schedule)
                if not math.isfinite(loss):
                    raise UserError(diverged(f"the training loss at step {fit.step + 1} is {loss}", checkpoints))
                fit.losses = [*fit.losses[-max(every, 50) + 1 :], loss]
                pairs = sum(map(len, group))
                fit.step, fit.batch, fit.seen, seen_since = (
                    fit.step + 1,
                    fit.batch + len(group),
                    fit.seen + pairs,
                    seen_since + pairs,
                )
                bar.update(pairs)
                bar.set_postfix(loss=f"{np.mean(fit.losses[-50:]):.4f}", refresh=False)  # drawn at the bar's interval
                # every `every` steps and at the last, but not twice within half an interval of the end
                validating = fit.step == total or (fit.step % every == 0 and total - fit.step >= every / 2)
                if validating:
                    rate = seen_since / (time.perf_counter() - last)
                    point = {
                        "step": fit.step,
                        "pairs_seen": fit.seen,
                        "epoch": round(fit.step / steps_per_epoch, 3),
                        "lr": lr,
                        "train_loss": float(np.mean(fit.losses[-every:])) * data.std**2,
                        "pairs_per_s": rate,
                    }
                    point.update(runner.validate(data))
                    if not math.isfinite(point["val_mse"]):
                        raise UserError(
                            diverged(f"the validation MSE at step {fit.step} is {point['val_mse']}", checkpoints)
                        )
                    fit.history.append(point)
                    eta = (total - fit.step) * cfg.effective_batch / rate
                    bar.write(
                        f"step {fit.step}/{total} (epoch {point['epoch']:.2f}): train MSE {point['train_loss']:.5g}, "
                        f"val MSE {point['val_mse']:.5g}, val Pearson {point['val_pearson']:.4f}, "
                        f"{rate:.1f} pairs/s, ETA {eta / 60:.1f} min",
                        file=sys.stderr,
                    )
                    fit.keep_if_best(point, model)
                    fit.stopped = fit.stale >= cfg.patience and fit.step < total  # at the last step: done anyway
                    last, seen_since = time.perf_counter(), 0
                if checkpoints is not None and (
                    validating or (checkpoints.every and fit.step % checkpoints.every == 0)
                ):
                    fit.seconds = seconds_before + time.perf_counter() - start
                    state = training_state(expected, model, optimizer, schedule, generator, order, fit)
                    path = save_checkpoint(checkpoints, state)
                    log(f"checkpoint: step {fit.step} -> {path}")
            if not fit.stopped:
                fit.epoch, fit.batch, order = fit.epoch + 1, 0, None
    fit.seconds = seconds_before + time.perf_counter() - start
    return fit


def training_state(
    expected: dict[str, Any],
    model: Any,
    optimizer: Any,
    schedule: Any,
    generator: torch.Generator,
    order: list[list[int]] | None,
    fit: Fit,
) -> dict[str, Any]:
    """What a checkpoint keeps (`nlgbench.distillation.checkpoint`): all a resumed run needs to go on."""
    return {
        "fingerprint": expected,
        "model": model_state(model),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "rng": capture_rng(generator),
        "order": order,
        "fit": fit.course(),
    }


def diverged(what: str, checkpoints: Checkpoints | None = None) -> str:
    """The one line of a training stopped by a number that is not finite (no student is written)."""
    folder = f" (and delete {checkpoints.folder}, its checkpoints)" if checkpoints is not None else ""
    return f"training stopped: {what}; no student written: lower --lr{folder}, or check the teacher's labels"


def step(
    runner: Runner, data: Data, targets: torch.Tensor, group: Sequence[Sequence[int]], optimizer: Any, schedule: Any
) -> float:
    """One optimizer step over the batches of `group` (gradients accumulated, each batch's squared errors
    summed and divided by the group's pairs: the mean over the effective batch), gradient norm clipped
    at 1, the schedule advanced; the group's MSE."""
    import torch

    n = sum(map(len, group))
    total = 0.0
    for rows in group:
        logits = runner.model(**runner.batch(data.train, rows)).logits[:, 0]
        target = targets[list(rows)].to(runner.device)
        loss = torch.nn.functional.mse_loss(logits.float(), target, reduction="sum") / n
        loss.backward()
        total += float(loss.item())
    torch.nn.utils.clip_grad_norm_(runner.model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def summaries(fit: Fit, data: Data, pred: np.ndarray, cfg: TrainConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """distill.json's `training` (the loop and its validation curve) and `validation` (the saved model
    on the held-out pairs)."""
    seconds = fit.seconds
    record = {
        "seconds": round(seconds, 2),
        "validations": len(fit.history),
        "steps": fit.step,
        "steps_planned": fit.total,
        "pairs_seen": fit.seen,
        "epochs_run": round(fit.step / fit.steps_per_epoch, 3),
        "batch_size": cfg.batch_size,
        "accumulate": cfg.accumulate,
        "effective_batch": cfg.effective_batch,
        "stopped_early": fit.stopped,
        "stop_reason": f"early stop (patience {cfg.patience})" if fit.stopped else "epochs done",
        "resumed_from": fit.resumed_from,
        "best_step": fit.best_step,
        "pairs_per_second": round(fit.seen / seconds, 2) if seconds else None,  # the whole loop, validations included
        "max_length": data.max_length,
        "truncated_pairs": data.truncated,
        "target_mean": data.mean,
        "target_std": data.std,
        "curve": [{k: point[k] for k in CURVE_KEYS} for point in fit.history],
    }
    validation = {
        "n": len(data.y_val),
        "mse": float(np.mean((pred - data.y_val) ** 2)),
        "pearson": pearson(pred, data.y_val),
        "spearman": spearman(pred, data.y_val),
        "mse_constant": float(np.mean((data.mean - data.y_val) ** 2)),
        "note": "mse_constant: predicting the training mean; pearson/spearman: with the teacher's targets",
    }
    return record, validation
