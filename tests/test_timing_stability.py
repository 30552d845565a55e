"""Timings you can compare: a timed repeat runs passes until it lasted the stated minimum (pass
times injected through a clock the scorer advances, never the wall clock), and a cell whose
repeats vary by more than 5% (CV) is flagged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nlgbench.core.result import Timing
from nlgbench.execution.measured import timing_of_protocol
from nlgbench.measurement import protocol, trackers
from nlgbench.measurement.devices import Device
from nlgbench.measurement.protocol import (
    CV_LIMIT,
    MIN_REPEAT_S,
    ScoringRun,
    measure_scoring,
    passes_needed,
    repeat_minimum,
    too_variable,
)
from nlgbench.metrics.base import PhaseTimer, Scores

pytestmark = pytest.mark.unit


class ClockScorer:
    """A scorer whose passes take the given seconds on a clock it advances (the protocol's clock)."""

    def __init__(self, seconds: Sequence[float]) -> None:
        self.now = 0.0
        self.seconds = list(seconds)
        self.passes = 0

    def clock(self) -> float:
        return self.now

    def prepare(self, items: Sequence[Any]) -> None:
        pass

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        with timer.phase("encode"):
            self.now += self.seconds[self.passes % len(self.seconds)]
        self.passes += 1
        return Scores("f1", {"f1": [0.5] * len(items)})


def test_passes_needed_until_the_minimum_and_at_least_one() -> None:
    assert passes_needed([], 0.0) and passes_needed([], 2.0)  # a repeat runs one pass at least
    assert not passes_needed([0.3], 0.0)
    assert passes_needed([0.7, 0.7], 2.0) and not passes_needed([0.7, 0.7, 0.7], 2.0)  # 1.4 < 2 <= 2.1


def test_repeat_minimum_per_device() -> None:
    assert repeat_minimum(Device("cuda")) == repeat_minimum(Device("cuda:1")) == MIN_REPEAT_S == 2.0
    assert repeat_minimum(Device("cpu")) == 0.0


def test_a_repeat_runs_passes_until_it_lasted_the_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = ClockScorer([0.7])
    monkeypatch.setattr(trackers.time, "perf_counter", scorer.clock)
    run = measure_scoring(scorer, list(range(8)), warmup=0, repeats=2, batch_size=4, min_repeat_s=2.0)
    # 0.7 s passes: 1.4 s < 2 s after two, 2.1 s after three -> 3 passes per repeat, 6 in all
    assert run.repeat_passes == [3, 3] and scorer.passes == 6
    assert run.repeat_s == pytest.approx([0.7, 0.7])  # seconds of one pass: 2.1 s / 3
    assert run.phases_s[0]["encode"] == pytest.approx(0.7) and run.phases_s[0]["other"] == pytest.approx(0.0)


def test_without_a_minimum_a_repeat_is_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = ClockScorer([0.7, 0.9])
    monkeypatch.setattr(trackers.time, "perf_counter", scorer.clock)
    run = measure_scoring(scorer, list(range(8)), warmup=0, repeats=2, batch_size=4)  # CPU: no minimum
    assert run.repeat_passes is None and scorer.passes == 2 and run.repeat_s == pytest.approx([0.7, 0.9])


def test_the_minimum_averages_uneven_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    # passes alternate 0.5 and 1.5 s: one pass per repeat gives CV 0.71; 2 s repeats average pairs
    scorer = ClockScorer([0.5, 1.5])
    monkeypatch.setattr(trackers.time, "perf_counter", scorer.clock)
    run = measure_scoring(scorer, list(range(8)), warmup=0, repeats=3, batch_size=4, min_repeat_s=2.0)
    assert run.repeat_passes == [2, 2, 2] and run.repeat_s == pytest.approx([1.0, 1.0, 1.0])
    assert protocol.coefficient_of_variation(run.repeat_s) == pytest.approx(0.0, abs=1e-12)


def timing(repeat_s: list[float]) -> Timing:
    run = ScoringRun(
        warmup_s=0.0,
        warmup_items=0,
        repeat_s=repeat_s,
        phases_s=[{"encode": t} for t in repeat_s],
        scores=Scores("f1", {"f1": [0.5] * 10}),
        max_abs_diff=0.0,
    )
    return timing_of_protocol(0.0, 0.0, 0.0, run, 10)


def test_a_cell_over_five_percent_cv_is_flagged() -> None:
    assert CV_LIMIT == 0.05
    # [1.0, 1.2, 1.0]: mean 1.0667, sample stdev 0.11547 -> CV 0.108 > 0.05
    noisy = timing([1.0, 1.2, 1.0])
    assert noisy.ms_per_segment_cv == pytest.approx(0.10825, rel=1e-4) and noisy.unstable
    # [1.0, 1.02, 1.0]: stdev 0.011547 over mean 1.00667 -> CV 0.0115 <= 0.05
    quiet = timing([1.0, 1.02, 1.0])
    assert quiet.ms_per_segment_cv == pytest.approx(0.011471, rel=1e-3) and not quiet.unstable
    assert not timing([1.0]).unstable  # one repeat: no CV, nothing to flag
    assert too_variable(0.0501) and not too_variable(0.05) and not too_variable(None)
