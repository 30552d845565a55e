"""BERTScore (Zhang et al., 2020): greedy cosine matching of contextual token embeddings.

Functional core, in `nlgbench.metrics.common` (SentSim uses it too): `idf_table` (Eq. 4's
idf from the references) and `greedy_match` (Eqs. 1-3 with idf weighting). `BertScoreScorer`
owns the encoder, batching and timing.

Conventions, chosen to equal the `bert_score` package: texts are stripped; special tokens
([CLS]/[SEP], <s>/</s>) get weight 0 by id but stay match candidates; the layer is
hidden_states[layer] of the encoder truncated to that layer; idf(w) = log((M + 1) / (df(w) + 1))
over the M references, unseen tokens log(M + 1); an empty text (no token but special ones) gives
P = R = F1 = 0 with any other text (bert_score's rule, `greedy_match`).

`rescale_with_baseline` maps each of P, R and F to (s - b) / (1 - b) with the layer's baselines
(`nlgbench.metrics.baseline_files`: from `baseline_path`, a file in bert_score's format, else the one
`nlgbench baseline` stored for the model), after the raw F is computed, as bert_score does; linear,
so no correlation changes. `fix_idf` fixes idf from a given corpus for the scorer's life (bert_score's
`BERTScorer(idf_sents=...)`): `prepare` then keeps it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef, default_layer
from nlgbench.encoders.runtime import load_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.baseline_files import Baseline, find_baseline, read_table
from nlgbench.metrics.common import weight_table
from nlgbench.metrics.embedding import FlatEmbedding, Workspace, chunks, corpus_idf, embed_flat, greedy_match_pairs
from nlgbench.metrics.metric_options import BertScoreOptions


class BertScoreScorer(ScorerBase[BertScoreOptions]):
    """BERTScore over one encoder, with length-sorted batching of unique texts."""

    options_class = BertScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        layer = self.options.layer if self.options.layer is not None else default_layer(encoder_ref, "bertscore")
        self.encoder = load_encoder(encoder_ref, device, needed_layer=layer, context=self.context)
        self.layer = self.encoder.layers_run
        self.idf: dict[int, float] | None = None
        self.unseen = 0.0
        self.idf_corpus: str | None = None  # sha256 of the fixed idf corpus (`fix_idf`), None: per call
        self.baseline: Baseline | None = None
        if self.options.rescale_with_baseline:
            self.baseline = find_baseline(self.encoder.source, self.layer, self.options.baseline_path)
        self.weights: torch.Tensor | None = None  # `weight_table` of the token ids, made on first use
        self.workspace = Workspace()  # where `embed` packs a chunk's states, reused by the next

    def fix_idf(self, texts: Sequence[str]) -> None:
        """idf from `texts` for the scorer's life (bert_score's `idf_sents`): `prepare` keeps it."""
        self.idf, self.unseen = corpus_idf(self.encoder, texts)
        self.idf_corpus = hashlib.sha256("\n".join(texts).encode()).hexdigest()
        self.weights = None

    def prepare(self, items: Sequence[Item]) -> None:
        """IDF over all references of the dataset (corpus state, computed once) unless fixed by
        `fix_idf`, and the weight of every token id (`weight_table`) made afresh on first use."""
        if self.options.idf and self.idf_corpus is None:
            self.idf, self.unseen = corpus_idf(self.encoder, [it.reference for it in items])
        self.weights = None

    def weight_of(self, ids: torch.Tensor) -> torch.Tensor:
        """Weights of token ids (idf or 1, 0 for special tokens), looked up in the table of all ids."""
        size = max(len(self.encoder.tokenizer), int(ids.max()) + 1 if len(ids) else 0)
        if self.weights is None or len(self.weights) < size:
            self.weights = weight_table(size, self.encoder.special_ids, self.idf, self.unseen)
        return self.weights[ids]

    def embed(self, texts: Sequence[str], timer: PhaseTimer) -> tuple[FlatEmbedding, torch.Tensor, torch.Tensor]:
        """Each unique text's unit-norm token embeddings (`FlatEmbedding`), the weights of all its
        tokens [N] on the device, and whether each text is empty [n] (no token but the special
        ones the tokenizer adds, as bert_score tests it). Packing, normalising and weighing are timed
        as `match`."""
        flat = embed_flat(self.encoder, texts, self.layer, self.batch_size, timer, unit=True, workspace=self.workspace)
        with timer.phase("match"):
            weights = self.weight_of(flat.ids).to(flat.states.device)
            empty = flat.length <= self.encoder.specials_added
        return flat, weights, empty

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """P, R, F1 of every item: its chunk's texts embedded once (`embed`), then matched in batches
        of `batch_size` pairs of similar lengths (least padding), gathered from the packed states
        on the cell's device (`greedy_match`); one list per column at the end."""
        parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        for chunk in chunks(items):
            flat, weights, empty = self.embed([t for it in chunk for t in (it.reference, it.hypothesis)], timer)
            with timer.phase("match"):
                hyp = torch.tensor([flat.texts[it.hypothesis] for it in chunk], dtype=torch.long)
                ref = torch.tensor([flat.texts[it.reference] for it in chunk], dtype=torch.long)
                parts.append(greedy_match_pairs(flat, weights, empty, hyp, ref, self.batch_size))
        with timer.phase("match"):
            cols: dict[str, list[float]] = {"precision": [], "recall": [], "f1": []}
            if parts:
                for k, name in enumerate(cols):
                    cols[name] = torch.cat([part[k] for part in parts]).cpu().float().tolist()
        if self.baseline is not None:
            cols = {name: self.baseline.rescale(name, values) for name, values in cols.items()}
        return Scores(primary="f1", columns=cols)

    def describe(self) -> dict[str, Any]:
        rescaled = {"rescaled": self.baseline.digest} if self.baseline is not None else {}
        fixed = {"idf_corpus": self.idf_corpus} if self.idf_corpus is not None else {}
        return {"layer": self.layer, "idf": self.options.idf, **rescaled, **fixed, **self.encoder.describe()}


def check_options(options: dict[str, Any]) -> None:
    """A baseline file only means something with rescaling on; it is read and checked whole here, when the
    spec or the scorer's options are checked, before any model loads."""
    if options.get("baseline_path") is not None and not options.get("rescale_with_baseline"):
        raise UserError("baseline_path is given but rescale_with_baseline is off: set rescale_with_baseline=True")
    if options.get("baseline_path") is not None:
        read_table(Path(options["baseline_path"]))


INFO = MetricInfo(
    name="bertscore",
    description="BERTScore (Zhang et al. 2020): greedy cosine matching of token embeddings; P, R, F1 (F1 primary)",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=True,
    options_class=BertScoreOptions,
    encoder_kinds=("encoder", "seq2seq"),  # seq2seq: its encoder half
    accepts_aligners=False,
    build=BertScoreScorer,
    check_values=check_options,
    held_if_set=("rescale_with_baseline", "baseline_path"),  # added later: cells without them keep their ids
    # bert_score.score with refs as a list of lists scores each (candidate, reference) pair, idf over all
    # of them, then keeps per candidate the max over its references of P, R and F separately
    # (bert_score/score.py: ref_group_boundaries, all_preds[beg:end].max(dim=0)).
    multi_reference="max",
)
