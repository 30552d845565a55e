"""Alignment of two weighted point clouds (token embeddings with idf weights): WMD and its cheap bounds.

Pure functions. Kusner et al. (2015), "From Word Embeddings To Document Distances": WCD <= WMD
and RWMD <= WMD (Eqs. in Sec. 4).
- Per pair, over NumPy arrays: `a` and `b` are non-negative weights (normalised here to sum 1);
  `cost` is the matrix of Euclidean distances between the points.
- Batched (`*_batch`), over torch tensors on any device: B pairs of clouds zero-padded to
  [B, n, D] by `pad_clouds`, weights [B, n] normalised per row and 0 on padding, and a mask of
  the real points. One batched matrix product gives all cost matrices; the exact transport
  problems (WMD) are solved on the CPU, one per pair. `pad_pairs` / `transport_pairs` cut many
  pairs into such batches (sorted by size) and run them on several threads (`parallel`).

Exact transport is POT's network simplex (`exact_transport`), called without `ot.emd`'s per-call
wrapper: same solver, same inputs, same plan and cost. POT and torch are imported inside the functions
that use them: the aligner registry is read by the spec checks, which need neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.lazyregistry import Registry
from nlgbench.metrics.common import length_sorted_batches

if TYPE_CHECKING:
    import torch


def _normalise(w: np.ndarray) -> np.ndarray:
    total = float(w.sum())
    if total <= 0:
        raise ValueError("all transport weights are zero (nothing left to align)")
    return np.asarray(w, dtype=np.float64) / total


def exact_transport(
    a: np.ndarray, b: np.ndarray, cost: np.ndarray, max_iter: int = 100_000
) -> tuple[np.ndarray, float]:
    """Optimal transport plan between histograms a [n] and b [m] for `cost` [n, m], and its cost <plan, cost>.

    What `ot.emd` and `ot.emd2` compute: the same preparation of the inputs (`solver_marginals`;
    points without mass left out of the solver, 0 in the plan) and the same C++ network simplex
    (`network_simplex`), without their per-call Python work (backend dispatch, marginal check,
    dual centring: as costly as solving a small problem).
    """
    a, b = solver_marginals(a, b)
    rows, cols = a != 0, b != 0
    if rows.all() and cols.all():
        return network_simplex(a, b, cost, max_iter)
    kept, value = network_simplex(a[rows], b[cols], cost[np.ix_(rows, cols)], max_iter)
    plan = np.zeros(cost.shape)
    plan[np.ix_(rows, cols)] = kept
    return plan, value


def solver_marginals(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) as `ot.emd` hands them to its solver: float64, b rescaled to a's mass (b * sum a / sum b)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return a, b * a.sum() / b.sum()


def network_simplex(
    a: np.ndarray, b: np.ndarray, cost: np.ndarray, max_iter: int = 100_000
) -> tuple[np.ndarray, float]:
    """POT's exact solver (C++ network simplex, Bonneel et al. 2011, behind `ot.emd`) for marginals with
    no zero entry, as `solver_marginals` gives them: (plan, cost). Warns, as POT, if it stops before
    optimality (`max_iter` pivots). It releases the GIL: problems run in parallel on threads (`parallel`).
    """
    from ot.lp.emd_wrap import check_result, emd_c

    plan, value, _, _, code = emd_c(a, b, np.ascontiguousarray(cost, dtype=np.float64), max_iter, 1)
    check_result(code)
    return plan, float(value)


Run = Callable[[Callable[[int], None], int], None]  # run(fn, n): fn(0), ..., fn(n - 1)


@contextmanager
def parallel(threads: int, what: str = "batches solved", context: CellContext | None = None) -> Iterator[Run]:
    """A `run(fn, n)` calling fn(0), ..., fn(n - 1) for independent jobs (a batch of transport
    problems, of barycentres): in this thread when threads <= 1, else on `threads` threads, each
    job going to the next free thread in index order (so give the largest first). Exceptions propagate.

    Coarse-grained: while the `with` block is open, torch's own intra-op threads are set to 1 (and
    restored after), so each job runs single-threaded and `threads` jobs keep `threads` cores busy.
    Splitting each small matrix product over all cores instead makes the threads wait on each other
    at every operation, worse the more cores (and the busier the machine) there are. The network
    simplex and torch's operations release the GIL, so the jobs do run in parallel. Each finished
    job advances the progress display of the cell's `context` (`CellContext.advance`) as `what`.
    """
    import torch

    context = context if context is not None else CellContext()
    if threads <= 1:

        def run_here(fn: Callable[[int], None], n: int) -> None:
            for i in range(n):
                fn(i)
                context.advance(what, i + 1, n)

        yield run_here
        return

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(threads) as pool:

            def run(fn: Callable[[int], None], n: int) -> None:
                for i, done in enumerate([pool.submit(fn, i) for i in range(n)]):
                    done.result()
                    context.advance(what, i + 1, n)  # in job order: a lower bound of what is done

            yield run
    finally:
        torch.set_num_threads(before)


def euclidean_cost(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances between the rows of x [n, d] and y [m, d]."""
    import ot

    return np.sqrt(np.maximum(ot.dist(np.asarray(x, np.float64), np.asarray(y, np.float64), metric="sqeuclidean"), 0.0))


