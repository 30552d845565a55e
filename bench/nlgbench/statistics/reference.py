"""The conventions of Google's mt-metrics-eval (the WMT Metrics task's code), where nlgbench's
defaults differ, as one option (`convention="mt-metrics-eval"`) that reproduces its figures:

  darr_kendall, kendall_like_all_pairs   pairs whose human scores differ by AT LEAST the threshold
                                         (its KendallLike, deliberately, to match WMT's tables; at
                                         threshold 0 a human tie counts as Discordant); nlgbench:
                                         by more than the threshold
  kendall_like_all_pairs, item/source    weighted by counted pairs (its AverageCorrelation with
                                         macro=False): sum(C - D) / sum(C + D) over the groups;
                                         nlgbench: the mean of the groups' figures
  pairwise_accuracy, system              every system pair of every language pair pooled into one
                                         accuracy (WMT's); nlgbench: the mean over language pairs
  soft_pairwise_accuracy                 1000 sampled swap patterns, its seed, float32
                                         (`pairwise.reference_p_values`); nlgbench: every pattern
                                         up to 10 segments, exact ties

Everything else is the same under both conventions. nlgbench's rule on small groups stays: a group
with fewer than MIN_POINTS points or a constant side has no figure and is left out (the reference
averages 2-point groups and scores a constant metric), so pooled counts leave those groups out too."""

from __future__ import annotations

from nlgbench.statistics.correlation import (
    MIN_POINTS,
    NAN,
    canonical_method,
    correlation_function,
    kendall_like_counts,
    undefined_reason,
)
from nlgbench.statistics.levels import (
    Points,
    Segments,
    canonical_level,
    finite_mean,
    level_points,
    method_reason,
    quality,
    source_keys,
)
from nlgbench.statistics.pairwise import darr_kendall, pairwise_agreement, soft_pairwise_accuracy

CONVENTIONS = ("nlgbench", "mt-metrics-eval")
REFERENCE = "mt-metrics-eval"
POOLED_BY_PAIRS = {  # (method, level) whose groups the reference pools by counted pairs
    ("kendall_like_all_pairs", "item"),
    ("kendall_like_all_pairs", "source"),
    ("pairwise_accuracy", "system"),
}


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
    if method == "darr_kendall":
        return finite_mean(
            [darr_kendall(p.segments.score, p.segments.human, source_keys(p.segments), threshold, True) for p in points]
        )
    if method == "kendall_like_all_pairs":
        corr = correlation_function(method, threshold, inclusive=True)
        return finite_mean([corr(p.x, p.h) for p in points])
    if method == "soft_pairwise_accuracy":
        return finite_mean([_reference_spa(p) for p in points])
    return quality(seg, method, level, threshold)


def _reference_spa(p: Points) -> float:
    """mt-metrics-eval's soft pairwise accuracy of one language pair's systems (>= MIN_POINTS)."""
    if len(p.x) < MIN_POINTS:
        return NAN
    s = p.segments
    return soft_pairwise_accuracy(s.score, s.human, s.system, source_keys(s), reference=True)


def _pooled_by_pairs(points: list[Points], method: str, threshold: float) -> float:
    """sum(agreeing) / sum(pairs) (pairwise accuracy) or sum(C - D) / sum(C + D) (tau-like, pairs
    differing by at least `threshold`) over the groups that have a figure under nlgbench's rule."""
    plus = minus = 0
    for p in points:
        if undefined_reason(p.x, p.h) is not None:
            continue
        if method == "pairwise_accuracy":
            agree, pairs = pairwise_agreement(p.x, p.h)
            plus, minus = plus + agree, minus + pairs - agree
        else:
            concordant, discordant = kendall_like_counts(p.x, p.h, threshold, inclusive=True)
            plus, minus = plus + concordant, minus + discordant
    if method == "pairwise_accuracy":
        return plus / (plus + minus) if plus + minus else NAN
    return (plus - minus) / (plus + minus) if plus + minus else NAN
