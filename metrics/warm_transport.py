"""Exact transport plans warm-started from an earlier optimal basis (BaryScore's barycentre loop).

POT's network simplex solves every problem from scratch. In the free-support barycentre iteration
a text's marginals never change and its costs move a little from one iteration to the next, so
the last optimal basis is a feasible start and a few pivots restore optimality. This module is
the transportation simplex (u-v method, Dantzig's entering rule) on a spanning-tree basis of
n + m - 1 cells, compiled by numba.

Parity with POT: a plan is returned only when it is optimal with every non-basic reduced cost at
least `MARGIN`, i.e. the unique optimum, which any exact solver (POT's included) must return; its
flows are recomputed from the tree and the marginals. Otherwise (a near tie, a basis that is not
a spanning tree, the pivot cap) the caller asks POT, whose plan seeds the next start.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# A plan is kept only if every non-basic reduced cost is at least this: costs are squared distances
# of unit vectors (at most 4), and the potentials' rounding along a tree path stays near 1e-14.
MARGIN = 1e-10
# A basic cell's reduced cost is zero up to rounding; a cell below -TOLERANCE enters the basis.
TOLERANCE = 1e-12


@njit(cache=True, nogil=True)
def _adjacency(n: int, er: np.ndarray, ec: np.ndarray, start: np.ndarray, edges: np.ndarray) -> None:
    """The tree's edges by node, written into start [n + m + 1] and edges [2 (n + m - 1)] (CSR):
    rows are nodes 0..n-1, columns n..n+m-1."""
    start[:] = 0
    for e in range(er.size):
        start[er[e] + 1] += 1
        start[ec[e] + n + 1] += 1
    for x in range(start.size - 1):
        start[x + 1] += start[x]
    for e in range(er.size):  # fill each node's slice, moving its start forward; shifted back below
        edges[start[er[e]]] = e
        start[er[e]] += 1
        edges[start[ec[e] + n]] = e
        start[ec[e] + n] += 1
    for x in range(start.size - 1, 0, -1):
        start[x] = start[x - 1]
    start[0] = 0


@njit(cache=True, nogil=True)
def _root_tree(
    n: int,
    er: np.ndarray,
    ec: np.ndarray,
    cost: np.ndarray,
    pot: np.ndarray,
    parent: np.ndarray,
    depth: np.ndarray,
    queue: np.ndarray,
    start: np.ndarray,
    edges: np.ndarray,
) -> int:
    """Potentials (u_i = pot[i], v_j = pot[n + j], u_0 = 0, u_i + v_j = C_ij on the tree), each node's
    parent edge and depth from row 0, written into the buffers by a breadth-first walk; returns how
    many nodes the edges reach (all n + m for a spanning tree)."""
    _adjacency(n, er, ec, start, edges)
    depth[:] = -1
    queue[0], depth[0], pot[0], head, tail = 0, 0, 0.0, 0, 1
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
    return tail


@njit(cache=True, nogil=True)
def _tree_flows(a: np.ndarray, b: np.ndarray, er: np.ndarray, ec: np.ndarray) -> np.ndarray:
    """The flows of the tree's basic solution: leaves peeled one by one, each edge carrying what its
    leaf still has to send or receive (a negative rounding residue clipped to 0)."""
    n, m = a.size, b.size
    start, edges = np.empty(n + m + 1, np.int64), np.empty(2 * er.size, np.int64)
    _adjacency(n, er, ec, start, edges)
    left = np.empty(n + m)
    left[:n], left[n:] = a, b
    degree = start[1:] - start[:-1]
    used = np.zeros(er.size, np.bool_)
    flow = np.zeros(er.size)
    stack = np.empty(n + m, np.int64)
    top = 0
    for x in range(n + m):
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
def _other_end(x: int, e: int, er: np.ndarray, ec: np.ndarray, n: int) -> int:
    """The node at the other end of tree edge e from node x."""
    return ec[e] + n if x < n else er[e]


@njit(cache=True, nogil=True)
def warm_plan(a: np.ndarray, b: np.ndarray, cost: np.ndarray, er: np.ndarray, ec: np.ndarray, max_pivots: int) -> bool:
    """Pivot the basis (er, ec: the n + m - 1 basic cells, changed in place) to the optimum of `cost`.
    True when it ends optimal with every non-basic reduced cost >= MARGIN (the unique optimum);
    False on a near tie, a basis that is not a spanning tree, or `max_pivots` pivots (ask POT then)."""
    n, m = a.size, b.size
    nodes = n + m
    flow = _tree_flows(a, b, er, ec)
    basic = np.zeros((n, m), np.bool_)
    for e in range(er.size):
        basic[er[e], ec[e]] = True
    pot, parent, depth = np.empty(nodes), np.empty(nodes, np.int64), np.empty(nodes, np.int64)
    queue, start, edges = np.empty(nodes, np.int64), np.empty(nodes + 1, np.int64), np.empty(2 * er.size, np.int64)
    path = np.empty(nodes, np.int64)
    cand_i, cand_j, count = np.empty(n, np.int64), np.empty(n, np.int64), 0
    for _ in range(max_pivots + 1):
        if _root_tree(n, er, ec, cost, pot, parent, depth, queue, start, edges) != nodes:
            return False
        # Multiple pricing: a full scan keeps each row's most negative cell as a candidate, and the next
        # pivots price only the candidates until none is negative; Dantzig's rule among them.
        best, bi, bj = -TOLERANCE, -1, -1
        for c in range(count):
            i, j = cand_i[c], cand_j[c]
            r = cost[i, j] - pot[i] - pot[n + j]
            if r < best and not basic[i, j]:
                best, bi, bj = r, i, j
        if bi < 0:
            count, second = 0, np.inf  # the least non-basic reduced cost, read where no cell is negative
            for i in range(n):
                ui, row_best, row_j = pot[i], -TOLERANCE, -1
                for j in range(m):
                    r = cost[i, j] - ui - pot[n + j]
                    if r < row_best:
                        row_best, row_j = r, j
                    elif r < second and not basic[i, j]:
                        second = r
                if row_j >= 0:
                    cand_i[count], cand_j[count], count = i, row_j, count + 1
                    if row_best < best:
                        best, bi, bj = row_best, i, row_j
            if bi < 0:
                return second >= MARGIN
        # The cycle: the entering cell (bi, bj), then the tree path from column bj to row bi, whose cells
        # lose and gain theta in turn. Both ends climb to their common ancestor: the column's side is
        # stored from the front, the row's side from the back, then moved to follow it.
        x, y, up, down = n + bj, bi, 0, nodes
        while depth[x] > depth[y]:
            e = parent[x]
            path[up], up, x = e, up + 1, _other_end(x, e, er, ec, n)
        while depth[y] > depth[x]:
            e = parent[y]
            down, y = down - 1, _other_end(y, e, er, ec, n)
            path[down] = e
        while x != y:
            e = parent[x]
            path[up], up, x = e, up + 1, _other_end(x, e, er, ec, n)
            e = parent[y]
            down, y = down - 1, _other_end(y, e, er, ec, n)
            path[down] = e
        length = up + nodes - down
        for k in range(nodes - down):
            path[up + k] = path[down + k]
        theta, leave = np.inf, -1
        for k in range(0, length, 2):  # the losing cells: the one that empties first leaves
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


@njit(cache=True, nogil=True)
def basis_of_plan(plan: np.ndarray, er: np.ndarray, ec: np.ndarray) -> bool:
    """A spanning-tree basis (written into er, ec: n + m - 1 cells) holding a vertex plan's positive
    cells, completed with empty cells that join its components. False if the positive cells hold a
    cycle (not a vertex)."""
    n, m = plan.shape
    root = np.arange(n + m)
    count = 0
    for positive in (True, False):
        for i in range(n):
            for j in range(m):
                if (plan[i, j] > 0) != positive:
                    continue
                x, y = i, n + j
                while root[x] != x:
                    x = root[x]
                while root[y] != y:
                    y = root[y]
                if x == y:
                    if positive:
                        return False
                    continue
                root[x] = y
                er[count], ec[count] = i, j
                count += 1
                if count == n + m - 1 and not positive:  # (a positive cell beyond a full tree closes a cycle)
                    return True
    return count == n + m - 1
