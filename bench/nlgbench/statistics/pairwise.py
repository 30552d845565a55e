"""Pairwise agreement statistics of modern MT meta-evaluation, each over the pairs its paper names:

  pairwise_accuracy       system pairs ordered alike by metric and humans (Kocmi et al. 2021)
  soft_pairwise_accuracy  1 - mean |p_human - p_metric| over system pairs, p from paired permutation
                          tests over segments (Thompson et al. 2024, the WMT24 metrics task)
  acc_eq                  pairwise accuracy with ties and tie calibration over the translations of
                          one source, averaged over sources (Deutsch, Foster & Freitag 2023, WMT23/24)
  darr_kendall            WMT17-20 DARR Kendall tau-like over translations of one source whose human
                          scores differ by more than a threshold (Ma et al. 2018, eq. 1)

Inputs are numpy arrays, scores signed so that higher means better; `source` is a key per segment
naming its source (translations of the same source share it). NaN where no pair is counted."""

from __future__ import annotations

import itertools
import math

import numpy as np

NAN = float("nan")
PERMUTATIONS = 1000  # soft pairwise accuracy's paired permutation tests (Thompson et al. 2024)
PERMUTATION_SEED = 0
ENUMERATE_UP_TO = 10  # with at most this many segments every sign pattern is enumerated (2^10 = 1024)


def pairwise_accuracy(x: np.ndarray, h: np.ndarray) -> float:
    """Share of the n(n-1)/2 system pairs whose order the metric `x` and the humans `h` agree on
    (Kocmi et al. 2021, "To Ship or Not to Ship"). Tie rule: a pair agrees when sign(x_i - x_j) =
    sign(h_i - h_j), so a pair tied on both sides agrees and a pair tied on one side only does not."""
    i, j = np.triu_indices(len(x), 1)
    if i.size == 0:
        return NAN
    return float(np.mean(np.sign(x[i] - x[j]) == np.sign(h[i] - h[j])))


def source_pairs(source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j), i before j in a stable order, of segments with the same source key."""
    order = np.argsort(source, kind="stable")
    keys = source[order]
    firsts, seconds = [], []
    for offset in range(1, len(order)):
        same = keys[offset:] == keys[:-offset]
        if not same.any():
            break  # sorted by key: no group is longer than offset
        firsts.append(order[:-offset][same])
        seconds.append(order[offset:][same])
    if not firsts:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    return np.concatenate(firsts), np.concatenate(seconds)


def pairwise_agreement(x: np.ndarray, h: np.ndarray) -> tuple[int, int]:
    """(system pairs ordered alike, system pairs): pairwise_accuracy's counts, which WMT pools over
    language pairs."""
    i, j = np.triu_indices(len(x), 1)
    return int(np.count_nonzero(np.sign(x[i] - x[j]) == np.sign(h[i] - h[j]))), int(i.size)


def darr_kendall(
    x: np.ndarray, h: np.ndarray, source: np.ndarray, threshold: float = 25.0, inclusive: bool = False
) -> float:
    """WMT's DARR Kendall tau-like (Ma et al. 2018, eq. 1): over pairs of translations of the same
    source whose human scores differ by more than `threshold` (WMT17-20: 25 raw DA points),
    (Concordant - Discordant) / (Concordant + Discordant), a metric tie counting as Discordant.
    `inclusive`: pairs differing by at least `threshold`, as mt-metrics-eval's KendallLike counts
    them to reproduce WMT's tables (at threshold 0 every pair counts, a human tie as Discordant)."""
    i, j = source_pairs(source)
    dh, dx = h[i] - h[j], x[i] - x[j]
    counted = (np.abs(dh) >= threshold) if inclusive else (np.abs(dh) > threshold)
    concordant = int(np.count_nonzero(counted & (np.sign(dx) == np.sign(dh)) & (dh != 0)))
    discordant = int(np.count_nonzero(counted)) - concordant
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else NAN


