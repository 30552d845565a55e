"""Exact transport plans warm-started from an earlier optimal basis (BaryScore's barycentre loop).

POT's network simplex solves every problem from scratch. In the free-support barycentre iteration
a text's marginals never change and its costs move a little from one iteration to the next, so
the last optimal basis is a feasible start and a few pivots restore optimality. This module is
the transportation simplex (u-v method, Dantzig's entering rule) on a spanning-tree basis of
n + m - 1 cells, compiled by numba.

Parity with POT: a plan is returned only when it is optimal with every non-basic reduced cost at
least `MARGIN`, i.e. the unique optimum, which any exact solver (POT's included) must return; the
flows are recomputed from the tree and the marginals. Otherwise (a near tie, a degenerate tree,
the pivot cap) the problem goes to POT's network simplex, and its plan seeds the next start.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# A plan is kept only if every non-basic reduced cost is at least this (costs are squared distances
# of unit vectors, at most 4; the potentials' rounding along a tree path stays near 1e-14).
MARGIN = 1e-10
# A basic cell's reduced cost is zero up to rounding; one below -TOLERANCE enters the basis.
TOLERANCE = 1e-12


@njit(cache=True, nogil=True)
def _adjacency(nodes: int, er: np.ndarray, ec: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The tree's edges by node (CSR): rows are nodes 0..n-1, columns n..n+m-1."""
    start = np.zeros(nodes + 1, np.int64)
    for e in range(er.size):
        start[er[e] + 1] += 1
        start[ec[e] + n + 1] += 1
    for x in range(nodes):
        start[x + 1] += start[x]
    fill = start[:-1].copy()
    edges = np.empty(2 * er.size, np.int64)
    for e in range(er.size):
        edges[fill[er[e]]] = e
        fill[er[e]] += 1
        edges[fill[ec[e] + n]] = e
        fill[ec[e] + n] += 1
    return start, edges


