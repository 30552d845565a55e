"""All correlation statistics of nlgbench, used by the worker, import-scores, report and compare.

As in mt-metrics-eval, one engine takes correlation functions: a correlation method is applied
at a level. Methods (METHODS): Pearson's r, Spearman's rho, Kendall's tau-b and tau-c (SciPy;
tau-c for data where ties dominate, e.g. Likert scores) and WMT's Kendall-like tau. Levels
(LEVELS), each with its grouping (GROUPING):

  global   pooled over all segments (grouping none; alias `pooled`, the efficiency study's)
  segment  per language pair `lp`, then the mean over pairs (WMT style; alias `lp_mean`)
  item     summary level: per document `doc_id` within its lp, over the segments of that
           document (its systems' outputs), then the mean over documents
  system   per lp, over the mean metric and human score of each system, then the mean over lps

Scores are signed so that higher always means better before they get here.

Minimum size: a correlation needs at least MIN_POINTS = 3 points. Through 2 points Pearson,
Kendall and Spearman are always +1 or -1 whatever the metric, so such a value says nothing.
A group (an lp's or a document's segments, or an lp's systems at system level) with fewer
points, or with a constant side, gets NaN; means over groups leave NaN out, and results count
the groups left out for being too small (`n_groups_too_small`, `n_lps_too_small`).
`quality_note` says in words why a correlation is undefined ("human scores constant in de-en");
a cell stores it as its correlation's `note`. A whole level is unavailable (`level_reason`)
without document ids (item) or system names (system), and at system level when every system
has one segment per language pair: its means would be the segments, the segment level again.

Means (system means, means over groups) are `mean`, math.fsum / n: the sum is correctly
rounded, so it does not depend on the order of the values, and two systems with the same
scores in another order get the same mean, as Kendall's ties need (issue 19 item 1). (Means of
different numbers of segments that are equal in decimals, [0.2, 0.2] and [0.1, 0.2, 0.3], can
still differ in the last bit: binary floats are not decimals.)
One seeded bootstrap (`bootstrap_distribution`) serves the confidence intervals of a cell and the
paired test of two cells: segments resampled with replacement, BOOTSTRAP_RESAMPLES times.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from scipy import stats

METHODS = ("pearson", "spearman", "kendall", "kendall_c", "kendall_like")
LEVELS = ("global", "segment", "item", "system")
LEVEL_ALIASES = {"pooled": "global", "lp_mean": "segment"}  # the names before issue 14, still accepted
GROUPING = {"global": "none", "segment": "lp", "item": "doc_id", "system": "lp"}  # what each level groups by
MIN_POINTS = 3  # fewer points: no correlation (NaN); see the module docstring
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
INTERVAL_PERCENTILES = (2.5, 97.5)  # the 95% percentile interval
ZERO_DELTA = 1e-12  # a bootstrap difference this close to 0 is 0 (rounding), on both sides of the test
PAIR_BLOCK = 1 << 22  # kendall_like compares at most this many pairs at once (bounded memory)
NAMES_SHOWN = 10  # a note names at most this many groups, then says how many more
NAN = float("nan")

Correlation = Callable[[np.ndarray, np.ndarray], float]  # (metric scores, human scores) -> coefficient


@dataclass(frozen=True)
class Segments:
    """One cell's segment scores in dataset order, signed so that higher always means better;
    `doc` is each segment's document id ("" = none), None when the data name no documents."""

    score: np.ndarray
    human: np.ndarray
    lp: np.ndarray
    system: np.ndarray
    seg_id: np.ndarray
    doc: np.ndarray | None = None

    def take(self, idx: np.ndarray) -> "Segments":
        return Segments(self.score[idx], self.human[idx], self.lp[idx], self.system[idx], self.seg_id[idx],
                        None if self.doc is None else self.doc[idx])

    def __len__(self) -> int:
        return len(self.score)


# ----------------------------------------------------------------------------- correlation functions


