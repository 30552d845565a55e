"""The device a cell measures on, read once from its name (`Device`): whether it is CUDA, and what the
protocol asks of it: waiting for its queued work, its peak memory, its energy counter, its SM clock.
And the one check that this machine has the device asked for, made before any model loads (by
`score`, the spec and `distill`), with `auto` for the API's default (`auto_device`). Names are read by
`nlgbench.foundations.devicenames`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from nlgbench.foundations.devicenames import parse_device
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.energy import POWERCAP_ROOT, Counter, nvml_counter, nvml_handle, rapl_counter


def auto_device(device: str) -> str:
    """`auto`: CUDA where torch sees a GPU, else the CPU; any other value checked as given (`check_device`)."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    check_device(device)
    return device


def check_device(device: str) -> None:
    """`device` is cpu, or a CUDA device this machine has: one clear line before any model is loaded
    (torch's own error on a CPU build is an AssertionError deep inside the first model move)."""
    parsed = parse_device(device)
    if not parsed.is_cuda:
        return
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            f"device {device!r}: CUDA is not available on this machine (torch {torch.__version__}); use cpu"
        )
    count = torch.cuda.device_count()
    if parsed.index >= count:
        raise UserError(
            f"device {device!r}: this machine has {count} CUDA device{'s' if count != 1 else ''} "
            f"(cuda:0 to cuda:{count - 1})"
        )


class Device:
    """One cell's device (cpu, cuda, cuda:N), its name read once: `is_cuda`, `index` (the GPU's), and
    the operations the protocol needs, which do nothing on the CPU: `synchronise` (CUDA kernels are
    asynchronous), `reset_peaks` / `peaks_mb` (CUDA's allocator peaks), `energy_counter` (RAPL on the
    CPU, NVML on CUDA) and `sm_clock_mhz`. torch is imported only on CUDA."""

    def __init__(self, name: str) -> None:
        parsed = parse_device(name)
        self.name = name
        self.is_cuda = parsed.is_cuda
        self.index = parsed.index
        self._torch_device: Any = None

    def __repr__(self) -> str:
        return f"Device({self.name!r})"

    def torch(self) -> Any:
        """torch where this process has imported it (every cell that runs a model has) or the device is
        CUDA; None otherwise: a cell that runs no model on the CPU never imports it."""
        if self.is_cuda:
            import torch

            return torch
        return sys.modules.get("torch")

    def torch_device(self) -> Any:
        """The `torch.device` of a CUDA device (made once)."""
        if self._torch_device is None:
            import torch

            self._torch_device = torch.device(self.name)
        return self._torch_device

    def require(self) -> None:
        """Raise where a CUDA device was asked for and this machine has no CUDA (the cell fails)."""
        torch = self.torch()
        if self.is_cuda and not torch.cuda.is_available():
            raise RuntimeError(f"device {self.name!r} requested but CUDA is not available on this machine")

    def synchronise(self) -> None:
        """Wait for the work queued on the device (CUDA kernels are asynchronous); nothing on the CPU."""
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.torch_device())

    def reset_peaks(self) -> None:
        """Reset CUDA's peak-memory counters before the measured work; nothing on the CPU."""
        if self.is_cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(self.torch_device())

    def peaks_mb(self) -> tuple[float | None, float | None]:
        """(max_memory_allocated, max_memory_reserved) in MiB since the last reset; None on the CPU."""
        if not self.is_cuda:
            return None, None
        import torch

        dev = self.torch_device()
        return torch.cuda.max_memory_allocated(dev) / 2**20, torch.cuda.max_memory_reserved(dev) / 2**20

    def energy_counter(self, powercap_root: Path = POWERCAP_ROOT, nvml: Any = None) -> Counter:
        """The counter a cell on this device reads: NVML on CUDA (`nvml`: the pynvml module, imported
        when None; tests pass a stand-in), RAPL under `powercap_root` on the CPU."""
        return nvml_counter(self.name, nvml) if self.is_cuda else rapl_counter(powercap_root)

    def sm_clock_mhz(self) -> int | None:
        """The GPU's current SM clock in MHz (NVML through pynvml where installed); None on the CPU or
        where it cannot be read. Sampled after each timed repeat, while the GPU is still at its
        working clock."""
        if not self.is_cuda:
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = nvml_handle(pynvml, self.name)
            return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        except Exception:  # pynvml missing, no NVML library, or no permission: not recorded
            return None