def _pair_weights(source: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Each pair's weight when pairwise accuracy is computed per source and averaged over sources,
    as exact integers: lcm(pairs per source) / (pairs of its source), proportional to
    1 / (pairs of its source x sources with a pair). Python ints (object array): sums of them are
    exact, so two epsilons with the same accuracy compare equal (float sums can differ in the last bit)."""
    _, inverse, counts = np.unique(source[i], return_inverse=True, return_counts=True)
    common = math.lcm(*(int(c) for c in set(counts.tolist())))
    return np.array([common // int(c) for c in counts.tolist()], dtype=object)[inverse]


def _exact_cumsum(weights: np.ndarray) -> list[int]:
    """0 followed by the running sums of integer weights, exactly."""
    return [0, *itertools.accumulate(int(w) for w in weights.tolist())]


def _mean_over_sources(source: np.ndarray, i: np.ndarray, agree: np.ndarray) -> float:
    """The share of agreeing pairs per source, averaged over the sources with a pair (fsum: exact
    shares such as 6/6 give exactly 1)."""
    _, inverse, counts = np.unique(source[i], return_inverse=True, return_counts=True)
    shares = np.bincount(inverse, weights=agree.astype(float)) / counts
    return math.fsum(shares.tolist()) / len(counts)


def acc_eq(x: np.ndarray, h: np.ndarray, source: np.ndarray, epsilon: float = 0.0) -> float:
    """Pairwise accuracy with ties (Deutsch, Foster & Freitag 2023, acc_eq) per source, averaged
    over sources: a pair agrees when both sides tie (|x_i - x_j| <= epsilon and h_i = h_j) or both
    order it the same way (|x_i - x_j| > epsilon); every pair counts, ties included."""
    i, j = source_pairs(source)
    if i.size == 0:
        return NAN
    return _mean_over_sources(source, i, pair_agreement(x, h, i, j, epsilon))


def pair_agreement(x: np.ndarray, h: np.ndarray, i: np.ndarray, j: np.ndarray, epsilon: float) -> np.ndarray:
    """acc_eq's verdict on each pair (i, j): True where the metric `x` (a tie when |x_i - x_j| <=
    epsilon) and the humans `h` agree, both tying or both ordering the pair the same way."""
    dx, dh = x[i] - x[j], h[i] - h[j]
    metric_tie = np.abs(dx) <= epsilon
    return np.where(dh == 0, metric_tie, ~metric_tie & (np.sign(dx) == np.sign(dh)))


def source_weights(source: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Each pair's weight in acc_eq's mean over sources: 1 / (pairs of its source x sources with a pair)."""
    _, inverse, counts = np.unique(source[i], return_inverse=True, return_counts=True)
    return 1.0 / (counts[inverse] * len(counts))


def calibrated_acc_eq(x: np.ndarray, h: np.ndarray, source: np.ndarray) -> tuple[float, float]:
    """acc_eq with tie calibration (Deutsch et al. 2023, sec. 5): the epsilon in {0} and every
    |x_i - x_j| of a counted pair that maximises acc_eq, the smallest on a draw; (acc_eq, epsilon).
    acc_eq(epsilon) is a step function, so these candidates reach its maximum."""
    i, j = source_pairs(source)
    if i.size == 0:
        return NAN, NAN
    dx, dh = np.abs(x[i] - x[j]), h[i] - h[j]
    w = _pair_weights(source, i)
    tie = dh == 0
    concordant = ~tie & (np.sign(x[i] - x[j]) == np.sign(dh)) & (dx > 0)
    candidates = np.unique(np.concatenate([[0.0], dx]))
    # tied pairs agree once epsilon >= |dx|; concordant pairs agree while epsilon < |dx|; counts
    # are exact integers, so the first (smallest) epsilon of the maximum is the one chosen
    tie_dx, tie_w = dx[tie], w[tie]
    order = np.argsort(tie_dx, kind="stable")
    tie_sums = _exact_cumsum(tie_w[order])
    tie_gain = [tie_sums[k] for k in np.searchsorted(tie_dx[order], candidates, "right").tolist()]
    conc_dx, conc_w = dx[concordant], w[concordant]
    order = np.argsort(conc_dx, kind="stable")
    conc_sums = _exact_cumsum(conc_w[order])
    conc_lost = [conc_sums[k] for k in np.searchsorted(conc_dx[order], candidates, "right").tolist()]
    accuracy = [gain + conc_sums[-1] - lost for gain, lost in zip(tie_gain, conc_lost, strict=True)]
    best = accuracy.index(max(accuracy))
    # the step function's value at the chosen epsilon, computed directly
    return acc_eq(x, h, source, float(candidates[best])), float(candidates[best])


def sign_patterns(n_segments: int, n_permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED) -> np.ndarray:
    """The +-1 swap patterns of a paired permutation test over `n_segments` segments: all 2^n when
    n <= ENUMERATE_UP_TO (the exact test), else `n_permutations` seeded random ones."""
    if n_segments <= ENUMERATE_UP_TO:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n_segments)), dtype=float).reshape(-1, n_segments)
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(n_permutations, n_segments)).astype(float) * 2.0 - 1.0


REFERENCE_SEED = 4  # mt-metrics-eval's soft pairwise accuracy (pce.compute_pairwise_p_values)


