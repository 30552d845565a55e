"""Significance of a difference between two metrics' correlations: the paired bootstrap test (with the
ratio of the two qualities, quality retained) and Williams' test for correlations sharing the humans."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nlgbench.statistics.bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_distribution,
    percentile_interval,
)
from nlgbench.statistics.correlation import NAN
from nlgbench.statistics.levels import Segments

ZERO_DELTA = 1e-12  # a bootstrap difference this close to 0 is 0 (rounding), on both sides of the test


@dataclass(frozen=True)
class PairedBootstrap:
    """Candidate minus baseline quality, its 95% percentile interval and a two-sided p-value; from
    the same resamples, the ratio candidate / baseline (quality retained) and its 95% percentile
    interval (resamples whose baseline statistic is 0 or undefined left out)."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n_resamples: int
    seed: int
    ratio: float = NAN
    ratio_ci_low: float = NAN
    ratio_ci_high: float = NAN


def paired_bootstrap(
    candidate: Segments,
    baseline: Segments,
    statistic: Callable[[Segments], float],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> PairedBootstrap:
    """Resample segments with replacement (the same draw for both metrics) and recompute
    statistic(candidate) - statistic(baseline). The p-value is the two-sided bootstrap test
    2 * min(P(delta* <= 0), P(delta* >= 0)): below 0.05 exactly when 0 lies outside the 95%
    percentile interval. A delta* within ZERO_DELTA of 0 counts as 0: rank statistics of a few
    systems often tie exactly, and rounding must not decide the side. The same resamples give the
    ratio statistic(candidate) / statistic(baseline) and its percentile interval (quality retained).

    Each side's resampled statistics are `bootstrap_distribution` of that cell alone: with the same
    number of segments and the same seed it draws the same resamples, so they pair (and a cell's
    resampled statistics, once computed, serve every comparison it is in: `paired_from_replicates`)."""
    n = len(candidate)
    if len(baseline) != n:
        raise ValueError(f"paired bootstrap needs the same segments: {n} vs {len(baseline)}")
    return paired_from_replicates(
        statistic(candidate),
        statistic(baseline),
        bootstrap_distribution(n, lambda idx: statistic(candidate.take(idx)), n_resamples, seed),
        bootstrap_distribution(n, lambda idx: statistic(baseline.take(idx)), n_resamples, seed),
        n_resamples,
        seed,
    )


def paired_from_replicates(
    candidate: float,
    baseline: float,
    candidate_replicates: np.ndarray,
    baseline_replicates: np.ndarray,
    n_resamples: int,
    seed: int,
) -> PairedBootstrap:
    """`paired_bootstrap` from each cell's statistic and its resampled statistics, which must come
    from the same draws (`bootstrap_distribution` over the same number of segments with `seed`)."""
    with np.errstate(invalid="ignore"):
        dist = candidate_replicates - baseline_replicates
    lo, hi = percentile_interval(dist)
    dist = dist[np.isfinite(dist)]
    p = min(1.0, 2 * min(float(np.mean(dist <= ZERO_DELTA)), float(np.mean(dist >= -ZERO_DELTA)))) if dist.size else NAN
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = candidate_replicates / baseline_replicates
    ratio_lo, ratio_hi = percentile_interval(ratios)
    return PairedBootstrap(
        float(candidate - baseline),
        lo,
        hi,
        p,
        n_resamples,
        seed,
        candidate / baseline if baseline else NAN,
        ratio_lo,
        ratio_hi,
    )


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' (1959) t for H0: r12 = r13, two correlations sharing variable 1 (the humans),
    as given by Steiger (1980, Psychol. Bull. 87(2), eq. 7) and used for MT metrics by Graham &
    Baldwin (2014). Returns (t with n - 3 degrees of freedom, two-sided p).

    Undefined (NaN, NaN) for n <= 3 or an undefined correlation. Two correlations equal up to
    rounding (ZERO_DELTA) give t = 0, p = 1: no difference was observed. This covers identical
    (or affinely related) metric scores, r23 = 1, where the formula is 0 * sqrt(x / 0); the
    determinant |R| of a correlation matrix is >= 0, so rounding below 0 is clamped. Any other
    zero denominator (|R| = 0 and r12 = -r13) leaves t undefined."""
    from scipy import stats

    if n <= 3 or not all(math.isfinite(r) for r in (r12, r13, r23)):
        return NAN, NAN
    if abs(r12 - r13) <= ZERO_DELTA:
        return 0.0, 1.0
    r23 = min(1.0, max(-1.0, r23))
    det = max(0.0, 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23)  # |R| of the 3 x 3 correlation matrix
    mean = (r12 + r13) / 2
    denominator = 2 * (n - 1) / (n - 3) * det + mean**2 * (1 - r23) ** 3
    if denominator <= 0:
        return NAN, NAN
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / denominator)
    return float(t), float(2 * stats.t.sf(abs(t), n - 3))
