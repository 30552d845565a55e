"""FrugalScore (Kamal Eddine et al., 2022): a small student that stands in for an expensive metric.

Two kinds of student, told apart by their folder (`build`):
- a cross-encoder (FrugalScore's own): a sequence classifier with one output; a pair is scored by one
  forward pass over "hypothesis [SEP] reference" (the order of the published scorer), truncated to
  `max_length`, on torch or on an inference backend (`backend:`). The twelve published students are in
  encoders.yaml (kind cross-encoder).
- a feature head (`nlgbench distill --student-kind head`): a frozen light encoder and a ridge head over
  the features its BERTScore pass computes (`nlgbench.metrics.featurehead`), kind feature-head.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nlgbench.data.items import Item
from nlgbench.data.training_texts import DISTILL_FILE
from nlgbench.encoders.backends import BackendRunner
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.models import load_model
from nlgbench.encoders.registry import EncoderRef, resolve_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, Scorer, ScorerBase, Scores
from nlgbench.metrics.common import length_sorted_map
from nlgbench.metrics.featurehead import FeatureHeadScorer, record_digest
from nlgbench.metrics.metric_options import FrugalScoreOptions


def pair_scores(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """The single regression output of the cross-encoder per pair, [B]. `model`: torch's sequence
    classifier, or a backend's runner of its export (`BackendRunner`)."""
    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    if isinstance(model, BackendRunner):
        logits = model.logits({"input_ids": input_ids, "attention_mask": attention_mask, **extra})
    else:
        with torch.inference_mode():
            logits = model(input_ids=input_ids, attention_mask=attention_mask, **extra).logits
    if logits.shape[-1] != 1:
        raise ValueError(f"a FrugalScore student has one output; this model has {logits.shape[-1]}")
    return logits[:, 0].float()


class FrugalScoreScorer(ScorerBase[FrugalScoreOptions]):
    """FrugalScore over one student checkpoint, batches sorted by pair length."""

    options_class = FrugalScoreOptions

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.lm = load_model(encoder_ref, "cross-encoder", device, context=self.context)
        labels = getattr(self.lm.model.config, "num_labels", 1)
        if labels != 1:
            raise UserError(
                f"{encoder_ref.label}: a FrugalScore student has one output, this model has {labels} labels"
            )

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        tok = self.lm.tokenizer
        with timer.phase("tokenize"):
            enc = tok(
                [it.hypothesis for it in items],
                [it.reference for it in items],
                truncation=True,
                max_length=self.options.max_length,
            )

        def batch_scores(batch: list[int]) -> list[float]:
            padded = tok.pad({k: [enc[k][i] for i in batch] for k in enc.keys()}, return_tensors="pt")
            return pair_scores(
                self.lm.runner or self.lm.model,
                padded["input_ids"].to(self.device),
                padded["attention_mask"].to(self.device),
                padded["token_type_ids"].to(self.device) if "token_type_ids" in padded else None,
            ).tolist()

        with timer.phase("encode"):
            out = length_sorted_map(batch_scores, [len(ids) for ids in enc["input_ids"]], self.batch_size, self.context)
        return Scores(primary="frugalscore", columns={"frugalscore": out})

    def describe(self) -> dict[str, Any]:
        described = {"max_length": self.options.max_length, **self.lm.describe()}
        folder = local_snapshot(self.lm.source)
        if folder is not None and (folder / DISTILL_FILE).is_file():  # a student `nlgbench distill` made
            described["student"] = f"cross-encoder@{record_digest(folder)}"
        return described


class StudentHeadScorer(FeatureHeadScorer[FrugalScoreOptions]):
    """A feature-head student under FrugalScore's options (`max_length` does not apply: the encoder cuts
    texts at its model's maximum, as BERTScore)."""

    options_class = FrugalScoreOptions


def build(
    encoder_ref: EncoderRef,
    options: dict[str, Any],
    device: str,
    batch_size: int,
    context: CellContext | None = None,
) -> Scorer:
    """The scorer of the student's kind: its folder says which (`ResolvedEncoder.kind`)."""
    if resolve_encoder(encoder_ref.name).kind == "feature-head":
        return StudentHeadScorer(encoder_ref, options, device, batch_size, context)
    return FrugalScoreScorer(encoder_ref, options, device, batch_size, context)


def check_values(options: dict[str, Any]) -> None:
    if options.get("max_length") is not None and options["max_length"] < 4:
        raise UserError(f"max_length must be >= 4, got {options['max_length']}")


INFO = MetricInfo(
    name="frugalscore",
    description="FrugalScore (Kamal Eddine et al. 2022): a student's output for (hypothesis, reference): "
    "a distilled cross-encoder, or a feature head over a frozen light encoder",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=False,
    options_class=FrugalScoreOptions,
    encoder_kinds=("cross-encoder", "feature-head"),
    accepts_aligners=False,
    build=build,
    check_values=check_values,
    # moussaKam/FrugalScore frugalscore.py: one reference string per prediction (features "references":
    # Value("string")), no multi-reference rule, so none here: the user sets reference_policy.
    multi_reference=None,
    blank_texts=BlankTexts(
        scored=("hypothesis", "reference"),
        value="the student's output for the pair with that side empty (a cross-encoder: `[CLS] [SEP] "
        "reference [SEP]`, as the published scorer; a feature head: BERTScore's P = R = F1 = 0 and a zero "
        "pooled vector)",
    ),
)
