"""XMoverScore (Zhao et al., 2020): reference-free MoverScore between source and hypothesis.

Parts, each timed: the source and hypothesis token states of a multilingual encoder layer
(default 8, as the published mBERT setting); optional remapping of the source side per
language pair, CLP (x -> x W, a linear map) or UMD (x -> x - (x.b) b, removing a bias
direction), read from `{mapping_dir}/{lp}.clp.npy` / `{lp}.umd.npy` the user supplies;
n-gram embeddings (mean of n consecutive token states, stride 1); a transport distance by
any aligner (score 1 - distance); and the target-side language-model term, the mean token
log-likelihood of the hypothesis under a causal LM (GPT-2 ...), combined as
`1 * xmover + lm_weight * lm` (the published weights 1 and 0.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.models import load_model
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import pad_ids
from nlgbench.encoders.tokenization import Tokenized
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import cost_matrix, transport
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, Scores, with_second_model
from nlgbench.metrics.common import length_sorted_map
from nlgbench.metrics.embedding import AlignerScorer, embed_pairs
from nlgbench.metrics.metric_options import XMoverScoreOptions
from nlgbench.metrics.tokenless import WORD_TOKENS


def remap(x: np.ndarray, mapping: str | None, matrix: np.ndarray) -> np.ndarray:
    """Source-side remapping: CLP multiplies by W [D, D]; UMD removes the component along b [D]."""
    if mapping is None:
        return x
    if mapping == "clp":
        return x @ matrix
    b = matrix / np.linalg.norm(matrix)
    return x - np.outer(x @ b, b)


def ngrams(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-gram embeddings (means of n consecutive rows, stride 1) and their mass (n tokens each, uniform)."""
    if n <= 1 or len(x) < n:
        return x, np.ones(len(x))
    windows = np.stack([x[i : i + n].mean(axis=0) for i in range(len(x) - n + 1)])
    return windows, np.full(len(windows), float(n))


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-30)


def lm_log_likelihood(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean log p(token_t | tokens_<t) over each row's predicted tokens (all but the first), [B]."""
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    m = mask[:, 1:].to(logp.dtype)
    return (logp * m).sum(1) / m.sum(1)


class XMoverScoreScorer(AlignerScorer[XMoverScoreOptions]):
    """XMoverScore over one multilingual encoder, one aligner and an optional causal LM."""

    options_class = XMoverScoreOptions

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
        self.lm = (
            load_model(EncoderRef(self.options.lm), "causal-lm", device, context=self.context)
            if self.options.lm
            else None
        )
        self.maps: dict[str, np.ndarray] = {}

    def prepare(self, items: Sequence[Item]) -> None:
        """Read the remapping of every language pair in the dataset (a missing file is an error)."""
        if self.options.mapping is None:
            return
        folder = Path(self.options.mapping_dir or ".").expanduser()
        for lp in sorted({it.lp for it in items}):
            path = folder / f"{lp}.{self.options.mapping}.npy"
            if not path.is_file():
                raise UserError(f"xmoverscore mapping {self.options.mapping}: no file {path} for language pair {lp}")
            self.maps[lp] = np.load(path).astype(np.float64)

    def _cloud(self, tok: Tokenized, hidden: torch.Tensor, lp: str | None) -> tuple[np.ndarray, np.ndarray]:
        x = hidden[[j for j in range(len(tok.ids)) if not tok.special[j]]].double().cpu().numpy()
        if lp is not None:
            x = remap(x, self.options.mapping, self.maps[lp])
        x, w = ngrams(x, self.options.n_gram)
        return unit(x), w

    def lm_scores(self, texts: list[str], timer: PhaseTimer) -> list[float]:
        """Mean token log-likelihood of each text under the causal LM (bos + text + eos)."""
        assert self.lm is not None
        tok = self.lm.tokenizer
        bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        with timer.phase("tokenize"):
            ids = [[bos, *t, tok.eos_token_id] for t in tok(texts, add_special_tokens=False)["input_ids"]]
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        model = self.lm.model

        def batch_scores(batch: list[int]) -> list[float]:
            x, m = pad_ids([ids[i] for i in batch], pad_id)
            return lm_log_likelihood(model, x.to(self.device), m.to(self.device)).tolist()

        with timer.phase("lm"):
            return length_sorted_map(batch_scores, [len(row) for row in ids], self.batch_size, self.context)

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        if any(not it.source.strip() for it in items):
            raise ValueError("xmoverscore needs a source text for every item; this dataset has blank sources")
        xmover: list[float] = []
        pairs = [(it.source, it.hypothesis) for it in items]
        for it, (src, hyp) in zip(
            items, embed_pairs(self.encoder, pairs, self.layer, self.batch_size, timer), strict=True
        ):
            with timer.phase("distance"):
                x, a = self._cloud(*src, it.lp if self.options.mapping else None)
                y, b = self._cloud(*hyp, None)
                cost = cost_matrix(self.aligner, x, y)
            with timer.phase("transport"):
                d = transport(self.aligner, x, a, y, b, cost)
            xmover.append(1.0 - d)
        cols = {"xmoverscore": xmover}
        if self.lm is not None:
            lm = self.lm_scores([it.hypothesis for it in items], timer)
            cols["lm"] = lm
            cols["combined"] = [s + self.options.lm_weight * v for s, v in zip(xmover, lm, strict=True)]
        return Scores(primary="combined" if self.lm is not None else "xmoverscore", columns=cols)

    def describe(self) -> dict[str, Any]:
        out = {
            "layer": self.layer,
            "aligner": self.aligner.name,
            "mapping": self.options.mapping,
            "n_gram": self.options.n_gram,
            **self.encoder.describe(),
        }
        if self.lm is not None:
            lm = self.lm.describe()
            out = {**with_second_model(out, lm), "lm": lm["source"], "lm_weight": self.options.lm_weight}
        return out


def check_values(options: dict[str, Any]) -> None:
    if options.get("mapping") not in (None, "clp", "umd"):
        raise UserError(f"mapping must be clp or umd (or null), got {options['mapping']!r}")
    if options.get("mapping") and options.get("mapping_dir") and not Path(options["mapping_dir"]).expanduser().is_dir():
        raise UserError(f"mapping_dir {options['mapping_dir']}: no such folder")
    if options.get("n_gram") is not None and options["n_gram"] < 1:
        raise UserError(f"n_gram must be >= 1, got {options['n_gram']}")


INFO = MetricInfo(
    name="xmoverscore",
    description="XMoverScore (Zhao et al. 2020): reference-free 1 - transport distance of (remapped) source "
    "and hypothesis token states, + lm_weight x causal-LM log-likelihood",
    needs=("source",),
    higher_is_better=True,
    corpus_state=False,
    options_class=XMoverScoreOptions,
    encoder_kinds=("encoder",),
    accepts_aligners=True,
    build=XMoverScoreScorer,
    check_values=check_values,
    model_options={"lm": "causal-lm"},
    # Reference-free (source vs hypothesis): references are never read, so several per item change nothing.
    multi_reference=None,
    blank_texts=BlankTexts(
        refused=("hypothesis", "source"),
        reason="an empty text has no token mass to move, so the transport distance is undefined "
        "(a blank source is missing data anyway)",
    ),
    token_rule=WORD_TOKENS,  # its clouds: the non-special tokens
)
