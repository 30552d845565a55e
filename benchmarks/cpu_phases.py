"""Phase timing for the benchmarks: process CPU seconds beside wall seconds, and the time outside the encoder.

CPU time (`time.process_time`: every thread of this process) is what a scorer's work costs
whatever else runs on the machine, so before/after comparisons on a shared machine use it; wall
time is what a user waits. On the CPU the encoder's inputs are prepared inline, inside the
`encode` phase, so CPU `encode` includes tokenisation (the wall split takes it out).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from nlgbench.metrics.base import PhaseTimer

ENCODER_PHASES = ("encode",)  # the model's own time; everything else is the metric's (or the harness's)


@dataclass
class CpuPhaseTimer(PhaseTimer):
    """A `PhaseTimer` that also adds up the process CPU seconds of each phase (`cpu_seconds`)."""

    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.process_time()
        try:
            with super().phase(name):
                yield
        finally:
            self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.process_time() - start


def with_rest(phases: dict[str, float], total: float) -> dict[str, float]:
    """`phases` (overlapped ones left out) with `other`: `total` minus their sum (never negative)."""
    counted = {k: v for k, v in phases.items() if not k.endswith("_overlapped")}
    return {**counted, "other": max(0.0, total - sum(counted.values()))}


def median_phases(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Per phase, the median over rounds (a phase missing in a round counts 0)."""
    names = list(dict.fromkeys(k for r in rounds for k in r))
    return {k: statistics.median(r.get(k, 0.0) for r in rounds) for k in names}


def outside_encoder(rounds: list[dict[str, float]]) -> tuple[float, float]:
    """(median seconds outside the encoder, median share of the round's total) over rounds of phases
    that add up to the round's total (`with_rest`)."""
    outside = [sum(v for k, v in r.items() if k not in ENCODER_PHASES) for r in rounds]
    shares = [o / sum(r.values()) for o, r in zip(outside, rounds, strict=True) if sum(r.values()) > 0]
    return statistics.median(outside), statistics.median(shares) if shares else 0.0


def phase_line(title: str, rounds: list[dict[str, float]], n: int) -> str:
    """'title: phase x.xx, ... ms/segment; outside the encoder y.yy ms/segment (z% of the total)'."""
    ph = median_phases(rounds)
    outside, share = outside_encoder(rounds)
    return (
        f"{title}: "
        + ", ".join(f"{k} {v / n * 1000:.2f}" for k, v in ph.items())
        + f" ms/segment; outside the encoder {outside / n * 1000:.2f} ms/segment ({100 * share:.1f}% of the total)"
    )
