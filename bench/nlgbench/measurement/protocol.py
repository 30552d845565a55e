"""The measurement protocol of docs/concepts/measurement.md, every phase of one cell in its order
(`measure_cell`): data, model load, prepare, the memory pass, then (`measure_scoring`) an untimed
warm-up (`warm_up`: on CUDA passes over the whole data until two consecutive passes agree within
WARMUP_TOLERANCE, so every batch shape has been seen and kernel selection is over; on CPU passes over
a prefix) and R timed repeats over the whole dataset whose scores must agree (each repeat, where a
minimum time is asked, as many passes as last that long). A cell whose repeats vary by more than
CV_LIMIT is flagged (`too_variable`). What it asks of the device (synchronising, CUDA peaks, energy,
SM clock) it asks the cell's `nlgbench.measurement.devices.Device`; its trackers are
`nlgbench.measurement.trackers`. The worker hands it callables and gets one `CellMeasurement` back.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nlgbench.measurement.devices import Device
from nlgbench.measurement.energy import Counter, EnergyTracker
from nlgbench.measurement.trackers import CudaEventTracker, LatencyTracker, MemoryTracker
from nlgbench.metrics.base import PhaseTimer, Scorer, Scores

if TYPE_CHECKING:
    from nlgbench.data.items import Dataset

# A CPU warm-up pass scores two full batches, but at least this many items (fewer only when the
# dataset is smaller), so lazy initialisation and allocator growth happen before the timed repeats.
WARMUP_MIN_ITEMS = 16
# On CUDA the warm-up goes on until two consecutive passes differ by less than this fraction of
# the earlier one, at most WARMUP_MAX_PASSES passes (or the spec's `warmup`, if more).
WARMUP_TOLERANCE = 0.02
WARMUP_MAX_PASSES = 5
# On CUDA a timed repeat lasts at least this long: passes over the data are repeated within it
# (`repeat_minimum`); a one-second pass on a shared machine varies by several percent.
MIN_REPEAT_S = 2.0
# A cell whose repeats' coefficient of variation (ms per segment) exceeds this is flagged unstable:
# its timings should not be compared before a rerun on a quieter machine.
CV_LIMIT = 0.05
# Repeats "agree" when no score differs from the first repeat's by more than this.
AGREEMENT_TOLERANCE = 1e-6
# Phases whose name ends so ran in a background thread, hidden behind other phases: recorded, but
# not part of the sum that adds up to a repeat's wall time (`nlgbench.metrics.embedding.OVERLAPPED`).
OVERLAPPED = "_overlapped"
# The part of a repeat's wall time outside every timed phase (Python between the phases).
OTHER_PHASE = "other"


def warmup_items(n_items: int, batch_size: int) -> int:
    """How many items a CPU warm-up pass scores: enough for a couple of full batches."""
    return min(n_items, max(2 * batch_size, WARMUP_MIN_ITEMS))


@dataclass(frozen=True)
class WarmupPolicy:
    """How the untimed warm-up runs: over the whole data or a prefix (`warmup_items`), and whether
    it goes on past the spec's `warmup` passes until two consecutive passes agree (`warm_up`)."""

    whole_data: bool
    until_stable: bool


def warmup_policy(device: Device) -> WarmupPolicy:
    """CUDA: whole-data passes until stable. A GPU selects kernels per input shape, so every
    length-sorted batch shape must have been run once, and the first passes are several times
    slower (docs/results/gpu.md). CPU: the spec's number of passes over a prefix of two batches.
    Measured (docs/concepts/measurement.md, Warm-up): on CPU a pass costs what a repeat costs, and
    the first pass over the data is not slower than the later ones, so whole-data passes would
    double a cell's time for nothing."""
    return WarmupPolicy(whole_data=device.is_cuda, until_stable=device.is_cuda)


def repeat_minimum(device: Device) -> float:
    """The least seconds a timed repeat lasts on `device`: MIN_REPEAT_S on CUDA, where a pass over
    the data takes about a second; none on CPU (each repeat one pass), where a pass over data worth
    timing lasts seconds already and tiny test cells stay fast (docs/concepts/measurement.md)."""
    return MIN_REPEAT_S if device.is_cuda else 0.0


