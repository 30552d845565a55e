"""BaryScore (Colombo et al., 2021): Wasserstein distance between layer barycentres.

Each text gives k discrete measures, one per last layer: its token embeddings (unit-normalised)
weighted by idf. Their Wasserstein barycentre (POT's free-support barycentre, Sec. 3, Eq. 4)
summarises the text across layers; the score is the Wasserstein distance between the
reference's and the hypothesis's barycentres (squared-Euclidean cost, as the published code),
plus optional Sinkhorn divergences. A distance: lower is better.

IDF convention: the reference measure is weighted with idf computed over the references, the
hypothesis measure with idf over the hypotheses, as the paper defines it. (The public
`bary_score.py` hands the two tables over in swapped order: its hypothesis tokens get the
reference-corpus idf.) Special tokens carry no mass (with idf they already get ~0 weight);
a text whose idf mass is zero falls back to uniform weights.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import ot
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Tokenized, load_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import (
    network_simplex,
    pad_clouds,
    parallel,
    solver_marginals,
    squared_euclidean_cost_batch,
    wmd_batch,
)
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.common import length_sorted_batches
from nlgbench.metrics.embedding import Embedded, SidedIdf, embed_pairs
from nlgbench.metrics.warm_transport import basis_of_plan, warm_plans

# Pairs whose barycentres are computed together, and texts per barycentre batch (sorted by length).
GROUP_PAIRS = 256
BATCH_TEXTS = 4
# Pivots a warm start may take per node of its problem before POT solves it afresh.
MAX_PIVOTS_PER_NODE = 4


def measure_weights(tok: Tokenized, idf: dict[int, float] | None, unseen: float) -> tuple[list[int], np.ndarray]:
    """(kept token positions, normalised weights): non-special tokens, idf-weighted (or uniform)."""
    keep = [j for j in range(len(tok.ids)) if not tok.special[j]]
    w = np.array([idf.get(tok.ids[j], unseen) if idf is not None else 1.0 for j in keep], dtype=np.float64)
    if not keep:
        raise ValueError("no token left after removing special tokens")
    if w.sum() <= 0:
        w = np.ones(len(keep))
    return keep, w / w.sum()


def unit_states(hidden: torch.Tensor, keep: Sequence[int]) -> torch.Tensor:
    """The states [k, T, D] of the tokens `keep`, unit-normalised, float64: [k, len(keep), D]."""
    layers = hidden.index_select(1, torch.tensor(keep, device=hidden.device)).double()
    return layers / layers.norm(dim=-1, keepdim=True).clamp_min(1e-30)


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
    plans of an iteration are exact (POT's network simplex, on the CPU); the rest is batched torch
    on the layers' device (texts zero-padded to the longest). (POT's own function takes torch
    tensors too, but solves one text at a time and copies every cost matrix to the CPU.)

    X is always (n_t / k) P L, with P = [T_1 .. T_k] the plans side by side and L the k layers
    stacked (k m points), so with the Gram matrix G = L L^T the costs need no D-dimensional product:
    C = |X|^2 + |L|^2 - 2 (n_t / k) P G. When the k m points are at most D (`use_gram` None), this
    one [n, k m] x [k m, k m] product per iteration replaces POT's two [n, k m] x [k m or D, D]
    ones; otherwise X is formed as in POT (True / False force either way).

    Same plans as POT, hence the same barycentres up to float64 rounding (tests: <= 1e-12). On the
    first iteration (X = 0) every plan is optimal (C_rj = |L_ij|^2 does not depend on r): the solver
    returns its starting plan, as it does inside POT.
    """
    if not layers:
        return []
    supports = _stack_supports(layers, weights)
    count, n, km = len(layers), max(supports.sizes), supports.points.shape[1]
    final = torch.zeros(count, n, km, dtype=torch.float64, device=supports.points.device)  # each text's last plans
    state = _first_iterate(supports, km <= supports.points.shape[2] if use_gram is None else use_gram)
    bases = _Bases.empty(supports)
    for _ in range(max_iter):
        new = _exact_plans(supports, state, bases)
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
    sizes: list[int]  # n_t: one support point per token
    heights: list[int]  # m_t: tokens with mass
    marginals: list[tuple[np.ndarray, np.ndarray]]  # (barycentre masses, token masses with mass) per text
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
    for t, (a, _) in enumerate(marginals):
        scale[t, : sizes[t], 0] = torch.from_numpy(1.0 / k * 1.0 / a)
    return _Supports(
        k=k,
        m=m,
        sizes=sizes,
        heights=[len(h) for h in held],
        marginals=marginals,
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
    n = max(supports.sizes)
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


def _exact_plans(supports: _Supports, state: _Iterate, bases: _Bases) -> torch.Tensor:
    """The k optimal plans T_i of every active text under its current costs, side by side:
    [B_active, n, k m] on the layers' device. Each starts from the text's last basis for layer i
    (`warm_plans`: kept only where it is the unique optimum, which POT would return too); the first
    iteration's plans, near ties and the rest are POT's network simplex, whose plan seeds the next
    start (`bases`, updated here)."""
    m = supports.m
    cost_np = state.cost.to("cpu").numpy()
    new_np = np.zeros(cost_np.shape)
    texts = state.active.cpu().numpy()
    found = warm_plans(
        cost_np,
        texts,
        bases.sizes,
        bases.heights,
        bases.a,
        bases.b,
        bases.rows,
        bases.cols,
        bases.have,
        MAX_PIVOTS_PER_NODE,
        new_np,
    )
    for row, i in zip(*np.nonzero(~found), strict=True):
        t = int(texts[row])
        n_t, h_t = supports.sizes[t], supports.heights[t]
        a, b = supports.marginals[t]
        plan = network_simplex(a, b, cost_np[row, :n_t, i * m : i * m + h_t])[0]
        new_np[row, :n_t, i * m : i * m + h_t] = plan
        edges = n_t + h_t - 1
        bases.have[t, i] = basis_of_plan(plan, bases.rows[t, i, :edges], bases.cols[t, i, :edges])
    return torch.from_numpy(new_np).to(supports.points.device)


@dataclass
class _Bases:
    """Each text's last optimal basis per layer (`warm_plans` starts there), with its problem's
    sizes and marginals as flat arrays (zero-padded)."""

    sizes: np.ndarray  # [B] n_t
    heights: np.ndarray  # [B] m_t
    a: np.ndarray  # [B, n]
    b: np.ndarray  # [B, m]
    rows: np.ndarray  # [B, k, n + m - 1] basic cells' rows
    cols: np.ndarray  # [B, k, n + m - 1] basic cells' columns
    have: np.ndarray  # [B, k] whether a basis is there yet

    @classmethod
    def empty(cls, supports: _Supports) -> _Bases:
        count, n = len(supports.sizes), max(supports.sizes)
        a, b = np.zeros((count, n)), np.zeros((count, supports.m))
        for t, (a_t, b_t) in enumerate(supports.marginals):
            a[t, : len(a_t)], b[t, : len(b_t)] = a_t, b_t
        edges = (count, supports.k, n + supports.m - 1)
        return cls(
            sizes=np.array(supports.sizes, np.int64),
            heights=np.array(supports.heights, np.int64),
            a=a,
            b=b,
            rows=np.zeros(edges, np.int64),
            cols=np.zeros(edges, np.int64),
            have=np.zeros((count, supports.k), np.bool_),
        )


def _move_support(state: _Iterate, new: torch.Tensor) -> torch.Tensor:
    """X <- (n_t / k) P_new L for the active texts: their next costs |X|^2 + |L|^2 - 2 X L^T (through the
    Gram matrix where there is one, else through X) and squared |X|^2; returns each text's shift
    sum_r |X_new - X|^2. `state.plans` are still the previous ones here."""
    coef, plans = state.coef, state.plans
    if state.gram is not None:
        moved = torch.bmm(new, state.gram)  # X_new L^T / c
        new_sq = coef[..., 0] ** 2 * (moved * new).sum(-1)  # |X_new_r|^2
        cross = coef[..., 0] ** 2 * (moved * plans).sum(-1)  # X_new_r . X_r
        shift = (new_sq - 2 * cross + state.x_sq).sum(-1)
        cost = -2 * (coef * moved)
        state.x_sq = new_sq
    else:
        new_x = coef * torch.bmm(new, state.pts)
        shift = (new_x - state.x).pow(2).sum(dim=(1, 2))
        cost = -2 * torch.bmm(new_x, state.pts.transpose(1, 2))
        state.x, state.x_sq = new_x, new_x.pow(2).sum(-1)
    cost += state.x_sq[:, :, None]
    cost += state.pts_sq[:, None, :]
    cost.clamp_min_(0)
    state.cost = cost
    return shift


def wasserstein_batch(
    x: Sequence[torch.Tensor],
    y: Sequence[torch.Tensor],
    threads: int = 1,
    batch_pairs: int = 32,
    context: CellContext | None = None,
) -> torch.Tensor:
    """Wasserstein distances [B] (on the CPU) between uniform measures on x[i] [n_i, D] and y[i] [m_i, D],
    squared-Euclidean cost.

    As `ot.emd2(a, b, ot.dist(x, y))` in the published code, batched: pairs sorted by size in
    batches of `batch_pairs` (little padding), one cost product per batch, exact transport per pair
    (`wmd_batch`); the batches run on `threads` threads (`parallel`, reporting to the cell's `context`).
    """
    out = torch.zeros(len(x), dtype=torch.float64)
    batches = list(length_sorted_batches([len(p) + len(q) for p, q in zip(x, y, strict=True)], batch_pairs))

    def solve(j: int) -> None:
        idx = batches[j]
        xp, a, _ = pad_clouds([x[i] for i in idx], [torch.ones(len(x[i]), dtype=torch.float64) for i in idx])
        yp, b, _ = pad_clouds([y[i] for i in idx], [torch.ones(len(y[i]), dtype=torch.float64) for i in idx])
        out[idx] = wmd_batch(a, b, squared_euclidean_cost_batch(xp, yp)).cpu()

    with parallel(threads, "Wasserstein batches solved", context) as run:
        run(solve, len(batches))
    return out


def sinkhorn_divergence(x: np.ndarray, y: np.ndarray, reg: float) -> float:
    """Debiased Sinkhorn divergence OT_reg(x, y) - (OT_reg(x, x) + OT_reg(y, y)) / 2 between uniform measures (POT)."""
    a, b = np.full(len(x), 1.0 / len(x)), np.full(len(y), 1.0 / len(y))
    return float(ot.bregman.empirical_sinkhorn_divergence(x, y, reg, a, b, numIterMax=10000, warn=False))


@dataclass
class BaryScoreOptions:
    last_layers: int = 5
    idf: bool = True
    sinkhorn_regs: list[float] = field(default_factory=list)
    max_iter: int = 1000

    def __post_init__(self) -> None:
        self.sinkhorn_regs = [float(r) for r in self.sinkhorn_regs or []]


class BaryScoreScorer(ScorerBase[BaryScoreOptions]):
    """BaryScore over one encoder: encode (k layers at once), barycentre per text, transport per pair."""

    options_class = BaryScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.encoder = load_encoder(encoder_ref, device, context=self.context)
        top = self.encoder.layers_run
        k = self.options.last_layers
        if not 1 <= k <= top + 1:
            raise UserError(
                f"baryscore last_layers={k} but encoder {encoder_ref.label} has {top + 1} hidden states "
                f"(embeddings + {top} layers)"
            )
        self.layers = list(range(top - k + 1, top + 1))
        self.idf_tables = SidedIdf()

    def prepare(self, items: Sequence[Item]) -> None:
        """IDF over all references and, separately, over all hypotheses."""
        if self.options.idf:
            self.idf_tables.fit(self.encoder, items)

    def weights(self, tok: Tokenized, side: str) -> tuple[list[int], np.ndarray]:
        """Kept positions and measure weights of a text on `side` ("reference" or "hypothesis")."""
        if side == "reference":
            return measure_weights(tok, self.idf_tables.reference, self.idf_tables.unseen_reference)
        return measure_weights(tok, self.idf_tables.hypothesis, self.idf_tables.unseen_hypothesis)

    def measure(self, tok: Tokenized, hidden: torch.Tensor, side: str) -> tuple[torch.Tensor, np.ndarray]:
        """A text's k measures: unit-normalised states of its kept tokens [k, n, D] (float64, on the
        device) and their weights."""
        keep, w = self.weights(tok, side)
        return unit_states(hidden, keep), w

    def barycentres(self, texts: dict[tuple[str, str], Embedded], threads: int) -> dict[tuple[str, str], torch.Tensor]:
        """The barycentre of each (text, side): batches of BATCH_TEXTS texts of similar length (little
        padding), `threads` batches at a time, one thread each (`parallel`)."""
        weighted = {key: self.weights(tok, key[1]) for key, (tok, _) in texts.items()}
        keys = sorted(weighted, key=lambda key: len(weighted[key][0]), reverse=True)  # longest first
        batches = [keys[start : start + BATCH_TEXTS] for start in range(0, len(keys), BATCH_TEXTS)]
        found: list[list[torch.Tensor]] = [[] for _ in batches]

        def solve(b: int) -> None:
            layers = [unit_states(texts[key][1], weighted[key][0]) for key in batches[b]]
            found[b] = free_support_barycentres(layers, [weighted[key][1] for key in batches[b]], self.options.max_iter)

        with parallel(threads, "barycentre batches solved", self.context) as run:
            run(solve, len(batches))
        return {
            key: bary for batch, bars in zip(batches, found, strict=True) for key, bary in zip(batch, bars, strict=True)
        }

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """Barycentres of each distinct (text, side) once (a reference shared by several items is reused,
        then dropped after its last use), computed GROUP_PAIRS pairs at a time; distances batched likewise."""
        threads = torch.get_num_threads()
        keys = [((it.reference, "reference"), (it.hypothesis, "hypothesis")) for it in items]
        uses = Counter(key for pair in keys for key in pair)
        known: dict[tuple[str, str], torch.Tensor] = {}
        cols: dict[str, list[float]] = {"w": [], **{f"sd_{reg:g}": [] for reg in self.options.sinkhorn_regs}}
        stream = embed_pairs(
            self.encoder, [(it.reference, it.hypothesis) for it in items], self.layers, self.batch_size, timer
        )
        for start in range(0, len(items), GROUP_PAIRS):
            group = list(islice(stream, GROUP_PAIRS))  # encodes when needed, timed as encode
            group_keys = keys[start : start + len(group)]
            with timer.phase("barycentre"):
                todo = {
                    key: emb
                    for pair_keys, embs in zip(group_keys, group, strict=True)
                    for key, emb in zip(pair_keys, embs, strict=True)
                    if key not in known
                }
                known.update(self.barycentres(todo, threads))
            with timer.phase("transport"):
                refs, hyps = [known[ref] for ref, _ in group_keys], [known[hyp] for _, hyp in group_keys]
                cols["w"].extend(wasserstein_batch(refs, hyps, threads, context=self.context).tolist())
                for reg in self.options.sinkhorn_regs:
                    cols[f"sd_{reg:g}"].extend(
                        sinkhorn_divergence(x.cpu().numpy(), y.cpu().numpy(), reg)
                        for x, y in zip(refs, hyps, strict=True)
                    )
            for key in (key for pair_keys in group_keys for key in pair_keys):
                uses[key] -= 1
                if not uses[key]:
                    del known[key]
        return Scores(primary="w", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "layer": self.layers[-1],
            "idf": self.options.idf,
            "sinkhorn_regs": self.options.sinkhorn_regs,
            **self.encoder.describe(),
        }


def check_values(options: dict[str, Any]) -> None:
    regs = options.get("sinkhorn_regs") or []
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in regs):
        raise UserError(f"sinkhorn_regs must be a list of positive numbers, got {regs!r}")
    for key in ("last_layers", "max_iter"):
        if options.get(key) is not None and options[key] < 1:
            raise UserError(f"{key} must be >= 1, got {options[key]}")


INFO = MetricInfo(
    name="baryscore",
    description="BaryScore (Colombo et al. 2021): Wasserstein distance of idf-weighted barycentres "
    "of the last k layers (lower is better)",
    needs=("reference",),
    higher_is_better=False,
    corpus_state=True,
    options_class=BaryScoreOptions,
    encoder_kinds=("encoder", "seq2seq"),  # seq2seq: its encoder half
    accepts_aligners=False,
    build=BaryScoreScorer,
    check_values=check_values,
    # PierreColombo/nlg_eval_via_simi_measures bary_score.py: BaryScoreMetric.supports_multi_ref is False
    # ("BaryScore does not support multi ref"), so no rule: the user sets reference_policy.
    multi_reference=None,
    blank_texts=BlankTexts(
        refused=("hypothesis", "reference"),
        reason="an empty text has no token to make a measure of, so no barycentre and no Wasserstein distance",
    ),
)
