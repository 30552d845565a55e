"""Maths shared by several metrics: idf, token weights, greedy matching, padding, length-sorted batching.

Pure functions, no model state. Metrics import these from here and never from each other.
- `idf_table`, `token_weights` (`weight_table`: all ids at once), `greedy_match`, `only_special`: BERTScore's
  core (Zhang et al., 2020, Eqs. 1-4),
  also used by MoverScore / BaryScore (idf) and SentSim (its BERTScore token part);
- `pad_tensors`: right-padding of per-token tensors into a batch (token ids: `nlgbench.encoders.runtime.pad_ids`);
- `length_sorted_map`: run a function over batches of indices sorted by length (least padding),
  results returned in the input order;
- `group_sorted`: how sorted inputs are cut into batches: at most `batch_size` items each, or, with a
  token budget N (a cell's `batch_tokens: N`, held by its `CellContext`), as many as keep the padded
  batch (items x longest length) within N tokens; never with more padding than real tokens.
The cell's budget and progress hook reach these functions in the scorer's `CellContext`
(`nlgbench.foundations.cellcontext`), passed as an argument. torch is imported inside the functions that
use it: the aligners' module imports this one, and the spec checks and the model-free metrics need no torch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from nlgbench.foundations.cellcontext import CellContext

if TYPE_CHECKING:
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


def token_weights(
    ids: Sequence[int], special_ids: frozenset[int], idf: dict[int, float] | None, unseen: float
) -> torch.Tensor:
    """Per-token weights: idf (or 1), 0 for special tokens."""
    import torch

    if idf is None:
        w = [0.0 if t in special_ids else 1.0 for t in ids]
    else:
        w = [0.0 if t in special_ids else idf.get(t, unseen) for t in ids]
    return torch.tensor(w, dtype=torch.float32)


def weight_table(
    size: int, special_ids: frozenset[int], idf: dict[int, float] | None, unseen: float, device: str = "cpu"
) -> torch.Tensor:
    """`token_weights` of every token id below `size` as one tensor [size]: a batch's weights are
    then one lookup, `table[ids]` (the same float32 values as `token_weights`)."""
    import torch

    table = torch.full((size,), 1.0 if idf is None else unseen, dtype=torch.float32)
    if idf:
        table[torch.tensor(list(idf), dtype=torch.long)] = torch.tensor(list(idf.values()), dtype=torch.float32)
    if special_ids:
        table[torch.tensor(sorted(special_ids), dtype=torch.long)] = 0.0
    return table.to(device)


def greedy_match(
    hyp: torch.Tensor,
    hyp_w: torch.Tensor,
    ref: torch.Tensor,
    ref_w: torch.Tensor,
    hyp_empty: torch.Tensor | None = None,
    ref_empty: torch.Tensor | None = None,
    hyp_mask: torch.Tensor | None = None,
    ref_mask: torch.Tensor | None = None,
    padding_repeats: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched BERTScore P, R, F from unit-norm embeddings [B, L, D] and weights [B, L] (0 on padding).

    Precision: each hypothesis token's best cosine against the reference, idf-weighted mean
    (Eq. 2); recall symmetric (Eq. 1); F their harmonic mean (Eq. 3). Padding is masked out of
    the max (similarities pushed below -1) and out of the sums (weight 0).

    Empty texts, as bert_score's `greedy_cos_idf`: where the hypothesis or the reference is empty
    (`hyp_empty` / `ref_empty` [B]: no token but special ones), P = R = 0; and F = 0 wherever it is
    undefined (NaN: an empty side, or P + R = 0).

    `hyp_mask` / `ref_mask` [B, L]: the real tokens, where the caller knows them (else found as
    the rows that are not all zeros). `padding_repeats`: every padding position holds a copy of a
    real token of its own text (`FlatEmbedding.batch_index`), so it cannot change a maximum and
    nothing is masked (the weights, 0 on padding, keep it out of the sums).
    """
    import torch

    sim = torch.bmm(hyp, ref.transpose(1, 2))
    if not padding_repeats:
        hyp_real = hyp_mask if hyp_mask is not None else _real(hyp)
        ref_real = ref_mask if ref_mask is not None else _real(ref)
        sim = sim.masked_fill(~(hyp_real.unsqueeze(2) & ref_real.unsqueeze(1)), -2.0)
    precision = (sim.amax(dim=2) * hyp_w).sum(1) / hyp_w.sum(1)
    recall = (sim.amax(dim=1) * ref_w).sum(1) / ref_w.sum(1)
    f1 = 2 * precision * recall / (precision + recall)
    for empty in (hyp_empty, ref_empty):
        if empty is not None:
            empty = empty.to(precision.device)
            precision, recall = precision.masked_fill(empty, 0.0), recall.masked_fill(empty, 0.0)
    return precision, recall, f1.masked_fill(f1.isnan(), 0.0)


def only_special(special: Sequence[bool]) -> bool:
    """Whether a tokenised text is empty: no token but special ones ([CLS] [SEP], <s> </s>). bert_score
    tests `mask.sum() == 2`, the same for tokenizers that add two special tokens."""
    return all(special)


def _real(emb: torch.Tensor) -> torch.Tensor:
    """Positions holding a real (non-padding) token: padding rows are all zeros."""
    return emb.abs().sum(-1).ne(0)


def pad_tensors(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-token tensors [L_i, ...] right-padded with zeros into one batch [B, max L_i, ...]."""
    import torch

    return torch.nn.utils.rnn.pad_sequence(list(tensors), batch_first=True)


def group_sorted(lengths: Sequence[int], batch_size: int, tokens: int | None = None) -> Iterator[list[int]]:
    """Positions 0..n-1 of inputs already sorted longest first, cut into consecutive batches of at
    most `batch_size` inputs, or with a token budget as many as keep batch size x its first
    (longest) length <= `tokens` (an input longer than the budget is a batch of its own).

    Either way a batch is also cut before its padding would outnumber its real tokens (padded
    tokens > 2 x real): a long outlier then shares its batch with a few texts, not with
    `batch_size` much shorter ones padded to its length. Model time grows with padded tokens
    (docs/concepts/measurement.md, Batches), and only batches dominated by padding are split."""
    batch: list[int] = []
    real = 0
    for i in range(len(lengths)):
        if batch:
            padded = (len(batch) + 1) * lengths[batch[0]]
            full = padded > tokens if tokens is not None else len(batch) == batch_size
            if full or padded > 2 * (real + lengths[i]):
                yield batch
                batch, real = [], 0
        batch.append(i)
        real += lengths[i]
    if batch:
        yield batch


def length_sorted_batches(lengths: Sequence[int], batch_size: int, tokens: int | None = None) -> Iterator[list[int]]:
    """Indices in batches (`group_sorted`: at most `batch_size` each or within a token budget,
    never more padding than real tokens), longest first (ties in input order): least padding."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    for group in group_sorted([lengths[i] for i in order], batch_size, tokens):
        yield [order[j] for j in group]


def length_sorted_map(
    fn: Callable[[list[int]], Sequence[T]], lengths: Sequence[int], batch_size: int, context: CellContext | None = None
) -> list[T]:
    """`fn(batch)` (one result per index of the batch) over length-sorted batches, cut by the cell's
    token budget where its `context` has one, each batch reported to its progress hook; results in input order."""
    context = context if context is not None else CellContext()
    results: dict[int, T] = {}
    for batch in length_sorted_batches(lengths, batch_size, context.batch_tokens):
        results.update(zip(batch, fn(batch), strict=True))
        context.advance("inputs scored", len(results), len(lengths))
    return [results[i] for i in range(len(lengths))]
