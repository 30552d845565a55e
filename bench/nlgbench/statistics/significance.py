"""Significance of a difference between two metrics' correlations: the paired bootstrap test (with the
ratio of the two qualities, quality retained) and Williams' test for correlations sharing the humans."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nlgbench.statistics.bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_distribution,
    percentile_interval,
)
from nlgbench.statistics.correlation import NAN, correlation_function
from nlgbench.statistics.levels import Segments, canonical_level, level_points, source_keys
from nlgbench.statistics.pairwise import calibrated_acc_eq, pair_agreement, source_pairs, source_weights

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


PERMUTATIONS = 1000
PERMUTATION_SEED = 0


@dataclass(frozen=True)
class PairedPermutation:
    """Candidate minus baseline quality, the two-sided p-value of the paired permutation test and
    the one-sided one mt-metrics-eval reports, `p_candidate_better` (PermutationSigDiff: #{delta* >=
    delta} / permutations, the p of "the candidate correlates better", without its early stopping)."""

    delta: float
    p_value: float
    n_permutations: int
    seed: int
    p_candidate_better: float = NAN
    n_swapped: int = 0  # what each permutation swaps: segments, or pairs of translations (perm_test 'pairs')


def standardized(score: np.ndarray) -> np.ndarray:
    """z-scores of one metric's scores over all segments, so that two metrics' scores can be swapped
    (Deutsch et al. 2021); every statistic here is invariant to this positive affine map."""
    spread = float(np.std(score))
    return (score - float(np.mean(score))) / spread if spread > 0 else score - float(np.mean(score))


def paired_permutation(
    candidate: Segments,
    baseline: Segments,
    statistic: Callable[[Segments], float],
    n_permutations: int = PERMUTATIONS,
    seed: int = PERMUTATION_SEED,
) -> PairedPermutation:
    """The paired permutation test of Deutsch, Dror & Roth (2021, perm-both): each segment's two
    (standardized) metric scores are swapped between the metrics with probability 1/2, independently
    per segment (a segment is one system's output for one input), and the difference of the
    statistic recomputed; p = (1 + #{|delta*| >= |delta|}) / (1 + n_permutations), two-sided."""
    if len(candidate) != len(baseline):
        raise ValueError(f"paired permutation test needs the same segments: {len(candidate)} vs {len(baseline)}")
    delta = statistic(candidate) - statistic(baseline)
    c, b = standardized(candidate.score), standardized(baseline.score)
    rng = np.random.default_rng(seed)
    deltas = []
    for _ in range(n_permutations):
        swap = rng.random(len(c)) < 0.5
        deltas.append(
            statistic(replace(candidate, score=np.where(swap, b, c)))
            - statistic(replace(candidate, score=np.where(swap, c, b)))
        )
    return permutation_result(delta, np.asarray(deltas, dtype=float), seed, len(c))


def permutation_result(delta: float, deltas: np.ndarray, seed: int, n_swapped: int) -> PairedPermutation:
    """A permutation test's p-values from the observed `delta` and the permuted ones: two-sided
    (1 + #{|delta*| >= |delta|}) / (1 + k), one-sided #{delta* >= delta} / k, within ZERO_DELTA (a
    delta* not finite counts as neither; both NaN when delta is not finite)."""
    n_permutations = len(deltas)
    if not math.isfinite(delta):
        return PairedPermutation(float(delta), NAN, n_permutations, seed, NAN, n_swapped)
    finite = np.isfinite(deltas)
    with np.errstate(invalid="ignore"):
        exceed = int(np.count_nonzero(finite & (np.abs(deltas) >= abs(delta) - ZERO_DELTA)))
        above = int(np.count_nonzero(finite & (deltas >= delta - ZERO_DELTA)))
    return PairedPermutation(
        float(delta), (1 + exceed) / (1 + n_permutations), n_permutations, seed, above / n_permutations, n_swapped
    )


def pair_permutation(
    candidate: Segments,
    baseline: Segments,
    level: str,
    n_permutations: int = PERMUTATIONS,
    seed: int = PERMUTATION_SEED,
) -> PairedPermutation:
    """WMT23/24's permutation test of acc_eq (mt-metrics-eval's PairwisePermutationSigDiff,
    perm_test='pairs'): each metric's tie epsilon is calibrated once per group of `level` on the
    real scores and kept fixed; each permutation swaps, with probability 1/2 per pair of
    translations of one source, the two metrics' verdicts on that pair (tie or order), and acc_eq
    is recomputed from the hybrid verdicts. Each pair's weight w in the level's figure (mean over
    sources, then over groups) is fixed, so delta* = sum of +-w (agree_c - agree_b). p-values as
    `paired_permutation`; draws: rng.random((n_permutations, pairs)) < 0.5, pairs in the groups'
    order, each group's in `source_pairs` order."""
    if len(candidate) != len(baseline):
        raise ValueError(f"paired permutation test needs the same segments: {len(candidate)} vs {len(baseline)}")
    groups = []
    for c, b in zip(level_points(candidate, level), level_points(baseline, level), strict=True):
        source = source_keys(c.segments)
        i, j = source_pairs(source)
        if i.size == 0:
            continue  # no pair: the group has no acc_eq for either metric
        h = c.segments.human
        agree_c = pair_agreement(c.segments.score, h, i, j, calibrated_acc_eq(c.segments.score, h, source)[1])
        agree_b = pair_agreement(b.segments.score, h, i, j, calibrated_acc_eq(b.segments.score, h, source)[1])
        groups.append(source_weights(source, i) * (agree_c.astype(float) - agree_b.astype(float)))
    if not groups:
        return PairedPermutation(NAN, NAN, n_permutations, seed, NAN, 0)
    contribution = np.concatenate(groups) / len(groups)  # each pair's weighted difference in the level's mean
    delta = float(contribution.sum())
    swapped = np.random.default_rng(seed).random((n_permutations, contribution.size)) < 0.5
    deltas = np.where(swapped, -contribution, contribution).sum(axis=1)
    return permutation_result(delta, deltas, seed, contribution.size)


WILLIAMS_NOT_AT_ITEM = "Williams' test does not apply to a mean of per-document correlations (item level)"
WILLIAMS_NOT_AT_SOURCE = (
    "Williams' test does not apply to a mean of per-source correlations (source level: each over a few systems)"
)
WILLIAMS_NOT_AT = {"item": WILLIAMS_NOT_AT_ITEM, "source": WILLIAMS_NOT_AT_SOURCE}  # levels without it, and why


def williams_by_group(candidate: Segments, baseline: Segments, level: str) -> list[dict[str, Any]]:
    """Williams' test at the level compared, one per group of that level: over the pooled segments
    (global), per language pair over its segments (segment) or over its systems' mean scores
    (system; n = systems). Each: `group`, `n`, the two Pearson correlations with the humans, theirs
    with each other, `t`, `p` (two-sided) and `p_observed_direction` (p / 2: the one-sided p in the
    direction the difference lies, whichever it is, as mt-metrics-eval's WilliamsTest default and its
    tables report it). None at the item and source levels (`WILLIAMS_NOT_AT`): []."""
    level = canonical_level(level)
    if level in WILLIAMS_NOT_AT:
        return []
    pearson = correlation_function("pearson")
    rows = []
    for c, b in zip(level_points(candidate, level), level_points(baseline, level), strict=True):
        r_c, r_b, r_cb = pearson(c.x, c.h), pearson(b.x, c.h), pearson(c.x, b.x)
        t, p = williams_test(r_c, r_b, r_cb, len(c.x))
        rows.append(
            {
                "group": c.name,
                "n": len(c.x),
                "r_candidate": r_c,
                "r_baseline": r_b,
                "r_between": r_cb,
                "t": t,
                "p": p,
                "p_observed_direction": p / 2,
            }
        )
    return rows
