"""Statistics shared by `report` and `compare`: correlation methods and levels, Williams' test,
paired bootstrap intervals and p-values. SciPy does the work wherever it has the statistic."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats

METHODS = ("pearson", "kendall", "spearman", "kendall_like")
LEVELS = ("pooled", "lp_mean", "system")
NAN = float("nan")


@dataclass(frozen=True)
class Segments:
    """One cell's segment scores in dataset order, signed so that higher always means better."""

    score: np.ndarray
    human: np.ndarray
    lp: np.ndarray
    system: np.ndarray
    seg_id: np.ndarray

    def take(self, idx: np.ndarray) -> "Segments":
        return Segments(self.score[idx], self.human[idx], self.lp[idx], self.system[idx], self.seg_id[idx])

    def __len__(self) -> int:
        return len(self.score)


def kendall_like(x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """WMT's DARR Kendall tau-like: over pairs whose human scores differ by more than `threshold`,
    (Concordant - Discordant) / (Concordant + Discordant), a metric tie counting as Discordant
    (Ma et al. 2018, WMT18 metrics task, eq. 1). WMT applies it with 25 raw DA points; on
    z-scored DA use a threshold in z units (0 keeps every pair with different human scores)."""
    dx = x[:, None] - x[None, :]
    dh = h[:, None] - h[None, :]
    upper = np.triu(np.ones(dh.shape, dtype=bool), k=1) & (np.abs(dh) > threshold)
    agree = np.sign(dx[upper]) == np.sign(dh[upper])
    conc = int(agree.sum())
    disc = int(upper.sum()) - conc
    return (conc - disc) / (conc + disc) if conc + disc else NAN


def correlation(method: str, x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """One correlation coefficient; NaN for fewer than 3 points or a constant side."""
    if len(x) < 3 or np.all(x == x[0]) or np.all(h == h[0]):
        return NAN
    if method == "pearson":
        return float(stats.pearsonr(x, h)[0])
    if method == "kendall":
        return float(stats.kendalltau(x, h, variant="b")[0])
    if method == "spearman":
        return float(stats.spearmanr(x, h)[0])
    if method == "kendall_like":
        return kendall_like(x, h, threshold)
    raise ValueError(f"unknown correlation method {method!r} (valid: {', '.join(METHODS)})")


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else NAN


def system_means(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean metric and human score per (lp, system) with a system name: (x, h, lp of each system)."""
    keys = [(lp, s) for lp, s in zip(seg.lp, seg.system) if s != ""]
    named = np.array([s != "" for s in seg.system])
    if not keys:
        return np.array([]), np.array([]), np.array([])
    uniq = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(uniq)}
    which = np.array([index[k] for k in keys])
    count = np.bincount(which, minlength=len(uniq))
    x = np.bincount(which, weights=seg.score[named], minlength=len(uniq)) / count
    h = np.bincount(which, weights=seg.human[named], minlength=len(uniq)) / count
    return x, h, np.array([k[0] for k in uniq])


def quality(seg: Segments, method: str = "pearson", level: str = "pooled", threshold: float = 0.0) -> float:
    """Correlation with humans at a level: pooled over all segments, mean over language pairs
    (WMT style), or system level (mean per system, correlated per lp, mean over lps)."""
    if level == "pooled":
        return correlation(method, seg.score, seg.human, threshold)
    if level == "lp_mean":
        return _nanmean([correlation(method, seg.score[seg.lp == lp], seg.human[seg.lp == lp], threshold)
                         for lp in dict.fromkeys(seg.lp)])
    if level == "system":
        x, h, lps = system_means(seg)
        return _nanmean([correlation(method, x[lps == lp], h[lps == lp], threshold) for lp in dict.fromkeys(lps)])
    raise ValueError(f"unknown correlation level {level!r} (valid: {', '.join(LEVELS)})")


# ----------------------------------------------------------------------------- significance


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' (1959) t for H0: r12 = r13, two correlations sharing variable 1 (the humans),
    as given by Steiger (1980, Psychol. Bull. 87(2), eq. 7) and used for MT metrics by Graham &
    Baldwin (2014). Returns (t with n - 3 degrees of freedom, two-sided p)."""
    if n <= 3:
        return NAN, NAN
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23  # |R| of the 3 x 3 correlation matrix
    mean = (r12 + r13) / 2
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / (2 * (n - 1) / (n - 3) * det + mean**2 * (1 - r23) ** 3))
    return float(t), float(2 * stats.t.sf(abs(t), n - 3))


@dataclass(frozen=True)
class PairedBootstrap:
    """Candidate minus baseline quality, its 95% percentile interval and a two-sided p-value."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n_resamples: int
    seed: int


def paired_bootstrap(candidate: Segments, baseline: Segments, statistic: Callable[[Segments], float],
                     n_resamples: int = 1000, seed: int = 0) -> PairedBootstrap:
    """Resample segments with replacement (the same draw for both metrics, SciPy's paired
    bootstrap) and recompute statistic(candidate) - statistic(baseline). The p-value is the
    two-sided bootstrap test 2 * min(P(delta* <= 0), P(delta* >= 0)): below 0.05 exactly when
    0 lies outside the 95% percentile interval."""
    n = len(candidate)
    if len(baseline) != n:
        raise ValueError(f"paired bootstrap needs the same segments: {n} vs {len(baseline)}")

    def delta(idx: np.ndarray) -> float:
        idx = np.asarray(idx, dtype=np.int64)
        return statistic(candidate.take(idx)) - statistic(baseline.take(idx))

    observed = delta(np.arange(n))
    res = stats.bootstrap((np.arange(n),), delta, n_resamples=n_resamples, vectorized=False, paired=True,
                          method="percentile", confidence_level=0.95, rng=np.random.default_rng(seed))
    dist = res.bootstrap_distribution[np.isfinite(res.bootstrap_distribution)]
    p = min(1.0, 2 * min(float(np.mean(dist <= 0)), float(np.mean(dist >= 0)))) if dist.size else NAN
    return PairedBootstrap(float(observed), float(res.confidence_interval.low), float(res.confidence_interval.high),
                           p, n_resamples, seed)


def bootstrap_ci(seg: Segments, statistic: Callable[[Segments], float], n_resamples: int = 1000,
                 seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of one cell's statistic by resampling segments (SciPy's bootstrap)."""
    res = stats.bootstrap((np.arange(len(seg)),), lambda idx: statistic(seg.take(np.asarray(idx, dtype=np.int64))),
                          n_resamples=n_resamples, vectorized=False, method="percentile", confidence_level=0.95,
                          rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
