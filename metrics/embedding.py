"""Shared encoding step of the token-embedding metrics: unique texts, length-sorted batches, corpus idf."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol, Sequence, TypeVar

import torch

from nlgbench.data import Item
from nlgbench.encoders import Encoder, EncoderRef, Tokenized, load_encoder
from nlgbench.metrics.alignment import get_aligner
from nlgbench.metrics.base import PhaseTimer, ScorerBase
from nlgbench.metrics.common import idf_table, length_sorted_map

T = TypeVar("T")


class LayerOptions(Protocol):
    @property
    def layer(self) -> int | None: ...


L = TypeVar("L", bound=LayerOptions)

# Items scored per chunk: embeddings of one chunk's unique texts are kept, then freed.
CHUNK_ITEMS = 2048

Embedded = tuple[Tokenized, torch.Tensor]  # a text's tokens and hidden states


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """Consecutive slices of CHUNK_ITEMS items (bounds the memory held by embeddings)."""
    for start in range(0, len(items), CHUNK_ITEMS):
        yield items[start : start + CHUNK_ITEMS]


def corpus_idf(encoder: Encoder, texts: Sequence[str]) -> tuple[dict[int, float], float]:
    """`idf_table` over the encoder's token ids of `texts` (one corpus side: references or hypotheses)."""
    return idf_table([t.ids for t in encoder.tokenize(list(texts))])


@dataclass
class SidedIdf:
    """idf over all references and, separately, over all hypotheses (MoverScore's and BaryScore's corpus state).

    Before `fit` (idf off) there are no tables: every token weighs 1.
    """

    reference: dict[int, float] | None = None
    hypothesis: dict[int, float] | None = None
    unseen_reference: float = 1.0
    unseen_hypothesis: float = 1.0

    def fit(self, encoder: Encoder, items: Sequence[Item]) -> None:
        self.reference, self.unseen_reference = corpus_idf(encoder, [it.reference for it in items])
        self.hypothesis, self.unseen_hypothesis = corpus_idf(encoder, [it.hypothesis for it in items])


def embed_texts(
    encoder: Encoder, texts: Sequence[str], layer: int | Sequence[int], batch_size: int, timer: PhaseTimer
) -> dict[str, Embedded]:
    """Tokens and hidden states of each unique text: [n_tokens, D] for one layer, [k, n_tokens, D] for k layers.

    Texts are deduplicated and encoded in batches sorted by token count (least padding);
    tokenisation and encoding are timed as separate phases.
    """
    layers = [layer] if isinstance(layer, int) else list(layer)
    unique = list(dict.fromkeys(texts))
    with timer.phase("tokenize"):
        toks = encoder.tokenize(unique)

    def encode(batch: list[int]) -> list[torch.Tensor]:
        states, _ = encoder.hidden_states([toks[i].ids for i in batch], layers)
        # half-precision variants: metrics work in float32
        hidden = states[0].float() if isinstance(layer, int) else torch.stack(states, dim=1).float()
        return [hidden[row, ..., : len(toks[i].ids), :] for row, i in enumerate(batch)]

    with timer.phase("encode"):
        hidden = length_sorted_map(encode, [len(t.ids) for t in toks], batch_size)
    return {text: (tok, states) for text, tok, states in zip(unique, toks, hidden)}


def embed_pairs(
    encoder: Encoder, pairs: Sequence[tuple[str, str]], layer: int | Sequence[int], batch_size: int, timer: PhaseTimer
) -> Iterator[tuple[Embedded, Embedded]]:
    """The embedded texts of each (a, b) pair, in order; encoded chunk by chunk with `embed_texts`."""
    for chunk in chunks(pairs):
        emb = embed_texts(encoder, [text for pair in chunk for text in pair], layer, batch_size, timer)
        for a, b in chunk:
            yield emb[a], emb[b]


class AlignerScorer(ScorerBase[L]):
    """A scorer comparing token clouds of one encoder layer (`options.layer`) with an aligner (MoverScore, XMoverScore)."""

    def __init__(self, encoder_ref: EncoderRef, options: dict[str, Any], device: str, batch_size: int,
                 aligner: str | None = None) -> None:
        super().__init__(options, device, batch_size)
        self.aligner = get_aligner(aligner or "wmd")
        self.encoder = load_encoder(encoder_ref, device, needed_layer=self.options.layer)
        self.layer = self.encoder.layers_run
