"""Free-support Wasserstein barycentres of many texts at once (BaryScore, Colombo et al. 2021, Eq. 4).

POT's `free_support_barycenter` fixed-point iteration, batched over texts: exact plans per text
and layer (warm-started from the last iteration's basis, `nlgbench.metrics.warm_transport`, else
POT's network simplex), the support's update as batched products on the layers' device, or one
compiled pass over the plans' nonzero cells on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from nlgbench.metrics.alignment import network_simplex, solver_marginals
from nlgbench.metrics.warm_transport import basis_of_plan, warm_plans

# Pivots a warm start may take per node of its problem before POT solves it afresh.
MAX_PIVOTS_PER_NODE = 4
# On the CPU the Gram matrix is used up to this many stacked points per dimension (4 x 384: 1536
# points, 18 MiB per text); its products through the plans' nonzero cells cost far less than X L^T.
GRAM_POINTS_PER_DIM = 4


def free_support_barycentres(
    layers: Sequence[torch.Tensor],
    weights: Sequence[np.ndarray],
    max_iter: int = 1000,
    stop_thr: float = 1e-7,
    use_gram: bool | None = None,
) -> list[torch.Tensor]:
    """Free-support Wasserstein barycentres of B texts at once: layers[t] [k, n_t, D], weights[t] [n_t] -> [n_t, D].

    Text t gives k measures (layer i: the points L_i = layers[t][i] with masses weights[t]); its
    barycentre has n_t support points X of uniform mass 1/n_t, started at X = 0, as the published
    code calls POT's `free_support_barycenter`. This runs POT's fixed-point iteration (Cuturi &
    Doucet 2014, Alg. 2 with theta = 1 and fixed weights) for all texts together:

        T_i = optimal plan between (X, 1/n_t) and (L_i, weights), cost C_rj = |X_r - L_ij|^2
        X  <- (n_t / k) sum_i T_i L_i    (each support point moves to the mean of what it is sent)

    until sum_r |X_new - X|^2 <= stop_thr or after max_iter iterations, per text, as POT. The k B
    plans of an iteration are exact, on the CPU (`_exact_plans`); the rest is batched on the
    layers' device (texts zero-padded to the longest). (POT's own function takes torch tensors
    too, but solves one text at a time and copies every cost matrix to the CPU.)

    X is always (n_t / k) P L, with P = [T_1 .. T_k] the plans side by side and L the k layers
    stacked (k m points), so with the Gram matrix G = L L^T the costs need no D-dimensional product:
    C = |X|^2 + |L|^2 - 2 (n_t / k) P G. P has about k (n + m) nonzero cells of n k m: on the CPU
    the product runs through them (`_gram_step`), on other devices as one batched product, which
    replaces POT's two [n, k m] x [k m or D, D] ones when k m <= D. So `use_gram` (None) holds
    when k m <= D, or k m <= GRAM_POINTS_PER_DIM D on the CPU (G's memory: (k m)^2 floats per
    text); otherwise X is formed as in POT (True / False force either way).

    Same plans as POT, hence the same barycentres up to float64 rounding (tests: <= 1e-12). On the
    first iteration (X = 0) every plan is optimal (C_rj = |L_ij|^2 does not depend on r): the solver
    returns its starting plan, as it does inside POT.
    """
    if not layers:
        return []
    supports = _stack_supports(layers, weights)
    count, n, km = len(layers), int(supports.sizes.max()), supports.points.shape[1]
    final = torch.zeros(count, n, km, dtype=torch.float64, device=supports.points.device)  # each text's last plans
    if use_gram is None:
        dim = supports.points.shape[2]
        use_gram = km <= dim * (GRAM_POINTS_PER_DIM if supports.points.device.type == "cpu" else 1)
    state = _first_iterate(supports, use_gram)
    bases = _Bases.empty(supports)
    for iteration in range(max_iter):
        new = _exact_plans(supports, state, bases, seed=iteration > 0)
        shift = _move_support(state, new)
        final[state.active] = state.plans = new
        going = shift > stop_thr
        if not bool(going.any()):
            break
        if not bool(going.all()):
            state.keep(going)
    bary = supports.scale * torch.bmm(final, supports.points)
    return [bary[t, :n_t] for t, n_t in enumerate(supports.sizes)]


@dataclass
class _Supports:
    """The B texts' layer measures stacked for `free_support_barycentres` (tokens with mass only)."""

    k: int  # layers: measures per text
    m: int  # rows per layer in `points`: the most tokens with mass of any text
    sizes: np.ndarray  # [B] n_t: one support point per token
    heights: np.ndarray  # [B] m_t: tokens with mass
    a: np.ndarray  # [B, n] the solver's marginals: barycentre masses (zero-padded)
    b: np.ndarray  # [B, m] and masses of the tokens with mass
    points: torch.Tensor  # L: [B, k m, D], layer i of text t in rows i m .. i m + m_t, zero-padded
    scale: torch.Tensor  # [B, n, 1]: POT's update coefficient (1 / k) / (1 / n_t), 0 on padding