def is_stable(seconds: Sequence[float], tolerance: float = WARMUP_TOLERANCE) -> bool:
    """Whether the last two passes differ by less than `tolerance` of the earlier one."""
    return len(seconds) >= 2 and abs(seconds[-1] - seconds[-2]) < tolerance * seconds[-2]


def warm_up(run_pass: Callable[[], float], passes: int, until_stable: bool) -> list[float]:
    """Run warm-up passes (`run_pass` returns one pass's seconds); their seconds, in order.

    `passes` of them (0: none at all); with `until_stable`, more until two consecutive passes agree
    (`is_stable`), at most max(passes, WARMUP_MAX_PASSES): so at least two, since one pass has
    nothing to agree with."""
    if passes <= 0:
        return []
    cap = max(passes, WARMUP_MAX_PASSES) if until_stable else passes
    seconds: list[float] = []
    while len(seconds) < cap:
        seconds.append(run_pass())
        if len(seconds) >= passes and (not until_stable or is_stable(seconds)):
            break
    return seconds


@dataclass
class ScoringRun:
    """What the protocol measured: the warm-up passes, each timed repeat's seconds (whole
    dataset: wall clock, process CPU time, and on CUDA the CUDA-event time and SM clock after the
    repeat) and its metric phases (adding up to the wall time with `other`; background phases
    `*_overlapped` beside them), the first repeat's scores, and how far later repeats strayed.
    Energy (`nlgbench.measurement.energy`): joules per repeat where a hardware counter exists
    (None where not), the counter's name (rapl, nvml, none) and what it read or why there is none."""

    warmup_s: float
    warmup_items: int
    repeat_s: list[float]
    phases_s: list[dict[str, float]]
    scores: Scores
    max_abs_diff: float
    warmup_passes_s: list[float] | None = None
    warmup_stable: bool | None = None
    repeat_cpu_s: list[float] | None = None
    repeat_cuda_s: list[float] | None = None
    gpu_sm_clock_mhz: list[int | None] | None = None
    energy_j: list[float] | None = None
    energy_counter: str | None = None
    energy_note: str | None = None
    repeat_passes: list[int] | None = None  # passes per repeat, where a minimum repeat time was asked

    @property
    def agree(self) -> bool:
        return self.max_abs_diff <= AGREEMENT_TOLERANCE


def with_other(phases: dict[str, float], wall_s: float) -> dict[str, float]:
    """`phases` with OTHER_PHASE: the wall time outside the timed phases (never negative), so that
    the phases that are not `*_overlapped` add up to `wall_s`."""
    counted = sum(v for k, v in phases.items() if not k.endswith(OVERLAPPED))
    return {**phases, OTHER_PHASE: max(0.0, wall_s - counted)}


@dataclass
class CellMeasurement:
    """One cell measured by `measure_cell`, every phase: the dataset and its load's seconds, what the
    untimed data check said, the scorer and its load's seconds (a backend's export apart, `export_s`),
    `prepare`'s, the memory window (its tracker, the memory pass's seconds), and the warm-up and
    timed repeats (`run`)."""

    dataset: Dataset
    data_s: float
    checked: str
    scorer: Scorer
    load_s: float
    export_s: float | None
    prepare_s: float
    memory: MemoryTracker
    memory_pass_s: float
    run: ScoringRun


