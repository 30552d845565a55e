"""BERTScore (Zhang et al., 2020): greedy cosine matching of contextual token embeddings.

Functional core: `idf_table` (Eq. 4's idf from the references) and `greedy_match` (Eqs. 1-3
with idf weighting). `BertScoreScorer` owns the encoder, batching and timing.

Conventions, chosen to equal the `bert_score` package: texts are stripped; special tokens
([CLS]/[SEP], <s>/</s>) get weight 0 by id but stay match candidates; the layer is
hidden_states[layer] of the encoder truncated to that layer; idf(w) = log((M + 1) / (df(w) + 1))
over the M references, unseen tokens log(M + 1).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from nlgbench.data import Item
from nlgbench.encoder_registry import default_layer
from nlgbench.encoders import EncoderRef, load_encoder
from nlgbench.metrics.base import MetricInfo, PhaseTimer, Scores
from nlgbench.metrics.embedding import chunks, embed_texts



def idf_table(references: Sequence[Sequence[int]]) -> tuple[dict[int, float], float]:
    """Inverse document frequency of token ids over reference token lists, and the unseen-token value."""
    m = len(references)
    df: Counter[int] = Counter()
    for ids in references:
        df.update(set(ids))
    return {tok: math.log((m + 1) / (c + 1)) for tok, c in df.items()}, math.log(m + 1)


def token_weights(ids: Sequence[int], special_ids: frozenset[int], idf: dict[int, float] | None, unseen: float) -> torch.Tensor:
    """Per-token weights: idf (or 1), 0 for special tokens."""
    if idf is None:
        w = [0.0 if t in special_ids else 1.0 for t in ids]
    else:
        w = [0.0 if t in special_ids else idf.get(t, unseen) for t in ids]
    return torch.tensor(w, dtype=torch.float32)


def greedy_match(
    hyp: torch.Tensor, hyp_w: torch.Tensor, ref: torch.Tensor, ref_w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched BERTScore P, R, F from unit-norm embeddings [B, L, D] and weights [B, L] (0 on padding).

    Precision: each hypothesis token's best cosine against the reference, idf-weighted mean
    (Eq. 2); recall symmetric (Eq. 1); F their harmonic mean (Eq. 3). Padding is masked out of
    the max (similarities pushed below -1) and out of the sums (weight 0).
    """
    sim = torch.bmm(hyp, ref.transpose(1, 2))
    valid = _real(hyp).unsqueeze(2) & _real(ref).unsqueeze(1)
    sim = sim.masked_fill(~valid, -2.0)
    precision = (sim.max(dim=2).values * hyp_w).sum(1) / hyp_w.sum(1)
    recall = (sim.max(dim=1).values * ref_w).sum(1) / ref_w.sum(1)
    f1 = 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def _real(emb: torch.Tensor) -> torch.Tensor:
    """Positions holding a real (non-padding) token: padding rows are all zeros."""
    return emb.abs().sum(-1).ne(0)


def _pad(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(list(tensors), batch_first=True)


@dataclass
class BertScoreOptions:
    idf: bool = False
    layer: int | None = None


class BertScoreScorer:
    """BERTScore over one encoder, with length-sorted batching of unique texts."""

    def __init__(self, encoder_ref: EncoderRef, options: dict[str, Any], device: str, batch_size: int) -> None:
        self.options = BertScoreOptions(**options)
        self.batch_size = batch_size
        layer = self.options.layer if self.options.layer is not None else default_layer(encoder_ref, "bertscore")
        self.encoder = load_encoder(encoder_ref, device, needed_layer=layer)
        self.layer = self.encoder.layers_run
        self.idf: dict[int, float] | None = None
        self.unseen = 0.0

    def prepare(self, items: Sequence[Item]) -> None:
        """IDF over all references of the dataset (corpus state, computed once)."""
        if self.options.idf:
            refs = self.encoder.tokenize([it.reference for it in items])
            self.idf, self.unseen = idf_table([t.ids for t in refs])

    def embed(self, texts: Sequence[str], timer: PhaseTimer) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Unit-norm embeddings and weights (idf or 1, 0 for special tokens) of each unique text."""
        out = {}
        for text, (tok, hidden) in embed_texts(self.encoder, texts, self.layer, self.batch_size, timer).items():
            w = token_weights(tok.ids, self.encoder.special_ids, self.idf, self.unseen)
            out[text] = (hidden / hidden.norm(dim=-1, keepdim=True), w.to(hidden.device))
        return out

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        cols: dict[str, list[float]] = {"precision": [], "recall": [], "f1": []}
        for chunk in chunks(items):
            emb = self.embed([t for it in chunk for t in (it.reference, it.hypothesis)], timer)
            with timer.phase("match"):
                for start in range(0, len(chunk), self.batch_size):
                    pairs = chunk[start : start + self.batch_size]
                    hyp = [emb[it.hypothesis] for it in pairs]
                    ref = [emb[it.reference] for it in pairs]
                    p, r, f = greedy_match(
                        _pad([h[0] for h in hyp]), _pad([h[1] for h in hyp]),
                        _pad([x[0] for x in ref]), _pad([x[1] for x in ref]),
                    )
                    cols["precision"] += p.tolist()
                    cols["recall"] += r.tolist()
                    cols["f1"] += f.tolist()
        return Scores(primary="f1", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {"layer": self.layer, "idf": self.options.idf, **self.encoder.describe()}


INFO = MetricInfo(
    name="bertscore",
    description="BERTScore (Zhang et al. 2020): greedy cosine matching of token embeddings; P, R, F1 (F1 primary)",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=True,
    options={"idf": (bool, False), "layer": (int, None)},
    encoder_kinds=("encoder", "seq2seq"),  # seq2seq: its encoder half
    accepts_aligners=False,
    build=BertScoreScorer,
)
