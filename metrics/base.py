"""The metric contract: what every metric declares and the thin scorer the worker drives.

A metric module has a functional core (pure functions over tensors and arrays), an options
dataclass (the one declaration of its options: names, types, defaults), a scorer that owns its
models' lifetime (a `ScorerBase` subclass), and an `INFO` (a `MetricInfo`) tying them together.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, Protocol, Sequence, TypeVar

from nlgbench.data import Item
from nlgbench.errors import UserError

O = TypeVar("O")


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


class ScorerBase(Generic[O]):
    """What every scorer holds: its typed options (an instance of `options_class`), device and batch size.

    Subclasses load their models in `__init__` (after calling this one), implement `score` and
    `describe`, and override `prepare` when the metric has corpus state.
    """

    options_class: type[O]

    def __init__(self, options: dict[str, Any], device: str, batch_size: int) -> None:
        self.options: O = self.options_class(**options)
        self.device = device
        self.batch_size = batch_size

    def prepare(self, items: Sequence[Item]) -> None:
        """No corpus state."""


def with_second_model(described: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`described` with the parameters, disk and weight bytes of a second model the scorer runs added in."""
    return {**described, **{key: described[key] + other[key] for key in ("params", "disk_bytes", "weight_bytes")}}


def _value_type(hint: Any) -> type:
    """The type an option's value must have: the annotation without `| None`, without type arguments."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return typing.get_origin(hint) or hint


def option_table(options_class: type) -> dict[str, tuple[type, Any]]:
    """option -> (type, default), read from an options dataclass (its fields, in order)."""
    hints = typing.get_type_hints(options_class)
    table: dict[str, tuple[type, Any]] = {}
    for f in dataclasses.fields(options_class):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        table[f.name] = (_value_type(hints[f.name]), default)
    return table


@dataclass(frozen=True)
class MetricInfo:
    """A registered metric: its declaration and how to build its scorer.

    `options_class` (a dataclass) is the one declaration of the metric's options; `options`
    (name -> (type, default)) and the type checks are derived from it. `check_values` holds
    only the constraints types cannot express (ranges, choices, existing files).
    """

    name: str
    description: str
    needs: tuple[str, ...]  # item fields it reads besides the hypothesis: "reference", "source"
    higher_is_better: bool
    corpus_state: bool
    options_class: type
    accepts_aligners: bool
    build: Callable[..., Scorer]  # build(encoder_ref, options, device, batch_size) -> Scorer
    encoder_kinds: tuple[str, ...] = ("encoder",)
    check_values: Callable[[dict[str, Any]], None] | None = None  # raises UserError on bad values
    model_options: dict[str, str] = field(default_factory=dict)  # option naming a further model -> its kind
    # How the metric uses several references per item (its paper / reference code): "max" or "mean"
    # over references, "native" (the scorer reads `Item.references` itself), or None (it cannot:
    # the user sets the option `reference_policy: first|max|mean`).
    multi_reference: str | None = None

    @property
    def options(self) -> dict[str, tuple[type, Any]]:
        """option -> (type, default), from `options_class`."""
        return option_table(self.options_class)

    def check_options(self, options: dict[str, Any], where: str = "options") -> None:
        """Unknown names and wrong types, then the metric's value constraints: a one-line UserError naming the option."""
        table = self.options
        for key, value in options.items():
            if key not in table:
                raise UserError(f"{where}: metric {self.name} has no option {key!r} (valid: {', '.join(table)})")
            typ = table[key][0]
            if value is not None and (not isinstance(value, typ) or (typ is int and isinstance(value, bool))):
                raise UserError(f"{where}.{key} must be {typ.__name__}, got {value!r}")
        if self.check_values is not None:
            try:
                self.check_values(options)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None

    def make(self, encoder_ref: Any, options: dict[str, Any], device: str, batch_size: int, **extra: Any) -> Scorer:
        """Check the options (as the spec does), then build the scorer."""
        self.check_options(options)
        return self.build(encoder_ref, options, device, batch_size, **extra)