def reference_p_values(
    scores: np.ndarray, n_permutations: int = PERMUTATIONS, seed: int = REFERENCE_SEED
) -> np.ndarray:
    """pairwise_p_values as mt-metrics-eval computes them, to reproduce its soft pairwise accuracy:
    always `n_permutations` sampled patterns (uniform float32 draws of default_rng(seed), rounded
    to 0 or 1, mapped to -1 or +1), float32 scores and sums, and null >= observed compared without
    a tolerance (float32 rounding can miscount a null equal to the observed difference)."""
    rng = np.random.default_rng(seed)
    patterns = np.rint(rng.random(size=(n_permutations, scores.shape[1]), dtype=np.float32)) * 2.0 - 1.0
    scores32 = scores.astype(np.float32)
    partial, totals = patterns.astype(np.float32) @ scores32.T, scores32.sum(axis=1)
    n = len(scores)
    p = np.full((n, n), NAN)
    for i, j in zip(*np.triu_indices(n, 1), strict=True):
        p[i, j] = float(np.count_nonzero(partial[:, i] - partial[:, j] >= totals[i] - totals[j])) / n_permutations
    return p


def pairwise_p_values(scores: np.ndarray, patterns: np.ndarray) -> np.ndarray:
    """p[i, j], i < j: the paired permutation test's one-sided p-value that system i beats system j
    (rows of `scores`: systems; columns: the same segments), the share of swap patterns whose
    difference of sums is >= the observed one (Thompson et al. 2024). NaN below the diagonal.
    Each system's signed sums are computed once: patterns @ (a - b) = patterns @ a - patterns @ b."""
    n = len(scores)
    p = np.full((n, n), NAN)
    partial = patterns @ scores.T  # (patterns, systems)
    totals = scores.sum(axis=1)
    for i, j in zip(*np.triu_indices(n, 1), strict=True):
        observed = float(totals[i] - totals[j])
        tolerance = 1e-12 * max(1.0, float(np.sum(np.abs(scores[i])) + np.sum(np.abs(scores[j]))))
        p[i, j] = float(np.mean(partial[:, i] - partial[:, j] >= observed - tolerance))  # identity counts as >=
    return p


def system_matrix(
    values: np.ndarray, system: np.ndarray, source: np.ndarray, data_order: bool = False
) -> tuple[list[str], np.ndarray] | None:
    """Systems x sources matrix of segment values, systems and sources sorted by name (so that
    p(i > j) is for the pair's first system by name, whatever the data order; `data_order`: in
    order of first appearance, as mt-metrics-eval's matrices are); None unless every system has
    exactly one segment for each of the same sources (a paired test needs them)."""
    order = (lambda v: list(dict.fromkeys(v))) if data_order else (lambda v: sorted(set(v), key=str))
    systems, sources = order(system.tolist()), order(source.tolist())
    column = {s: k for k, s in enumerate(sources)}
    matrix = np.full((len(systems), len(sources)), np.nan)
    row = {s: k for k, s in enumerate(systems)}
    for value, sys_name, src in zip(values.tolist(), system.tolist(), source.tolist(), strict=True):
        if not np.isnan(matrix[row[sys_name], column[src]]):
            return None  # two segments of one system for one source
        matrix[row[sys_name], column[src]] = value
    return (systems, matrix) if not np.isnan(matrix).any() else None


def soft_pairwise_accuracy(
    x: np.ndarray,
    h: np.ndarray,
    system: np.ndarray,
    source: np.ndarray,
    n_permutations: int = PERMUTATIONS,
    seed: int = PERMUTATION_SEED,
    reference: bool = False,
) -> float:
    """Soft pairwise accuracy (Thompson et al. 2024; WMT24): 1 - mean over system pairs of
    |p_human(i > j) - p_metric(i > j)|, each p from the paired permutation test over the segments
    (`pairwise_p_values`, the same swap patterns for both). Segment-level inputs: every system
    must have scored the same sources; NaN otherwise or with fewer than 2 systems. `reference`:
    mt-metrics-eval's sampling (`reference_p_values`: always sampled, its seed, data order)
    instead of the exact enumeration up to ENUMERATE_UP_TO segments and the exact tie count."""
    metric = system_matrix(x, system, source, data_order=reference)
    human = system_matrix(h, system, source, data_order=reference)
    if metric is None or human is None or len(metric[0]) < 2:
        return NAN
    if reference:
        p_metric, p_human = reference_p_values(metric[1], n_permutations), reference_p_values(human[1], n_permutations)
    else:
        patterns = sign_patterns(metric[1].shape[1], n_permutations, seed)
        p_metric, p_human = pairwise_p_values(metric[1], patterns), pairwise_p_values(human[1], patterns)
    upper = np.triu_indices(len(metric[0]), 1)
    return float(1.0 - np.mean(np.abs(p_human - p_metric)[upper]))
