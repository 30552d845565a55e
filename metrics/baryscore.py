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

from collections import Counter
from collections.abc import Sequence
from itertools import islice
from typing import Any

import numpy as np
import ot
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import load_encoder
from nlgbench.encoders.tokenization import Tokenized
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import (
    pad_clouds,
    parallel,
    squared_euclidean_cost_batch,
    wmd_batch,
)
from nlgbench.metrics.barycentre import compile_kernels, free_support_barycentres
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.common import length_sorted_batches
from nlgbench.metrics.embedding import Embedded, SidedIdf, embed_pairs
from nlgbench.metrics.metric_options import BaryScoreOptions
from nlgbench.metrics.tokenless import WORD_TOKENS, has_word, scorer_refusal

# Pairs whose barycentres are computed together, and texts per barycentre batch (sorted by length).
GROUP_PAIRS = 256
BATCH_TEXTS = 4


def measure_weights(tok: Tokenized, idf: dict[int, float] | None, unseen: float) -> tuple[list[int], np.ndarray]:
    """(kept token positions, normalised weights): non-special tokens, idf-weighted (or uniform)."""
    keep = [j for j in range(len(tok.ids)) if not tok.special[j]]
    w = np.array([idf.get(tok.ids[j], unseen) if idf is not None else 1.0 for j in keep], dtype=np.float64)
    if not keep:
        raise ValueError("no token left after removing special tokens")
    if w.sum() <= 0:
        w = np.ones(len(keep))
    return keep, w / w.sum()


def unit_states(hidden: torch.Tensor, keep: Sequence[int]) -> torch.Tensor:
    """The states [k, T, D] of the tokens `keep`, unit-normalised, float64: [k, len(keep), D]."""
    layers = hidden.index_select(1, torch.tensor(keep, device=hidden.device)).double()
    return layers / layers.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def wasserstein_batch(
    x: Sequence[torch.Tensor],
    y: Sequence[torch.Tensor],
    threads: int = 1,
    batch_pairs: int = 32,
    context: CellContext | None = None,
) -> torch.Tensor:
    """Wasserstein distances [B] (on the CPU) between uniform measures on x[i] [n_i, D] and y[i] [m_i, D],
    squared-Euclidean cost.

    As `ot.emd2(a, b, ot.dist(x, y))` in the published code, batched: pairs sorted by size in
    batches of `batch_pairs` (little padding), one cost product per batch, exact transport per pair
    (`wmd_batch`); the batches run on `threads` threads (`parallel`, reporting to the cell's `context`).
    """
    out = torch.zeros(len(x), dtype=torch.float64)
    batches = list(length_sorted_batches([len(p) + len(q) for p, q in zip(x, y, strict=True)], batch_pairs))

    def solve(j: int) -> None:
        idx = batches[j]
        xp, a, _ = pad_clouds([x[i] for i in idx], [torch.ones(len(x[i]), dtype=torch.float64) for i in idx])
        yp, b, _ = pad_clouds([y[i] for i in idx], [torch.ones(len(y[i]), dtype=torch.float64) for i in idx])
        out[idx] = wmd_batch(a, b, squared_euclidean_cost_batch(xp, yp)).cpu()

    with parallel(threads, "Wasserstein batches solved", context) as run:
        run(solve, len(batches))
    return out


def sinkhorn_divergence(x: np.ndarray, y: np.ndarray, reg: float) -> float:
    """Debiased Sinkhorn divergence OT_reg(x, y) - (OT_reg(x, x) + OT_reg(y, y)) / 2 between uniform measures (POT)."""
    a, b = np.full(len(x), 1.0 / len(x)), np.full(len(y), 1.0 / len(y))
    return float(ot.bregman.empirical_sinkhorn_divergence(x, y, reg, a, b, numIterMax=10000, warn=False))


