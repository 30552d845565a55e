"""The measurement protocol of DESIGN.md and its trackers: wall-clock latency (device
synchronised), CUDA-event time, memory (RSS baseline and peak, CUDA peaks), and the environment
record (machine, GPU, driver and clocks, versions, host and Slurm job).

`measure_scoring` is the protocol proper: an untimed warm-up (`warm_up`: on CUDA passes over the
whole data until two consecutive passes agree within WARMUP_TOLERANCE, so every batch shape has
been seen and kernel selection is over; on CPU passes over a prefix), then R timed repeats over
the whole dataset whose scores must agree.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Sequence

import psutil

from nlgbench.foundations.package import REPOSITORY_DIR
from nlgbench.metrics.base import PhaseTimer, Scorer, Scores


# A CPU warm-up pass scores two full batches, but at least this many items (fewer only when the
# dataset is smaller), so lazy initialisation and allocator growth happen before the timed repeats.
WARMUP_MIN_ITEMS = 16
# On CUDA the warm-up goes on until two consecutive passes differ by less than this fraction of
# the earlier one, at most WARMUP_MAX_PASSES passes (or the spec's `warmup`, if more).
WARMUP_TOLERANCE = 0.02
WARMUP_MAX_PASSES = 5
# Repeats "agree" when no score differs from the first repeat's by more than this.
AGREEMENT_TOLERANCE = 1e-6
# Phases whose name ends so ran in a background thread, hidden behind other phases: recorded, but
# not part of the sum that adds up to a repeat's wall time (`nlgbench.metrics.embedding.OVERLAPPED`).
OVERLAPPED = "_overlapped"
# The part of a repeat's wall time outside every timed phase (Python between the phases).
OTHER_PHASE = "other"


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


class CudaEventTracker:
    """Seconds of a `with` block by CUDA events on the current stream (`torch.cuda.Event`,
    recorded at entry and exit; the exit waits for the end event). GPU-side time, recorded beside
    the wall clock; None on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.seconds: float | None = None
        self._start: Any = None

    def __enter__(self) -> CudaEventTracker:
        if self.device.startswith("cuda"):
            import torch

            with torch.cuda.device(torch.device(self.device)):
                self._start = torch.cuda.Event(enable_timing=True)
                self._start.record()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._start is None or kind is not None:
            return
        import torch

        with torch.cuda.device(torch.device(self.device)):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
        self.seconds = self._start.elapsed_time(end) / 1000  # elapsed_time is in milliseconds


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
    """How many items a CPU warm-up pass scores: enough for a couple of full batches."""
    return min(n_items, max(2 * batch_size, WARMUP_MIN_ITEMS))


@dataclass(frozen=True)
class WarmupPolicy:
    """How the untimed warm-up runs: over the whole data or a prefix (`warmup_items`), and whether
    it goes on past the spec's `warmup` passes until two consecutive passes agree (`warm_up`)."""

    whole_data: bool
    until_stable: bool


def warmup_policy(device: str) -> WarmupPolicy:
    """CUDA: whole-data passes until stable. A GPU selects kernels per input shape, so every
    length-sorted batch shape must have been run once, and the first passes are much slower
    (issue 15: first repeats 4.4x (fp16), 5.4x (bf16) the later ones after a one-batch warm-up).
    CPU: the spec's number of passes over a prefix of two batches. Measured (README, Measurement
    protocol): on CPU a pass costs what a repeat costs, and the first pass over the data is not
    slower than the later ones, so whole-data passes would double a cell's time for nothing."""
    cuda = device.startswith("cuda")
    return WarmupPolicy(whole_data=cuda, until_stable=cuda)


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


def gpu_sm_clock_mhz(device: str) -> int | None:
    """The GPU's current SM clock in MHz (NVML through pynvml where installed); None on CPU or
    where it cannot be read. Sampled after each timed repeat, while the GPU is still at its
    working clock."""
    if not device.startswith("cuda"):
        return None
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml, device)
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # pynvml missing, no NVML library, or no permission: not recorded
        return None


