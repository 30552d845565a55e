"""The device names nlgbench measures on (cpu, cuda, cuda:N) and the one check that this machine has
the device asked for, made before any model loads (by `score`, the spec and `distill`)."""

from __future__ import annotations

import re

from nlgbench.foundations.errors import UserError

DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")


def check_device(device: str) -> None:
    """`device` is cpu, or a CUDA device this machine has: one clear line before any model is loaded
    (torch's own error on a CPU build is an AssertionError deep inside the first model move)."""
    if not isinstance(device, str) or not DEVICE_RE.match(device):
        raise UserError(f"unknown device {device!r} (use cpu, cuda or cuda:N)")
    if not device.startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            f"device {device!r}: CUDA is not available on this machine (torch {torch.__version__}); use cpu"
        )
    index, count = int(device.partition(":")[2] or 0), torch.cuda.device_count()
    if index >= count:
        raise UserError(
            f"device {device!r}: this machine has {count} CUDA device{'s' if count != 1 else ''} "
            f"(cuda:0 to cuda:{count - 1})"
        )
