"""The source and item levels' figures computed over all groups at once (nlgbench.statistics.grouped)
against the per-group loop of SciPy calls they replace: Pearson to 1e-12 (SciPy's own rounding),
Kendall's tau-b exactly, the same groups undefined (fewer than 3 points, a constant side)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nlgbench.statistics.correlation import correlation_function
from nlgbench.statistics.grouped import group_ids, grouped_correlations
from nlgbench.statistics.levels import Segments, finite_mean, group_statistic, level_groups, level_points, quality
from nlgbench.statistics.resampling import draw

pytestmark = pytest.mark.unit


def mt_like(seed: int, n_sources: int = 40, docs: bool = False) -> Segments:
    """Sources of 1 to 6 translations over two lps, scores on a coarse grid (ties), a few constant groups."""
    rng = np.random.default_rng(seed)
    lp, sid, system, doc = [], [], [], []
    for k in range(n_sources):
        for s in range(int(rng.integers(1, 7))):
            lp.append("aa-en" if k % 2 else "bb-en")
            sid.append(k)
            system.append(f"S{s}")
            doc.append("" if docs and k % 7 == 0 else f"d{k // 3}")
    n = len(lp)
    x = np.round(rng.normal(size=n), 1)
    h = rng.integers(0, 4, size=n).astype(float)
    x[np.asarray(sid) % 9 == 4] = 0.5  # metric constant in these sources
    h[np.asarray(sid) % 11 == 3] = 2.0  # humans constant in these
    return Segments(
        x,
        h,
        np.array(lp, dtype=object),
        np.array(system, dtype=object),
        np.array(sid, dtype=object),
        np.array(doc, dtype=object) if docs else None,
    )


def loop(seg: Segments, method: str, level: str) -> list[float]:
    """The figures as level_groups computes them: one SciPy call per group."""
    return [g.value for g in level_groups(seg, level, group_statistic(method))]


@pytest.mark.parametrize("method", ["pearson", "kendall"])
@pytest.mark.parametrize("level", ["source", "item"])
def test_all_groups_at_once_give_the_loops_figures(method: str, level: str) -> None:
    for seed in range(6):
        seg = mt_like(seed, docs=True)
        points = level_points(seg, level)
        keys = (
            list(zip(seg.lp.tolist(), seg.seg_id.tolist(), strict=True))
            if level == "source"
            else [(lp, d) if d != "" else None for lp, d in zip(seg.lp.tolist(), seg.doc.tolist(), strict=True)]
        )
        ids, n_groups = group_ids(keys)
        assert n_groups == len(points)
        fast = grouped_correlations(method, seg.score, seg.human, ids, n_groups)
        slow = np.array(loop(seg, method, level))
        assert np.array_equal(np.isnan(fast), np.isnan(slow))
        assert 0 < np.count_nonzero(np.isnan(slow)) < len(slow)  # both kinds of group are tested
        if method == "kendall":
            assert np.array_equal(fast[~np.isnan(fast)], slow[~np.isnan(slow)])  # exact counts, SciPy's formula
        else:
            assert np.max(np.abs(fast - slow)[~np.isnan(slow)]) <= 1e-12
        assert quality(seg, method, level) == pytest.approx(finite_mean(slow.tolist()), abs=1e-12)


def test_bootstrap_draws_of_sources_give_the_loops_figures() -> None:
    # a drawn source twice is two groups (relabelled `id#k`), as level_points keeps them
    seg = mt_like(7)
    rng = np.random.default_rng(0)
    for _ in range(20):
        drawn = draw(seg, "sources", rng)
        for method in ("pearson", "kendall"):
            expected = finite_mean(loop(drawn, method, "source"))
            assert math.isclose(quality(drawn, method, "source"), expected, rel_tol=0, abs_tol=1e-12)


def test_a_group_is_a_plain_correlation() -> None:
    # one source of 4 translations: the grouped figure is the plain correlation of its points
    x, h = np.array([0.1, 0.4, 0.2, 0.3]), np.array([1.0, 3.0, 3.0, 2.0])
    ids = np.zeros(4, dtype=np.intp)
    for method in ("pearson", "kendall"):
        (value,) = grouped_correlations(method, x, h, ids, 1)
        assert value == pytest.approx(correlation_function(method)(x, h), abs=1e-15)
    # by hand, tau-b: pairs 01, 02, 03, 13 concordant, 23 discordant, 12 tied in h only: C - D = 3,
    # n0 = 6, Tx = 0, Th = 1: 3 / sqrt(6 * 5)
    assert grouped_correlations("kendall", x, h, ids, 1)[0] == 3 / math.sqrt(6) / math.sqrt(5)


def old_draw_positions(keys: list[object], positions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The draw as the per-unit loop made it: units in order of first appearance, each drawn unit's
    positions in data order, concatenated."""
    units: dict[object, list[int]] = {}
    for key, pos in zip(keys, positions.tolist(), strict=True):
        units.setdefault(key, []).append(pos)
    listed = list(units.values())
    chosen = rng.integers(0, len(listed), size=len(listed))
    return np.concatenate([np.asarray(listed[u]) for u in chosen])


@pytest.mark.parametrize("unit, field", [("sources", "seg_id"), ("systems", "system"), ("documents", "doc")])
def test_a_draw_of_units_is_the_per_unit_loops_draw(unit: str, field: str) -> None:
    seg = mt_like(3, docs=True)
    new, old = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(10):
        drawn = draw(seg, unit, new)
        expected = np.concatenate(
            [
                old_draw_positions(getattr(seg, field)[pos].tolist(), pos, old)
                for pos in (np.flatnonzero(seg.lp == lp) for lp in dict.fromkeys(seg.lp.tolist()))
            ]
        )
        assert np.array_equal(drawn.score, seg.score[expected]) and np.array_equal(drawn.human, seg.human[expected])
        assert np.array_equal(drawn.lp, seg.lp[expected])
