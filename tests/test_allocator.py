"""The allocator policies of the memory window (nlgbench.measurement.allocator), seen from the pages a
freed 8 MiB block leaves resident in a fresh process: glibc's default keeps the first one mapped and
returned, then (its threshold raised by that free) keeps the second in the heap; the measuring policy
returns both, the timing policy keeps both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nlgbench
from nlgbench.measurement import allocator

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not allocator.on_glibc(), reason="the policies are glibc's"),
]

BLOCK_MIB = 8
# Between two RSS readings the interpreter allocates a few small objects: far under 1 MiB.
SLACK_MIB = 1.0

SCRIPT = """
import ctypes, sys
from nlgbench.measurement import allocator
from nlgbench.measurement.trackers import rss_mb
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
if sys.argv[1] != "default":
    getattr(allocator, sys.argv[1])()
size = int(sys.argv[2]) << 20
kept = []
before = rss_mb()
for _ in range(2):
    block = libc.malloc(size)
    libc.memset(block, 1, size)
    libc.free(block)
    kept.append(rss_mb() - before)
print(" ".join(f"{k:.3f}" for k in kept))
"""


def resident_after_free(policy: str) -> list[float]:
    """MiB left resident, after each of two 8 MiB blocks allocated, written and freed in turn, over the start."""
    env = {**os.environ, "PYTHONPATH": str(Path(nlgbench.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, policy, str(BLOCK_MIB)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [float(x) for x in done.stdout.split()]


def test_glibcs_default_keeps_a_block_or_not_by_what_was_freed_before() -> None:
    first, second = resident_after_free("default")
    assert abs(first) <= SLACK_MIB
    assert abs(second - BLOCK_MIB) <= SLACK_MIB


def test_the_measuring_policy_returns_every_large_block_on_free() -> None:
    assert all(abs(kept) <= SLACK_MIB for kept in resident_after_free("hold_for_measuring"))


def test_the_timing_policy_keeps_large_blocks_in_the_heap_for_reuse() -> None:
    assert all(abs(kept - BLOCK_MIB) <= SLACK_MIB for kept in resident_after_free("hold_for_timing"))
