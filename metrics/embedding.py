"""Shared encoding step of the token-embedding metrics: unique texts, length-sorted batches."""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

import torch

from nlgbench.encoders import Encoder, Tokenized
from nlgbench.metrics.base import PhaseTimer

T = TypeVar("T")

# Items scored per chunk: embeddings of one chunk's unique texts are kept, then freed.
CHUNK_ITEMS = 2048


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """Consecutive slices of CHUNK_ITEMS items (bounds the memory held by embeddings)."""
    for start in range(0, len(items), CHUNK_ITEMS):
        yield items[start : start + CHUNK_ITEMS]


def embed_texts(
    encoder: Encoder, texts: Sequence[str], layer: int | Sequence[int], batch_size: int, timer: PhaseTimer
) -> dict[str, tuple[Tokenized, torch.Tensor]]:
    """Tokens and hidden states of each unique text: [n_tokens, D] for one layer, [k, n_tokens, D] for k layers.

    Texts are deduplicated and encoded in batches sorted by token count (least padding);
    tokenisation and encoding are timed as separate phases.
    """
    layers = [layer] if isinstance(layer, int) else list(layer)
    unique = list(dict.fromkeys(texts))
    with timer.phase("tokenize"):
        toks = encoder.tokenize(unique)
    order = sorted(range(len(unique)), key=lambda i: len(toks[i].ids), reverse=True)
    out: dict[str, tuple[Tokenized, torch.Tensor]] = {}
    with timer.phase("encode"):
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            states, _ = encoder.hidden_states([toks[i].ids for i in batch], layers)
            # half-precision variants: metrics work in float32
            hidden = states[0].float() if isinstance(layer, int) else torch.stack(states, dim=1).float()
            for row, i in enumerate(batch):
                out[unique[i]] = (toks[i], hidden[row, ..., : len(toks[i].ids), :])
    return out
