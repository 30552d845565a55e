"""BARTScore (Yuan et al., 2021): how likely a seq2seq model finds one text given another.

Functional core: `target_log_likelihood` (Eq. 2: the mean log-probability of the target's
tokens, specials included as the published code does, given the source). Directions:
precision = reference -> hypothesis, recall = hypothesis -> reference, F = their arithmetic
mean (the paper's F score), faithfulness = source -> hypothesis (optional). An optional
prompt is appended to the source (`source_suffix`, "src prompt,") or prepended to the target
(`target_prefix`, "prompt, tgt"), as BARTScore's prompt helpers do. Pairs are scored in
batches sorted by length; `state_dict` loads fine-tuned weights (e.g. BARTScore's ParaBank2
`bart.pth`) on top of the Hub checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from nlgbench.data.items import Item
from nlgbench.encoders.models import load_model
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import pad_ids
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.common import length_sorted_map
from nlgbench.metrics.metric_options import BartScoreOptions


def target_log_likelihood(
    model: Any, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor
) -> torch.Tensor:
    """Mean log p(tgt_t | tgt_<t, src) over each target's real tokens, [B] (teacher forcing)."""
    start = model.config.decoder_start_token_id
    decoder_in = torch.cat([torch.full_like(tgt[:, :1], start), tgt[:, :-1]], dim=1)
    with torch.inference_mode():
        # causal decoder: padding at the end of a target cannot affect its real positions
        logits = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=decoder_in).logits
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    m = tgt_mask.to(logp.dtype)
    return (logp * m).sum(1) / m.sum(1)


class BartScoreScorer(ScorerBase[BartScoreOptions]):
    """BARTScore over one seq2seq checkpoint."""

    options_class = BartScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.lm = load_model(encoder_ref, "seq2seq", device, self.options.state_dict, self.context)
        tok = self.lm.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0

    def _prompted(self, srcs: list[str], tgts: list[str]) -> tuple[list[str], list[str]]:
        p = self.options.prompt
        if not p:
            return srcs, tgts
        if self.options.prompt_position == "source_suffix":
            return [f"{s} {p}," for s in srcs], tgts
        return srcs, [f"{p}, {t}" for t in tgts]

    def direction(self, srcs: list[str], tgts: list[str], timer: PhaseTimer, name: str) -> list[float]:
        """Mean target log-likelihood of each (source text, target text) pair, batched by length."""
        srcs, tgts = self._prompted(srcs, tgts)
        tok = self.lm.tokenizer
        with timer.phase("tokenize"):
            s_ids = tok(srcs, truncation=True, max_length=self.options.max_length)["input_ids"]
            t_ids = tok(tgts, truncation=True, max_length=self.options.max_length)["input_ids"]
        if any(not ids for ids in (*s_ids, *t_ids)):  # an empty text without special tokens: 0 / 0
            raise ValueError(f"{self.lm.source}: its tokenizer gives an empty text no token, so no log-likelihood")

        def batch_scores(batch: list[int]) -> list[float]:
            src, src_mask = pad_ids([s_ids[i] for i in batch], self.pad_id)
            tgt, tgt_mask = pad_ids([t_ids[i] for i in batch], self.pad_id)
            dev = self.device
            return target_log_likelihood(
                self.lm.model, src.to(dev), src_mask.to(dev), tgt.to(dev), tgt_mask.to(dev)
            ).tolist()

        with timer.phase(name):
            return length_sorted_map(
                batch_scores,
                [len(s) + len(t) for s, t in zip(s_ids, t_ids, strict=True)],
                self.batch_size,
                self.context,
            )

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        refs, hyps = [it.reference for it in items], [it.hypothesis for it in items]
        precision = self.direction(refs, hyps, timer, "precision")
        recall = self.direction(hyps, refs, timer, "recall")
        cols = {
            "precision": precision,
            "recall": recall,
            "f": [(p + r) / 2 for p, r in zip(precision, recall, strict=True)],
        }
        if self.options.faithfulness:
            sources = [it.source for it in items]
            if any(not s.strip() for s in sources):
                raise ValueError("faithfulness needs a source text for every item; this dataset has blank sources")
            cols["faithfulness"] = self.direction(sources, hyps, timer, "faithfulness")
        return Scores(primary="f", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {"prompt": self.options.prompt, "state_dict": self.options.state_dict, **self.lm.describe()}


def check_values(options: dict[str, Any]) -> None:
    if options.get("prompt_position") not in (None, "source_suffix", "target_prefix"):
        raise UserError(f"prompt_position must be source_suffix or target_prefix, got {options['prompt_position']!r}")
    path = options.get("state_dict")
    if path is not None and not Path(path).expanduser().is_file():
        raise UserError(f"state_dict {path}: no such file")
    if options.get("max_length") is not None and options["max_length"] < 2:
        raise UserError(f"max_length must be >= 2, got {options['max_length']}")


INFO = MetricInfo(
    name="bartscore",
    description="BARTScore (Yuan et al. 2021): mean target log-likelihood under a seq2seq LM; "
    "P (ref->hyp), R (hyp->ref), F = mean (primary), optional faithfulness (src->hyp)",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=False,
    options_class=BartScoreOptions,
    encoder_kinds=("seq2seq",),
    accepts_aligners=False,
    build=BartScoreScorer,
    check_values=check_values,
    # neulab/BARTScore bart_score.py: BARTScorer.multi_ref_score(srcs, tgts, agg="mean") scores each
    # reference and takes np.mean over them by default (agg="max" is its alternative).
    multi_reference="mean",
)
