"""The student of `nlgbench distill` and its data (FrugalScore's setup): loading, encoding, batching.

The student is any checkpoint (registered name, Hub id, local folder) loaded as a one-output
`AutoModelForSequenceClassification`, optionally cut to its first K layers (the config says so
before loading, so only those layers are read). It reads `[CLS] candidate [SEP] reference [SEP]`
(`INPUT_ORDER`: the order of the published FrugalScore scorer and of `metrics/frugalscore.py`, which
scores it), cut at `max_length` tokens: a number, or `auto`, the smallest multiple of 8 covering the
99th percentile of the training pairs' lengths (capped by the model's maximum). Batches are of
similar lengths, in random order (`length_batches`). The training loop is
`nlgbench.distillation.training`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.distillation.config import AUTO, TrainConfig
from nlgbench.encoders.registry import resolve_encoder, resolve_source
from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    import torch

INPUT_ORDER = "candidate [SEP] reference"  # metrics/frugalscore.py: tokenizer(hypothesis, reference)
STUDENT_KINDS = ("encoder", "cross-encoder")  # a plain encoder gets a new head; a student may be trained further
BUCKET_BATCHES = 20  # batches per pool sorted by length (`length_batches`)
LENGTH_PERCENTILE = 99  # --max-length auto covers this percentile of the training pairs' lengths
LENGTH_MULTIPLE = 8

Example = tuple[str, str, float]  # (reference, candidate, target)
Encoded = dict[str, list[list[int]]]  # the tokenizer's output for a list of pairs (input_ids, attention_mask, ...)


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


@dataclass
class Data:
    """The pairs as the student reads them (INPUT_ORDER: candidate first) and their targets."""

    train: Encoded
    val: Encoded
    y_train: np.ndarray
    y_val: np.ndarray
    mean: float  # of the training targets: the model learns (y - mean) / std
    std: float
    truncated: int  # pairs cut at max_length
    max_length: dict[str, Any]  # distill.json's `training.max_length`: the value used and how it was chosen


def encode_pairs(
    tokenizer: Any, model: Any, train: Sequence[Example], val: Sequence[Example], cfg: TrainConfig
) -> Data:
    """The pairs tokenized in INPUT_ORDER, cut at `cfg.max_length` (or the length `choose_max_length` picks)."""

    def encode(rows: Sequence[Example], max_length: int | None) -> Encoded:  # INPUT_ORDER: candidate first
        cut = {"truncation": True, "max_length": max_length} if max_length else {}
        return dict(tokenizer([cand for _, cand, _ in rows], [ref for ref, _, _ in rows], **cut))

    if cfg.max_length == AUTO:
        lengths = [len(ids) for ids in encode(train, model_max_length(tokenizer, model))["input_ids"]]
        chosen = choose_max_length(lengths, model_max_length(tokenizer, model))
    else:
        chosen = {"value": int(cfg.max_length), "chosen": "given"}
    max_length = chosen["value"]
    train_enc, val_enc = encode(train, max_length), encode(val, max_length)
    truncated = sum(len(ids) >= max_length for ids in train_enc["input_ids"] + val_enc["input_ids"])
    y_train = np.array([y for _, _, y in train], dtype=np.float64)
    y_val = np.array([y for _, _, y in val], dtype=np.float64)
    mean, std = float(y_train.mean()), float(y_train.std())
    if not std > 0:
        raise UserError(f"the teacher gives every training pair the same score ({mean}); nothing to learn")
    return Data(train_enc, val_enc, y_train, y_val, mean, std, truncated, chosen)


def choose_max_length(lengths: Sequence[int], cap: int) -> dict[str, Any]:
    """`--max-length auto`: the smallest multiple of LENGTH_MULTIPLE covering the LENGTH_PERCENTILE-th
    percentile of the pair lengths (tokens, specials included; the higher of two neighbours, so
    that at least that share of the pairs fits), capped by the model's maximum `cap`."""
    percentile = int(np.percentile(lengths, LENGTH_PERCENTILE, method="higher"))
    value = min(cap, LENGTH_MULTIPLE * math.ceil(percentile / LENGTH_MULTIPLE))
    return {
        "value": value,
        "chosen": AUTO,
        "percentile": LENGTH_PERCENTILE,
        "percentile_tokens": percentile,
        "longest_tokens": max(lengths),
        "model_max": cap,
    }


def model_max_length(tokenizer: Any, model: Any) -> int:
    """The most tokens the student reads: its position table, and its tokenizer's limit where it sets one."""
    limits = [getattr(model.config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    known = [int(v) for v in limits if isinstance(v, int) and 0 < v < 1_000_000]  # unset: a huge sentinel
    if not known:
        raise UserError("--max-length auto: the student states no maximum length; give --max-length N")
    return min(known)


class Runner:
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

    def validate(self, data: Data) -> dict[str, Any]:
        """Validation MSE and Pearson with the teacher, in the teacher's scale."""
        pred = self.predict(data.val, len(data.y_val)) * data.std + data.mean
        return {"val_mse": float(np.mean((pred - data.y_val) ** 2)), "val_pearson": pearson(pred, data.y_val)}


def to_teacher_scale(model: Any, mean: float, std: float) -> None:
    """Fold the standardisation into the head: the model outputs y = std * z + mean."""
    import torch

    head = regression_head(model)
    with torch.no_grad():
        head.weight.mul_(std)
        head.bias.mul_(std).add_(mean)


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


def pearson(a: Any, b: Any) -> float:
    """Pearson's r, NaN where either side is constant."""
    if np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])
