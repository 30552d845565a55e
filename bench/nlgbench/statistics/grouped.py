"""Pearson's r and Kendall's tau-b of many small groups at once (the source and item levels: one
group per source or document, a few systems each), in numpy over all groups instead of one SciPy
call per group: a bootstrap draw of 650 sources is one pass. The same figures as
`correlation.pearson` / `correlation.kendall` per group (Pearson to rounding, 1e-15; tau-b exactly,
as SciPy computes it from the integer pair counts) and the same NaN rule (fewer than MIN_POINTS
points or a constant side, `correlation.undefined_reason`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nlgbench.statistics.correlation import MIN_POINTS

GROUPED_METHODS = ("pearson", "kendall")


def group_ids(keys: Sequence[Any]) -> tuple[np.ndarray, int]:
    """Each point's group number (groups in order of first appearance; a key None is in no group,
    -1) and the number of groups."""
    index: dict[Any, int] = {}
    ids = [-1 if k is None else index.setdefault(k, len(index)) for k in keys]
    return np.asarray(ids, dtype=np.intp), len(index)


def group_starts(counts: np.ndarray) -> np.ndarray:
    """Where each group begins when groups of `counts` points lie one after the other."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)


def grouped_correlations(method: str, x: np.ndarray, h: np.ndarray, ids: np.ndarray, n_groups: int) -> np.ndarray:
    """`method` (GROUPED_METHODS) of (x, h) within each group `ids` (0 .. n_groups - 1; -1: none),
    one value per group, NaN where the group has fewer than MIN_POINTS points or a constant side."""
    keep = ids >= 0
    order = np.argsort(ids[keep], kind="stable")  # points of a group together, in data order
    g, x, h = ids[keep][order], x[keep][order], h[keep][order]
    n = np.bincount(g, minlength=n_groups)
    starts = group_starts(n)
    present = n > 0
    constant = np.zeros(n_groups, dtype=bool)
    if g.size:
        for side in (x, h):  # min == max: every value equal to the first, as undefined_reason tests
            lo, hi = np.minimum.reduceat(side, starts[present]), np.maximum.reduceat(side, starts[present])
            constant[present] |= lo == hi
    values = (pearson_by_group if method == "pearson" else kendall_by_group)(x, h, g, n, n_groups)
    values[(n < MIN_POINTS) | constant] = np.nan
    return values


def pearson_by_group(x: np.ndarray, h: np.ndarray, g: np.ndarray, n: np.ndarray, n_groups: int) -> np.ndarray:
    """Pearson's r per group as SciPy's pearsonr computes it: deviations from the mean, their norm
    taken after scaling by the largest absolute deviation, the cosine of the two deviation vectors
    clipped to [-1, 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = x - (np.bincount(g, weights=x, minlength=n_groups) / n)[g]
        dh = h - (np.bincount(g, weights=h, minlength=n_groups) / n)[g]
        norm_x, norm_h = _norm(dx, g, n_groups), _norm(dh, g, n_groups)
        r = np.bincount(g, weights=(dx / norm_x[g]) * (dh / norm_h[g]), minlength=n_groups)
    return np.clip(r, -1.0, 1.0)


def _norm(d: np.ndarray, g: np.ndarray, n_groups: int) -> np.ndarray:
    """Each group's Euclidean norm of `d`, scaled by its largest |d| first (SciPy's guard against overflow)."""
    largest = np.zeros(n_groups)
    np.maximum.at(largest, g, np.abs(d))
    return largest * np.sqrt(np.bincount(g, weights=(d / largest[g]) ** 2, minlength=n_groups))


def kendall_by_group(x: np.ndarray, h: np.ndarray, g: np.ndarray, n: np.ndarray, n_groups: int) -> np.ndarray:
    """Kendall's tau-b per group from exact pair counts, as SciPy's kendalltau: (C - D) / sqrt(n0 -
    Tx) / sqrt(n0 - Th), n0 = pairs, Tx and Th the pairs tied in x and in h, clipped to [-1, 1]."""
    first, second = [], []
    starts = group_starts(n)
    for size in range(2, int(n.max(initial=0)) + 1):
        groups = np.flatnonzero(n == size)  # every pair (a, b), a < b, of the groups of this size
        a, b = np.triu_indices(size, 1)
        first.append((starts[groups][:, None] + a[None, :]).ravel())
        second.append((starts[groups][:, None] + b[None, :]).ravel())
    i = np.concatenate(first) if first else np.zeros(0, dtype=np.intp)
    j = np.concatenate(second) if second else np.zeros(0, dtype=np.intp)
    sx, sh, pg = np.sign(x[j] - x[i]), np.sign(h[j] - h[i]), g[i]
    concordant_minus_discordant = np.bincount(pg, weights=sx * sh, minlength=n_groups)
    pairs = n * (n - 1) // 2
    tied_x = np.bincount(pg, weights=sx == 0, minlength=n_groups)
    tied_h = np.bincount(pg, weights=sh == 0, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = concordant_minus_discordant / np.sqrt(pairs - tied_x) / np.sqrt(pairs - tied_h)
    return np.clip(tau, -1.0, 1.0)
