"""The machine's CPU as measurements name it (`/proc/cpuinfo`'s model name): in every cell's environment
record and in the key of the cached `backend: auto` choice, which is only valid on the CPU it was timed on."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (`AMD EPYC 9R14`), else the platform's processor or machine name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