def measure_cell(
    device: Device,
    load_data: Callable[[], Dataset],
    check_data: Callable[[Dataset], str],
    load_scorer: Callable[[], tuple[Scorer, float | None]],
    *,
    warmup: int,
    repeats: int,
    batch_size: int,
    log: Callable[[str], None] = lambda _: None,
    on_stage: Callable[[str], None] = lambda _: None,
) -> CellMeasurement:
    """Every phase of one cell on `device`, in docs/concepts/measurement.md's order: the data
    (`load_data`, timed), its check (`check_data`, untimed: the worker's leakage guard, which raises
    on a leak, else says what it checked), the model load (`load_scorer`: the scorer, and the seconds
    of its load that were a backend's export, left out of `load_s`), `prepare` (corpus state), the
    memory pass (one untimed pass over all items), then the warm-up and the timed repeats
    (`measure_scoring`). The memory window (`MemoryTracker`) runs from before the data to the end of
    the memory pass. Each phase's clock waits for the device at its end. `on_stage` hears each stage
    begin (the progress bar's name), `log` each phase's line."""
    device.require()
    # The baseline is taken here, after the worker's imports; a fork server's child has mapped the
    # server's resident pages by now (`forkserver.populate`), so it reads as a plain worker's.
    with MemoryTracker(device) as memory:
        with LatencyTracker() as data:
            dataset = load_data()
        items = dataset.items
        log(f"data: {len(items)} items from {dataset.name} ({data.seconds:.1f} s)")
        checked = check_data(dataset)

        with LatencyTracker(device.synchronise) as load:
            scorer, export_s = load_scorer()
        load_s = load.seconds - (export_s or 0.0)
        log(f"load: {load_s:.1f} s" + (f" (+ export {export_s:.1f} s)" if export_s else ""))

        on_stage("prepare")
        with LatencyTracker(device.synchronise) as prepare:
            scorer.prepare(items)
        log(f"prepare {prepare.seconds:.1f} s")

        # The memory window ends after one untimed pass over all items, under the allocator's measuring
        # policy (nlgbench.measurement.allocator); the timed passes run after it, outside.
        on_stage("memory pass")
        with LatencyTracker(device.synchronise) as memory_pass:
            scorer.score(items, PhaseTimer(sync=device.synchronise))
        memory.close()
        log(f"memory pass {memory_pass.seconds:.1f} s: peak RSS {memory.peak_rss_mb:.0f} MiB")

        run = measure_scoring(
            scorer,
            items,
            warmup=warmup,
            repeats=repeats,
            batch_size=batch_size,
            device=device,
            log=log,
            on_pass=on_stage,
        )
    return CellMeasurement(
        dataset, data.seconds, checked, scorer, load_s, export_s, prepare.seconds, memory, memory_pass.seconds, run
    )


def measure_scoring(
    scorer: Scorer,
    items: Sequence[Any],
    *,
    warmup: int,
    repeats: int,
    batch_size: int,
    device: Device | None = None,
    policy: WarmupPolicy | None = None,
    log: Callable[[str], None] = lambda _: None,
    on_pass: Callable[[str], None] = lambda _: None,
    energy: Counter | None = None,
    min_repeat_s: float | None = None,
) -> ScoringRun:
    """The warm-up (`warm_up`, untimed: at least `warmup` passes over the items `policy` picks,
    default `warmup_policy(device)`), then `repeats` (>= 1) timed passes over all items, each
    timed by the wall clock (device synchronised), process CPU time and, on CUDA, CUDA events, and
    its energy read around it from `energy` (default the device's counter, `Device.energy_counter`);
    `device` defaults to the CPU;
    every repeat's scores are compared with the first's. `on_pass` hears each pass begin ("warm-up",
    "repeat 2/3": the progress bar's name), `log` each pass's line.

    `min_repeat_s` (default `repeat_minimum(device)`) > 0: a repeat runs passes over all items until
    it has lasted that long (a pass of a second on a noisy machine varies by several percent; two
    seconds' worth average it out), and records the seconds of one pass (`repeat_passes` per repeat)."""
    device = device if device is not None else Device("cpu")
    min_repeat_s = min_repeat_s if min_repeat_s is not None else repeat_minimum(device)
    if repeats < 1:
        raise ValueError("the protocol needs at least one timed repeat")
    policy = policy if policy is not None else warmup_policy(device)
    timer = PhaseTimer(sync=device.synchronise)
    n_warm = len(items) if policy.whole_data else warmup_items(len(items), batch_size)
    counter = energy if energy is not None else device.energy_counter()
    log(f"energy: {counter.name}, {counter.note}")
    warm, stable = _warm_up_phase(scorer, items[:n_warm], timer, device, warmup, policy, log, on_pass)
    timed = _TimedRepeats()
    for r in range(repeats):
        on_pass(f"repeat {r + 1}/{repeats}")
        timed.run(scorer, items, timer, device, counter, min_repeat_s)
        rate = f", {len(items) / timed.repeat_s[-1]:.0f} items/s" if timed.repeat_s[-1] > 0 else ""
        joules = f", {timed.energy_j[-1]:.1f} J" if timed.energy_j else ""
        log(f"repeat {r + 1}/{repeats}: {timed.repeat_s[-1]:.2f} s{rate}{joules}")
    assert timed.first is not None
    return ScoringRun(
        warmup_s=sum(warm),
        warmup_items=n_warm,
        repeat_s=timed.repeat_s,
        phases_s=timed.phases,
        scores=timed.first,
        max_abs_diff=timed.max_diff,
        warmup_passes_s=warm,
        warmup_stable=stable,
        repeat_cpu_s=timed.cpu_s,
        repeat_cuda_s=timed.cuda_s or None,
        gpu_sm_clock_mhz=timed.clocks or None,
        energy_j=timed.energy_j or None,
        energy_counter=counter.name,
        energy_note=counter.note,
        repeat_passes=timed.passes if min_repeat_s > 0 else None,
    )


