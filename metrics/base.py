"""The metric contract: what every metric declares and the thin scorer interface the worker drives."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Sequence

from nlgbench.data import Item


@dataclass
class PhaseTimer:
    """Accumulates wall time per named phase (encode, match, transport ...), synchronising CUDA."""

    sync: Callable[[], None] = lambda: None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def reset(self) -> None:
        self.seconds = {}


@dataclass
class Scores:
    """A metric's per-item outputs: `primary` names the column that is the metric's score."""

    primary: str
    columns: dict[str, list[float]]

    @property
    def score(self) -> list[float]:
        return self.columns[self.primary]


class Scorer(Protocol):
    """A metric bound to one encoder; owns the model's lifetime."""

    def prepare(self, items: Sequence[Item]) -> None:
        """Corpus-level state (IDF, normalisation) over the whole dataset, once."""

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """Score all items; time phases on `timer`."""

    def describe(self) -> dict[str, Any]:
        """What this scorer actually runs: layer, parameters, disk bytes, options."""


@dataclass(frozen=True)
class MetricInfo:
    """A registered metric: its declaration and how to build its scorer."""

    name: str
    description: str
    needs: tuple[str, ...]  # item fields it reads besides the hypothesis: "reference", "source"
    higher_is_better: bool
    corpus_state: bool
    options: dict[str, tuple[type, Any]]  # option -> (type, default)
    accepts_aligners: bool
    build: Callable[..., Scorer]  # build(encoder_ref, options, device, batch_size) -> Scorer
    encoder_kinds: tuple[str, ...] = ("encoder",)
    check_options: Callable[[dict[str, Any]], None] | None = None  # raises UserError on bad values
    model_options: dict[str, str] = field(default_factory=dict)  # option naming a further model -> its kind

    def make(self, encoder_ref: Any, options: dict[str, Any], device: str, batch_size: int, **extra: Any) -> Scorer:
        """Check the options (as the spec does), then build the scorer."""
        if self.check_options is not None:
            self.check_options(options)
        return self.build(encoder_ref, options, device, batch_size, **extra)
