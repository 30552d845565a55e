"""The bootstrap's settings and its 95% percentile interval (`percentile_interval`), and the plain
seeded bootstrap over n indices (`bootstrap_distribution`). What report, compare and the worker
resample at each level is `nlgbench.statistics.resampling`; this module is nlgbench's own loop,
not SciPy's `stats.bootstrap`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nlgbench.statistics.correlation import NAN
from nlgbench.statistics.levels import Segments

BOOTSTRAP_RESAMPLES = 1000
# What `nlgbench compare --resamples` takes. At least MIN_RESAMPLES: a 95% percentile interval from
# fewer draws rests on one or two draws per tail. At most MAX_RESAMPLES: each resample recomputes the
# statistic over every segment of both cells in Python (10^5 take minutes per row, 10^8 days) and all
# of them are held in memory; at 10^5 an interval's ends lie within about 0.0005 of their percentile
# (the Monte Carlo error of a 2.5% quantile) and p resolves 2e-5, finer than any human-judgment data
# set supports, so more resamples change nothing visible.
MIN_RESAMPLES = 100
MAX_RESAMPLES = 100_000
BOOTSTRAP_SEED = 0
INTERVAL_PERCENTILES = (2.5, 97.5)  # the 95% percentile interval


def bootstrap_distribution(
    n: int, statistic: Callable[[np.ndarray], Any], n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """`statistic(idx)` on n_resamples resamples of the n segments drawn with replacement (one row
    per resample; a statistic may return several values), drawn with numpy's default_rng(seed)."""
    rng = np.random.default_rng(seed)
    return np.asarray([statistic(rng.integers(0, n, size=n)) for _ in range(n_resamples)], dtype=float)


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    """95% percentile interval of the finite values; (NaN, NaN) if there are none."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return NAN, NAN
    lo, hi = np.percentile(finite, INTERVAL_PERCENTILES)
    return float(lo), float(hi)


def bootstrap_ci(
    seg: Segments,
    statistic: Callable[[Segments], float],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% percentile interval of one cell's statistic by resampling segments."""
    replicates = bootstrap_distribution(len(seg), lambda idx: statistic(seg.take(idx)), n_resamples, seed)
    return percentile_interval(replicates)
