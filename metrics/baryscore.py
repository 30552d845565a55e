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

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import ot
import torch

from nlgbench.data import Item
from nlgbench.encoders import EncoderRef, Tokenized, load_encoder
from nlgbench.errors import UserError
from nlgbench.metrics.base import MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.embedding import SidedIdf, embed_pairs


def measure_weights(tok: Tokenized, idf: dict[int, float] | None, unseen: float) -> tuple[list[int], np.ndarray]:
    """(kept token positions, normalised weights): non-special tokens, idf-weighted (or uniform)."""
    keep = [j for j in range(len(tok.ids)) if not tok.special[j]]
    w = np.array([idf.get(tok.ids[j], unseen) if idf is not None else 1.0 for j in keep], dtype=np.float64)
    if not keep:
        raise ValueError("no token left after removing special tokens")
    if w.sum() <= 0:
        w = np.ones(len(keep))
    return keep, w / w.sum()


def barycentre(layers: np.ndarray, weights: np.ndarray, max_iter: int = 1000) -> np.ndarray:
    """Free-support Wasserstein barycentre of k measures sharing weights: layers [k, n, D] -> support [n, D].

    As the published code: n support points with uniform mass, initialised at zero.
    """
    k, n, d = layers.shape
    return ot.lp.free_support_barycenter(
        [layers[i] for i in range(k)], [weights] * k, np.zeros((n, d)), b=np.full(n, 1.0 / n), numItermax=max_iter,
    )


def bary_distances(x: np.ndarray, y: np.ndarray, sinkhorn_regs: Sequence[float]) -> dict[str, float]:
    """Wasserstein distance between two uniform barycentres (squared-Euclidean cost), and Sinkhorn divergences.

    `sd_<reg>` is the debiased Sinkhorn divergence of the paper,
    OT_reg(x, y) - (OT_reg(x, x) + OT_reg(y, y)) / 2, via POT.
    """
    a, b = np.full(len(x), 1.0 / len(x)), np.full(len(y), 1.0 / len(y))
    out = {"w": float(ot.emd2(a, b, ot.dist(x, y)))}
    for reg in sinkhorn_regs:
        sd = ot.bregman.empirical_sinkhorn_divergence(x, y, reg, a, b, numIterMax=10000, warn=False)
        out[f"sd_{reg:g}"] = float(sd)
    return out


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

    def __init__(self, encoder_ref: EncoderRef, options: dict[str, Any], device: str, batch_size: int) -> None:
        super().__init__(options, device, batch_size)
        self.encoder = load_encoder(encoder_ref, device)
        top = self.encoder.layers_run
        k = self.options.last_layers
        if not 1 <= k <= top + 1:
            raise UserError(f"baryscore last_layers={k} but encoder {encoder_ref.label} has {top + 1} hidden states "
                            f"(embeddings + {top} layers)")
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

    def _bary(self, tok: Tokenized, hidden: torch.Tensor, side: str) -> np.ndarray:
        keep, w = self.weights(tok, side)
        layers = hidden[:, keep].double()
        layers = layers / layers.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        return barycentre(layers.cpu().numpy(), w, self.options.max_iter)

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        cols: dict[str, list[float]] = {}
        pairs = [(it.reference, it.hypothesis) for it in items]
        for ref_emb, hyp_emb in embed_pairs(self.encoder, pairs, self.layers, self.batch_size, timer):
            with timer.phase("barycentre"):
                ref = self._bary(*ref_emb, "reference")
                hyp = self._bary(*hyp_emb, "hypothesis")
            with timer.phase("transport"):
                for key, value in bary_distances(ref, hyp, self.options.sinkhorn_regs).items():
                    cols.setdefault(key, []).append(value)
        return Scores(primary="w", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {"layers": self.layers, "layer": self.layers[-1], "idf": self.options.idf,
                "sinkhorn_regs": self.options.sinkhorn_regs, **self.encoder.describe()}


def check_values(options: dict[str, Any]) -> None:
    regs = options.get("sinkhorn_regs") or []
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in regs):
        raise UserError(f"sinkhorn_regs must be a list of positive numbers, got {regs!r}")
    for key in ("last_layers", "max_iter"):
        if options.get(key) is not None and options[key] < 1:
            raise UserError(f"{key} must be >= 1, got {options[key]}")


INFO = MetricInfo(
    name="baryscore",
    description="BaryScore (Colombo et al. 2021): Wasserstein distance of idf-weighted barycentres of the last k layers (lower is better)",
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
)
