"""MoverScore (Zhao et al., 2019), with the semantics of the published `moverscore_v2`.

Each text is a weighted cloud of its last-layer token embeddings (unit-normalised); subword
continuations, punctuation, special tokens and optional stop words get no mass; weights are
idf computed separately over the references and over the hypotheses (corpus state). The
distance between the two clouds comes from an aligner (exact WMD by default, or RWMD / WCD)
and the score is `1 - distance`, as `moverscore_v2.word_mover_score` returns (the published
code, which the efficiency study ran, uses this one); `score_form: inverse` gives
`1 / (1 + distance)` instead. `n_gram: n` replaces tokens by n-grams as the first release
(`moverscore.py`'s `load_ngram`); moverscore_v2 accepts `n_gram` but ignores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

import numpy as np
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.tokenization import Tokenized
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import pad_pairs, transport_pairs
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, Scores
from nlgbench.metrics.embedding import AlignerScorer, SidedIdf, embed_pairs
from nlgbench.metrics.metric_options import MoverScoreOptions
from nlgbench.metrics.tokenless import kept_tokens, scorer_refusal

GROUP_PAIRS = 256  # pairs taken from the encoder at a time
BATCH_PAIRS = 32  # pairs padded into one batch (sorted by size)


def ngram_cloud(emb: np.ndarray, w: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-grams of consecutive kept tokens (stride 1; one window of all when fewer than n): the
    idf-weighted mean embedding and the idf sum as mass, as moverscore.py's `load_ngram`."""
    if n <= 1 or not len(w):
        return emb, w
    n = min(n, len(w))
    starts = range(len(w) - n + 1)
    mass = np.array([w[i : i + n].sum() for i in starts])
    grams = np.stack(
        [(w[i : i + n, None] / (mass[k] + 1e-30) * emb[i : i + n]).sum(axis=0) for k, i in enumerate(starts)]
    )
    return grams, mass


