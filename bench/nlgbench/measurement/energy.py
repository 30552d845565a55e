"""Energy a block of work drew, read from a hardware counter where one exists, never estimated (no
TDP x time): RAPL through Linux powercap on CPUs (Intel, and AMD Zen, which the kernel exposes the
same way), NVML's total-energy counter on CUDA devices (Volta and later). Where neither can be read
the counter is `NoCounter`, with the reason, and results say "n/a (no counter)". Which one a cell
reads is its device's (`nlgbench.measurement.devices.Device.energy_counter`).

Both counters measure the whole device, not this process: RAPL a CPU package (every process on it),
NVML the whole GPU. A CUDA cell's energy is the GPU's only (not the host CPU's)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol

from nlgbench.foundations.devicenames import cuda_index

POWERCAP_ROOT = Path("/sys/class/powercap")
# Top-level RAPL zones only (intel-rapl:0, intel-rapl:1, one per package): their sub-zones
# (intel-rapl:0:0 core, :1 uncore, dram) are parts of a package's energy, and adding them would
# count it twice.
RAPL_ZONE = re.compile(r"^intel-rapl:(\d+)$")
PACKAGE_PREFIX = "package"  # a top-level zone named otherwise (`psys`: the platform) contains the packages
RAPL, NVML, NONE = "rapl", "nvml", "none"  # result.json's `energy_counter`

Reading = tuple[int, ...]  # a counter's raw values at one moment (one per RAPL zone; NVML: one)


class EnergyCounter(Protocol):
    """A hardware energy counter: `read` its raw values, `joules` drawn between two readings."""

    name: str  # RAPL or NVML
    note: str  # what it reads, in words

    def read(self) -> Reading: ...

    def joules(self, start: Reading, end: Reading) -> float: ...


@dataclass(frozen=True)
class NoCounter:
    """No energy counter can be read here; `note` says why."""

    note: str
    name: ClassVar[str] = NONE


Counter = EnergyCounter | NoCounter


# ----------------------------------------------------------------------------- RAPL (powercap)


@dataclass(frozen=True)
class RaplZone:
    """One package zone: its folder (energy_uj) and the value its counter wraps at."""

    path: Path
    label: str  # its `name`: package-0
    max_range_uj: int

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text())


def wrapped_delta_uj(start: int, end: int, max_range_uj: int) -> int:
    """Microjoules between two readings of a counter that wraps to 0 at `max_range_uj`; one wrap
    between them at most (a package at 200 W takes about 20 minutes to wrap a 2^38 uJ range)."""
    return end - start if end >= start else max_range_uj - start + end


class RaplCounter:
    """The package zones of powercap's intel-rapl control type, summed."""

    name = RAPL

    def __init__(self, zones: Sequence[RaplZone]) -> None:
        self.zones = list(zones)
        self.note = f"RAPL {', '.join(z.label for z in self.zones)} (whole packages)"

    def read(self) -> Reading:
        return tuple(z.read_uj() for z in self.zones)

    def joules(self, start: Reading, end: Reading) -> float:
        deltas = (wrapped_delta_uj(s, e, z.max_range_uj) for s, e, z in zip(start, end, self.zones, strict=True))
        return sum(deltas) / 1e6


def rapl_counter(root: Path = POWERCAP_ROOT) -> RaplCounter | NoCounter:
    """The RAPL counter of this machine's packages under the powercap folder `root`; NoCounter with
    the reason where there is none or it cannot be read (energy_uj is root-only since Linux 5.10)."""
    if not root.is_dir():
        return NoCounter(f"no {root} (no RAPL powercap interface)")
    zones = []
    try:
        found = sorted((int(m.group(1)), p) for p in root.iterdir() if (m := RAPL_ZONE.match(p.name)))
        for _, path in found:
            name_file = path / "name"
            label = name_file.read_text().strip() if name_file.exists() else path.name
            if not label.startswith(PACKAGE_PREFIX):
                continue
            zone = RaplZone(path, label, int((path / "max_energy_range_uj").read_text()))
            zone.read_uj()  # readable now, or no counter
            zones.append(zone)
    except PermissionError as exc:
        return NoCounter(f"{exc.filename}: permission denied (RAPL energy is root-only since Linux 5.10)")
    except (OSError, ValueError) as exc:
        return NoCounter(f"RAPL zone under {root} not readable: {exc}")
    if not zones:
        return NoCounter(f"no RAPL package zone (intel-rapl:N named package-N) under {root}")
    return RaplCounter(zones)


# ----------------------------------------------------------------------------- NVML


class NvmlCounter:
    """NVML's total energy of one GPU since the driver loaded (millijoules; Volta and later)."""

    name = NVML

    def __init__(self, nvml: Any, handle: Any, device: str) -> None:
        self.nvml, self.handle = nvml, handle
        self.note = f"NVML total energy of {device} (whole GPU)"

    def read(self) -> Reading:
        return (int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)),)

    def joules(self, start: Reading, end: Reading) -> float:
        return (end[0] - start[0]) / 1000


def nvml_handle(nvml: Any, device: str) -> Any:
    """The NVML handle of torch CUDA device `device`: by UUID where torch sees it (CUDA_VISIBLE_DEVICES
    renumbers devices), else by its index."""
    import torch

    index = cuda_index(device)
    if torch.cuda.is_available():
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        if uuid is not None:
            return nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    return nvml.nvmlDeviceGetHandleByIndex(index)


def nvml_counter(device: str, nvml: Any = None) -> NvmlCounter | NoCounter:
    """The NVML energy counter of CUDA device `device` (`nvml`: the pynvml module, imported here when
    None; tests pass a stand-in); NoCounter with the reason where pynvml is missing or the counter
    cannot be read (no NVML library, a GPU before Volta)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return NoCounter("pynvml is not installed (pip install nvidia-ml-py)")
        nvml = pynvml
    try:
        nvml.nvmlInit()
        counter = NvmlCounter(nvml, nvml_handle(nvml, device), device)
        counter.read()  # NotSupported before Volta
    except Exception as exc:  # NVMLError (library missing, not supported, no permission): the reason is kept
        return NoCounter(f"NVML energy counter of {device} not readable: {exc}")
    return counter


class EnergyTracker:
    """Joules a `with` block drew by `counter` (None with NoCounter or when the block failed). The
    device is synchronised before each reading, so the work the block queued is counted."""

    def __init__(self, counter: Counter, sync: Callable[[], None] = lambda: None) -> None:
        self.counter, self.sync = counter, sync
        self.joules: float | None = None
        self._start: Reading | None = None

    def __enter__(self) -> EnergyTracker:
        if not isinstance(self.counter, NoCounter):
            self.sync()
            self._start = self.counter.read()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._start is None or kind is not None or isinstance(self.counter, NoCounter):
            return
        self.sync()
        self.joules = self.counter.joules(self._start, self.counter.read())
