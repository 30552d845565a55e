"""The C allocator's policy while a cell's memory is measured, and while it is timed.

glibc's malloc moves its mmap threshold with the history of frees (a freed mmapped block raises it, up
to 32 MiB), so whether a large tensor's pages come from a fresh mapping or stay in the heap, and so the
peak RSS of one and the same cell, varied by about 10% from run to run. While memory is measured the
threshold is held at glibc's initial 128 KiB: every large block is mapped on allocation and returned
on free, and the peak is the memory the cell needs. Timed passes then run with the threshold at the
ceiling the dynamic rule can reach (large blocks reused from the heap): mapping every block anew made
the quickstart's MiniLM cell 44% slower (8.2 against 5.7 ms/segment), and glibc's moving default
measured 6.0.
"""

from __future__ import annotations

import ctypes
import functools
import platform

# mallopt parameters of glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MEASURING_MMAP_THRESHOLD = 128 * 1024  # glibc's initial value (DEFAULT_MMAP_THRESHOLD_MIN)
TIMING_MMAP_THRESHOLD = 32 * 1024 * 1024  # the ceiling of glibc's dynamic rule on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)

MEASURING = "glibc: mmap threshold 128 KiB in the memory window, 32 MiB in the timed passes"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc where this process runs on it, else None (musl, macOS and Windows have no such rule)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)  # the process's own symbols, glibc's among them (no ldconfig lookup)
    except OSError:
        return None


def on_glibc() -> bool:
    """Whether this process's C allocator is glibc's malloc (the one whose policy is held)."""
    return _libc() is not None


def _mallopt(param: int, value: int) -> bool:
    libc = _libc()
    return libc is not None and bool(libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)))


def hold_for_measuring() -> str | None:
    """Hold the mmap threshold at 128 KiB (and trim at the same), so a large block's pages are
    mapped when allocated and unmapped when freed; the policy's name, or None where not glibc."""
    held = _mallopt(M_MMAP_THRESHOLD, MEASURING_MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD, MEASURING_MMAP_THRESHOLD)
    return MEASURING if held else None


def hold_for_timing() -> bool:
    """Hold the threshold where glibc's dynamic rule ends (32 MiB; trim at twice that, as the rule
    sets it), so timed passes reuse heap blocks as a warmed-up process does; False where not glibc."""
    return _mallopt(M_MMAP_THRESHOLD, TIMING_MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD, 2 * TIMING_MMAP_THRESHOLD)
