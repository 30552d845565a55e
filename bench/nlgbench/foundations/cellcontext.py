"""What one cell's scoring shares between the harness, its scorer and the scorer's encoders.

A `CellContext` is made per cell by whoever runs the scorer (the worker; the API and the teacher of
a distillation make their own) and given to the metric's build (`MetricInfo.make(..., context=)`),
which hands it to the encoders it loads. It holds the two settings the harness gives the cell's
scoring, the per-batch token budget (`batch_tokens`) and the live progress display's hook, and the
two records its models write: the texts an encoder cut to its model's maximum length (the cell's
`truncated_segments`) and the seconds spent exporting models for an inference backend (the cell's
`timing.export_s`). One object per cell, passed down explicitly: two scorers in one process keep
their records apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A progress display's hook: `(what, done, total)`, e.g. ("texts encoded", 40, 100).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, eq=False)
class CellContext:
    """One cell's settings (token budget, progress hook: fixed) and records (truncated texts, export
    seconds: filled while the cell loads and scores). Compared by identity: each cell has its own."""

    # As many length-sorted inputs per model batch as keep its padded size (inputs x longest) within
    # this many tokens; None: `batch_size` inputs per batch.
    batch_tokens: int | None = None
    progress: Progress | None = None  # called as work finishes; None: no display
    truncated: set[str] = field(default_factory=set)  # (stripped) texts cut to a model's maximum length
    # seconds per backend export made (0.0: reused), and of `backend: auto`'s calibration where it ran
    exports: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise ValueError(f"a token budget must be >= 1, got {self.batch_tokens}")

    def advance(self, what: str, done: int, total: int) -> None:
        """`done` of `total` units of `what` (e.g. "texts encoded") are finished in the current pass."""
        if self.progress is not None:
            self.progress(what, done, total)

    @property
    def export_seconds(self) -> float | None:
        """Seconds this cell spent exporting models for a backend; None where no backend ran."""
        return sum(self.exports) if self.exports else None


class TqdmProgress:
    """A progress hook that draws one tqdm bar per pass of work (`what`, e.g. "texts encoded") on
    stderr: the API's `verbose=True`, as bert_score's `verbose` shows its bar."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.what = ""

    def __call__(self, what: str, done: int, total: int) -> None:
        from tqdm.auto import tqdm

        if self.bar is None or what != self.what or done < self.bar.n:  # a new pass
            self.close()
            self.bar, self.what = tqdm(total=total, desc=what, unit="", leave=False), what
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        """Close the current bar (a pass ends, or the caller stops)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
