"""Train a cross-encoder student to predict a teacher's scores (FrugalScore's setup), for `nlgbench distill`.

The student is any checkpoint (registered name, Hub id, local folder) loaded as a one-output
`AutoModelForSequenceClassification`, optionally cut to its first K layers (the config says so
before loading, so only those layers are read). It reads `[CLS] candidate [SEP] reference [SEP]`
(`INPUT_ORDER`: the order of the published FrugalScore scorer and of `metrics/frugalscore.py`, which
scores it) and is trained with MSE on standardised targets (AdamW, linear warm-up and decay,
gradient norm clipped at 1; batches of similar lengths, in random order). Validation MSE is
measured `evals_per_epoch` times per epoch; training stops after `patience` validations without
improvement (counted from the end of the first epoch) and the best weights are kept. Finally the
standardisation is folded into the regression head (y = std * z + mean), so the saved model outputs
the teacher's scale.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.distillation.config import TrainConfig
from nlgbench.distillation.progress import BAR_INTERVAL, Log, log_stderr
from nlgbench.encoders.registry import resolve_encoder, resolve_source
from nlgbench.encoders.variants import count_params
from nlgbench.foundations.errors import UserError
from nlgbench.statistics.correlation import spearman

if TYPE_CHECKING:
    import torch

INPUT_ORDER = "candidate [SEP] reference"  # metrics/frugalscore.py: tokenizer(hypothesis, reference)
STUDENT_KINDS = ("encoder", "cross-encoder")  # a plain encoder gets a new head; a student may be trained further
BUCKET_BATCHES = 20  # batches per pool sorted by length (`length_batches`)

Example = tuple[str, str, float]  # (reference, candidate, target)
Encoded = dict[str, list[list[int]]]  # the tokenizer's output for a list of pairs (input_ids, attention_mask, ...)


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


def check_student(cfg: TrainConfig) -> None:
    """Before any labelling: the student names a loadable checkpoint of a kind that can become a
    cross-encoder, deep enough for `student_layers` (read from its config alone)."""
    student = resolve_encoder(cfg.student)
    student.check("--student")
    kind = student.kind
    if kind is not None and kind not in STUDENT_KINDS:
        raise UserError(
            f"--student {cfg.student}: a {kind} model cannot be a cross-encoder student "
            f"(give an encoder checkpoint, or a {STUDENT_KINDS[1]})"
        )
    _student_config(cfg, student.source)


def _student_config(cfg: TrainConfig, source: str) -> tuple[Any, int | None]:
    """(the student's config as trained: one output, regression, cut to `student_layers`; the base depth)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"--student {cfg.student}: cannot read its config ({' '.join(str(exc).split())[:300]})"
        ) from None
    depth = getattr(config, "num_hidden_layers", None)
    if cfg.student_layers is not None:
        if depth is None:
            raise UserError(f"--student {cfg.student}: its config names no number of layers to cut")
        if cfg.student_layers > depth:
            raise UserError(f"--student-layers {cfg.student_layers}, but {cfg.student} has only {depth} layers")
        config.num_hidden_layers = cfg.student_layers
    config.num_labels = 1
    config.problem_type = "regression"
    return config, depth


def load_student(cfg: TrainConfig, device: str) -> tuple[Any, Any, str, int | None]:
    """(model, tokenizer, source, base depth): a one-output sequence classifier from the student
    checkpoint, cut to its first `student_layers` layers (the config says so before loading, so
    only those layers' weights are read); a new head where the checkpoint has none."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    source = resolve_source(cfg.student)
    config, depth = _student_config(cfg, source)
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # the weight-loading and shard-writing bars
    hf_logging.set_verbosity_error()  # the load report lists the new head and the cut layers: said in one line instead
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        torch.manual_seed(cfg.seed)  # the new head's initialisation
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            source, config=config, ignore_mismatched_sizes=True
        )
    except OSError as exc:
        raise UserError(f"--student {cfg.student}: cannot load ({' '.join(str(exc).split())[:300]})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return model.to(device), tokenizer, source, depth


def regression_head(model: torch.nn.Module) -> torch.nn.Linear:
    """The head's last linear layer with one output (BERT's `classifier`, RoBERTa/MPNet's `classifier.out_proj`)."""
    import torch

    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 1]
    if not heads:
        raise UserError(f"{type(model).__name__}: no one-output linear head found to put in the teacher's scale")
    return heads[-1]


