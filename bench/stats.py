"""All correlation statistics of nlgbench, used by the worker, import-scores, report and compare.

As in mt-metrics-eval, one engine takes correlation functions: a correlation method (`pearson`,
`kendall` tau-b, `spearman`, WMT's `kendall_like`) is applied at a level (`pooled` over all
segments; `lp_mean`, the mean over language pairs of the per-pair values, WMT style; `system`,
per language pair over the mean scores of its systems, then the mean over pairs). Scores are
signed so that higher always means better before they get here.

Minimum size: a correlation needs at least MIN_POINTS = 3 points. Through 2 points Pearson,
Kendall and Spearman are always +1 or -1 whatever the metric, so such a value says nothing.
A group (a language pair's segments, or its systems at system level) with fewer points, or with
a constant side, gets NaN; means over language pairs leave NaN out, and results count the pairs
left out for being too small (`n_lps_too_small`). `quality_note` says in words why a correlation
is undefined ("human scores constant in de-en"); a cell stores it as its correlation's `note`.

Sums (system means, means over language pairs) use math.fsum, so they do not depend on order.
One seeded bootstrap (`bootstrap_distribution`) serves the confidence intervals of a cell and the
paired test of two cells: segments resampled with replacement, BOOTSTRAP_RESAMPLES times.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

METHODS = ("pearson", "kendall", "spearman", "kendall_like")
LEVELS = ("pooled", "lp_mean", "system")
MIN_POINTS = 3  # fewer points: no correlation (NaN); see the module docstring
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
INTERVAL_PERCENTILES = (2.5, 97.5)  # the 95% percentile interval
ZERO_DELTA = 1e-12  # a bootstrap difference this close to 0 is 0 (rounding), on both sides of the test
NAN = float("nan")

Correlation = Callable[[np.ndarray, np.ndarray], float]  # (metric scores, human scores) -> coefficient


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


# ----------------------------------------------------------------------------- correlation functions


def pearson(x: np.ndarray, h: np.ndarray) -> float:
    """Pearson's r (SciPy)."""
    return float(stats.pearsonr(x, h)[0])


def kendall(x: np.ndarray, h: np.ndarray) -> float:
    """Kendall's tau-b, which handles ties on either side (SciPy)."""
    return float(stats.kendalltau(x, h, variant="b")[0])


def spearman(x: np.ndarray, h: np.ndarray) -> float:
    """Spearman's rho (SciPy)."""
    return float(stats.spearmanr(x, h)[0])


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


def correlation_function(method: str, threshold: float = 0.0) -> Correlation:
    """The correlation `method` as a function of (x, h): NaN for fewer than MIN_POINTS points or
    a constant side. `threshold` is kendall_like's."""
    functions: dict[str, Correlation] = {"pearson": pearson, "kendall": kendall, "spearman": spearman,
                                         "kendall_like": functools.partial(kendall_like, threshold=threshold)}
    if method not in functions:
        raise ValueError(f"unknown correlation method {method!r} (valid: {', '.join(METHODS)})")
    return functools.partial(_guarded, functions[method])


