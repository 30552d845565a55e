"""Correlation methods (METHODS), as in mt-metrics-eval one engine of correlation functions:
Pearson's r, Spearman's rho, Kendall's tau-b and tau-c (SciPy; tau-c for data where ties dominate,
e.g. Likert scores) and Kendall's tau-like over all pairs of segments (`kendall_like_all_pairs`; the
name `kendall_like` is still read). The pairwise methods of `nlgbench.statistics.pairwise` (DARR
Kendall, acc_eq, pairwise and soft pairwise accuracy) are methods too, each at the levels whose pairs
it counts (`METHOD_LEVELS`); `nlgbench.statistics.levels` applies them.

Minimum size: a correlation needs at least MIN_POINTS = 3 points. Through 2 points Pearson, Kendall
and Spearman are always +1 or -1 whatever the metric, so such a value says nothing: fewer points, or
a constant side, give NaN (`undefined_reason` says why). Scores are signed so that higher always
means better before they get here."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

from nlgbench.statistics.pairwise import pairwise_accuracy

PLAIN_METHODS = ("pearson", "spearman", "kendall", "kendall_c", "kendall_like_all_pairs")  # (x, h) at any level
SOURCE_METHODS = ("darr_kendall", "acc_eq")  # pairs of translations of one source: global and segment level
SYSTEM_METHODS = ("pairwise_accuracy", "soft_pairwise_accuracy")  # pairs of systems: system level
METHODS = PLAIN_METHODS + SOURCE_METHODS + SYSTEM_METHODS
METHOD_ALIASES = {"kendall_like": "kendall_like_all_pairs"}  # its older name, still accepted
ALL_LEVELS = ("global", "segment", "item", "source", "system")
METHOD_LEVELS: dict[str, tuple[str, ...]] = {
    **{m: ALL_LEVELS for m in PLAIN_METHODS},
    **{m: ("global", "segment") for m in SOURCE_METHODS},
    **{m: ("system",) for m in SYSTEM_METHODS},
}
MIN_POINTS = 3  # fewer points: no correlation (NaN); see the module docstring
MIN_FISHER_POINTS = 4  # Fisher's z interval needs n - 3 > 0 (its standard error is 1 / sqrt(n - 3))
PAIR_BLOCK = 1 << 22  # kendall_like compares at most this many pairs at once (bounded memory)
NAN = float("nan")

Correlation = Callable[[np.ndarray, np.ndarray], float]  # (metric scores, human scores) -> coefficient


def pearson(x: np.ndarray, h: np.ndarray) -> float:
    """Pearson's r (SciPy)."""
    from scipy import stats

    return float(stats.pearsonr(x, h)[0])


def spearman(x: np.ndarray, h: np.ndarray) -> float:
    """Spearman's rho (SciPy): Pearson's r of the ranks, ties given their mean rank."""
    from scipy import stats

    return float(stats.spearmanr(x, h)[0])


def kendall(x: np.ndarray, h: np.ndarray) -> float:
    """Kendall's tau-b (SciPy): (C - D) / sqrt((n0 - Tx)(n0 - Th)), ties on either side handled
    (n0 pairs, Tx and Th tied in x and in h)."""
    from scipy import stats

    return float(stats.kendalltau(x, h, variant="b")[0])


def kendall_c(x: np.ndarray, h: np.ndarray) -> float:
    """Stuart's tau-c (SciPy): 2 (C - D) / (n^2 (m - 1) / m), m = the smaller number of distinct
    values of x and h; reaches +-1 when one side has few distinct values (Likert scores)."""
    from scipy import stats

    return float(stats.kendalltau(x, h, variant="c")[0])


