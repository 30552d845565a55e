"""Numbers as the report and compare tables print them: '-' where a value is missing or undefined."""

from __future__ import annotations

import math

import numpy as np


def number(value: object, digits: int = 3) -> str:
    """A float with `digits` decimals ('-' for NaN/inf); anything else as str()."""
    if isinstance(value, (float, np.floating)):
        return "-" if not math.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def percent(value: float) -> str:
    """A ratio as a percentage with one decimal: 0.953 -> '95.3%'."""
    return "-" if not math.isfinite(value) else f"{100 * value:.1f}%"


def times(value: float) -> str:
    """A ratio as a factor: 2.5 -> '2.50x'."""
    return "-" if not math.isfinite(value) else f"{value:.2f}x"


def p_value(p: float | None, resamples: int | None = None) -> str:
    """A p-value readable at any size: 0.037, 2.1e-05; a bootstrap p of 0 is `< 2/resamples`
    (no resample crossed 0, so the test cannot say more)."""
    if p is None or not math.isfinite(p):
        return "-"
    if resamples and p == 0:
        return f"< {2 / resamples:.2g}"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
