"""Train a cross-encoder student to predict a teacher's scores (FrugalScore's setup), for `nlgbench distill`.

The student is any checkpoint (registered name, Hub id, local folder) loaded as a one-output
`AutoModelForSequenceClassification`, optionally cut to its first K layers (the config says so
before loading, so only those layers are read). It reads `[CLS] candidate [SEP] reference [SEP]`
(`INPUT_ORDER`: the order of the published FrugalScore scorer and of `metrics/frugalscore.py`, which
scores it) and is trained with MSE on standardised targets (AdamW, linear warm-up and decay,
gradient norm clipped at 1; batches of similar lengths, in random order). Validation MSE is
measured `evals_per_epoch` times per epoch; training stops after `patience` validations without
improvement (counted from the end of the first epoch) and the best weights are kept. Finally the standardisation is folded into the regression head
(y = std * z + mean), so the saved model outputs the teacher's scale.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    import torch

INPUT_ORDER = "candidate [SEP] reference"  # metrics/frugalscore.py: tokenizer(hypothesis, reference)
STUDENT_KINDS = ("encoder", "cross-encoder")  # a plain encoder gets a new head; a student may be trained further
BUCKET_BATCHES = 20  # batches per pool sorted by length (`length_batches`)
BAR_INTERVAL = 2.0 if sys.stderr.isatty() else 30.0  # seconds between progress-bar updates (a log file: fewer)

Log = Callable[[str], None]
Example = tuple[str, str, float]  # (reference, candidate, target)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class TrainConfig:
    """The student and its training hyper-parameters (distill.json's `hyperparameters`)."""

    student: str
    student_layers: int | None = None
    epochs: int = 3
    lr: float = 2e-4  # measured here: 5e-5 with batches of 32 had not left the mean predictor after 88 steps
    batch_size: int = 16
    max_length: int = 128
    val_fraction: float = 0.1
    patience: int = 3  # validations without improvement (after the first epoch) before stopping
    evals_per_epoch: int = 4
    warmup_fraction: float = 0.1  # of the steps, linear warm-up then linear decay
    weight_decay: float = 0.01
    seed: int = 0

    def check(self) -> None:
        for name, minimum in (("epochs", 1), ("batch_size", 1), ("max_length", 8), ("patience", 1),
                              ("evals_per_epoch", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise UserError(f"{name.replace('_', '-')} must be an integer >= {minimum}, got {value!r}")
        if self.student_layers is not None and self.student_layers < 1:
            raise UserError(f"student-layers must be >= 1, got {self.student_layers}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0 < self.lr < math.inf:
            raise UserError(f"lr must be a positive number, got {self.lr!r}")
        if not 0 < self.val_fraction < 1:
            raise UserError(f"val-fraction must be between 0 and 1, got {self.val_fraction}")
        if not 0 <= self.warmup_fraction < 1 or self.weight_decay < 0:
            raise UserError("warmup fraction must be in [0, 1) and weight decay >= 0")


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
    from nlgbench.encoders.registry import encoder_kind, validate_encoder_name

    validate_encoder_name(cfg.student, "--student")
    kind = encoder_kind(cfg.student)
    if kind is not None and kind not in STUDENT_KINDS:
        raise UserError(f"--student {cfg.student}: a {kind} model cannot be a cross-encoder student "
                        f"(give an encoder checkpoint, or a {STUDENT_KINDS[1]})")
    _student_config(cfg)


def _student_config(cfg: TrainConfig) -> tuple[Any, int | None]:
    """(the student's config as trained: one output, regression, cut to `student_layers`; the base depth)."""
    import transformers

    from nlgbench.encoders.registry import resolve_source

    try:
        config = transformers.AutoConfig.from_pretrained(resolve_source(cfg.student))
    except (OSError, ValueError) as exc:
        raise UserError(f"--student {cfg.student}: cannot read its config ({' '.join(str(exc).split())[:300]})") from None
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

    from nlgbench.encoders.registry import resolve_source

    source = resolve_source(cfg.student)
    config, depth = _student_config(cfg)
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # the weight-loading and shard-writing bars
    hf_logging.set_verbosity_error()  # the load report lists the new head and the cut layers: said in one line instead
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        torch.manual_seed(cfg.seed)  # the new head's initialisation
        model = transformers.AutoModelForSequenceClassification.from_pretrained(source, config=config,
                                                                                ignore_mismatched_sizes=True)
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


def train_student(train: Sequence[Example], val: Sequence[Example], cfg: TrainConfig,
                  device: str, log: Log = _stderr) -> Trained:
    """Fine-tune the student to predict the targets (MSE on standardised targets), validating
    `evals_per_epoch` times per epoch, stopping after `patience` validations without improvement,
    keeping the best weights; then fold the standardisation into the head."""
    import numpy as np
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    from nlgbench.encoders.variants import count_params

    model, tokenizer, source, depth = load_student(cfg, device)
    kept = cfg.student_layers or depth
    log(f"student: {cfg.student} ({type(model).__name__}, {kept} of {depth} layers, "
        f"{count_params(model) / 1e6:.1f} M parameters) on {device}; new one-output regression head")

    def encode(rows: Sequence[Example]) -> dict[str, list[list[int]]]:  # INPUT_ORDER: candidate first
        return dict(tokenizer([cand for _, cand, _ in rows], [ref for ref, _, _ in rows],
                              truncation=True, max_length=cfg.max_length))

    train_enc, val_enc = encode(train), encode(val)
    truncated = sum(len(ids) >= cfg.max_length for ids in train_enc["input_ids"] + val_enc["input_ids"])
    y_train = np.array([y for _, _, y in train], dtype=np.float64)
    y_val = np.array([y for _, _, y in val], dtype=np.float64)
    mean, std = float(y_train.mean()), float(y_train.std())
    if not std > 0:
        raise UserError(f"the teacher gives every training pair the same score ({mean}); nothing to learn")
    targets = torch.tensor((y_train - mean) / std, dtype=torch.float32)

    def batch(enc: dict[str, list[list[int]]], rows: Sequence[int]) -> dict[str, torch.Tensor]:
        padded = tokenizer.pad({k: [enc[k][i] for i in rows] for k in enc}, return_tensors="pt")
        return {k: v.to(device) for k, v in padded.items()}

    def predict(enc: dict[str, list[list[int]]], n: int) -> np.ndarray:
        """Standardised predictions, longest-first batches (less padding), returned in input order."""
        model.eval()
        order = sorted(range(n), key=lambda i: -len(enc["input_ids"][i]))
        out = np.empty(n)
        with torch.inference_mode():
            for s in range(0, n, cfg.batch_size * 2):
                rows = order[s:s + cfg.batch_size * 2]
                out[rows] = model(**batch(enc, rows)).logits[:, 0].float().cpu().numpy()
        model.train()
        return out

    def validate(step: int, epoch: float, train_loss: float | None, rate: float | None) -> dict[str, Any]:
        pred = predict(val_enc, len(val)) * std + mean
        return {"step": step, "epoch": round(epoch, 3), "train_loss": train_loss, "pairs_per_s": rate,
                "val_mse": float(np.mean((pred - y_val) ** 2)), "val_pearson": _pearson(pred, y_val)}

    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    every = max(1, steps_per_epoch // cfg.evals_per_epoch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_fraction * total), total)
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # dropout
    history = [validate(0, 0.0, None, None)]
    log(f"train: {len(train)} pairs, validation {len(val)}; {cfg.epochs} epochs x {steps_per_epoch} steps of "
        f"{cfg.batch_size}; validating every {every} steps; before training: val MSE {history[0]['val_mse']:.5g}, "
        f"Pearson {history[0]['val_pearson']:.4f}")
    best_mse, best_step = history[0]["val_mse"], 0
    best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    stale, step, stopped = 0, 0, False
    losses: list[float] = []
    model.train()
    start = last = time.perf_counter()
    seen_since = seen = 0
    with tqdm(total=cfg.epochs * len(train), unit="pair", desc="student", file=sys.stderr, mininterval=BAR_INTERVAL) as bar:
        for epoch in range(cfg.epochs):
            for rows in length_batches([len(ids) for ids in train_enc["input_ids"]], cfg.batch_size, generator):
                logits = model(**batch(train_enc, rows)).logits[:, 0]
                loss = torch.nn.functional.mse_loss(logits.float(), targets[rows].to(device))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                seen_since += len(rows)
                seen += len(rows)
                losses.append(loss.item())
                bar.update(len(rows))
                bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.4f}")
                if step % every and step != total:
                    continue
                now = time.perf_counter()
                rate = seen_since / (now - last)
                point = validate(step, step / steps_per_epoch, float(np.mean(losses[-every:])) * std ** 2, rate)
                history.append(point)
                eta = (total - step) * cfg.batch_size / rate
                bar.write(f"step {step}/{total} (epoch {point['epoch']:.2f}): train MSE {point['train_loss']:.5g}, "
                          f"val MSE {point['val_mse']:.5g}, val Pearson {point['val_pearson']:.4f}, "
                          f"{rate:.1f} pairs/s, ETA {eta / 60:.1f} min", file=sys.stderr)
                if point["val_mse"] < best_mse:
                    best_mse, best_step, stale = point["val_mse"], step, 0
                    best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                elif step >= steps_per_epoch:  # no stopping inside the first epoch (warm-up, a new head)
                    stale += 1
                last, seen_since = time.perf_counter(), 0
                if stale >= cfg.patience:
                    stopped = True
                    break
            if stopped:
                break
    seconds = time.perf_counter() - start
    model.load_state_dict(best_state)
    head = regression_head(model)
    with torch.no_grad():  # outputs in the teacher's scale: y = std * z + mean
        head.weight.mul_(std)
        head.bias.mul_(std).add_(mean)
    model.eval()
    pred = predict(val_enc, len(val))  # the saved model's own outputs
    const = float(np.mean((mean - y_val) ** 2))
    record = {
        "seconds": round(seconds, 2), "validations": len(history), "steps": step, "steps_planned": total,
        "epochs_run": round(step / steps_per_epoch, 3), "stopped_early": stopped, "best_step": best_step,
        "pairs_per_second": round(seen / seconds, 2) if seconds else None,  # over the whole loop, validations included
        "truncated_pairs": truncated, "target_mean": mean, "target_std": std,
    }
    validation = {"n": len(val), "mse": float(np.mean((pred - y_val) ** 2)), "pearson": _pearson(pred, y_val),
                  "spearman": _spearman(pred, y_val), "mse_constant": const,
                  "note": "mse_constant: predicting the training mean; pearson/spearman: with the teacher's targets"}
    log(f"train: {step} steps in {seconds:.0f} s ({record['pairs_per_second']} pairs/s){', stopped early' if stopped else ''}; "
        f"best at step {best_step}: val MSE {validation['mse']:.5g} (predicting the mean: {const:.5g}), "
        f"Pearson with the teacher {validation['pearson']:.4f}")
    return Trained(model, tokenizer, source, depth, history, {"training": record, "validation": validation},
                   [float(v) for v in pred])


def length_batches(lengths: Sequence[int], batch_size: int, generator: torch.Generator,
                   pool: int = BUCKET_BATCHES) -> list[list[int]]:
    """One epoch's batches of indices: a random order cut into pools of `pool` batches, each pool
    sorted by length before it is cut into batches (less padding), and the batches shuffled."""
    import torch

    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches = []
    for start in range(0, len(order), pool * batch_size):
        chunk = sorted(order[start:start + pool * batch_size], key=lambda i: lengths[i])
        batches += [chunk[s:s + batch_size] for s in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def _pearson(a: Any, b: Any) -> float:
    import numpy as np

    if np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _spearman(a: Any, b: Any) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])
