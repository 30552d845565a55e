"""Measurement helpers: device synchronisation, memory trackers, environment record."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
from pathlib import Path
from typing import Any, Callable

import psutil

REPO = Path(__file__).resolve().parents[1]


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

    from nlgbench import __version__

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