def _stack_supports(layers: Sequence[torch.Tensor], weights: Sequence[np.ndarray]) -> _Supports:
    """The texts' measures as the iteration runs on them: the solver's marginals, and the layers'
    points with mass stacked and zero-padded into one batch on the layers' device."""
    count = len(layers)
    k, _, dim = layers[0].shape
    device = layers[0].device
    sizes = [int(layer.shape[1]) for layer in layers]  # n_t: one support point per token
    marginals = [solver_marginals(np.full(n_t, 1.0 / n_t), w) for n_t, w in zip(sizes, weights, strict=True)]
    held = [np.flatnonzero(b) for _, b in marginals]  # tokens with mass: the solver leaves the others out
    marginals = [(a, b[h]) for (a, b), h in zip(marginals, held, strict=True)]
    padded = torch.nn.utils.rnn.pad_sequence(
        [
            layer[:, torch.from_numpy(h).to(device)].transpose(0, 1).double()
            for layer, h in zip(layers, held, strict=True)
        ],
        batch_first=True,
    )
    n, m = max(sizes), padded.shape[1]
    points = padded.transpose(1, 2).reshape(count, k * m, dim)
    scale = torch.zeros(count, n, 1, dtype=torch.float64)
    a, b = np.zeros((count, n)), np.zeros((count, m))
    for t, (a_t, b_t) in enumerate(marginals):
        a[t, : len(a_t)], b[t, : len(b_t)] = a_t, b_t
        scale[t, : sizes[t], 0] = torch.from_numpy(1.0 / k * 1.0 / a_t)
    return _Supports(
        k=k,
        m=m,
        sizes=np.array(sizes, np.int64),
        heights=np.array([len(h) for h in held], np.int64),
        a=a,
        b=b,
        points=points,
        scale=scale.to(device),
    )


@dataclass
class _Iterate:
    """The fixed-point iteration's state of the texts still moving (`active`): their plans P, |X_r|^2,
    X itself (without the Gram matrix only), the costs of the next plans, and their constants
    (update coefficients, points L, |L_ij|^2, the Gram matrix G = L L^T where used)."""

    active: torch.Tensor
    coef: torch.Tensor
    pts: torch.Tensor
    pts_sq: torch.Tensor
    gram: torch.Tensor | None
    plans: torch.Tensor
    x_sq: torch.Tensor
    x: torch.Tensor
    cost: torch.Tensor

    def keep(self, going: torch.Tensor) -> None:
        """Drop the texts whose barycentre has settled (`going` False)."""
        self.active, self.coef, self.pts, self.pts_sq, self.plans, self.x_sq, self.x, self.cost = (
            v[going] for v in (self.active, self.coef, self.pts, self.pts_sq, self.plans, self.x_sq, self.x, self.cost)
        )
        self.gram = self.gram[going] if self.gram is not None else None


