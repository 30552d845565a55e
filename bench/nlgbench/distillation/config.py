"""The student of `nlgbench distill` and its training hyper-parameters (`TrainConfig`, distill.json's
`hyperparameters`), checked before any work; a module of its own, free of torch, so that the command
line's defaults load fast."""

from __future__ import annotations

import math
from dataclasses import dataclass

from nlgbench.foundations.errors import UserError

AUTO = "auto"  # --max-length auto: from the pairs' length distribution (`nlgbench.distillation.student`)


@dataclass(frozen=True)
class TrainConfig:
    """The student and its training hyper-parameters (distill.json's `hyperparameters`)."""

    student: str
    student_layers: int | None = None
    epochs: int = 3
    lr: float = 2e-4  # lower rates leave the student predicting the mean for too long
    batch_size: int = 16
    accumulate: int = 2  # batches per optimizer step: an effective batch of 32 with the default batch size
    max_length: int | str = AUTO  # tokens per pair, or AUTO
    val_fraction: float = 0.1
    patience: int = 3  # validations without improvement (after the first epoch) before stopping
    evals_per_epoch: int = 4
    warmup_fraction: float = 0.1  # of the steps, linear warm-up then linear decay
    weight_decay: float = 0.01
    seed: int = 0

    @property
    def effective_batch(self) -> int:
        """Pairs per optimizer step."""
        return self.batch_size * self.accumulate

    def check(self) -> None:
        for name, minimum in (
            ("epochs", 1),
            ("batch_size", 1),
            ("accumulate", 1),
            ("patience", 1),
            ("evals_per_epoch", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise UserError(f"{name.replace('_', '-')} must be an integer >= {minimum}, got {value!r}")
        if self.max_length != AUTO and (
            not isinstance(self.max_length, int) or isinstance(self.max_length, bool) or self.max_length < 8
        ):
            raise UserError(f"max-length must be an integer >= 8 or {AUTO!r}, got {self.max_length!r}")
        if self.student_layers is not None and self.student_layers < 1:
            raise UserError(f"student-layers must be >= 1, got {self.student_layers}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0 < self.lr < math.inf:
            raise UserError(f"lr must be a positive number, got {self.lr!r}")
        if not 0 < self.val_fraction < 1:
            raise UserError(f"val-fraction must be between 0 and 1, got {self.val_fraction}")
        if not 0 <= self.warmup_fraction < 1 or self.weight_decay < 0:
            raise UserError("warmup fraction must be in [0, 1) and weight decay >= 0")