def train_student(
    train: Sequence[Example], val: Sequence[Example], cfg: TrainConfig, device: str, log: Log = log_stderr
) -> Trained:
    """Fine-tune the student to predict the targets (MSE on standardised targets), validating
    `evals_per_epoch` times per epoch, stopping after `patience` validations without improvement,
    keeping the best weights; then fold the standardisation into the head."""
    model, tokenizer, source, depth = load_student(cfg, device)
    kept = cfg.student_layers or depth
    log(
        f"student: {cfg.student} ({type(model).__name__}, {kept} of {depth} layers, "
        f"{count_params(model) / 1e6:.1f} M parameters) on {device}; new one-output regression head"
    )
    data = _encode(tokenizer, train, val, cfg.max_length)
    student = _Student(model, tokenizer, device, cfg.batch_size)
    fit = _fit(student, data, cfg, log)
    model.load_state_dict(fit.best_state)
    _to_teacher_scale(model, data.mean, data.std)
    model.eval()
    pred = student.predict(data.val, len(data.y_val))  # the saved model's own outputs
    record, validation = _summaries(fit, data, pred)
    log(
        f"train: {fit.step} steps in {fit.seconds:.0f} s ({record['pairs_per_second']} pairs/s)"
        f"{', stopped early' if fit.stopped else ''}; best at step {fit.best_step}: val MSE {validation['mse']:.5g} "
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
class _Data:
    """The pairs as the student reads them (INPUT_ORDER: candidate first) and their targets."""

    train: Encoded
    val: Encoded
    y_train: np.ndarray
    y_val: np.ndarray
    mean: float  # of the training targets: the model learns (y - mean) / std
    std: float
    truncated: int  # pairs cut at max_length


def _encode(tokenizer: Any, train: Sequence[Example], val: Sequence[Example], max_length: int) -> _Data:
    def encode(rows: Sequence[Example]) -> Encoded:  # INPUT_ORDER: candidate first
        return dict(
            tokenizer(
                [cand for _, cand, _ in rows], [ref for ref, _, _ in rows], truncation=True, max_length=max_length
            )
        )

    train_enc, val_enc = encode(train), encode(val)
    truncated = sum(len(ids) >= max_length for ids in train_enc["input_ids"] + val_enc["input_ids"])
    y_train = np.array([y for _, _, y in train], dtype=np.float64)
    y_val = np.array([y for _, _, y in val], dtype=np.float64)
    mean, std = float(y_train.mean()), float(y_train.std())
    if not std > 0:
        raise UserError(f"the teacher gives every training pair the same score ({mean}); nothing to learn")
    return _Data(train_enc, val_enc, y_train, y_val, mean, std, truncated)


class _Student:
    """The model in training and its tokenizer: padded batches, predictions, validation points."""

    def __init__(self, model: Any, tokenizer: Any, device: str, batch_size: int) -> None:
        self.model, self.tokenizer, self.device, self.batch_size = model, tokenizer, device, batch_size

    def batch(self, enc: Encoded, rows: Sequence[int]) -> dict[str, torch.Tensor]:
        padded = self.tokenizer.pad({k: [enc[k][i] for i in rows] for k in enc}, return_tensors="pt")
        return {k: v.to(self.device) for k, v in padded.items()}

    def predict(self, enc: Encoded, n: int) -> np.ndarray:
        """Standardised predictions, longest-first batches (less padding), returned in input order."""
        import torch

        self.model.eval()
        order = sorted(range(n), key=lambda i: -len(enc["input_ids"][i]))
        out = np.empty(n)
        with torch.inference_mode():
            for s in range(0, n, self.batch_size * 2):
                rows = order[s : s + self.batch_size * 2]
                out[rows] = self.model(**self.batch(enc, rows)).logits[:, 0].float().cpu().numpy()
        self.model.train()
        return out

    def validate(
        self, data: _Data, step: int, epoch: float, train_loss: float | None, rate: float | None
    ) -> dict[str, Any]:
        pred = self.predict(data.val, len(data.y_val)) * data.std + data.mean
        return {
            "step": step,
            "epoch": round(epoch, 3),
            "train_loss": train_loss,
            "pairs_per_s": rate,
            "val_mse": float(np.mean((pred - data.y_val) ** 2)),
            "val_pearson": _pearson(pred, data.y_val),
        }


@dataclass
class _Fit:
    """The training loop's course: the validations, the best one's weights, where it stopped."""

    history: list[dict[str, Any]]
    best_mse: float
    best_state: dict[str, Any]
    steps_per_epoch: int
    total: int  # steps planned
    best_step: int = 0
    stale: int = 0  # validations since the best one (after the first epoch)
    step: int = 0
    stopped: bool = False
    seen: int = 0  # pairs trained on
    seconds: float = 0.0

    def keep_if_best(self, point: dict[str, Any], model: Any) -> None:
        """After a validation: the best weights so far kept, else one more stale validation."""
        if point["val_mse"] < self.best_mse:
            self.best_mse, self.best_step, self.stale = point["val_mse"], point["step"], 0
            self.best_state = _state(model)
        elif self.step >= self.steps_per_epoch:  # no stopping inside the first epoch (warm-up, a new head)
            self.stale += 1


def _state(model: Any) -> dict[str, Any]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _fit(student: _Student, data: _Data, cfg: TrainConfig, log: Log) -> _Fit:
    """The training loop: AdamW with linear warm-up and decay, MSE on the standardised targets,
    validations every `steps_per_epoch // evals_per_epoch` steps and at the end, early stopping."""
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    model = student.model
    targets = torch.tensor((data.y_train - data.mean) / data.std, dtype=torch.float32)
    n_train = len(data.y_train)
    steps_per_epoch = math.ceil(n_train / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    every = max(1, steps_per_epoch // cfg.evals_per_epoch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_fraction * total), total)
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # dropout
    first = student.validate(data, 0, 0.0, None, None)
    log(
        f"train: {n_train} pairs, validation {len(data.y_val)}; {cfg.epochs} epochs x {steps_per_epoch} steps of "
        f"{cfg.batch_size}; validating every {every} steps; before training: val MSE {first['val_mse']:.5g}, "
        f"Pearson {first['val_pearson']:.4f}"
    )
    fit = _Fit([first], first["val_mse"], _state(model), steps_per_epoch, total)
    losses: list[float] = []
    model.train()
    start = last = time.perf_counter()
    seen_since = 0
    with tqdm(
        total=cfg.epochs * n_train, unit="pair", desc="student", file=sys.stderr, mininterval=BAR_INTERVAL
    ) as bar:
        for _epoch in range(cfg.epochs):
            for rows in length_batches([len(ids) for ids in data.train["input_ids"]], cfg.batch_size, generator):
                losses.append(
                    _step(model, student.batch(data.train, rows), targets[rows].to(student.device), optimizer, schedule)
                )
                fit.step += 1
                seen_since += len(rows)
                fit.seen += len(rows)
                bar.update(len(rows))
                bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.4f}")
                if fit.step % every and fit.step != total:
                    continue
                rate = seen_since / (time.perf_counter() - last)
                point = student.validate(
                    data, fit.step, fit.step / steps_per_epoch, float(np.mean(losses[-every:])) * data.std**2, rate
                )
                fit.history.append(point)
                eta = (total - fit.step) * cfg.batch_size / rate
                bar.write(
                    f"step {fit.step}/{total} (epoch {point['epoch']:.2f}): train MSE {point['train_loss']:.5g}, "
                    f"val MSE {point['val_mse']:.5g}, val Pearson {point['val_pearson']:.4f}, "
                    f"{rate:.1f} pairs/s, ETA {eta / 60:.1f} min",
                    file=sys.stderr,
                )
                fit.keep_if_best(point, model)
                last, seen_since = time.perf_counter(), 0
                if fit.stale >= cfg.patience:
                    fit.stopped = True
                    break
            if fit.stopped:
                break
    fit.seconds = time.perf_counter() - start
    return fit


def _step(model: Any, inputs: dict[str, torch.Tensor], target: torch.Tensor, optimizer: Any, schedule: Any) -> float:
    """One optimisation step (MSE, gradient norm clipped at 1, the schedule advanced); the batch's loss."""
    import torch

    logits = model(**inputs).logits[:, 0]
    loss = torch.nn.functional.mse_loss(logits.float(), target)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.item())


def _to_teacher_scale(model: Any, mean: float, std: float) -> None:
    """Fold the standardisation into the head: the model outputs y = std * z + mean."""
    import torch

    head = regression_head(model)
    with torch.no_grad():
        head.weight.mul_(std)
        head.bias.mul_(std).add_(mean)


def _summaries(fit: _Fit, data: _Data, pred: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    """distill.json's `training` (the loop) and `validation` (the saved model on the held-out pairs)."""
    seconds = fit.seconds
    record = {
        "seconds": round(seconds, 2),
        "validations": len(fit.history),
        "steps": fit.step,
        "steps_planned": fit.total,
        "epochs_run": round(fit.step / fit.steps_per_epoch, 3),
        "stopped_early": fit.stopped,
        "best_step": fit.best_step,
        "pairs_per_second": round(fit.seen / seconds, 2) if seconds else None,  # the whole loop, validations included
        "truncated_pairs": data.truncated,
        "target_mean": data.mean,
        "target_std": data.std,
    }
    validation = {
        "n": len(data.y_val),
        "mse": float(np.mean((pred - data.y_val) ** 2)),
        "pearson": _pearson(pred, data.y_val),
        "spearman": spearman(pred, data.y_val),
        "mse_constant": float(np.mean((data.mean - data.y_val) ** 2)),
        "note": "mse_constant: predicting the training mean; pearson/spearman: with the teacher's targets",
    }
    return record, validation


def length_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator, pool: int = BUCKET_BATCHES
) -> list[list[int]]:
    """One epoch's batches of indices: a random order cut into pools of `pool` batches, each pool
    sorted by length before it is cut into batches (less padding), and the batches shuffled."""
    import torch

    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches = []
    for start in range(0, len(order), pool * batch_size):
        chunk = sorted(order[start : start + pool * batch_size], key=lambda i: lengths[i])
        batches += [chunk[s : s + batch_size] for s in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def _pearson(a: Any, b: Any) -> float:
    if np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])
