"""Tokenising as an encoder's cells tokenise, without torch: `Tokenized` (one text's tokens), the model's
maximum input length and the batch call of the fast tokenizer (`tokenize_texts`), shared by the loaded encoder
(`nlgbench.encoders.runtime.Encoder`) and by `load_tokenizer`, the tokenizer alone for the checks of the
texts before any model loads. This module imports no torch, so that the commands and checks that need a
tokenizer only (or nothing of a model) start fast; transformers is imported when a tokenizer loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nlgbench.encoders.hfcache import load_options, local_snapshot
from nlgbench.encoders.registry import EncoderRef, resolve_source
from nlgbench.foundations.cellcontext import CellContext

# RoBERTa-style models reserve padding_idx + 1 positions.
_RESERVING_POSITIONS = {"roberta", "mpnet", "xlm-roberta", "camembert"}


class Tokenized:
    """Token ids of one text, and what metrics need to filter them, read from the fast tokenizer's
    encoding only when a metric asks (BERTScore reads the ids alone: no per-token Python work).

    `tracked=False`: the encoding was made without offsets and word ids (`Encoder.tokenize(...,
    ids_only=True)`), so the flags and offsets cannot be read: asking for them is a bug, raised."""

    def __init__(self, encoding: Any, text: str = "", tracked: bool = True) -> None:
        self.encoding = encoding  # the tokenizer's `tokenizers.Encoding`
        self.text = text  # the (stripped) text the offsets point into
        self.ids: list[int] = encoding.ids
        self.tracked = tracked

    def _tracked_encoding(self) -> Any:
        """The encoding, where it tracked word ids and offsets (else a bug of the metric: raised)."""
        if not self.tracked:
            raise RuntimeError("tokenised for its ids only (ids_only=True): no word ids or offsets")
        return self.encoding

    def _word_ids(self) -> list[int | None]:
        word_ids: list[int | None] = self._tracked_encoding().word_ids
        return word_ids

    @cached_property
    def special(self) -> list[bool]:
        """True for special tokens ([CLS], <s>, </s>, ...: no word of the text)."""
        return [wid is None for wid in self._word_ids()]

    @cached_property
    def word_start(self) -> list[bool]:
        """True where a token begins a new word (a subword continuation: False; special tokens: False)."""
        word_ids = self._word_ids()
        return [wid is not None and (j == 0 or wid != word_ids[j - 1]) for j, wid in enumerate(word_ids)]

    @cached_property
    def offsets(self) -> list[tuple[int, int]]:
        """(start, end) of each token in `text` ((0, 0) for special tokens)."""
        return [tuple(o) for o in self._tracked_encoding().offsets]

    def surface(self, j: int) -> str:
        """The characters of the text that token j covers ("" for special tokens)."""
        start, end = self.offsets[j]
        return self.text[start:end]


def model_max_length(tokenizer: Any, config: Any) -> int:
    """Longest input the model accepts (tokens, specials included): the tokenizer's limit, and the
    configuration's positions less those a RoBERTa-style model reserves."""
    limit = getattr(tokenizer, "model_max_length", 512) or 512
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        reserve = 2 if getattr(config, "model_type", "") in _RESERVING_POSITIONS else 0
        limit = min(limit, positions - reserve)
    return int(min(limit, 100_000))


def tokenize_texts(
    tokenizer: Any, limit: int, texts: Sequence[str], truncated: set[str], *, ids_only: bool = False
) -> list[Tokenized]:
    """Tokenise texts (stripped) with special tokens, truncated to `limit` tokens (the texts that were cut
    are added to `truncated`).

    One batch call of the fast tokenizer's backend (`tokenizers.Tokenizer.encode_batch`), set
    as transformers' own call sets it (no padding; truncation longest first, on the tokenizer's
    side, at `limit`), without the per-text dictionaries transformers builds around it.
    Per-token flags and offsets are read from each encoding when a metric asks (`Tokenized`).
    `ids_only`: for a metric that reads the ids alone (BERTScore), the backend's
    `encode_batch_fast` where it has one, which tracks no offsets or word ids (the same ids,
    about an eighth less time per text)."""
    stripped = [t.strip() for t in texts]
    backend = tokenizer.backend_tokenizer
    truncation = {
        "max_length": limit,
        "stride": 0,
        "strategy": "longest_first",
        "direction": tokenizer.truncation_side,
    }
    if backend.truncation != truncation:
        backend.enable_truncation(**truncation)
    if backend.padding is not None:
        backend.no_padding()
    fast = ids_only and hasattr(backend, "encode_batch_fast")
    encode = backend.encode_batch_fast if fast else backend.encode_batch
    encodings = encode(stripped, add_special_tokens=True)
    truncated.update(text for text, e in zip(stripped, encodings, strict=True) if e.overflowing)
    return [Tokenized(e, text, tracked=not fast) for text, e in zip(stripped, encodings, strict=True)]


@dataclass
class TokenizerAlone:
    """A model's tokenizer and configuration, no model (`load_tokenizer`): tokenises as the model's
    cells tokenise (the same ids, the same maximum length)."""

    ref: EncoderRef
    source: str
    tokenizer: Any
    config: Any
    context: CellContext = field(default_factory=CellContext)

    @property
    def max_length(self) -> int:
        """Longest input the model accepts (tokens, specials included)."""
        return model_max_length(self.tokenizer, self.config)

    def tokenize(self, texts: Sequence[str], *, ids_only: bool = False) -> list[Tokenized]:
        """The texts' tokens, as the model's `Encoder.tokenize` gives them."""
        return tokenize_texts(self.tokenizer, self.max_length, texts, self.context.truncated, ids_only=ids_only)


def load_tokenizer(ref: EncoderRef) -> TokenizerAlone | None:
    """The encoder for tokenising alone, as its cells tokenise: its tokenizer and its configuration (for the
    maximum length; no modelling code imported, no weights read). For the checks of the texts that need the
    tokenizer, before any model loads. None where the model is not on this machine (a local folder or a
    cached snapshot) or its tokenizer does not load: a check downloads nothing (a snapshot of the tokenizer
    alone would pass for the model's), and the cell then meets what it would have found."""
    source = resolve_source(ref.name)
    if local_snapshot(source) is None:
        return None
    from transformers import AutoConfig, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **load_options(source))
        config = AutoConfig.from_pretrained(source, **load_options(source))
    except (OSError, ValueError):  # files missing or unreadable: the cell's loading says which
        return None
    if not getattr(tokenizer, "is_fast", False):
        return None
    return TokenizerAlone(ref=ref, source=source, tokenizer=tokenizer, config=config)