def passes_needed(pass_seconds: Sequence[float], min_repeat_s: float) -> bool:
    """Whether a repeat whose passes took `pass_seconds` so far needs another pass to last
    `min_repeat_s` (at least one pass always)."""
    return not pass_seconds or sum(pass_seconds) < min_repeat_s


def too_variable(cv: float | None) -> bool:
    """Whether a cell's timings vary too much to compare (coefficient of variation over CV_LIMIT)."""
    return cv is not None and cv > CV_LIMIT


def _warm_up_phase(
    scorer: Scorer,
    warm_items: Sequence[Any],
    timer: PhaseTimer,
    device: Device,
    warmup: int,
    policy: WarmupPolicy,
    log: Callable[[str], None],
    on_pass: Callable[[str], None],
) -> tuple[list[float], bool | None]:
    """The untimed warm-up passes (`warm_up`) and whether they ended stable (None: not asked)."""

    def warm_pass() -> float:
        on_pass("warm-up")
        with LatencyTracker(device.synchronise) as lap:
            scorer.score(warm_items, timer)
        return lap.seconds

    warm = warm_up(warm_pass, warmup, policy.until_stable)
    stable = is_stable(warm) if policy.until_stable and warm else None
    log(
        f"warm-up {sum(warm):.1f} s ({len(warm)} x {len(warm_items)} items"
        + ("" if stable is None else ", stable" if stable else f", not stable within {WARMUP_TOLERANCE:.0%}")
        + ")"
    )
    return warm, stable


@dataclass
class _TimedRepeats:
    """The timed repeats so far: wall, CPU and CUDA seconds, phases, and the first repeat's scores
    with the largest difference any later repeat's scores showed from them."""

    repeat_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    cuda_s: list[float] = field(default_factory=list)
    clocks: list[int | None] = field(default_factory=list)
    energy_j: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    first: Scores | None = None
    max_diff: float = 0.0

    def run(
        self,
        scorer: Scorer,
        items: Sequence[Any],
        timer: PhaseTimer,
        device: Device,
        counter: Counter,
        min_repeat_s: float = 0.0,
    ) -> None:
        """One timed repeat over all items (wall clock with the device synchronised, process CPU time,
        CUDA events on CUDA, energy where `counter` reads one: its readings bracket the wall clock's,
        each after the device is synchronised): passes until it lasted `min_repeat_s` (`passes_needed`),
        recorded per pass; every pass's scores compared with the first repeat's."""
        timer.reset()
        cpu_start = time.process_time()
        laps: list[float] = []
        sync = device.synchronise
        with EnergyTracker(counter, sync) as energy, LatencyTracker(sync) as lap, CudaEventTracker(device) as events:
            while passes_needed(laps, min_repeat_s):
                with LatencyTracker(sync) as one:
                    scores = scorer.score(items, timer)
                laps.append(one.seconds)
                self._compare(scores)
        n = len(laps)
        self.passes.append(n)
        self.cpu_s.append((time.process_time() - cpu_start) / n)
        if energy.joules is not None:
            self.energy_j.append(energy.joules / n)
        self.repeat_s.append(lap.seconds / n)
        if events.seconds is not None:
            self.cuda_s.append(events.seconds / n)
            self.clocks.append(device.sm_clock_mhz())
        phases = {k: v / n for k, v in timer.seconds.items()}
        self.phases.append(with_other(phases, lap.seconds / n))

    def _compare(self, scores: Scores) -> None:
        """Keep the first pass's scores; widen `max_diff` by any later pass's difference from them."""
        if self.first is None:
            self.first = scores
        else:
            diffs = [abs(a - b) for a, b in zip(self.first.score, scores.score, strict=True)]
            self.max_diff = max([self.max_diff, *diffs]) if diffs else self.max_diff


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over mean; None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None
