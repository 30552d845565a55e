"""SentSim (Song et al., 2021): sentence-embedding similarity combined with a token-level similarity.

Reference-free by default: the hypothesis is compared with the source (`against: source`);
`against: reference` compares with the reference instead. Parts, as the published code:
- sentence part: cosine of mean-pooled last-layer token states (sentence-transformers
  mean pooling, special tokens included);
- token part: BERTScore F1 (`token_part: bertscore`) or the Word Mover's Distance of the
  token clouds with uniform weights over the non-special tokens (`token_part: wmd`; any
  aligner: wmd, rwmd, wcd);
- each part min-max normalised over the whole scored dataset (corpus-level, never per
  batch), combined as exp(cos) + exp(F1), or exp(cos) + exp(1 - WMD) for a distance.
The encoder is the sentence encoder; `word_encoder` names another model for the token part
(default: the same one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.encoders.tokenization import Tokenized
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import ALIGNERS, align
from nlgbench.metrics.base import (
    MetricInfo,
    PhaseTimer,
    ScorerBase,
    Scores,
    with_second_model,
)
from nlgbench.metrics.common import greedy_match, only_special, pad_tensors, token_weights
from nlgbench.metrics.embedding import chunks, embed_texts
from nlgbench.metrics.metric_options import SentSimOptions


def min_max(values: Sequence[float]) -> np.ndarray:
    """(v - min) / (max - min) over the whole set; undefined (ValueError) when all values are equal."""
    v = np.asarray(values, dtype=np.float64)
    span = v.max() - v.min()
    if span <= 0:
        raise ValueError("min-max normalisation needs at least two different scores in the dataset")
    return (v - v.min()) / span


def normalised(part: str, values: Sequence[float]) -> np.ndarray:
    """`min_max` of one part's scores, its undefined case (all scores equal) as one clear UserError."""
    try:
        return min_max(values)
    except ValueError:
        raise UserError(
            f"sentsim normalises each part by its min and max over the scored set (SentSim's min-max rule), "
            f"so it needs at least two items with different {part} scores; these {len(values)} all score "
            f"{values[0]:.6g} (identical or blank texts?)"
        ) from None


def combine(sentence: np.ndarray, token: np.ndarray, token_is_distance: bool) -> np.ndarray:
    """SentSim's combination of two min-max normalised parts."""
    return np.exp(sentence) + np.exp(1.0 - token if token_is_distance else token)


def mean_pool(hidden: torch.Tensor) -> torch.Tensor:
    """Sentence embedding: the mean of a text's token states [n, D] -> [D]."""
    return hidden.mean(dim=0)


class SentSimScorer(ScorerBase[SentSimOptions]):
    """SentSim over a sentence encoder and a word encoder (the same model unless `word_encoder` is set)."""

    options_class = SentSimOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.sentence = load_encoder(encoder_ref, device, context=self.context)
        word_ref = EncoderRef(self.options.word_encoder) if self.options.word_encoder else encoder_ref
        self.word: Encoder = (
            self.sentence
            if word_ref == encoder_ref and self.options.layer is None
            else load_encoder(word_ref, device, needed_layer=self.options.layer, context=self.context)
        )
        self.layer = self.options.layer if self.options.layer is not None else self.word.layers_run

    def prepare(self, items: Sequence[Item]) -> None:
        """Normalisation is over the whole scored dataset, done in `score` once all items are scored."""

    def _other(self, it: Item) -> str:
        return it.source if self.options.against == "source" else it.reference

    def _token_part(self, tok_a: Tokenized, a: torch.Tensor, tok_b: Tokenized, b: torch.Tensor) -> float:
        if self.options.token_part == "bertscore":
            wa = token_weights(tok_a.ids, self.word.special_ids, None, 0.0)
            wb = token_weights(tok_b.ids, self.word.special_ids, None, 0.0)
            a, b = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
            _, _, f = greedy_match(
                pad_tensors([a]),
                pad_tensors([wa]),
                pad_tensors([b]),
                pad_tensors([wb]),
                hyp_empty=torch.tensor([only_special(tok_a.special)]),  # an empty text: F1 = 0, as bert_score
                ref_empty=torch.tensor([only_special(tok_b.special)]),
            )
            return float(f[0])
        keep_a = [j for j in range(len(tok_a.ids)) if not tok_a.special[j]]
        keep_b = [j for j in range(len(tok_b.ids)) if not tok_b.special[j]]
        x, y = a[keep_a].double().numpy(), b[keep_b].double().numpy()
        return align(self.options.token_part, x, np.ones(len(x)), y, np.ones(len(y)))

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        if self.options.against == "source" and any(not it.source.strip() for it in items):
            raise ValueError("against: source needs a source text for every item; this dataset has blank sources")
        cosine: list[float] = []
        token: list[float] = []
        for chunk in chunks(items):
            texts = [t for it in chunk for t in (it.hypothesis, self._other(it))]
            sent = embed_texts(self.sentence, texts, self.sentence.layers_run, self.batch_size, timer)
            words = (
                sent
                if self.word is self.sentence
                else embed_texts(self.word, texts, self.layer, self.batch_size, timer)
            )
            with timer.phase("sentence"):
                for it in chunk:
                    u, v = mean_pool(sent[it.hypothesis][1]), mean_pool(sent[self._other(it)][1])
                    cosine.append(float(torch.nn.functional.cosine_similarity(u, v, dim=0)))
            with timer.phase("token"):
                for it in chunk:
                    token.append(self._token_part(*words[it.hypothesis], *words[self._other(it)]))
        with timer.phase("combine"):
            is_distance = self.options.token_part != "bertscore"
            token_part = f"token ({self.options.token_part})"
            sentsim = combine(normalised("sentence cosine", cosine), normalised(token_part, token), is_distance)
        token_column = f"token_{self.options.token_part}"
        return Scores(
            primary="sentsim",
            columns={"sentsim": sentsim.tolist(), "sentence_cosine": cosine, token_column: token},
            opposite_direction=(token_column,) if is_distance else (),
        )

    def describe(self) -> dict[str, Any]:
        out = {
            "layer": self.layer,
            "against": self.options.against,
            "token_part": self.options.token_part,
            **self.sentence.describe(),
        }
        if self.word is not self.sentence:
            word = self.word.describe()
            out = {**with_second_model(out, word), "word_encoder": word["source"]}
        return out


def check_values(options: dict[str, Any]) -> None:
    if options.get("against") not in (None, "source", "reference"):
        raise UserError(f"against must be source or reference, got {options['against']!r}")
    parts = ["bertscore", *ALIGNERS]
    if options.get("token_part") not in (None, *parts):
        raise UserError(f"token_part must be one of {', '.join(parts)}, got {options['token_part']!r}")


INFO = MetricInfo(
    name="sentsim",
    description="SentSim (Song et al. 2021): exp(normalised sentence cosine) "
    "+ exp(normalised token BERTScore F1 or 1 - WMD); reference-free (source) by default",
    needs=("source",),
    higher_is_better=True,
    corpus_state=True,
    options_class=SentSimOptions,
    encoder_kinds=("encoder",),
    accepts_aligners=False,
    build=SentSimScorer,
    check_values=check_values,
    model_options={"word_encoder": "encoder"},
    # Reference-free by default. With `against: reference` the published definition (Song et al. 2021) and
    # code score one (hypothesis, text) pair and give no rule for several references: the user sets reference_policy.
    multi_reference=None,
)
