"""The conventions of Google's mt-metrics-eval (the WMT Metrics task's code), where nlgbench's
defaults differ, as one option (`convention="mt-metrics-eval"`) that reproduces its figures:

  darr_kendall, kendall_like_all_pairs   pairs whose human scores differ by AT LEAST the threshold
                                         (its KendallLike, deliberately, to match WMT's tables; at
                                         threshold 0 a human tie counts as Discordant); nlgbench:
                                         by more than the threshold
  kendall_like_all_pairs, item/source    weighted by counted pairs (its AverageCorrelation with
                                         macro=False): sum(C - D) / sum(C + D) over the groups;
                                         nlgbench: the mean of the groups' figures
  darr_kendall, kendall_like_all_pairs   a group with a constant side counts its pairs (KendallLike
                                         has no such check: a pair tied in human or metric score is
                                         Discordant); nlgbench: the group has no figure
  pairwise_accuracy, system              every system pair of every language pair pooled into one
                                         accuracy (WMT's); nlgbench: the mean over language pairs
  soft_pairwise_accuracy                 1000 sampled swap patterns, its seed, float32
                                         (`pairwise.reference_p_values`); nlgbench: every pattern
                                         up to 10 segments, exact ties

Everything else is the same under both conventions. nlgbench's rule on small groups stays: a group
with fewer than MIN_POINTS points has no figure and is left out (the reference averages 2-point
groups), so pooled counts leave those groups out too; so is a group with a constant side for every
method but the two tau-likes. compare counts the groups left out, and says why a figure is
undefined, by the convention in force (`convention_statistic`, `convention_note`)."""

from __future__ import annotations

from nlgbench.statistics.correlation import (
    MIN_POINTS,
    NAN,
    canonical_method,
    kendall_like_counts,
    undefined_reason,
)
from nlgbench.statistics.levels import (
    LEFT_OUT_WHY,
    Points,
    Segments,
    Statistic,
    canonical_level,
    finite_mean,
    group_statistic,
    groups_left_out,
    level_points,
    level_reason,
    method_reason,
    point_unit,
    quality,
    quality_note,
    source_keys,
    undefined_groups_note,
)
from nlgbench.statistics.pairwise import darr_kendall, pairwise_agreement, soft_pairwise_accuracy, source_pairs

CONVENTIONS = ("nlgbench", "mt-metrics-eval")
REFERENCE = "mt-metrics-eval"
POOLED_BY_PAIRS = {  # (method, level) whose groups the reference pools by counted pairs
    ("kendall_like_all_pairs", "item"),
    ("kendall_like_all_pairs", "source"),
    ("pairwise_accuracy", "system"),
}
TAU_LIKE = ("darr_kendall", "kendall_like_all_pairs")  # counted as the reference's KendallLike counts
TAU_LIKE_LEFT_OUT_WHY = f"fewer than {MIN_POINTS} points or no pair counted"  # the reference's rule for them