def _nvml_handle(pynvml: Any, device: str) -> Any:
    """The NVML handle of a torch CUDA device, by UUID (CUDA_VISIBLE_DEVICES renumbers devices)."""
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    return pynvml.nvmlDeviceGetHandleByIndex(torch.device(device).index or 0)


@dataclass
class ScoringRun:
    """What the protocol measured: the warm-up passes, each timed repeat's seconds (whole
    dataset: wall clock, process CPU time, and on CUDA the CUDA-event time and SM clock after the
    repeat) and its metric phases (adding up to the wall time with `other`; background phases
    `*_overlapped` beside them), the first repeat's scores, and how far later repeats strayed."""

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

    @property
    def agree(self) -> bool:
        return self.max_abs_diff <= AGREEMENT_TOLERANCE


def with_other(phases: dict[str, float], wall_s: float) -> dict[str, float]:
    """`phases` with OTHER_PHASE: the wall time outside the timed phases (never negative), so that
    the phases that are not `*_overlapped` add up to `wall_s`."""
    counted = sum(v for k, v in phases.items() if not k.endswith(OVERLAPPED))
    return {**phases, OTHER_PHASE: max(0.0, wall_s - counted)}


def measure_scoring(scorer: Scorer, items: Sequence[Any], *, warmup: int, repeats: int, batch_size: int,
                    device: str = "cpu", sync: Callable[[], None] | None = None, policy: WarmupPolicy | None = None,
                    log: Callable[[str], None] = lambda _: None,
                    on_pass: Callable[[str], None] = lambda _: None) -> ScoringRun:
    """The warm-up (`warm_up`, untimed: at least `warmup` passes over the items `policy` picks,
    default `warmup_policy(device)`), then `repeats` (>= 1) timed passes over all items, each
    timed by the wall clock (device synchronised), process CPU time and, on CUDA, CUDA events;
    every repeat's scores are compared with the first's. `on_pass` hears each pass begin ("warm-up",
    "repeat 2/3": the progress bar's name), `log` each pass's line."""
    if repeats < 1:
        raise ValueError("the protocol needs at least one timed repeat")
    sync = sync if sync is not None else synchroniser(device)
    policy = policy if policy is not None else warmup_policy(device)
    timer = PhaseTimer(sync=sync)
    n_warm = len(items) if policy.whole_data else warmup_items(len(items), batch_size)
    warm_items = items[:n_warm]

    def warm_pass() -> float:
        on_pass("warm-up")
        with LatencyTracker(sync) as lap:
            scorer.score(warm_items, timer)
        return lap.seconds

    warm = warm_up(warm_pass, warmup, policy.until_stable)
    stable = is_stable(warm) if policy.until_stable and warm else None
    log(f"warm-up {sum(warm):.1f} s ({len(warm)} x {n_warm} items"
        + ("" if stable is None else ", stable" if stable else f", not stable within {WARMUP_TOLERANCE:.0%}") + ")")

    repeat_s: list[float] = []
    cpu_s: list[float] = []
    cuda_s: list[float] = []
    clocks: list[int | None] = []
    phases: list[dict[str, float]] = []
    first: Scores | None = None
    max_diff = 0.0
    for r in range(repeats):
        timer.reset()
        on_pass(f"repeat {r + 1}/{repeats}")
        cpu_start = time.process_time()
        with LatencyTracker(sync) as lap, CudaEventTracker(device) as events:
            scores = scorer.score(items, timer)
        cpu_s.append(time.process_time() - cpu_start)
        repeat_s.append(lap.seconds)
        if events.seconds is not None:
            cuda_s.append(events.seconds)
            clocks.append(gpu_sm_clock_mhz(device))
        phases.append(with_other(dict(timer.seconds), lap.seconds))
        if first is None:
            first = scores
        else:
            diffs = [abs(a - b) for a, b in zip(first.score, scores.score)]
            max_diff = max([max_diff, *diffs]) if diffs else max_diff
        rate = f", {len(items) / repeat_s[-1]:.0f} items/s" if repeat_s[-1] > 0 else ""
        log(f"repeat {r + 1}/{repeats}: {repeat_s[-1]:.2f} s{rate}")
    assert first is not None
    return ScoringRun(warmup_s=sum(warm), warmup_items=n_warm, repeat_s=repeat_s, phases_s=phases,
                      scores=first, max_abs_diff=max_diff, warmup_passes_s=warm, warmup_stable=stable,
                      repeat_cpu_s=cpu_s, repeat_cuda_s=cuda_s or None, gpu_sm_clock_mhz=clocks or None)


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over mean; None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


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
        head = subprocess.run(["git", "-C", str(REPOSITORY_DIR), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(REPOSITORY_DIR), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_record(device: str) -> dict[str, Any]:
    """The GPU a CUDA device is: name, compute capability, memory, driver, and clocks (current and
    maximum SM and memory clocks, MHz) where NVML (pynvml) or nvidia-smi can read them; empty on CPU
    or without CUDA. Values that cannot be read are None."""
    if not device.startswith("cuda"):
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    out: dict[str, Any] = {
        "gpu_capability": f"{props.major}.{props.minor}",
        "gpu_memory_mb": round(props.total_memory / 2**20),
        "gpu_multiprocessors": props.multi_processor_count,
        "gpu_driver": None, "gpu_sm_clock_mhz": None, "gpu_sm_clock_max_mhz": None,
        "gpu_mem_clock_mhz": None, "gpu_mem_clock_max_mhz": None,
    }
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml, device)
        driver = pynvml.nvmlSystemGetDriverVersion()
        out.update({
            "gpu_driver": driver.decode() if isinstance(driver, bytes) else driver,
            "gpu_sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "gpu_sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "gpu_mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "gpu_mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        })
        return out
    except Exception:  # no pynvml or NVML: ask nvidia-smi
        pass
    uuid = getattr(props, "uuid", None)
    out.update(nvidia_smi_record(f"GPU-{uuid}" if uuid is not None else str(dev.index or 0)))
    return out


NVIDIA_SMI_FIELDS = {  # nvidia-smi --query-gpu field -> environment key
    "driver_version": "gpu_driver", "clocks.sm": "gpu_sm_clock_mhz", "clocks.max.sm": "gpu_sm_clock_max_mhz",
    "clocks.mem": "gpu_mem_clock_mhz", "clocks.max.mem": "gpu_mem_clock_max_mhz",
}


def nvidia_smi_record(gpu_id: str) -> dict[str, Any]:
    """Driver and clocks of one GPU (`nvidia-smi -i ID`); {} when nvidia-smi cannot be run."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "-i", gpu_id, f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """The first line of `nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits`:
    the driver as text, clocks as ints (None where nvidia-smi says `[N/A]` or similar)."""
    lines = text.strip().splitlines()
    if not lines:
        return {}
    values = [v.strip() for v in lines[0].split(",")]
    if len(values) != len(NVIDIA_SMI_FIELDS):
        return {}
    out: dict[str, Any] = {}
    for (field, key), value in zip(NVIDIA_SMI_FIELDS.items(), values):
        if field == "driver_version":
            out[key] = value or None
        else:
            out[key] = int(float(value)) if value.replace(".", "", 1).isdigit() else None
    return out


def job_record(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Where the process runs: the host name (`node`) and, under Slurm, the job id and, for an
    array job, the array's job id and this task's index (None when unset)."""
    env = dict(os.environ) if env is None else env
    return {
        "node": platform.node(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
    }


def environment(device: str) -> dict[str, Any]:
    """Everything about the machine and software that a result depends on."""
    import ot
    import torch
    import transformers

    from nlgbench.foundations.version import __version__

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
        **job_record(),
        **gpu_record(device),
    }
