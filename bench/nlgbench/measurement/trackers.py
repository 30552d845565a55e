"""The measurement trackers, as context managers: wall-clock latency (device synchronised), CUDA-event
time, and memory (RSS baseline and peak, the sampled peak of the unique set, CUDA peaks: the cell's
`Device` reads them); and the cgroup's OOM-kill count."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from nlgbench.measurement import allocator
from nlgbench.measurement.devices import Device


def rss_mb() -> float:
    """Current resident set size of this process in MiB."""
    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (kernel high-water mark), in MiB."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return peak_kb / 1024


def uss_mb(process: psutil.Process | None = None) -> float | None:
    """Unique set size of `process` (default: this one) in MiB: its resident pages no other process
    maps (private clean + private dirty, /proc/PID/smaps_rollup); None where the system does not say."""
    try:
        return float((process or psutil.Process()).memory_full_info().uss) / 2**20
    except (psutil.Error, OSError, AttributeError):
        return None


USS_INTERVAL_S = 0.2  # between USS samples: a sample reads smaps_rollup (about 5 ms at 600 MiB, 2 vCPU)


class UssSampler:
    """The peak of this process's USS over a `with` block, sampled every `interval` seconds in a
    background thread (and at entry and exit). The kernel keeps a high-water mark of RSS only, so a peak
    shorter than the interval may be missed; `peak_mb` is None where USS cannot be read."""

    def __init__(self, interval: float = USS_INTERVAL_S) -> None:
        self.interval = interval
        self.peak_mb: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()

    def sample(self) -> None:
        """Read USS once and keep the peak."""
        now = uss_mb(self._process)
        if now is not None and (self.peak_mb is None or now > self.peak_mb):
            self.peak_mb = now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> UssSampler:
        self.sample()
        if self.peak_mb is not None:  # nothing to sample where USS is unreadable
            self._thread = threading.Thread(target=self._run, name="uss-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()


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


class CudaEventTracker:
    """Seconds of a `with` block by CUDA events on the current stream (`torch.cuda.Event`,
    recorded at entry and exit; the exit waits for the end event). GPU-side time, recorded beside
    the wall clock; None on CPU."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.seconds: float | None = None
        self._start: Any = None

    def __enter__(self) -> CudaEventTracker:
        if self.device.is_cuda:
            import torch

            with torch.cuda.device(self.device.torch_device()):
                self._start = torch.cuda.Event(enable_timing=True)
                self._start.record()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._start is None or kind is not None:
            return
        import torch

        with torch.cuda.device(self.device.torch_device()):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
        self.seconds = self._start.elapsed_time(end) / 1000  # elapsed_time is in milliseconds


class MemoryTracker:
    """Memory of this process from entry to `close()` (or the end of the `with` block), in MiB: RSS at
    entry (the baseline, taken after imports and before loading anything), the kernel's RSS high-water
    mark at close, the peak USS (`UssSampler`: pages no other process maps, so not those a fork server
    shares with its child), and on CUDA `max_memory_allocated` / `max_memory_reserved` since the reset
    at entry (None on CPU). The allocator's measuring policy (`allocator.hold_for_measuring`) holds
    from entry to close, the timing policy after it. Peaks are read only when the window completes."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.baseline_rss_mb = 0.0
        self.peak_rss_mb = 0.0
        self.peak_uss_mb: float | None = None
        self.cuda_peak_allocated_mb: float | None = None
        self.cuda_peak_reserved_mb: float | None = None
        self.allocator_policy: str | None = None
        self._uss = UssSampler()
        self._closed = False

    def __enter__(self) -> MemoryTracker:
        self.allocator_policy = allocator.hold_for_measuring()
        self.baseline_rss_mb = rss_mb()
        self.device.reset_peaks()
        self._uss.__enter__()
        return self

    def close(self) -> None:
        """End the window: read the peaks, then let the allocator reuse large blocks for timing."""
        if self._closed:
            return
        self._closed = True
        self._uss.__exit__(None, None, None)
        self.cuda_peak_allocated_mb, self.cuda_peak_reserved_mb = self.device.peaks_mb()
        self.peak_rss_mb = peak_rss_mb()
        self.peak_uss_mb = self._uss.peak_mb
        allocator.hold_for_timing()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None:  # the block failed: nothing to report, and the device may be unusable
            self._uss.__exit__(kind, exc, tb)  # the sampler stops either way
            self._closed = True
            return
        self.close()


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
    candidates = [
        Path("/sys/fs/cgroup", v2, "memory.events"),
        Path("/sys/fs/cgroup/memory.events"),
        Path("/sys/fs/cgroup/memory", v1, "memory.oom_control"),
        Path("/sys/fs/cgroup/memory/memory.oom_control"),
    ]
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
