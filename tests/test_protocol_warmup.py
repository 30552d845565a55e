"""The measurement protocol's warm-up and timing record: warm-up until two passes agree (capped, per
device, over every item), phases that add up to the wall time, the coefficient of variation and
the results.csv columns it fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.result import CellResult, Timing
from nlgbench.encoders.registry import EncoderRef
from nlgbench.execution.measured import timing_of_protocol
from nlgbench.measurement.devices import Device
from nlgbench.measurement.protocol import (
    OTHER_PHASE,
    WARMUP_MAX_PASSES,
    ScoringRun,
    WarmupPolicy,
    coefficient_of_variation,
    is_stable,
    measure_scoring,
    warm_up,
    warmup_policy,
)
from nlgbench.metrics import embedding
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.runs.csvfiles import RESULTS_COLUMNS, csv_row

pytestmark = pytest.mark.component

# ----------------------------------------------------------------------------- warm-up


def scripted(times: Sequence[float]) -> tuple[list[int], Any]:
    """A pass runner returning `times` in turn, and the list that counts its calls."""
    calls: list[int] = []

    def run_pass() -> float:
        calls.append(1)
        return times[len(calls) - 1]

    return calls, run_pass


def test_warm_up_fixed_passes_without_the_stability_rule() -> None:
    calls, run = scripted([5.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 1, until_stable=False) == [5.0] and len(calls) == 1
    calls, run = scripted([5.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 3, until_stable=False) == [5.0, 1.0, 1.0]
    calls, run = scripted([5.0])
    assert warm_up(run, 0, until_stable=True) == [] and calls == []  # warmup: 0 is no warm-up, even on CUDA


def test_warm_up_goes_on_until_two_passes_agree_within_two_percent() -> None:
    # a measured fp16 cell: 5.56 s, then 1.25, 1.21 (3.2% apart: not yet), then 1.22 (0.8%: stable)
    calls, run = scripted([5.56, 1.25, 1.21, 1.22, 1.22])
    assert warm_up(run, 1, until_stable=True) == [5.56, 1.25, 1.21, 1.22]
    # one pass has nothing to agree with: at least two
    _, run = scripted([1.0, 1.0, 1.0])
    assert warm_up(run, 1, until_stable=True) == [1.0, 1.0]
    # more passes asked than needed: all of them
    _, run = scripted([1.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 3, until_stable=True) == [1.0, 1.0, 1.0]


def test_warm_up_is_capped() -> None:
    never = [float(2**k) for k in range(20)]  # doubling: never stable
    _, run = scripted(never)
    assert len(warm_up(run, 1, until_stable=True)) == WARMUP_MAX_PASSES
    _, run = scripted(never)
    assert len(warm_up(run, 7, until_stable=True)) == 7  # the spec's number when larger than the cap


def test_is_stable_is_relative_to_the_earlier_pass() -> None:
    assert is_stable([1.0, 1.019]) and not is_stable([1.0, 1.021]) and not is_stable([1.0, 0.97])
    assert not is_stable([1.0]) and not is_stable([])


def test_warmup_policy_per_device() -> None:
    assert warmup_policy(Device("cpu")) == WarmupPolicy(whole_data=False, until_stable=False)
    assert (
        warmup_policy(Device("cuda"))
        == warmup_policy(Device("cuda:1"))
        == WarmupPolicy(whole_data=True, until_stable=True)
    )


class CountingScorer:
    """Scores each item by its value; records how many items each call scored."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        with timer.phase("encode"):
            self.calls.append(len(items))
        with timer.phase("tokenize" + embedding.OVERLAPPED):  # as if measured in the background
            pass
        return Scores(primary="f1", columns={"f1": [float(i) for i in items]})


