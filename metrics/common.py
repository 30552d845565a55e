"""Maths shared by several metrics: idf, token weights, greedy matching, padding, length-sorted batching.

Pure functions, no model state. Metrics import these from here and never from each other.
- `idf_table`, `token_weights`, `greedy_match`: BERTScore's core (Zhang et al., 2020, Eqs. 1-4),
  also used by MoverScore / BaryScore (idf) and SentSim (its BERTScore token part);
- `pad_ids`, `pad_tensors`: right-padding of token ids or per-token tensors into a batch;
- `length_sorted_map`: run a function over batches of indices sorted by length (least padding),
  results returned in the input order.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Iterator, Sequence, TypeVar

import torch

T = TypeVar("T")


def idf_table(references: Sequence[Sequence[int]]) -> tuple[dict[int, float], float]:
    """Inverse document frequency of token ids over M token lists, and the unseen-token value.

    idf(w) = log((M + 1) / (df(w) + 1)); an unseen token gets log(M + 1) (as `bert_score`).
    """
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


def pad_tensors(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-token tensors [L_i, ...] right-padded with zeros into one batch [B, max L_i, ...]."""
    return torch.nn.utils.rnn.pad_sequence(list(tensors), batch_first=True)


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists right-padded with `pad_id`: ids [B, T] and attention mask [B, T]."""
    longest = max(len(r) for r in rows)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of at most `batch_size`, longest first (ties in input order): least padding."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def length_sorted_map(fn: Callable[[list[int]], Sequence[T]], lengths: Sequence[int], batch_size: int) -> list[T]:
    """`fn(batch)` (one result per index of the batch) over length-sorted batches; results in input order."""
    results: dict[int, T] = {}
    for batch in length_sorted_batches(lengths, batch_size):
        results.update(zip(batch, fn(batch), strict=True))
    return [results[i] for i in range(len(lengths))]
