"""One seeded bootstrap (`bootstrap_distribution`): segments resampled with replacement,
BOOTSTRAP_RESAMPLES times, for the confidence intervals of a cell and the paired test of two cells
(`nlgbench.statistics.significance`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nlgbench.statistics.correlation import NAN
from nlgbench.statistics.levels import Segments

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
INTERVAL_PERCENTILES = (2.5, 97.5)  # the 95% percentile interval


def bootstrap_distribution(
    n: int, statistic: Callable[[np.ndarray], Any], n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """`statistic(idx)` on n_resamples resamples of the n segments drawn with replacement (one row
    per resample; a statistic may return several values). The draws are SciPy's `bootstrap`'s."""
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