def _first_iterate(supports: _Supports, use_gram: bool) -> _Iterate:
    """Every text active, X = 0: the first costs are C_rj = |L_ij|^2."""
    points = supports.points
    count, km, dim = points.shape
    n = int(supports.sizes.max())
    device = points.device
    pts_sq = points.pow(2).sum(-1)  # |L_ij|^2
    return _Iterate(
        active=torch.arange(count, device=device),
        coef=supports.scale,
        pts=points,
        pts_sq=pts_sq,
        gram=torch.bmm(points, points.transpose(1, 2)) if use_gram else None,
        plans=torch.zeros(count, n, km, dtype=torch.float64, device=device),
        x_sq=torch.zeros(count, n, dtype=torch.float64, device=device),
        x=torch.zeros(count, n, 0 if use_gram else dim, dtype=torch.float64, device=device),
        cost=pts_sq[:, None, :].expand(count, n, km),  # X = 0
    )


def _exact_plans(supports: _Supports, state: _Iterate, bases: _Bases, seed: bool) -> torch.Tensor:
    """The k optimal plans T_i of every active text under its current costs, side by side:
    [B_active, n, k m] on the layers' device. Each starts from the text's last basis for layer i
    (`warm_plans`: kept only where it is the unique optimum, which POT would return too); the rest
    are POT's network simplex, whose plans seed the next starts (`bases`, updated here) when `seed`.
    Not the first iteration's: at X = 0 every plan is optimal, and POT's is a poor start (measured:
    the second iteration warm-started from it took 1.3x as long as POT solving it afresh)."""
    m = supports.m
    cost_np = np.ascontiguousarray(state.cost.to("cpu").numpy())  # (the first costs are a broadcast view)
    new_np = np.zeros(cost_np.shape)
    texts = state.active.cpu().numpy()
    found = warm_plans(
        cost_np,
        texts,
        supports.sizes,
        supports.heights,
        supports.a,
        supports.b,
        bases.rows,
        bases.cols,
        bases.have,
        MAX_PIVOTS_PER_NODE,
        new_np,
    )
    for row, i in zip(*np.nonzero(~found), strict=True):
        t = int(texts[row])
        n_t, h_t = supports.sizes[t], supports.heights[t]
        plan = network_simplex(supports.a[t, :n_t], supports.b[t, :h_t], cost_np[row, :n_t, i * m : i * m + h_t])[0]
        new_np[row, :n_t, i * m : i * m + h_t] = plan
        edges = n_t + h_t - 1
        bases.have[t, i] = seed and basis_of_plan(plan, bases.rows[t, i, :edges], bases.cols[t, i, :edges])
    return torch.from_numpy(new_np).to(supports.points.device)


@dataclass
class _Bases:
    """Each text's last optimal basis per layer, where `warm_plans` starts."""

    rows: np.ndarray  # [B, k, n + m - 1] basic cells' rows
    cols: np.ndarray  # [B, k, n + m - 1] basic cells' columns
    have: np.ndarray  # [B, k] whether a basis is there yet

    @classmethod
    def empty(cls, supports: _Supports) -> _Bases:
        count, k = len(supports.sizes), supports.k
        edges = (count, k, supports.a.shape[1] + supports.m - 1)
        return cls(rows=np.zeros(edges, np.int64), cols=np.zeros(edges, np.int64), have=np.zeros((count, k), np.bool_))