@njit(cache=True, nogil=True)
def _root_tree(
    n: int, m: int, er: np.ndarray, ec: np.ndarray, cost: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Potentials (u_i = pot[i], v_j = pot[n + j], u_0 = 0, u_i + v_j = C_ij on the tree), each node's
    parent edge and depth from row 0, and how many nodes the edges reach (n + m for a spanning tree)."""
    nodes = n + m
    start, edges = _adjacency(nodes, er, ec, n)
    pot = np.zeros(nodes)
    parent = np.full(nodes, -1, np.int64)
    depth = np.full(nodes, -1, np.int64)
    queue = np.empty(nodes, np.int64)
    queue[0], depth[0], head, tail = 0, 0, 0, 1
    while head < tail:
        x = queue[head]
        head += 1
        for k in range(start[x], start[x + 1]):
            e = edges[k]
            y = ec[e] + n if x < n else er[e]
            if depth[y] >= 0:
                continue
            depth[y], parent[y] = depth[x] + 1, e
            pot[y] = cost[er[e], ec[e]] - pot[x]
            queue[tail] = y
            tail += 1
    return pot, parent, depth, queue, tail


@njit(cache=True, nogil=True)
def _tree_flows(a: np.ndarray, b: np.ndarray, er: np.ndarray, ec: np.ndarray) -> np.ndarray:
    """The flows of the basic solution of this tree: leaves peeled one by one, each edge carrying what
    its leaf still has to send or receive (negative rounding residue clipped to 0)."""
    n, m = a.size, b.size
    nodes = n + m
    start, edges = _adjacency(nodes, er, ec, n)
    left = np.empty(nodes)
    left[:n], left[n:] = a, b
    degree = start[1:] - start[:-1]
    used = np.zeros(er.size, np.bool_)
    flow = np.zeros(er.size)
    stack = np.empty(nodes, np.int64)
    top = 0
    for x in range(nodes):
        if degree[x] == 1:
            stack[top] = x
            top += 1
    while top > 0:
        top -= 1
        x = stack[top]
        if degree[x] != 1:
            continue
        for k in range(start[x], start[x + 1]):
            e = edges[k]
            if used[e]:
                continue
            y = ec[e] + n if x < n else er[e]
            used[e] = True
            flow[e] = max(left[x], 0.0)
            left[y] -= flow[e]
            degree[x] -= 1
            degree[y] -= 1
            if degree[y] == 1:
                stack[top] = y
                top += 1
            break
    return flow


@njit(cache=True, nogil=True)
def warm_plan(a: np.ndarray, b: np.ndarray, cost: np.ndarray, er: np.ndarray, ec: np.ndarray, max_pivots: int) -> bool:
    """Pivot the basis (er, ec: the n + m - 1 basic cells, changed in place) to the optimum of `cost`.
    True when it ends optimal with every non-basic reduced cost >= MARGIN (unique optimum); False
    on a near tie, a basis that is not a spanning tree, or `max_pivots` pivots (ask POT then)."""
    n, m = a.size, b.size
    flow = _tree_flows(a, b, er, ec)
    basic = np.zeros((n, m), np.bool_)
    for e in range(er.size):
        basic[er[e], ec[e]] = True
    path = np.empty(n + m, np.int64)
    block = max(int(np.sqrt(n * m)), 16)  # block search (as LEMON's network simplex): a few blocks per pivot
    i, j = 0, 0
    for _ in range(max_pivots + 1):
        pot, parent, depth, _, reached = _root_tree(n, m, er, ec, cost)
        if reached != n + m:
            return False
        best, bi, bj, seen, scanned = -TOLERANCE, -1, -1, 0, 0
        while scanned < n * m:
            r = cost[i, j] - pot[i] - pot[n + j]
            if r < best:
                best, bi, bj = r, i, j
            j += 1
            if j == m:
                i, j = (i + 1) % n, 0
            scanned += 1
            seen += 1
            if seen == block:
                if bi >= 0:
                    break
                seen = 0
        if bi < 0:  # optimal: is it the unique optimum?
            second = np.inf
            for i in range(n):
                for j in range(m):
                    if not basic[i, j]:
                        second = min(second, cost[i, j] - pot[i] - pot[n + j])
            return second >= MARGIN
        # The cycle: entering cell (bi, bj), then the tree path from column bj to row bi; signs alternate
        # -, +, -, ... from the column's side. Both ends climb to their common ancestor.
        x, y = n + bj, bi
        up, down = 0, n + m
        while depth[x] > depth[y]:
            path[up] = parent[x]
            up += 1
            x = ec[parent[x]] + n if er[parent[x]] == x else er[parent[x]]
        while depth[y] > depth[x]:
            down -= 1
            path[down] = parent[y]
            y = ec[parent[y]] + n if er[parent[y]] == y else er[parent[y]]
        while x != y:
            path[up] = parent[x]
            up += 1
            x = ec[parent[x]] + n if er[parent[x]] == x else er[parent[x]]
            down -= 1
            path[down] = parent[y]
            y = ec[parent[y]] + n if er[parent[y]] == y else er[parent[y]]
        length = up + (n + m - down)
        for k in range(n + m - down):  # the row side's edges, from the ancestor down to row bi
            path[up + k] = path[down + k]
        theta, leave = np.inf, -1
        for k in range(0, length, 2):
            if flow[path[k]] < theta:
                theta, leave = flow[path[k]], path[k]
        theta = max(theta, 0.0)
        for k in range(length):
            flow[path[k]] += theta if k % 2 else -theta
        basic[er[leave], ec[leave]] = False
        er[leave], ec[leave], flow[leave] = bi, bj, theta
        basic[bi, bj] = True
    return False


@njit(cache=True, nogil=True)
def plan_of_tree(a: np.ndarray, b: np.ndarray, er: np.ndarray, ec: np.ndarray) -> np.ndarray:
    """The dense plan [n, m] of a basis: its tree's flows (`_tree_flows`) at the basic cells."""
    plan = np.zeros((a.size, b.size))
    flow = _tree_flows(a, b, er, ec)
    for e in range(er.size):
        plan[er[e], ec[e]] = flow[e]
    return plan


@njit(cache=True, nogil=True)
def basis_of_plan(plan: np.ndarray, er: np.ndarray, ec: np.ndarray) -> bool:
    """A spanning-tree basis (written into er, ec: n + m - 1 cells) holding a vertex plan's positive
    cells, completed with empty cells that join its components. False if the positive cells hold a
    cycle (not a vertex)."""
    n, m = plan.shape
    root = np.arange(n + m)
    count = 0
    for pass_ in range(2):
        for i in range(n):
            for j in range(m):
                if (plan[i, j] > 0) != (pass_ == 0):
                    continue
                x, y = i, n + j
                while root[x] != x:
                    x = root[x]
                while root[y] != y:
                    y = root[y]
                if x == y:
                    if pass_ == 0:
                        return False
                    continue
                root[x] = y
                er[count], ec[count] = i, j
                count += 1
                if count == n + m - 1:
                    return True
    return count == n + m - 1


@njit(cache=True, nogil=True)
def warm_plans(
    cost: np.ndarray,
    texts: np.ndarray,
    sizes: np.ndarray,
    heights: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    er: np.ndarray,
    ec: np.ndarray,
    have: np.ndarray,
    pivots_per_node: int,
    plans: np.ndarray,
) -> np.ndarray:
    """`warm_plan` for the k layers of every active text of a barycentre batch in one call.

    cost and plans [B_active, n, k m] (layer i of row r in columns i m .. i m + heights[t]), texts[r]
    the text t of row r, sizes / heights [B] its n_t and m_t, a [B, n] / b [B, m] its marginals
    (zero-padded), er / ec [B, k, n + m - 1] its bases where have[t, i]. Writes each plan found into
    `plans` and returns which [B_active, k] were found (the others are left to POT)."""
    k = have.shape[1]
    m = cost.shape[2] // k
    found = np.zeros((texts.size, k), np.bool_)
    for r in range(texts.size):
        t = texts[r]
        n_t, h_t = sizes[t], heights[t]
        edges = n_t + h_t - 1
        for i in range(k):
            if not have[t, i]:
                continue
            rows, cols = er[t, i, :edges], ec[t, i, :edges]
            c = np.ascontiguousarray(cost[r, :n_t, i * m : i * m + h_t])
            if warm_plan(a[t, :n_t], b[t, :h_t], c, rows, cols, pivots_per_node * (n_t + h_t)):
                flow = _tree_flows(a[t, :n_t], b[t, :h_t], rows, cols)
                for e in range(edges):
                    plans[r, rows[e], i * m + cols[e]] = flow[e]
                found[r, i] = True
    return found
