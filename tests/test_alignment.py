"""Aligners on hand-made embeddings with known distances, and the lower-bound relations."""

from __future__ import annotations

import numpy as np
import pytest

from nlgbench.errors import UserError
from nlgbench.metrics.alignment import ALIGNERS, align, euclidean_cost, get_aligner, rwmd, wcd, wmd


def test_identical_texts_are_at_distance_zero() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(5, 8)), rng.random(5)
    # the cost |x|^2 + |y|^2 - 2 x.y (float64) can leave round-off (d + 2) u 4 max|x|^2 in a zero distance,
    # and sqrt amplifies it: sqrt(10 * 1.1e-16 * 4 * 10) = 2e-7 here (seen: exactly 0)
    tol = float(np.sqrt((x.shape[1] + 2) * np.finfo(np.float64).eps / 2 * 4 * (x**2).sum(1).max()))
    for name in ALIGNERS:
        assert align(name, x, w, x, w) == pytest.approx(0.0, abs=tol)


def test_known_distances_by_hand() -> None:
    # two points at x=0 and x=2 against one point at x=1: every unit of mass moves 1
    x = np.array([[0.0], [2.0]])
    y = np.array([[1.0]])
    a, b = np.array([1.0, 1.0]), np.array([3.0])
    # float64 on small integers and O(25) squares: a few roundings, <= 1e-14 relative
    assert align("wmd", x, a, y, b) == pytest.approx(1.0, rel=1e-12)
    assert align("rwmd", x, a, y, b) == pytest.approx(1.0, rel=1e-12)
    assert align("wcd", x, a, y, b) == pytest.approx(0.0, abs=1e-12)  # same centroid
    # translation of a whole cloud by t: WMD = WCD = |t|
    rng = np.random.default_rng(1)
    pts, w, t = rng.normal(size=(4, 3)), rng.random(4), np.array([3.0, 4.0, 0.0])
    assert align("wmd", pts, w, pts + t, w) == pytest.approx(5.0, rel=1e-12)
    assert align("wcd", pts, w, pts + t, w) == pytest.approx(5.0, rel=1e-12)


def test_weights_are_normalised_and_zero_weight_points_ignored() -> None:
    x, y = np.array([[0.0], [10.0]]), np.array([[1.0]])
    assert align("wmd", x, np.array([2.0, 0.0]), y, np.array([7.0])) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="zero"):
        align("wmd", x, np.zeros(2), y, np.ones(1))


@pytest.mark.parametrize("seed", range(20))
def test_wcd_and_rwmd_are_lower_bounds_of_wmd(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(rng.integers(2, 12), 16)), rng.normal(size=(rng.integers(2, 12), 16))
    a, b = rng.random(len(x)), rng.random(len(y))
    cost = euclidean_cost(x, y)
    exact = wmd(a, b, cost)
    # float64: costs < 12, sums of <= 22 terms -> round-off <= 22 * 1.1e-16 * 12 = 3e-14
    assert rwmd(a, b, cost) <= exact + 1e-12
    assert wcd(x, a, y, b) <= exact + 1e-12


@pytest.mark.parametrize("name", sorted(ALIGNERS))
def test_permutation_invariance_and_symmetry(name: str) -> None:
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(6, 4)), rng.normal(size=(9, 4))
    a, b = rng.random(6), rng.random(9)
    base = align(name, x, a, y, b)
    px, py = rng.permutation(6), rng.permutation(9)
    # float64 sums of <= 15 terms in another order (costs within 5x of their mean): <= 15 * 5 u = 1e-14 relative
    assert align(name, x[px], a[px], y[py], b[py]) == pytest.approx(base, rel=1e-12)
    assert align(name, y, b, x, a) == pytest.approx(base, rel=1e-12)


def test_euclidean_cost_matches_direct() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(3, 5)), rng.normal(size=(4, 5))
    direct = np.linalg.norm(x[:, None, :] - y[None, :, :], axis=-1)
    # |x|^2 + |y|^2 - 2 x.y loses u (|x|^2 + |y|^2) / d^2 relatively: |x|^2 < 16, |y|^2 < 6, d > 2 -> 6e-16
    assert np.allclose(euclidean_cost(x, y), direct, rtol=1e-13, atol=0)


def test_unknown_aligner_names_closest() -> None:
    with pytest.raises(UserError, match="'rwmd'"):
        get_aligner("rwdm")
