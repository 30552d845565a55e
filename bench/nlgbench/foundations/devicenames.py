"""The device names nlgbench runs on (cpu, cuda, cuda:N), read in this module only: whether a name
is known, whether it is CUDA and which GPU it names. Every layer asks here (an encoder pinning its
inputs, a backend picking its provider, the protocol, Slurm's device groups), so no other module
parses a device name (`tests/test_structure.py` checks it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nlgbench.foundations.errors import UserError

CPU, CUDA = "cpu", "cuda"  # the two kinds of device; also the device groups of results and reports
DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")


@dataclass(frozen=True)
class DeviceName:
    """A device name read once: the name as written, its kind (CPU or CUDA) and, on CUDA, the index
    of its GPU (0 for a plain `cuda`)."""

    name: str
    kind: str
    index: int

    @property
    def is_cuda(self) -> bool:
        return self.kind == CUDA


def known_device(name: str) -> bool:
    """Whether `name` is a device name nlgbench knows: cpu, cuda or cuda:N."""
    return isinstance(name, str) and DEVICE_RE.match(name) is not None


def parse_device(name: str) -> DeviceName:
    """`name` read as a `DeviceName`; a one-line `UserError` where it is no known device name."""
    if not known_device(name):
        raise UserError(f"unknown device {name!r} (use cpu, cuda or cuda:N)")
    return DeviceName(name, device_kind(name), cuda_index(name))


def is_cuda(name: str) -> bool:
    """Whether the device `name` (cpu, cuda, cuda:N) is a CUDA device."""
    return name.startswith(CUDA)


def device_kind(name: str) -> str:
    """CUDA for cuda and cuda:N, else CPU."""
    return CUDA if is_cuda(name) else CPU


def cuda_index(name: str) -> int:
    """The GPU index a CUDA device name names (cuda:N's N, 0 for a plain cuda); 0 for cpu."""
    return int(name.partition(":")[2] or 0) if is_cuda(name) else 0