def cloud(
    tok: Tokenized,
    hidden: torch.Tensor,
    idf: dict[int, float] | None,
    unseen: float,
    stop_words: frozenset[str],
    n_gram: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(embeddings [k, D] float64 on the states' device, weights [k] float64 on the CPU) of the kept
    tokens (or their n-grams) of one text; `unit_rows` normalises the embeddings, batched."""
    keep = kept_tokens(tok, stop_words)
    idx = [j for j, k in enumerate(keep) if k]
    w = np.array([idf.get(tok.ids[j], unseen) if idf is not None else 1.0 for j in idx], dtype=np.float64)
    if len(w) and w.sum() <= 0:
        # Every kept token is in every text of its side (always so for one pair: log(2/2) = 0): uniform weights,
        # as BaryScore's fallback. moverscore_v2 moves no mass there and returns 1, the best score, whatever the text.
        w = np.ones(len(w))
    emb = hidden.index_select(0, torch.tensor(idx, dtype=torch.long, device=hidden.device)).double()
    if n_gram > 1:
        grams, w = ngram_cloud(emb.cpu().numpy(), w, n_gram)
        emb = torch.from_numpy(grams).to(hidden.device)
    return emb, torch.from_numpy(w)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by their norm (+ 1e-30, as moverscore_v2; zero padding rows stay zero)."""
    return x / (torch.linalg.vector_norm(x, dim=-1, keepdim=True) + 1e-30)


def moverscore_from_distance(d: float, form: str) -> float:
    """`one_minus`: 1 - d (moverscore_v2's return value); `inverse`: 1 / (1 + d)."""
    return 1.0 - d if form == "one_minus" else 1.0 / (1.0 + d)


class MoverScoreScorer(AlignerScorer[MoverScoreOptions]):
    """MoverScore over one encoder and one aligner."""

    options_class = MoverScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        aligner: str | None = None,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(encoder_ref, options, device, batch_size, aligner, context)
        self.stop_words = frozenset(w.lower() for w in (self.options.stop_words or []))
        self.idf_tables = SidedIdf()

    def prepare(self, items: Sequence[Item]) -> None:
        """IDF over all references and, separately, over all hypotheses (as moverscore_v2's usage)."""
        if self.options.idf:
            self.idf_tables.fit(self.encoder, items)

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """GROUP_PAIRS pairs at a time: their clouds in batches of BATCH_PAIRS pairs of similar size
        (little padding), each batch's cost matrices in one product (`pad_pairs`), then its transport
        problems (`transport_pairs`); batches run on the cell's threads, one thread each."""
        threads = torch.get_num_threads()
        idf = self.idf_tables
        distances: list[float] = []
        stream = embed_pairs(
            self.encoder, [(it.reference, it.hypothesis) for it in items], self.layer, self.batch_size, timer
        )
        for start in range(0, len(items), GROUP_PAIRS):
            group = list(islice(stream, GROUP_PAIRS))  # encodes when needed, timed as encode
            with timer.phase("distance"):
                refs = [
                    cloud(*ref, idf.reference, idf.unseen_reference, self.stop_words, self.options.n_gram)
                    for ref, _ in group
                ]
                hyps = [
                    cloud(*hyp, idf.hypothesis, idf.unseen_hypothesis, self.stop_words, self.options.n_gram)
                    for _, hyp in group
                ]
                for it, (_, a), (_, b) in zip(items[start : start + len(group)], refs, hyps, strict=True):
                    for field, text, weights in (("reference", it.reference, a), ("hypothesis", it.hypothesis, b)):
                        if not len(weights):  # no check before (the model was not on disk at the sweep's start)
                            rule = self.options.token_rule(None)
                            label = self.encoder.ref.label
                            raise scorer_refusal("moverscore", field, it, text, rule, label, BLANK_REASON)
                batches = pad_pairs(
                    self.aligner,
                    [x for x, _ in refs],
                    [a for _, a in refs],
                    [y for y, _ in hyps],
                    [b for _, b in hyps],
                    threads,
                    BATCH_PAIRS,
                    points=unit_rows,
                    context=self.context,
                )
            with timer.phase("transport"):
                distances.extend(transport_pairs(self.aligner, batches, threads, self.context).tolist())
        scores = [moverscore_from_distance(d, self.options.score_form) for d in distances]
        return Scores(
            primary="moverscore",
            columns={"moverscore": scores, "distance": distances},
            opposite_direction=("distance",),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "idf": self.options.idf,
            "aligner": self.aligner.name,
            "n_gram": self.options.n_gram,
            "score_form": self.options.score_form,
            **self.encoder.describe(),
        }


def check_values(options: dict[str, Any]) -> None:
    if options.get("stop_words") is not None and not all(isinstance(w, str) for w in options["stop_words"]):
        raise UserError("stop_words must be a list of words")
    if options.get("n_gram") is not None and options["n_gram"] < 1:
        raise UserError(f"n_gram must be >= 1, got {options['n_gram']}")
    if options.get("score_form") not in (None, "one_minus", "inverse"):
        raise UserError(
            f"score_form must be one_minus (1 - distance) or inverse (1 / (1 + distance)), "
            f"got {options['score_form']!r}"
        )


# An empty text has no mass: moverscore_v2's emd_with_flow then moves nothing and returns 1 - 0 = 1,
# the best score, for an empty hypothesis or reference (checked on MiniLM-L6): an artifact, not a value.
BLANK_REASON = (
    "an empty text has no token mass to move, so its transport distance is undefined "
    "(moverscore_v2 gives it 1, the best score, by moving nothing)"
)


INFO = MetricInfo(
    name="moverscore",
    description="MoverScore (Zhao et al. 2019, moverscore_v2 semantics): 1 - transport distance "
    "of idf-weighted token embeddings",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=True,
    options_class=MoverScoreOptions,
    encoder_kinds=("encoder", "seq2seq"),  # seq2seq: its encoder half
    accepts_aligners=True,
    build=MoverScoreScorer,
    check_values=check_values,
    # AIPHES/emnlp19-moverscore: examples/example.py `sentence_score` (the README's multi-reference usage)
    # and examples/run_summarization.py take np.mean of word_mover_score over the references.
    multi_reference="mean",
    blank_texts=BlankTexts(refused=("hypothesis", "reference"), reason=BLANK_REASON),
)
