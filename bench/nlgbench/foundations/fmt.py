"""Numbers as the report and compare tables print them. Two kinds of missing value read
differently: UNKNOWN ('-') for what was not measured (an imported cell's timing), UNDEFINED
('n/a') for what cannot be computed (a correlation of constant scores); callers pick one."""

from __future__ import annotations

import math
from typing import TypeGuard

import numpy as np

UNKNOWN = "-"
UNDEFINED = "n/a"


def _finite(value: object) -> TypeGuard[float]:
    """Whether `value` is a finite number (a float, an int, or numpy's)."""
    return isinstance(value, (float, int, np.floating, np.integer)) and math.isfinite(value)


def number(value: object, digits: int = 3, missing: str = UNKNOWN) -> str:
    """A float with `digits` decimals (`missing` for None/NaN/inf); anything else as str()."""
    if value is None:
        return missing
    if isinstance(value, (float, np.floating)):
        return missing if not math.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def signed(value: float | None, digits: int = 3, missing: str = UNKNOWN) -> str:
    """A difference with its sign: +0.012, -0.300."""
    return f"{value:+.{digits}f}" if _finite(value) else missing


def percent(value: float | None, missing: str = UNKNOWN) -> str:
    """A ratio as a percentage with one decimal: 0.953 -> '95.3%'."""
    return f"{100 * value:.1f}%" if _finite(value) else missing


def times(value: float | None, missing: str = UNKNOWN) -> str:
    """A ratio as a factor: 2.5 -> '2.50x'."""
    return f"{value:.2f}x" if _finite(value) else missing


def duration(seconds: float) -> str:
    """Elapsed time rounded to the second: 5 -> '5s', 65 -> '1m05s', 3725 -> '62m05s'."""
    whole = int(round(seconds))
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"


def p_value(p: float | None, resamples: int | None = None, missing: str = UNKNOWN) -> str:
    """A p-value readable at any size: 0.037, 2.1e-05; a bootstrap p of 0 is `< 2/resamples`
    (no resample crossed 0, so the test cannot say more)."""
    if p is None or not math.isfinite(p):
        return missing
    if resamples and p == 0:
        return f"< {2 / resamples:.2g}"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def percent_ci(value: float | None, low: float | None, high: float | None, missing: str = UNKNOWN) -> str:
    """A ratio as a percentage with its interval: '96.0% [91.7, 100.3]' (the interval left out when unknown)."""
    if not _finite(value):
        return missing
    interval = f" [{100 * low:.1f}, {100 * high:.1f}]" if _finite(low) and _finite(high) else ""
    return percent(value) + interval


def times_range(value: float | None, low: float | None, high: float | None, missing: str = UNKNOWN) -> str:
    """A ratio as a factor with its range: '6.92x [6.01, 7.08]' (the range left out when unknown)."""
    if not _finite(value):
        return missing
    return times(value) + (f" [{low:.2f}, {high:.2f}]" if _finite(low) and _finite(high) else "")
