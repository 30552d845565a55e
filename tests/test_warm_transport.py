"""The warm-started transportation simplex (nlgbench.metrics.warm_transport) against POT's network
simplex, its refusals (near ties, pivot cap), and its use inside the barycentre iteration."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from ot.lp.emd_wrap import emd_c

from nlgbench.metrics import barycentre
from nlgbench.metrics.barycentre import (
    _Bases,
    _first_iterate,
    _stack_supports,
    free_support_barycentres,
    gram_update_batched,
    gram_update_compiled,
)
from nlgbench.metrics.warm_transport import _tree_flows, basis_of_plan, warm_plan, warm_plans

pytestmark = pytest.mark.component  # in-process, POT as the reference

U = np.finfo(np.float64).eps / 2  # unit roundoff


def pot_plan(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> np.ndarray:
    return emd_c(a, b, np.ascontiguousarray(cost), 100_000, 1)[0]


def problem(rng: np.random.Generator, n: int, m: int, dim: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A barycentre-like problem: uniform a, idf-like b, squared distances between unit vectors."""
    a = np.full(n, 1.0 / n)
    b = rng.uniform(0.2, 3.0, m)
    b *= a.sum() / b.sum()  # as POT rescales them
    return a, b, rng.normal(size=(n, dim))


def sq_cost(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return ((x[:, None] - y[None]) ** 2).sum(-1)


def is_spanning_tree(n: int, m: int, rows: np.ndarray, cols: np.ndarray) -> bool:
    """n + m - 1 cells joining all n + m nodes (rows, then columns)."""
    root = list(range(n + m))

    def find(x: int) -> int:
        while root[x] != x:
            x = root[x]
        return x

    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        x, y = find(i), find(n + j)
        if x == y:
            return False
        root[x] = y
    return len(rows) == n + m - 1


@pytest.mark.parametrize("n,m", [(3, 4), (12, 9), (30, 30), (57, 41)])
def test_warm_plans_equal_pots_along_a_moving_cost(n: int, m: int) -> None:
    """Start from POT's basis, move the support a little, re-solve warm: every plan is POT's own."""
    rng = np.random.default_rng(n * 100 + m)
    a, b, x = problem(rng, n, m)
    y = rng.normal(size=(m, x.shape[1]))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    rows, cols = np.empty(n + m - 1, np.int64), np.empty(n + m - 1, np.int64)
    assert basis_of_plan(pot_plan(a, b, sq_cost(x, y)), rows, cols)
    kept = 0
    for _ in range(12):
        x = x + 0.1 * rng.normal(size=x.shape)
        cost = sq_cost(x, y)
        want = pot_plan(a, b, cost)
        if warm_plan(a, b, cost, rows, cols, 4 * (n + m)):
            kept += 1
            got = np.zeros((n, m))
            got[rows, cols] = _tree_flows(a, b, rows, cols)
            # each flow is a signed sum of <= n + m masses (total 1), summed in another order than POT's
            assert np.abs(got - want).max() <= 2 * (n + m) * U
            assert is_spanning_tree(n, m, rows, cols)
        else:
            assert basis_of_plan(want, rows, cols)
    assert kept >= 10  # costs in general position: the unique optimum, found warm


def test_a_tie_is_left_to_pot() -> None:
    """Two identical rows of costs: moving flow between them gives other optima, so the warm plan is
    not the unique optimum and is refused (POT's choice among the optima stands)."""
    rng = np.random.default_rng(5)
    a, b, x = problem(rng, 6, 5)
    y = rng.normal(size=(5, x.shape[1]))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cost = sq_cost(x, y)
    cost[3] = cost[1]
    rows, cols = np.empty(10, np.int64), np.empty(10, np.int64)
    assert basis_of_plan(pot_plan(a, b, cost), rows, cols)
    assert not warm_plan(a, b, cost, rows, cols, 100)


def test_the_pivot_cap_and_a_broken_basis_are_refused() -> None:
    rng = np.random.default_rng(6)
    a, b, x = problem(rng, 8, 8)
    y = rng.normal(size=(8, x.shape[1]))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    rows, cols = np.empty(15, np.int64), np.empty(15, np.int64)
    assert basis_of_plan(pot_plan(a, b, sq_cost(x, y)), rows, cols)
    far = sq_cost(-x, y)  # another problem altogether: its optimum is pivots away
    assert not warm_plan(a, b, far, rows.copy(), cols.copy(), 0)
    assert warm_plan(a, b, far, rows.copy(), cols.copy(), 200)
    broken_rows, broken_cols = rows.copy(), cols.copy()
    broken_rows[0], broken_cols[0] = rows[1], cols[1]  # a cell twice: n + m - 2 cells cannot join n + m nodes
    assert not warm_plan(a, b, far, broken_rows, broken_cols, 200)


def test_basis_of_a_degenerate_plan_is_a_spanning_tree() -> None:
    """An assignment (n positive cells of the 2n - 1) is completed with empty cells; a plan with a cycle
    of positive cells is no vertex."""
    n = 6
    plan = np.eye(n)[np.random.default_rng(1).permutation(n)] / n
    rows, cols = np.empty(2 * n - 1, np.int64), np.empty(2 * n - 1, np.int64)
    assert basis_of_plan(plan, rows, cols)
    assert is_spanning_tree(n, n, rows, cols)
    assert {(i, j) for i, j in zip(*np.nonzero(plan), strict=True)} <= set(
        zip(rows.tolist(), cols.tolist(), strict=True)
    )
    cycle = np.array([[0.25, 0.25], [0.25, 0.25]])
    assert not basis_of_plan(cycle, np.empty(3, np.int64), np.empty(3, np.int64))


def test_warm_plans_batch_writes_only_what_it_found() -> None:
    """The batched call leaves a problem without a basis (or refused) to the caller, plans untouched."""
    rng = np.random.default_rng(9)
    n, m, k = 7, 6, 2
    a, b, x = problem(rng, n, m)
    y = rng.normal(size=(k, m, x.shape[1]))
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    cost = np.concatenate([sq_cost(x, y[i]) for i in range(k)], axis=1)[None]
    rows, cols = np.zeros((1, k, n + m - 1), np.int64), np.zeros((1, k, n + m - 1), np.int64)
    have = np.array([[True, False]])
    assert basis_of_plan(pot_plan(a, b, cost[0, :, :m]), rows[0, 0], cols[0, 0])
    plans = np.zeros_like(cost)
    sizes, heights = np.array([n]), np.array([m])
    found = warm_plans(cost, np.array([0]), sizes, heights, a[None], b[None], rows, cols, have, 4, plans)
    assert found.tolist() == [[True, False]]
    assert np.abs(plans[0, :, :m] - pot_plan(a, b, cost[0, :, :m])).max() <= 2 * (n + m) * U
    assert not plans[0, :, m:].any()


def test_barycentres_solve_most_plans_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """POT is asked for the first two iterations' plans (and near ties), the warm start does the rest."""
    calls = []
    solve = barycentre.network_simplex

    def counted(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, float]:
        calls.append(cost.shape)
        return solve(a, b, cost)

    monkeypatch.setattr(barycentre, "network_simplex", counted)
    rng = np.random.default_rng(2)
    k, texts = 3, 4
    layers = []
    for _ in range(texts):
        x = rng.normal(size=(k, 20, 16)) + rng.normal(size=(1, 20, 16))
        layers.append(torch.from_numpy(x / np.linalg.norm(x, axis=-1, keepdims=True)))
    seen = []
    exact = barycentre._exact_plans

    def counting_exact(supports: Any, state: Any, bases: Any, seed: bool) -> torch.Tensor:
        seen.append(len(state.active) * k)
        return exact(supports, state, bases, seed)

    monkeypatch.setattr(barycentre, "_exact_plans", counting_exact)
    weights = [w / w.sum() for w in rng.uniform(0.2, 1.0, (texts, 20))]  # idf-like: not an assignment
    free_support_barycentres(layers, weights)
    assert len(seen) > 4  # a run of several iterations
    assert len(calls) < seen[0] + seen[1] + sum(seen[2:]) / 4


def test_compiled_gram_update_equals_the_batched_one() -> None:
    """The CPU's update through the plans' nonzero cells against the batched products (the path of other
    devices), on a state midway through an iteration: same costs, squares and shifts up to rounding."""
    rng = np.random.default_rng(4)
    k = 3
    layers, weights = [], []
    for n_t in (9, 5, 12):
        x = rng.normal(size=(k, n_t, 10))
        layers.append(torch.from_numpy(x / np.linalg.norm(x, axis=-1, keepdims=True)))
        weights.append(rng.uniform(0.2, 1.0, n_t))
    supports = _stack_supports(layers, [w / w.sum() for w in weights])
    state = _first_iterate(supports, use_gram=True)
    bases = _Bases.empty(supports)
    for seed in (False, True):  # two iterations, so that the previous plans are not zero
        new = barycentre._exact_plans(supports, state, bases, seed)
        cost, new_sq, shift = gram_update_batched(state, new)
        cost2, new_sq2, shift2 = gram_update_compiled(state, new)
        # terms of size <= k m |G| <= k m and sums of <= k m of them, in another order
        bound = 4 * (k * supports.m) ** 2 * U
        assert torch.allclose(cost, cost2, rtol=0, atol=bound)
        assert torch.allclose(new_sq, new_sq2, rtol=0, atol=bound)
        assert torch.allclose(shift, shift2, rtol=0, atol=bound * supports.m)
        state.cost, state.x_sq = cost2, new_sq2
        state.plans = new