def wmd(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
    """Word Mover's Distance: the exact optimal-transport cost (POT's network simplex)."""
    return exact_transport(_normalise(a), _normalise(b), cost)[1]


def rwmd(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
    """Relaxed WMD: each side sends all its mass to its nearest point; the larger of the two relaxations."""
    a, b = _normalise(a), _normalise(b)
    return float(max(a @ cost.min(axis=1), b @ cost.min(axis=0)))


def wcd(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Word Centroid Distance: distance of the weighted centroids (no cost matrix needed)."""
    return float(np.linalg.norm(_normalise(a) @ np.asarray(x, np.float64) - _normalise(b) @ np.asarray(y, np.float64)))


# --- batched: B pairs at once, torch tensors on any device ---------------------------------------


def pad_clouds(
    points: Sequence[torch.Tensor], weights: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """B clouds (points [n_i, D], weights [n_i]) as one zero-padded batch, float64.

    Returns points [B, n, D], weights [B, n] normalised to sum 1 per cloud (0 on padding) and
    the mask [B, n] of real points, on the points' device (weights may come from the CPU).
    ValueError if a cloud has no mass.
    """
    import torch

    x = torch.nn.utils.rnn.pad_sequence([p.double() for p in points], batch_first=True)
    w = torch.nn.utils.rnn.pad_sequence([v.double() for v in weights], batch_first=True).to(x.device)
    lengths = torch.tensor([len(v) for v in weights], device=x.device)
    mask = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
    total = w.sum(dim=1, keepdim=True)
    if bool((total <= 0).any()):
        raise ValueError("all transport weights are zero (nothing left to align)")
    return x, w / total, mask


def squared_euclidean_cost_batch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|x_i - y_j|^2 for x [B, n, D], y [B, m, D] -> [B, n, m], as ot.dist: |x|^2 + |y|^2 - 2 x.y, clamped at 0."""
    import torch

    cost = -2 * torch.bmm(x, y.transpose(1, 2))
    cost += x.pow(2).sum(-1)[:, :, None]
    cost += y.pow(2).sum(-1)[:, None, :]
    return cost.clamp_min_(0)


def euclidean_cost_batch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pairwise Euclidean distances per pair: x [B, n, D], y [B, m, D] -> [B, n, m] (`euclidean_cost` batched)."""
    return squared_euclidean_cost_batch(x, y).sqrt_()


def wmd_batch(a: torch.Tensor, b: torch.Tensor, cost: torch.Tensor) -> torch.Tensor:
    """WMD of B pairs: weights a [B, n], b [B, m] (normalised, 0 on padding), costs [B, n, m] -> [B].

    One copy of the costs to the CPU; each pair's exact problem is solved by `exact_transport`,
    which leaves the padding (no mass) out, so each value is the pair's own WMD.
    """
    import torch

    cost_np, a_np, b_np = (t.detach().to("cpu", torch.float64).numpy() for t in (cost, a, b))
    out = np.array([exact_transport(a_np[i], b_np[i], cost_np[i])[1] for i in range(len(cost_np))])
    return torch.from_numpy(out).to(cost.device)


def rwmd_batch(
    a: torch.Tensor, b: torch.Tensor, cost: torch.Tensor, mask_x: torch.Tensor, mask_y: torch.Tensor
) -> torch.Tensor:
    """RWMD of B pairs (`rwmd` batched): nearest real points only, padding masked out."""
    import torch

    far = torch.finfo(cost.dtype).max
    to_y = cost.masked_fill(~mask_y[:, None, :], far).min(dim=2).values.masked_fill(~mask_x, 0)
    to_x = cost.masked_fill(~mask_x[:, :, None], far).min(dim=1).values.masked_fill(~mask_y, 0)
    return torch.maximum((a * to_y).sum(1), (b * to_x).sum(1))


def wcd_batch(x: torch.Tensor, a: torch.Tensor, y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """WCD of B pairs (`wcd` batched): distance of the weighted centroids."""
    import torch

    return torch.linalg.vector_norm(torch.bmm(a[:, None], x)[:, 0] - torch.bmm(b[:, None], y)[:, 0], dim=-1)


@dataclass(frozen=True)
class AlignerInfo:
    name: str
    description: str
    needs_cost: bool  # True: called as fn(a, b, cost); False: fn(x, a, y, b)
    fn: Callable[..., float]


ALIGNERS: Registry[AlignerInfo] = Registry("aligner", AlignerInfo)
ALIGNERS.register("wmd", AlignerInfo("wmd", "exact Word Mover's Distance (optimal transport, POT emd)", True, wmd))
ALIGNERS.register(
    "rwmd",
    AlignerInfo("rwmd", "relaxed WMD: max of the two nearest-neighbour relaxations (lower bound of WMD)", True, rwmd),
)
ALIGNERS.register(
    "wcd",
    AlignerInfo("wcd", "word centroid distance: distance of weighted mean embeddings (lower bound of WMD)", False, wcd),
)


def get_aligner(name: str) -> AlignerInfo:
    """The named aligner; UserError with the closest names otherwise."""
    return ALIGNERS.get(name)


def cost_matrix(aligner: AlignerInfo, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """The cost matrix `aligner` needs between the points x and y (None for one that needs none, as WCD)."""
    return euclidean_cost(x, y) if aligner.needs_cost else None


def transport(
    aligner: AlignerInfo, x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray, cost: np.ndarray | None
) -> float:
    """The aligner's distance between (x, a) and (y, b); `cost` is `cost_matrix(aligner, x, y)`."""
    return aligner.fn(a, b, cost) if aligner.needs_cost else aligner.fn(x, a, y, b)


def align(name: str, x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Distance between (x, a) and (y, b) with the named aligner."""
    info = get_aligner(name)
    return transport(info, x, a, y, b, cost_matrix(info, x, y))


def cost_matrix_batch(aligner: AlignerInfo, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """`cost_matrix` for B padded pairs: Euclidean costs [B, n, m], or None for an aligner that needs none."""
    return euclidean_cost_batch(x, y) if aligner.needs_cost else None


def transport_batch(
    aligner: AlignerInfo,
    x: torch.Tensor,
    a: torch.Tensor,
    mask_x: torch.Tensor,
    y: torch.Tensor,
    b: torch.Tensor,
    mask_y: torch.Tensor,
    cost: torch.Tensor | None,
) -> torch.Tensor:
    """`transport` for B padded pairs (from `pad_clouds`): the aligner's distances [B];
    `cost` from `cost_matrix_batch`."""
    if aligner.name == "wmd":
        assert cost is not None
        return wmd_batch(a, b, cost)
    if aligner.name == "rwmd":
        assert cost is not None
        return rwmd_batch(a, b, cost, mask_x, mask_y)
    if aligner.name == "wcd":
        return wcd_batch(x, a, y, b)
    raise ValueError(f"no batched form of aligner {aligner.name!r}")


@dataclass
class PairBatch:
    """Pairs of clouds padded together (`pad_pairs`): which pairs (`index`, positions in the input),
    their points, normalised weights and masks (`pad_clouds`), and the costs the aligner needs."""

    index: list[int]
    x: torch.Tensor
    a: torch.Tensor
    mask_x: torch.Tensor
    y: torch.Tensor
    b: torch.Tensor
    mask_y: torch.Tensor
    cost: torch.Tensor | None


def pad_pairs(
    aligner: AlignerInfo,
    x: Sequence[torch.Tensor],
    a: Sequence[torch.Tensor],
    y: Sequence[torch.Tensor],
    b: Sequence[torch.Tensor],
    threads: int = 1,
    batch_pairs: int = 32,
    points: Callable[[torch.Tensor], torch.Tensor] | None = None,
    context: CellContext | None = None,
) -> list[PairBatch]:
    """The pairs (x[i], a[i]), (y[i], b[i]) in batches of `batch_pairs` of similar size (sorted by
    n_i + m_i: little padding), padded, `points` (e.g. a normalisation) applied to the padded points,
    with the cost matrices `aligner` needs. Batches are made on `threads` threads (`parallel`, reporting
    to the cell's `context`)."""
    batches = list(length_sorted_batches([len(p) + len(q) for p, q in zip(a, b, strict=True)], batch_pairs))
    out: list[PairBatch | None] = [None] * len(batches)

    def make(j: int) -> None:
        idx = batches[j]
        xp, ap, mx = pad_clouds([x[i] for i in idx], [a[i] for i in idx])
        yp, bp, my = pad_clouds([y[i] for i in idx], [b[i] for i in idx])
        if points is not None:
            xp, yp = points(xp), points(yp)
        out[j] = PairBatch(idx, xp, ap, mx, yp, bp, my, cost_matrix_batch(aligner, xp, yp))

    with parallel(threads, "pair batches padded", context) as run:
        run(make, len(batches))
    return [batch for batch in out if batch is not None]


def transport_pairs(
    aligner: AlignerInfo, batches: Sequence[PairBatch], threads: int = 1, context: CellContext | None = None
) -> torch.Tensor:
    """The aligner's distance of every pair in `batches` (from `pad_pairs`), in input order, on the CPU [B].
    Batches run on `threads` threads (`parallel`)."""
    import torch

    out = torch.zeros(sum(len(batch.index) for batch in batches), dtype=torch.float64)

    def solve(j: int) -> None:
        t = batches[j]
        out[t.index] = transport_batch(aligner, t.x, t.a, t.mask_x, t.y, t.b, t.mask_y, t.cost).cpu()

    with parallel(threads, "transport batches solved", context) as run:
        run(solve, len(batches))
    return out