def correlation(method: str, x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """One correlation coefficient; NaN for fewer than MIN_POINTS points or a constant side."""
    return correlation_function(method, threshold)(x, h)


# ----------------------------------------------------------------------------- levels


@dataclass(frozen=True)
class Group:
    """One language pair at a level: its correlation and its number of points (segments, or
    systems at system level)."""

    lp: str
    value: float
    n: int

    @property
    def too_small(self) -> bool:
        return self.n < MIN_POINTS


def finite_mean(values: Sequence[float]) -> float:
    """Mean of the finite values (math.fsum); NaN when there are none (WMT-style mean over lps)."""
    finite = [v for v in values if math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else NAN


def _index(keys: Sequence[Any]) -> dict[Any, list[int]]:
    """Positions of each key, keys in order of first appearance."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


def system_means(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean metric and human score per (lp, system) with a system name: (x, h, lp of each system),
    systems in order of first appearance. Segments without a system name are left out."""
    keys = [(lp, s) if s != "" else None for lp, s in zip(seg.lp.tolist(), seg.system.tolist())]
    index = {k: idx for k, idx in _index(keys).items() if k is not None}
    x = np.array([math.fsum(seg.score[idx]) / len(idx) for idx in index.values()], dtype=float)
    h = np.array([math.fsum(seg.human[idx]) / len(idx) for idx in index.values()], dtype=float)
    return x, h, np.array([lp for lp, _ in index], dtype=object)


def level_points(seg: Segments, level: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per language pair (in order of first appearance), the (metric, human) points a level
    correlates: its segments (`lp_mean`) or its systems' mean scores (`system`; a pair without
    named systems has none)."""
    if level == "lp_mean":
        return [(lp, seg.score[idx], seg.human[idx]) for lp, idx in _index(seg.lp.tolist()).items()]
    if level == "system":
        x, h, lps = system_means(seg)
        by_lp = _index(lps.tolist())
        return [(lp, x[by_lp.get(lp, [])], h[by_lp.get(lp, [])]) for lp in dict.fromkeys(seg.lp.tolist())]
    raise ValueError(f"correlation level {level!r} has no language-pair groups (valid: lp_mean, system)")


def lp_groups(seg: Segments, corr: Correlation) -> list[Group]:
    """Segment level per language pair, pairs in order of first appearance."""
    return [Group(lp, corr(x, h), len(x)) for lp, x, h in level_points(seg, "lp_mean")]


def system_groups(seg: Segments, corr: Correlation) -> list[Group]:
    """System level per language pair (over its systems' mean scores); every pair of the
    segments is listed, one without named systems with n = 0."""
    return [Group(lp, corr(x, h), len(x)) for lp, x, h in level_points(seg, "system")]


def quality(seg: Segments, method: str = "pearson", level: str = "pooled", threshold: float = 0.0) -> float:
    """Correlation with humans at a level: pooled over all segments, mean over language pairs
    (WMT style), or system level (mean per system, correlated per lp, mean over lps)."""
    corr = correlation_function(method, threshold)
    if level not in LEVELS:
        raise ValueError(f"unknown correlation level {level!r} (valid: {', '.join(LEVELS)})")
    if level == "pooled":
        return corr(seg.score, seg.human)
    return finite_mean([g.value for g in level_groups(seg, level, corr)])


def level_groups(seg: Segments, level: str, corr: Correlation) -> list[Group]:
    """The language-pair groups whose mean is the `lp_mean` or `system` level."""
    return [Group(lp, corr(x, h), len(x)) for lp, x, h in level_points(seg, level)]


def has_systems(seg: Segments) -> bool:
    """Whether any segment names its system (the `system` level needs them)."""
    return any(s != "" for s in seg.system.tolist())


def quality_note(seg: Segments, method: str = "pearson", level: str = "pooled", threshold: float = 0.0) -> str:
    """Why `quality(seg, method, level)`, or a language pair of its mean, is undefined, e.g.
    'human scores constant in de-en, fr-en'; '' when every correlation it involves is defined."""
    if level not in LEVELS:
        raise ValueError(f"unknown correlation level {level!r} (valid: {', '.join(LEVELS)})")
    corr = correlation_function(method, threshold)
    unit = "systems" if level == "system" else "segments"
    points = [("", seg.score, seg.human)] if level == "pooled" else level_points(seg, level)
    lps_by_reason: dict[str, list[str]] = {}
    for lp, x, h in points:
        if not math.isfinite(corr(x, h)):
            reason = undefined_reason(x, h, unit) or f"{method} undefined"
            lps_by_reason.setdefault(reason, []).append(lp)
    if level == "pooled":
        return "; ".join(lps_by_reason)
    return "; ".join(f"{reason} in {', '.join(lps)}" for reason, lps in lps_by_reason.items())


def too_small_lps(seg: Segments, level: str) -> list[str]:
    """The language pairs left out of a level's mean for having fewer than MIN_POINTS segments
    (`lp_mean`) or systems (`system`); none at the `pooled` level."""
    if level not in LEVELS:
        raise ValueError(f"unknown correlation level {level!r} (valid: {', '.join(LEVELS)})")
    if level == "pooled":
        return []
    return [lp for lp, x, _ in level_points(seg, level) if len(x) < MIN_POINTS]


def left_out_note(level: str, lps: Sequence[str]) -> str:
    """The line report and compare print for the language pairs `too_small_lps` names."""
    unit = "systems" if level == "system" else "segments"
    return (f"{len(lps)} language pair(s) with fewer than {MIN_POINTS} {unit} have no correlation and are left out "
            f"of the {level.replace('_', ' ')}: {', '.join(lps)}")


# ----------------------------------------------------------------------------- bootstrap


def bootstrap_distribution(n: int, statistic: Callable[[np.ndarray], Any], n_resamples: int = BOOTSTRAP_RESAMPLES,
                           seed: int = BOOTSTRAP_SEED) -> np.ndarray:
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


def bootstrap_ci(seg: Segments, statistic: Callable[[Segments], float], n_resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """95% percentile interval of one cell's statistic by resampling segments."""
    return percentile_interval(bootstrap_distribution(len(seg), lambda idx: statistic(seg.take(idx)), n_resamples, seed))


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
                     n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedBootstrap:
    """Resample segments with replacement (the same draw for both metrics) and recompute
    statistic(candidate) - statistic(baseline). The p-value is the two-sided bootstrap test
    2 * min(P(delta* <= 0), P(delta* >= 0)): below 0.05 exactly when 0 lies outside the 95%
    percentile interval. A delta* within ZERO_DELTA of 0 counts as 0: rank statistics of a few
    systems often tie exactly, and rounding must not decide the side."""
    n = len(candidate)
    if len(baseline) != n:
        raise ValueError(f"paired bootstrap needs the same segments: {n} vs {len(baseline)}")

    def delta(idx: np.ndarray) -> float:
        return statistic(candidate.take(idx)) - statistic(baseline.take(idx))

    dist = bootstrap_distribution(n, delta, n_resamples, seed)
    lo, hi = percentile_interval(dist)
    dist = dist[np.isfinite(dist)]
    p = min(1.0, 2 * min(float(np.mean(dist <= ZERO_DELTA)), float(np.mean(dist >= -ZERO_DELTA)))) if dist.size else NAN
    return PairedBootstrap(float(delta(np.arange(n))), lo, hi, p, n_resamples, seed)


# ----------------------------------------------------------------------------- significance


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' (1959) t for H0: r12 = r13, two correlations sharing variable 1 (the humans),
    as given by Steiger (1980, Psychol. Bull. 87(2), eq. 7) and used for MT metrics by Graham &
    Baldwin (2014). Returns (t with n - 3 degrees of freedom, two-sided p).

    Undefined (NaN, NaN) for n <= 3 or an undefined correlation. Two correlations equal up to
    rounding (ZERO_DELTA) give t = 0, p = 1: no difference was observed. This covers identical
    (or affinely related) metric scores, r23 = 1, where the formula is 0 * sqrt(x / 0); the
    determinant |R| of a correlation matrix is >= 0, so rounding below 0 is clamped. Any other
    zero denominator (|R| = 0 and r12 = -r13) leaves t undefined."""
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


# ----------------------------------------------------------------------------- a cell's summary


def _check_finite(name: str, values: np.ndarray) -> None:
    """Raise ValueError naming how many values are non-finite and the first index."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"{bad.size} non-finite {name} value(s) (NaN or inf), first at index {int(bad[0])}")


def correlate(scores: Sequence[float], human: Sequence[float], lps: Sequence[str],
              systems: Sequence[str | None] | None = None, *, higher_is_better: bool = True, bootstrap: int = 0,
              seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """A cell's correlations as stored in result.json and results.csv: Pearson and Kendall per
    language pair, their mean (`pearson`, `kendall`), pooled, at system level where systems are
    named, and with `bootstrap` > 0 resamples the 95% intervals of the pooled values.

    Lower-is-better metrics are negated first so positive always means agreement; plain floats
    (NaN where a correlation is undefined). `n_lps` counts all language pairs, `n_lps_too_small`
    those with fewer than MIN_POINTS segments (NaN, left out of the mean like constant ones).
    `note` says why correlations are undefined (`correlation_note`), None when all are defined."""
    n = len(scores)
    if len(human) != n or len(lps) != n:
        raise ValueError(f"length mismatch: {n} scores, {len(human)} human judgments, {len(lps)} language pairs")
    if systems is not None and len(systems) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(systems)} system names")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 resamples, got {bootstrap}")
    raw = np.asarray(scores, dtype=float).reshape(-1)
    h = np.asarray(human, dtype=float).reshape(-1)
    _check_finite("metric score", raw)
    _check_finite("human judgment", h)
    sign = 1 if higher_is_better else -1
    names = np.array(["" if s is None else str(s) for s in (systems if systems is not None else [""] * n)], dtype=object)
    seg = Segments(raw * sign, h, np.array([str(lp) for lp in lps], dtype=object), names, np.arange(n))
    r, tau = correlation_function("pearson"), correlation_function("kendall")

    def summary(groups_r: list[Group], groups_tau: list[Group], size: str) -> dict[str, Any]:
        return {"pearson": finite_mean([g.value for g in groups_r]), "kendall": finite_mean([g.value for g in groups_tau]),
                "n_lps": len(groups_r), "n_lps_too_small": sum(g.too_small for g in groups_r),
                "per_lp": {g.lp: {"pearson": g.value, "kendall": t.value, size: g.n} for g, t in zip(groups_r, groups_tau)}}

    segment = summary(lp_groups(seg, r), lp_groups(seg, tau), "n")
    system = None
    if has_systems(seg):
        system = summary(system_groups(seg, r), system_groups(seg, tau), "n_systems")
    boot = None
    if bootstrap > 0 and n > 0:
        dist = bootstrap_distribution(n, lambda idx: (r(seg.score[idx], h[idx]), tau(seg.score[idx], h[idx])),
                                      bootstrap, seed)
        boot = {"n_resamples": bootstrap, "seed": seed, "pearson_pooled_ci": list(percentile_interval(dist[:, 0])),
                "kendall_pooled_ci": list(percentile_interval(dist[:, 1]))}
    return {
        "pearson": segment["pearson"], "kendall": segment["kendall"], "n_lps": segment["n_lps"],
        "n_lps_too_small": segment["n_lps_too_small"], "min_points": MIN_POINTS,
        "pearson_pooled": r(seg.score, h), "kendall_pooled": tau(seg.score, h), "n": n,
        "per_lp": segment["per_lp"], "system": system, "bootstrap": boot, "sign": sign,
        "note": correlation_note(seg) or None,
    }


def correlation_note(seg: Segments) -> str:
    """Why some of a cell's correlations are undefined (Pearson and Kendall share the reasons):
    per language pair, then `pooled: ...` and `system level: ...`; '' when all are defined."""
    notes = [quality_note(seg, "pearson", "lp_mean")]
    for level, prefix in (("pooled", "pooled"), ("system", "system level")):
        if level == "system" and not has_systems(seg):
            continue
        note = quality_note(seg, "pearson", level)
        notes.append(f"{prefix}: {note}" if note else "")
    return "; ".join(n for n in notes if n)
