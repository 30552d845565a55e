"""The measurement protocol of DESIGN.md and its trackers: wall-clock latency (device
synchronised), memory (RSS baseline and peak, CUDA peaks), and the environment record.

`measure_scoring` is the protocol proper: an untimed warm-up on the first few batches, then R
timed repeats over the whole dataset whose scores must agree.
"""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Sequence

import psutil

from nlgbench.metrics.base import PhaseTimer, Scorer, Scores

REPO = Path(__file__).resolve().parents[1]

# The warm-up pass scores two full batches, but at least this many items (fewer only when the
# dataset is smaller), so lazy initialisation and allocator growth happen before the timed repeats.
WARMUP_MIN_ITEMS = 16
# Repeats "agree" when no score differs from the first repeat's by more than this.
AGREEMENT_TOLERANCE = 1e-6


def rss_mb() -> float:
    """Current resident set size of this process in MiB."""
    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (kernel high-water mark), in MiB."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return peak_kb / 1024


def synchroniser(device: str) -> Callable[[], None]:
    """A function that waits for queued work on `device` (CUDA kernels are asynchronous)."""
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def cuda_reset(device: str) -> None:
    """Reset CUDA peak-memory counters before the measured work."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats(torch.device(device))


def cuda_peaks_mb(device: str) -> tuple[float | None, float | None]:
    """(max_memory_allocated, max_memory_reserved) in MiB since the last reset; None on CPU."""
    if not device.startswith("cuda"):
        return None, None
    import torch

    dev = torch.device(device)
    return torch.cuda.max_memory_allocated(dev) / 2**20, torch.cuda.max_memory_reserved(dev) / 2**20


class LatencyTracker:
    """Wall-clock seconds of a `with` block. It waits for the device at the end, so work the
    block queued (CUDA kernels are asynchronous) is counted; phases run back to back, each
    ending so, and the next one starts on an idle device."""

    def __init__(self, sync: Callable[[], None] = lambda: None) -> None:
        self.sync = sync
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> LatencyTracker:
        self._start = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.sync()
        self.seconds = time.perf_counter() - self._start


class MemoryTracker:
    """Memory of this process over a `with` block, in MiB: RSS at entry (the baseline, taken after
    imports and before loading anything), the kernel's RSS high-water mark at exit, and on CUDA
    `max_memory_allocated` / `max_memory_reserved` since the reset at entry (None on CPU).
    Peaks are read only when the block completes."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.baseline_rss_mb = 0.0
        self.peak_rss_mb = 0.0
        self.cuda_peak_allocated_mb: float | None = None
        self.cuda_peak_reserved_mb: float | None = None

    def __enter__(self) -> MemoryTracker:
        self.baseline_rss_mb = rss_mb()
        cuda_reset(self.device)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None:
            return  # the block failed: nothing to report, and the device may be unusable
        self.cuda_peak_allocated_mb, self.cuda_peak_reserved_mb = cuda_peaks_mb(self.device)
        self.peak_rss_mb = peak_rss_mb()


def warmup_items(n_items: int, batch_size: int) -> int:
    """How many items the warm-up pass scores: enough for a couple of full batches."""
    return min(n_items, max(2 * batch_size, WARMUP_MIN_ITEMS))


@dataclass
class ScoringRun:
    """What the protocol measured: the warm-up, each timed repeat's seconds (whole dataset) and
    its metric phases, the first repeat's scores, and how far later repeats strayed from them."""

    warmup_s: float
    warmup_items: int
    repeat_s: list[float]
    phases_s: list[dict[str, float]]
    scores: Scores
    max_abs_diff: float

    @property
    def agree(self) -> bool:
        return self.max_abs_diff <= AGREEMENT_TOLERANCE


def measure_scoring(scorer: Scorer, items: Sequence[Any], *, warmup: int, repeats: int, batch_size: int,
                    sync: Callable[[], None], log: Callable[[str], None] = lambda _: None) -> ScoringRun:
    """`warmup` untimed passes over the first `warmup_items` items, then `repeats` (>= 1) timed
    passes over all items; every repeat's scores are compared with the first's."""
    timer = PhaseTimer(sync=sync)
    n_warm = warmup_items(len(items), batch_size)
    with LatencyTracker(sync) as warm:
        for _ in range(warmup):
            scorer.score(items[:n_warm], timer)
    log(f"warm-up {warm.seconds:.1f} s ({warmup} x {n_warm} items)")

    repeat_s: list[float] = []
    phases: list[dict[str, float]] = []
    first: Scores | None = None
    max_diff = 0.0
    for r in range(repeats):
        timer.reset()
        with LatencyTracker(sync) as lap:
            scores = scorer.score(items, timer)
        repeat_s.append(lap.seconds)
        phases.append(dict(timer.seconds))
        if first is None:
            first = scores
        else:
            diffs = [abs(a - b) for a, b in zip(first.score, scores.score)]
            max_diff = max([max_diff, *diffs]) if diffs else max_diff
        log(f"repeat {r + 1}/{repeats}: {repeat_s[-1]:.2f} s")
    if first is None:
        raise ValueError("the protocol needs at least one timed repeat")
    return ScoringRun(warmup_s=warm.seconds, warmup_items=n_warm, repeat_s=repeat_s, phases_s=phases,
                      scores=first, max_abs_diff=max_diff)


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed in this process's memory cgroup
    (`oom_kill` of cgroup v2 memory.events or v1 memory.oom_control); None where unreadable.
    A worker killed by SIGKILL while this count rose was killed for memory."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    own = {kind: path for _, kind, path in (line.split(":", 2) for line in lines if line.count(":") >= 2)}
    v2, v1 = own.get("", "/").lstrip("/"), own.get("memory", "/").lstrip("/")
    candidates = [Path("/sys/fs/cgroup", v2, "memory.events"), Path("/sys/fs/cgroup/memory.events"),
                  Path("/sys/fs/cgroup/memory", v1, "memory.oom_control"), Path("/sys/fs/cgroup/memory/memory.oom_control")]
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The project's git commit (with `-dirty` when the work tree has changes), if in a checkout."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict[str, Any]:
    """Everything about the machine and software that a result depends on."""
    import ot
    import torch
    import transformers

    from nlgbench.version import __version__

    gpu = None
    if device.startswith("cuda") and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(torch.device(device))
    return {
        "cpu_model": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "torch_threads": torch.get_num_threads(),
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "gpu": gpu,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "pot": ot.__version__,
        "nlgbench": __version__,
        "git_commit": git_commit(),
    }