def _move_support(state: _Iterate, new: torch.Tensor) -> torch.Tensor:
    """X <- (n_t / k) P_new L for the active texts: their next costs |X|^2 + |L|^2 - 2 X L^T (through the
    Gram matrix where there is one, else through X) and squared |X|^2; returns each text's shift
    sum_r |X_new - X|^2. `state.plans` are still the previous ones here."""
    if state.gram is not None:
        update = gram_update_compiled if new.device.type == "cpu" else gram_update_batched
        state.cost, state.x_sq, shift = update(state, new)
        return shift
    new_x = state.coef * torch.bmm(new, state.pts)
    shift = (new_x - state.x).pow(2).sum(dim=(1, 2))
    cost = -2 * torch.bmm(new_x, state.pts.transpose(1, 2))
    state.x, state.x_sq = new_x, new_x.pow(2).sum(-1)
    cost += state.x_sq[:, :, None]
    cost += state.pts_sq[:, None, :]
    state.cost = cost.clamp_min_(0)
    return shift


def gram_update_batched(state: _Iterate, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Gram-matrix update as batched products on any device: (next costs [B, n, k m], |X_new_r|^2
    [B, n], shifts [B])."""
    assert state.gram is not None
    c = state.coef[..., 0]
    moved = torch.bmm(new, state.gram)  # X_new L^T / c
    new_sq = c**2 * (moved * new).sum(-1)  # |X_new_r|^2
    cross = c**2 * (moved * state.plans).sum(-1)  # X_new_r . X_r
    shift = (new_sq - 2 * cross + state.x_sq).sum(-1)
    cost = -2 * (state.coef * moved) + new_sq[:, :, None] + state.pts_sq[:, None, :]
    return cost.clamp_min_(0), new_sq, shift


def gram_update_compiled(state: _Iterate, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The same on the CPU through the plans' nonzero cells (`_gram_step`)."""
    assert state.gram is not None
    cost, new_sq = torch.empty_like(new), torch.empty_like(state.x_sq)
    arrays = (new, state.plans, state.gram, state.coef, state.x_sq, state.pts_sq, cost, new_sq)
    shift = torch.from_numpy(_gram_step(*(x.numpy() for x in arrays)))
    return cost, new_sq, shift


@njit(cache=True, nogil=True)
def _gram_step(
    new: np.ndarray,
    plans: np.ndarray,
    gram: np.ndarray,
    coef: np.ndarray,
    x_sq: np.ndarray,
    pts_sq: np.ndarray,
    cost: np.ndarray,
    new_sq: np.ndarray,
) -> np.ndarray:
    """`_move_support`'s Gram-matrix update on the CPU, row by row through the plans' nonzero cells
    (about k (n + m) of n k m; the batched product multiplies all of them): writes the next costs
    [B, n, k m] and |X_new_r|^2 [B, n], returns each text's shift [B]. Same arithmetic as the
    batched form, summed in another order."""
    count, n, km = new.shape
    shift = np.zeros(count)
    moved = np.empty(km)  # X_new_r L^T / c_r
    for t in range(count):
        for r in range(n):
            moved[:] = 0.0
            for c in range(km):
                f = new[t, r, c]
                if f != 0.0:
                    for q in range(km):
                        moved[q] += f * gram[t, c, q]
            square, cross = 0.0, 0.0
            for c in range(km):
                square += moved[c] * new[t, r, c]
                cross += moved[c] * plans[t, r, c]
            c2 = coef[t, r, 0] ** 2
            square, cross = c2 * square, c2 * cross
            shift[t] += square - 2.0 * cross + x_sq[t, r]
            new_sq[t, r] = square
            for q in range(km):
                cost[t, r, q] = max(-2.0 * coef[t, r, 0] * moved[q] + square + pts_sq[t, q], 0.0)
    return shift


def compile_kernels() -> None:
    """Run the compiled kernels once on a tiny problem with the argument types of real calls: numba
    compiles them (or loads them from its cache). BaryScore's warm-up hook (`MetricInfo.warm_up`), run
    in the worker's start-up, before a cell's memory baseline, instead of inside its first pass; not at
    import, where it would run torch ops in a fork server that promises none."""
    layers = [torch.eye(3, dtype=torch.float64)[None, :2]]  # one text, one layer, two unit vectors
    free_support_barycentres(layers, [np.array([0.25, 0.75])], max_iter=3, use_gram=True)