def kendall_like_counts(
    x: np.ndarray, h: np.ndarray, threshold: float = 0.0, inclusive: bool = False
) -> tuple[int, int]:
    """(Concordant, Discordant) of Kendall's tau-like over all pairs whose human scores differ by
    more than `threshold` (`inclusive`: by at least `threshold`, mt-metrics-eval's KendallLike, which
    at threshold 0 counts every pair, a human tie as Discordant); a metric tie is Discordant."""
    if not threshold >= 0:
        raise ValueError(f"kendall_like threshold must be >= 0, got {threshold}")
    n, concordant, discordant = len(x), 0, 0
    rows = max(1, PAIR_BLOCK // max(n, 1))
    for start in range(0, n, rows):
        i = np.arange(start, min(n, start + rows))[:, None]  # first item of each pair, j > i the second
        j = np.arange(start + 1, n)[None, :]
        dx, dh = x[j] - x[i], h[j] - h[i]
        counted = (j > i) & ((np.abs(dh) >= threshold) if inclusive else (np.abs(dh) > threshold))
        agree = (np.sign(dx) == np.sign(dh)) & (dh != 0)  # a metric tie (dx = 0) or a human tie disagrees
        concordant += int(np.count_nonzero(counted & agree))
        discordant += int(np.count_nonzero(counted & ~agree))
    return concordant, discordant


def kendall_like(x: np.ndarray, h: np.ndarray, threshold: float = 0.0, inclusive: bool = False) -> float:
    """Kendall's tau-like of WMT18 (Ma et al. 2018, eq. 1) over ALL pairs of segments whose human
    scores differ by more than `threshold` (human ties never count; `inclusive`: by at least
    `threshold`, see kendall_like_counts): (Concordant - Discordant) / (Concordant + Discordant),
    a metric tie counting as Discordant. This is not WMT's DARR figure, which pairs only
    translations of the same source (`pairwise.darr_kendall`); it is the method
    `kendall_like_all_pairs`. Pairs are compared PAIR_BLOCK at a time."""
    concordant, discordant = kendall_like_counts(x, h, threshold, inclusive)
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else NAN


def undefined_reason(x: np.ndarray, h: np.ndarray, unit: str = "segments") -> str | None:
    """Why no correlation of metric scores `x` with human scores `h` is defined: fewer than
    MIN_POINTS points (`unit` names them), or a constant side (zero variance); None otherwise."""
    if len(x) < MIN_POINTS:
        return f"fewer than {MIN_POINTS} {unit}"
    human_constant, metric_constant = bool(np.all(h == h[0])), bool(np.all(x == x[0]))
    if human_constant and metric_constant:
        return "human and metric scores constant"
    if human_constant:
        return "human scores constant"
    if metric_constant:
        return "metric scores constant"
    return None


def _guarded(fn: Correlation, x: np.ndarray, h: np.ndarray) -> float:
    if undefined_reason(x, h) is not None:
        return NAN
    return fn(x, h)


def canonical_method(name: str) -> str:
    """The method's name in METHODS (`kendall_like` read as `kendall_like_all_pairs`)."""
    if name in METHODS:
        return name
    if name in METHOD_ALIASES:
        return METHOD_ALIASES[name]
    raise ValueError(f"unknown correlation method {name!r} (valid: {', '.join(METHODS)})")


def correlation_function(method: str, threshold: float = 0.0, inclusive: bool = False) -> Correlation:
    """The correlation `method` as a function of (x, h): NaN for fewer than MIN_POINTS points or
    a constant side. `threshold` is kendall_like_all_pairs's (>= 0; `inclusive`: pairs differing
    by at least it). Only the methods of (x, h) alone: PLAIN_METHODS and pairwise_accuracy (over
    system means)."""
    functions: dict[str, Correlation] = {
        "pearson": pearson,
        "spearman": spearman,
        "kendall": kendall,
        "kendall_c": kendall_c,
        "kendall_like_all_pairs": functools.partial(kendall_like, threshold=threshold, inclusive=inclusive),
        "pairwise_accuracy": pairwise_accuracy,
    }
    method = canonical_method(method)
    if method not in functions:
        raise ValueError(f"{method} needs more than (metric, human) scores: use nlgbench.statistics.levels")
    if not threshold >= 0:
        raise ValueError(f"kendall_like threshold must be >= 0, got {threshold}")
    return functools.partial(_guarded, functions[method])


def correlation(method: str, x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """One correlation coefficient; NaN for fewer than MIN_POINTS points or a constant side."""
    return correlation_function(method, threshold)(x, h)


def fisher_interval(r: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The confidence interval of Pearson's r from `n` points by Fisher's z transformation:
    tanh(atanh(r) -+ z_{(1+confidence)/2} / sqrt(n - 3)) (what SciPy's `pearsonr(...).confidence_interval()`
    gives). (NaN, NaN) for fewer than MIN_FISHER_POINTS points or an undefined r; r = +-1 gives the
    one-point interval it implies."""
    if n < MIN_FISHER_POINTS or not math.isfinite(r):
        return NAN, NAN
    if abs(r) >= 1.0:
        return float(r), float(r)
    half = NormalDist().inv_cdf((1.0 + confidence) / 2.0) / math.sqrt(n - 3)
    z = math.atanh(r)
    return math.tanh(z - half), math.tanh(z + half)