def convention_quality(
    seg: Segments, method: str, level: str, threshold: float = 0.0, convention: str = "nlgbench"
) -> float:
    """`levels.quality` under `convention` (CONVENTIONS): nlgbench's, or mt-metrics-eval's where
    they differ (the module docstring)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r} (valid: {', '.join(CONVENTIONS)})")
    method, level = canonical_method(method), canonical_level(level)
    if convention == "nlgbench" or method_reason(method, level) is not None:
        return quality(seg, method, level, threshold)
    points = level_points(seg, level)
    if (method, level) in POOLED_BY_PAIRS:
        return _pooled_by_pairs(points, method, threshold)
    if method in (*TAU_LIKE, "soft_pairwise_accuracy"):
        return finite_mean([convention_statistic(method, threshold, convention)(p) for p in points])
    return quality(seg, method, level, threshold)


def convention_statistic(method: str, threshold: float = 0.0, convention: str = "nlgbench") -> Statistic:
    """One group's figure under `convention`: `levels.group_statistic`, or mt-metrics-eval's where it
    differs (the two tau-likes, pairs differing by at least `threshold`, constant sides counted;
    soft pairwise accuracy's sampled p-values)."""
    method = canonical_method(method)
    if convention == "nlgbench":
        return group_statistic(method, threshold)
    if method == "darr_kendall":
        return lambda p: darr_kendall(p.segments.score, p.segments.human, source_keys(p.segments), threshold, True)
    if method == "kendall_like_all_pairs":
        return lambda p: _reference_kendall_like(p, threshold)
    if method == "soft_pairwise_accuracy":
        return _reference_spa
    return group_statistic(method, threshold)


def _reference_kendall_like(p: Points, threshold: float) -> float:
    """KendallLike of one group (at least MIN_POINTS points, a constant side included): (C - D) / (C + D)
    over the pairs differing by at least `threshold` in human score; NaN without such a pair."""
    if len(p.x) < MIN_POINTS:
        return NAN
    concordant, discordant = kendall_like_counts(p.x, p.h, threshold, inclusive=True)
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else NAN


def convention_groups_left_out(
    seg: Segments, method: str, level: str, threshold: float = 0.0, convention: str = "nlgbench"
) -> tuple[tuple[int, int], str]:
    """((groups without a figure, groups), why in words) under `convention`: `levels.groups_left_out`
    with the convention's own figure of each group (`convention_statistic`)."""
    counted = groups_left_out(seg, method, level, threshold, convention_statistic(method, threshold, convention))
    reference_tau = convention == REFERENCE and canonical_method(method) in TAU_LIKE
    return counted, TAU_LIKE_LEFT_OUT_WHY if reference_tau else LEFT_OUT_WHY


def convention_note(
    seg: Segments, method: str, level: str, threshold: float = 0.0, convention: str = "nlgbench"
) -> str:
    """`levels.quality_note` under `convention`: for the tau-likes under the reference's, why a group
    has no figure in its terms (too few points, or no pair differing by AT LEAST the threshold)."""
    method, level = canonical_method(method), canonical_level(level)
    if convention == "nlgbench" or method not in TAU_LIKE:
        return quality_note(seg, method, level, threshold)
    reason = level_reason(seg, level) or method_reason(method, level)
    if reason is not None:
        return reason
    unit = point_unit(level)

    def why(p: Points) -> str:
        if method == "darr_kendall":
            if source_pairs(source_keys(p.segments))[0].size == 0:
                return "every source has one translation (no pairs of translations of one source)"
            return f"no pair of translations of one source differs by at least {threshold:g} in human score"
        if len(p.x) < MIN_POINTS:
            return f"fewer than {MIN_POINTS} {unit}"
        return f"no pair of {unit} differs by at least {threshold:g} in human score"

    return undefined_groups_note(seg, level, convention_statistic(method, threshold, convention), why)


def _reference_spa(p: Points) -> float:
    """mt-metrics-eval's soft pairwise accuracy of one language pair's systems (>= MIN_POINTS)."""
    if len(p.x) < MIN_POINTS:
        return NAN
    s = p.segments
    return soft_pairwise_accuracy(s.score, s.human, s.system, source_keys(s), reference=True)


def _pooled_by_pairs(points: list[Points], method: str, threshold: float) -> float:
    """sum(agreeing) / sum(pairs) (pairwise accuracy, over the groups with a figure under nlgbench's
    rule) or sum(C - D) / sum(C + D) (tau-like, pairs differing by at least `threshold`, over the
    groups of at least MIN_POINTS points, a constant side counted as KendallLike counts it)."""
    plus = minus = 0
    for p in points:
        if method == "pairwise_accuracy" and undefined_reason(p.x, p.h) is None:
            agree, pairs = pairwise_agreement(p.x, p.h)
            plus, minus = plus + agree, minus + pairs - agree
        elif method != "pairwise_accuracy" and len(p.x) >= MIN_POINTS:
            concordant, discordant = kendall_like_counts(p.x, p.h, threshold, inclusive=True)
            plus, minus = plus + concordant, minus + discordant
    if method == "pairwise_accuracy":
        return plus / (plus + minus) if plus + minus else NAN
    return (plus - minus) / (plus + minus) if plus + minus else NAN