def test_whole_data_policy_warms_up_over_every_item_at_least_twice() -> None:
    scorer = CountingScorer()
    run = measure_scoring(
        scorer,
        list(range(50)),
        warmup=1,
        repeats=2,
        batch_size=4,
        policy=WarmupPolicy(whole_data=True, until_stable=True),
    )
    assert run.warmup_items == 50 and run.warmup_passes_s is not None
    assert 2 <= len(run.warmup_passes_s) <= WARMUP_MAX_PASSES and scorer.calls == [50] * (len(run.warmup_passes_s) + 2)
    assert run.warmup_stable is not None and run.warmup_s == pytest.approx(sum(run.warmup_passes_s))


def test_phases_add_up_to_the_wall_time_with_overlap_apart() -> None:
    run = measure_scoring(CountingScorer(), list(range(10)), warmup=0, repeats=3, batch_size=4)
    assert run.warmup_passes_s == [] and run.warmup_s == 0.0
    for phases, wall in zip(run.phases_s, run.repeat_s, strict=True):
        assert set(phases) == {"encode", "tokenize_overlapped", OTHER_PHASE}
        counted = sum(v for k, v in phases.items() if not k.endswith(embedding.OVERLAPPED))
        assert counted == pytest.approx(wall, rel=1e-9)


# ----------------------------------------------------------------------------- timing record


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(2**0.5 / 2)  # stdev sqrt(2), mean 2
    assert coefficient_of_variation([2.0]) is None and coefficient_of_variation([]) is None


def scoring_run(repeat_s: list[float], **extra: Any) -> ScoringRun:
    return ScoringRun(
        warmup_s=3.0,
        warmup_items=10,
        repeat_s=repeat_s,
        phases_s=[{"encode": t / 2, "tokenize_overlapped": 0.1, OTHER_PHASE: t / 2} for t in repeat_s],
        scores=Scores("f1", {"f1": [0.5] * 10}),
        max_abs_diff=0.0,
        warmup_passes_s=[2.0, 1.0],
        **extra,
    )


def test_timing_records_cv_and_the_new_fields_only_where_measured() -> None:
    cpu = timing_of_protocol(0.1, 1.0, 0.2, scoring_run([1.0, 1.1, 0.9], repeat_cpu_s=[2.0, 2.1, 1.9]), 10)
    assert cpu.ms_per_segment == pytest.approx([100.0, 110.0, 90.0])
    assert cpu.ms_per_segment_cv == pytest.approx(0.1)  # stdev 10 ms over mean 100 ms
    assert cpu.phase_ms_per_segment_mean["tokenize_overlapped"] == pytest.approx(10.0)
    shown = cpu.to_dict()
    assert shown["warmup_passes_s"] == [2.0, 1.0] and shown["repeat_cpu_s"] == [2.0, 2.1, 1.9]
    assert "repeat_cuda_s" not in shown and "gpu_sm_clock_mhz" not in shown and "warmup_stable" not in shown
    assert Timing(**shown) == cpu

    cuda = timing_of_protocol(
        0.1, 1.0, 0.2, scoring_run([1.0], repeat_cuda_s=[0.95], gpu_sm_clock_mhz=[1980], warmup_stable=True), 10
    )
    assert cuda.ms_per_segment_cv is None and "ms_per_segment_cv" not in cuda.to_dict()  # one repeat: no CV
    assert cuda.to_dict()["repeat_cuda_s"] == [0.95] and cuda.to_dict()["warmup_stable"] is True


def test_results_csv_has_the_new_columns_before_the_note() -> None:
    columns = RESULTS_COLUMNS
    assert columns[-1] == "correlation_note"
    assert {"ms_per_segment_cv", "warmup_passes", "batch_tokens"} <= set(columns)
    config = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef("m"),
        aligner=None,
        dataset=DatasetRef(name="wmt16"),
        device="cpu",
        batch_size=4,
        repeats=3,
        warmup=1,
        threads=None,
        batch_tokens=512,
    )
    failed = CellResult.not_finished("abc", "label", config, "boom", oom=False)
    assert csv_row(failed)["batch_tokens"] == 512
    assert CellResult.from_json(failed.to_json()).config.batch_tokens == 512