def pearson(x: np.ndarray, h: np.ndarray) -> float:
    """Pearson's r (SciPy)."""
    return float(stats.pearsonr(x, h)[0])


def spearman(x: np.ndarray, h: np.ndarray) -> float:
    """Spearman's rho (SciPy): Pearson's r of the ranks, ties given their mean rank."""
    return float(stats.spearmanr(x, h)[0])


def kendall(x: np.ndarray, h: np.ndarray) -> float:
    """Kendall's tau-b (SciPy): (C - D) / sqrt((n0 - Tx)(n0 - Th)), ties on either side handled
    (n0 pairs, Tx and Th tied in x and in h)."""
    return float(stats.kendalltau(x, h, variant="b")[0])


def kendall_c(x: np.ndarray, h: np.ndarray) -> float:
    """Stuart's tau-c (SciPy): 2 (C - D) / (n^2 (m - 1) / m), m = the smaller number of distinct
    values of x and h; reaches +-1 when one side has few distinct values (Likert scores)."""
    return float(stats.kendalltau(x, h, variant="c")[0])


def kendall_like(x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """WMT's DARR Kendall tau-like (Ma et al. 2018, WMT18 metrics task, eq. 1): over the pairs
    whose human scores differ by more than `threshold` (human ties never count),
    (Concordant - Discordant) / (Concordant + Discordant), where a metric tie counts as
    Discordant. WMT uses 25 raw DA points; on z-scored DA give a threshold in z units (0 keeps
    every pair with different human scores). Pairs are compared PAIR_BLOCK at a time."""
    if not threshold >= 0:
        raise ValueError(f"kendall_like threshold must be >= 0, got {threshold}")
    n, concordant, discordant = len(x), 0, 0
    rows = max(1, PAIR_BLOCK // max(n, 1))
    for start in range(0, n, rows):
        i = np.arange(start, min(n, start + rows))[:, None]  # first item of each pair, j > i the second
        j = np.arange(start + 1, n)[None, :]
        dx, dh = x[j] - x[i], h[j] - h[i]
        counted = (j > i) & (np.abs(dh) > threshold)
        agree = np.sign(dx) == np.sign(dh)  # dh != 0 here, so a metric tie (dx = 0) disagrees
        concordant += int(np.count_nonzero(counted & agree))
        discordant += int(np.count_nonzero(counted & ~agree))
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


def correlation_function(method: str, threshold: float = 0.0) -> Correlation:
    """The correlation `method` as a function of (x, h): NaN for fewer than MIN_POINTS points or
    a constant side. `threshold` is kendall_like's (>= 0)."""
    functions: dict[str, Correlation] = {"pearson": pearson, "spearman": spearman, "kendall": kendall,
                                         "kendall_c": kendall_c,
                                         "kendall_like": functools.partial(kendall_like, threshold=threshold)}
    if method not in functions:
        raise ValueError(f"unknown correlation method {method!r} (valid: {', '.join(METHODS)})")
    if not threshold >= 0:
        raise ValueError(f"kendall_like threshold must be >= 0, got {threshold}")
    return functools.partial(_guarded, functions[method])


def correlation(method: str, x: np.ndarray, h: np.ndarray, threshold: float = 0.0) -> float:
    """One correlation coefficient; NaN for fewer than MIN_POINTS points or a constant side."""
    return correlation_function(method, threshold)(x, h)


# ----------------------------------------------------------------------------- means


def mean(values: Iterable[float]) -> float:
    """The mean as math.fsum / n: the sum correctly rounded, whatever the order of the values, so
    systems whose scores have equal sums over the same number of segments get identical means
    (Kendall's ties). Every mean of this module (system means, means over groups) is this one."""
    values = list(values)
    return math.fsum(values) / len(values)


def finite_mean(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (the mean over groups, WMT style)."""
    finite = [v for v in values if math.isfinite(v)]
    return mean(finite) if finite else NAN


def _index(keys: Sequence[Any]) -> dict[Any, list[int]]:
    """Positions of each key, keys in order of first appearance."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


def _system_index(seg: Segments) -> dict[tuple[str, str], list[int]]:
    """Segment positions per (lp, system) with a system name, in order of first appearance."""
    keys = [(lp, s) if s != "" else None for lp, s in zip(seg.lp.tolist(), seg.system.tolist())]
    return {k: idx for k, idx in _index(keys).items() if k is not None}


def system_means(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean metric and human score per (lp, system) with a system name: (x, h, lp of each system),
    systems in order of first appearance. Segments without a system name are left out."""
    index = _system_index(seg)
    x = np.array([mean(seg.score[idx].tolist()) for idx in index.values()], dtype=float)
    h = np.array([mean(seg.human[idx].tolist()) for idx in index.values()], dtype=float)
    return x, h, np.array([lp for lp, _ in index], dtype=object)


# ----------------------------------------------------------------------------- levels


def canonical_level(name: str) -> str:
    """The level's name in LEVELS, `pooled` and `lp_mean` read as `global` and `segment`."""
    if name in LEVELS:
        return name
    if name in LEVEL_ALIASES:
        return LEVEL_ALIASES[name]
    aliases = ", ".join(f"{old} = {new}" for old, new in LEVEL_ALIASES.items())
    raise ValueError(f"unknown correlation level {name!r} (valid: {', '.join(LEVELS)}; aliases: {aliases})")


def has_systems(seg: Segments) -> bool:
    """Whether any segment names its system (the `system` level needs them)."""
    return any(s != "" for s in seg.system.tolist())


def has_docs(seg: Segments) -> bool:
    """Whether any segment names its document (the `item` level needs them)."""
    return seg.doc is not None and any(d != "" for d in seg.doc.tolist())


def level_reason(seg: Segments, level: str) -> str | None:
    """Why `level` is unavailable for these segments as a whole, None when it is available:
    the item level needs document ids, the system level system names, and it is undefined when
    every system has exactly one segment per language pair (issue 19 item 8: its "means" would
    be single segments and the figure the segment level's)."""
    level = canonical_level(level)
    if level == "item" and not has_docs(seg):
        return "no document ids (doc_id)"
    if level == "system":
        if not has_systems(seg):
            return "no system names"
        if all(len(idx) == 1 for idx in _system_index(seg).values()):
            return ("every system has one segment per language pair, so the system level would equal the "
                    "segment level")
    return None


def available_levels(seg: Segments) -> tuple[str, ...]:
    """The levels defined for these segments (global and segment always)."""
    return tuple(level for level in LEVELS if level_reason(seg, level) is None)


def level_points(seg: Segments, level: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The groups a level correlates, each as (name, metric scores, human scores), groups in order
    of first appearance: all segments (`global`, one group named ""), an lp's segments
    (`segment`), a document's segments (`item`; named by its doc id, `lp/doc` when the data have
    several lps; segments without a doc id left out) or an lp's systems' mean scores (`system`;
    every lp listed, one without named systems with no points). No groups for an unavailable level."""
    level = canonical_level(level)
    if level_reason(seg, level) is not None:
        return []
    if level == "global":
        return [("", seg.score, seg.human)]
    if level == "segment":
        return [(lp, seg.score[idx], seg.human[idx]) for lp, idx in _index(seg.lp.tolist()).items()]
    if level == "item":
        assert seg.doc is not None  # level_reason checked
        keys = [(lp, d) if d != "" else None for lp, d in zip(seg.lp.tolist(), seg.doc.tolist())]
        groups = {k: idx for k, idx in _index(keys).items() if k is not None}
        several_lps = len({lp for lp, _ in groups}) > 1
        return [(f"{lp}/{doc}" if several_lps else doc, seg.score[idx], seg.human[idx]) for (lp, doc), idx in groups.items()]
    x, h, lps = system_means(seg)
    by_lp = _index(lps.tolist())
    return [(lp, x[by_lp.get(lp, [])], h[by_lp.get(lp, [])]) for lp in dict.fromkeys(seg.lp.tolist())]


@dataclass(frozen=True)
class Group:
    """One group of a level (a language pair, or a document at item level): its correlation and
    its number of points (segments, or systems at system level)."""

    name: str
    value: float
    n: int

    @property
    def lp(self) -> str:  # the name of the group at the segment and system levels
        return self.name

    @property
    def too_small(self) -> bool:
        return self.n < MIN_POINTS


def level_groups(seg: Segments, level: str, corr: Correlation) -> list[Group]:
    """The groups of a level (see level_points) with their correlations; the level's figure is
    their finite mean."""
    return [Group(name, corr(x, h), len(x)) for name, x, h in level_points(seg, level)]


def lp_groups(seg: Segments, corr: Correlation) -> list[Group]:
    """Segment level per language pair, pairs in order of first appearance."""
    return level_groups(seg, "segment", corr)


def system_groups(seg: Segments, corr: Correlation) -> list[Group]:
    """System level per language pair (over its systems' mean scores); every pair of the
    segments is listed, one without named systems with n = 0."""
    return level_groups(seg, "system", corr)


def quality(seg: Segments, method: str = "pearson", level: str = "global", threshold: float = 0.0) -> float:
    """Correlation with humans at a level (see the module docstring): the finite mean over the
    level's groups, the one group's value at the global level; NaN for an unavailable level."""
    corr = correlation_function(method, threshold)
    return finite_mean([g.value for g in level_groups(seg, canonical_level(level), corr)])


def _names(names: Sequence[str]) -> str:
    """Names for a note: at most NAMES_SHOWN, then how many more."""
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def quality_note(seg: Segments, method: str = "pearson", level: str = "global", threshold: float = 0.0) -> str:
    """Why `quality(seg, method, level)`, or a group of its mean, is undefined, e.g.
    'human scores constant in de-en, fr-en'; '' when every correlation it involves is defined."""
    level = canonical_level(level)
    corr = correlation_function(method, threshold)
    reason = level_reason(seg, level)
    if reason is not None:
        return reason
    unit = "systems" if level == "system" else "segments"
    groups_by_reason: dict[str, list[str]] = {}
    for name, x, h in level_points(seg, level):
        if not math.isfinite(corr(x, h)):
            groups_by_reason.setdefault(undefined_reason(x, h, unit) or f"{method} undefined", []).append(name)
    if level == "global":
        return "; ".join(groups_by_reason)
    return "; ".join(f"{reason} in {_names(names)}" for reason, names in groups_by_reason.items())


def too_small_groups(seg: Segments, level: str) -> list[str]:
    """The groups left out of a level's mean for having fewer than MIN_POINTS segments (segment,
    item) or systems (system); none at the global level or for an unavailable level."""
    level = canonical_level(level)
    if level == "global":
        return []
    return [name for name, x, _ in level_points(seg, level) if len(x) < MIN_POINTS]


too_small_lps = too_small_groups  # the name before the item level


def left_out_note(level: str, names: Sequence[str]) -> str:
    """The line report and compare print for the groups `too_small_groups` names."""
    level = canonical_level(level)
    groups = "document(s)" if level == "item" else "language pair(s)"
    unit = "systems" if level == "system" else "segments"
    return (f"{len(names)} {groups} with fewer than {MIN_POINTS} {unit} have no correlation and are left out "
            f"of the {level} level: {_names(list(names))}")


def figure_table(seg: Segments, levels: Sequence[str] | None = None, methods: Sequence[str] = METHODS,
                 threshold: float = 0.0) -> list[dict[str, Any]]:
    """Every figure as a long table, one dict per level x method: `level`, `grouping`, `method`,
    `value` (NaN where undefined), `n` (points of all its groups: segments, or systems at system
    level), `n_groups`, `n_groups_too_small` (fewer than MIN_POINTS points) and `n_groups_used`
    (groups with a defined correlation, those averaged). `levels` None: the available ones."""
    chosen = available_levels(seg) if levels is None else tuple(canonical_level(level) for level in levels)
    rows = []
    for level in chosen:
        points = level_points(seg, level)
        for method in methods:
            corr = correlation_function(method, threshold)
            values = [corr(x, h) for _, x, h in points]
            rows.append({"level": level, "grouping": GROUPING[level], "method": method, "value": finite_mean(values),
                         "n": sum(len(x) for _, x, _ in points), "n_groups": len(points),
                         "n_groups_too_small": sum(len(x) < MIN_POINTS for _, x, _ in points),
                         "n_groups_used": sum(math.isfinite(v) for v in values)})
    return rows


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


def paired_bootstrap(candidate: Segments, baseline: Segments, statistic: Callable[[Segments], float],
                     n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedBootstrap:
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
        statistic(candidate), statistic(baseline),
        bootstrap_distribution(n, lambda idx: statistic(candidate.take(idx)), n_resamples, seed),
        bootstrap_distribution(n, lambda idx: statistic(baseline.take(idx)), n_resamples, seed), n_resamples, seed)


def paired_from_replicates(candidate: float, baseline: float, candidate_replicates: np.ndarray,
                           baseline_replicates: np.ndarray, n_resamples: int, seed: int) -> PairedBootstrap:
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
    return PairedBootstrap(float(candidate - baseline), lo, hi, p, n_resamples, seed,
                           candidate / baseline if baseline else NAN, ratio_lo, ratio_hi)


# ----------------------------------------------------------------------------- speed-up


@dataclass(frozen=True)
class SpeedUp:
    """How many times faster the candidate is: `value` = median baseline time / median candidate time
    (the ratio of medians: the one speed-up of nlgbench, in compare, report and tables); `low` and
    `high` = the smallest and largest ratio over every (baseline repeat, candidate repeat) pair, the
    spread the repeats allow. NaN where a side has no timed repeat."""

    value: float
    low: float
    high: float


def speedup(baseline: Sequence[float], candidate: Sequence[float]) -> SpeedUp:
    """The speed-up of `candidate` over `baseline` from their repeats' times (any one unit)."""
    import statistics

    base = [float(t) for t in baseline if math.isfinite(t) and t > 0]
    cand = [float(t) for t in candidate if math.isfinite(t) and t > 0]
    if not base or not cand:
        return SpeedUp(NAN, NAN, NAN)
    ratios = [b / c for b in base for c in cand]
    return SpeedUp(statistics.median(base) / statistics.median(cand), min(ratios), max(ratios))


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


SUMMARY_METHODS = ("pearson", "kendall", "spearman")  # the methods of correlate's level sections


def correlate(scores: Sequence[float], human: Sequence[float], lps: Sequence[str],
              systems: Sequence[str | None] | None = None, docs: Sequence[str | None] | None = None, *,
              higher_is_better: bool = True, bootstrap: int = 0, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """A cell's correlations as stored in result.json and results.csv. Segment level: Pearson,
    Kendall (tau-b) and Spearman per language pair (`per_lp`) and their mean (`pearson`,
    `kendall`, `spearman`); global (`*_pooled`); `system` (None without system names, or when
    every system has one segment per lp); `item` (None without document ids); `figures`, every
    level x METHODS as figure_table's rows; with `bootstrap` > 0 resamples the 95% intervals of
    the pooled Pearson and Kendall.

    Lower-is-better metrics are negated first so positive always means agreement; plain floats
    (NaN where a correlation is undefined). `n_lps` counts all language pairs, `n_lps_too_small`
    those with fewer than MIN_POINTS segments (NaN, left out of the mean like constant ones).
    `note` says why correlations or levels are undefined (`correlation_note`), None when all are."""
    n = len(scores)
    if len(human) != n or len(lps) != n:
        raise ValueError(f"length mismatch: {n} scores, {len(human)} human judgments, {len(lps)} language pairs")
    if systems is not None and len(systems) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(systems)} system names")
    if docs is not None and len(docs) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(docs)} document ids")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 resamples, got {bootstrap}")
    raw = np.asarray(scores, dtype=float).reshape(-1)
    h = np.asarray(human, dtype=float).reshape(-1)
    _check_finite("metric score", raw)
    _check_finite("human judgment", h)
    sign = 1 if higher_is_better else -1

    def names(values: Sequence[str | None] | None) -> np.ndarray:
        return np.array(["" if v is None else str(v) for v in (values if values is not None else [""] * n)], dtype=object)

    seg = Segments(raw * sign, h, np.array([str(lp) for lp in lps], dtype=object), names(systems), np.arange(n),
                   None if docs is None else names(docs))
    figures = figure_table(seg)
    value = {(f["level"], f["method"]): f for f in figures}
    corr = {m: correlation_function(m) for m in SUMMARY_METHODS}

    def per_group(level: str, size: str) -> dict[str, dict[str, Any]]:
        groups = {m: level_groups(seg, level, corr[m]) for m in SUMMARY_METHODS}
        return {g.name: {**{m: groups[m][i].value for m in SUMMARY_METHODS}, size: g.n}
                for i, g in enumerate(groups["pearson"])}

    def section(level: str) -> dict[str, Any]:
        return {m: value[level, m]["value"] for m in SUMMARY_METHODS}

    segment = value["segment", "pearson"]
    system = None
    if ("system", "pearson") in value:
        system = {**section("system"), "n_lps": value["system", "pearson"]["n_groups"],
                  "n_lps_too_small": value["system", "pearson"]["n_groups_too_small"],
                  "per_lp": per_group("system", "n_systems")}
    item = None
    if ("item", "pearson") in value:
        item = {**section("item"), "n_docs": value["item", "pearson"]["n_groups"],
                "n_docs_too_small": value["item", "pearson"]["n_groups_too_small"]}
    boot = None
    r, tau = corr["pearson"], corr["kendall"]
    if bootstrap > 0 and n > 0:
        dist = bootstrap_distribution(n, lambda idx: (r(seg.score[idx], h[idx]), tau(seg.score[idx], h[idx])),
                                      bootstrap, seed)
        boot = {"n_resamples": bootstrap, "seed": seed, "pearson_pooled_ci": list(percentile_interval(dist[:, 0])),
                "kendall_pooled_ci": list(percentile_interval(dist[:, 1]))}
    return {
        **section("segment"), "n_lps": segment["n_groups"], "n_lps_too_small": segment["n_groups_too_small"],
        "min_points": MIN_POINTS, **{f"{m}_pooled": value["global", m]["value"] for m in SUMMARY_METHODS}, "n": n,
        "per_lp": per_group("segment", "n"), "system": system, "item": item, "bootstrap": boot, "sign": sign,
        "note": correlation_note(seg) or None, "figures": figures,
    }


def correlation_note(seg: Segments) -> str:
    """Why some of a cell's correlations are undefined (Pearson, Kendall and Spearman share the
    reasons): per language pair, then `pooled: ...`, `item level: ...` and `system level: ...`
    (item level only with document ids, system level only with system names); '' when all are."""
    notes = [quality_note(seg, "pearson", "segment")]
    for level, prefix in (("global", "pooled"), ("item", "item level"), ("system", "system level")):
        if (level == "item" and not has_docs(seg)) or (level == "system" and not has_systems(seg)):
            continue
        note = quality_note(seg, "pearson", level)
        notes.append(f"{prefix}: {note}" if note else "")
    return "; ".join(n for n in notes if n)