class BaryScoreScorer(ScorerBase[BaryScoreOptions]):
    """BaryScore over one encoder: encode (k layers at once), barycentre per text, transport per pair."""

    options_class = BaryScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.encoder = load_encoder(encoder_ref, device, context=self.context)
        top = self.encoder.layers_run
        k = self.options.last_layers
        if not 1 <= k <= top + 1:
            raise UserError(
                f"baryscore last_layers={k} but encoder {encoder_ref.label} has {top + 1} hidden states "
                f"(embeddings + {top} layers)"
            )
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

    def measure(self, tok: Tokenized, hidden: torch.Tensor, side: str) -> tuple[torch.Tensor, np.ndarray]:
        """A text's k measures: unit-normalised states of its kept tokens [k, n, D] (float64, on the
        device) and their weights."""
        keep, w = self.weights(tok, side)
        return unit_states(hidden, keep), w

    def refuse_tokenless(self, texts: dict[tuple[str, str], Embedded], items: Sequence[Item]) -> None:
        """The first item holding a text with special tokens alone, refused by its ids (no check ran before:
        the model was not on disk at the sweep's start), instead of a measure without support."""
        for (text, side), (tok, _) in texts.items():
            if not has_word(tok):
                item = next(it for it in items if getattr(it, side) == text)
                raise scorer_refusal("baryscore", side, item, text, WORD_TOKENS, self.encoder.ref.label, BLANK_REASON)

    def barycentres(self, texts: dict[tuple[str, str], Embedded], threads: int) -> dict[tuple[str, str], torch.Tensor]:
        """The barycentre of each (text, side): batches of BATCH_TEXTS texts of similar length (little
        padding), `threads` batches at a time, one thread each (`parallel`)."""
        weighted = {key: self.weights(tok, key[1]) for key, (tok, _) in texts.items()}
        keys = sorted(weighted, key=lambda key: len(weighted[key][0]), reverse=True)  # longest first
        batches = [keys[start : start + BATCH_TEXTS] for start in range(0, len(keys), BATCH_TEXTS)]
        found: list[list[torch.Tensor]] = [[] for _ in batches]

        def solve(b: int) -> None:
            layers = [unit_states(texts[key][1], weighted[key][0]) for key in batches[b]]
            found[b] = free_support_barycentres(layers, [weighted[key][1] for key in batches[b]], self.options.max_iter)

        with parallel(threads, "barycentre batches solved", self.context) as run:
            run(solve, len(batches))
        return {
            key: bary for batch, bars in zip(batches, found, strict=True) for key, bary in zip(batch, bars, strict=True)
        }

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """Barycentres of each distinct (text, side) once (a reference shared by several items is reused,
        then dropped after its last use), computed GROUP_PAIRS pairs at a time; distances batched likewise."""
        threads = torch.get_num_threads()
        keys = [((it.reference, "reference"), (it.hypothesis, "hypothesis")) for it in items]
        uses = Counter(key for pair in keys for key in pair)
        known: dict[tuple[str, str], torch.Tensor] = {}
        cols: dict[str, list[float]] = {"w": [], **{f"sd_{reg:g}": [] for reg in self.options.sinkhorn_regs}}
        stream = embed_pairs(
            self.encoder, [(it.reference, it.hypothesis) for it in items], self.layers, self.batch_size, timer
        )
        for start in range(0, len(items), GROUP_PAIRS):
            group = list(islice(stream, GROUP_PAIRS))  # encodes when needed, timed as encode
            group_keys = keys[start : start + len(group)]
            with timer.phase("barycentre"):
                todo = {
                    key: emb
                    for pair_keys, embs in zip(group_keys, group, strict=True)
                    for key, emb in zip(pair_keys, embs, strict=True)
                    if key not in known
                }
                self.refuse_tokenless(todo, items)
                known.update(self.barycentres(todo, threads))
            with timer.phase("transport"):
                refs, hyps = [known[ref] for ref, _ in group_keys], [known[hyp] for _, hyp in group_keys]
                cols["w"].extend(wasserstein_batch(refs, hyps, threads, context=self.context).tolist())
                for reg in self.options.sinkhorn_regs:
                    cols[f"sd_{reg:g}"].extend(
                        sinkhorn_divergence(x.cpu().numpy(), y.cpu().numpy(), reg)
                        for x, y in zip(refs, hyps, strict=True)
                    )
            for key in (key for pair_keys in group_keys for key in pair_keys):
                uses[key] -= 1
                if not uses[key]:
                    del known[key]
        return Scores(primary="w", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "layer": self.layers[-1],
            "idf": self.options.idf,
            "sinkhorn_regs": self.options.sinkhorn_regs,
            **self.encoder.describe(),
        }


def check_values(options: dict[str, Any]) -> None:
    regs = options.get("sinkhorn_regs") or []
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in regs):
        raise UserError(f"sinkhorn_regs must be a list of positive numbers, got {regs!r}")
    for key in ("last_layers", "max_iter"):
        if options.get(key) is not None and options[key] < 1:
            raise UserError(f"{key} must be >= 1, got {options[key]}")


BLANK_REASON = "an empty text has no token to make a measure of, so no barycentre and no Wasserstein distance"


INFO = MetricInfo(
    name="baryscore",
    description="BaryScore (Colombo et al. 2021): Wasserstein distance of idf-weighted barycentres "
    "of the last k layers (lower is better)",
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
    blank_texts=BlankTexts(refused=("hypothesis", "reference"), reason=BLANK_REASON),
    # A text the tokenizer leaves [CLS] and [SEP] alone (U+200B, NUL ...) is as blank. The published bary_score.py
    # keeps those two in its measures (and its idf lookup, by tensor keys, never hits its int-keyed table, so every
    # token weighs the unseen value): it scores such a text from their states alone. Here special tokens weigh
    # nothing, so there is no measure, as for an empty text.
    token_rule=WORD_TOKENS,
    warm_up=compile_kernels,  # numba's kernels compiled (or read from its cache) in the worker's start-up
)
