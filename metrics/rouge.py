"""Lexical baselines through rouge-score: ROUGE-1, ROUGE-2 and ROUGE-L (`rouge1`, `rouge2`, `rougeL`).

They run no model (encoder `none` in a spec, `nlgbench.encoders.registry.NO_ENCODER`), and are the cheap
anchor of a sweep. Each is `rouge_score.rouge_scorer.RougeScorer` of that one ROUGE type, so its
scores are the library's exactly (0-1): precision, recall and F-measure (primary). Three metric
names rather than one metric with a variant option, so that every plot, table and results.csv
row says which ROUGE it is without an option to look up, as papers report them. Option
`use_stemmer` (Porter stemming, the library's default off). rouge-score's tokenizer lowercases
and keeps only runs of `[a-z0-9]`: text in another script has no tokens and scores 0.

Several references per item: rouge-score's `score_multi` (`multi_reference="native"`) keeps the
reference with the highest F-measure (with one reference it equals `score`). The scorer builds
the RougeScorer once (the cell's load phase) and times one phase, `score`; single-threaded Python
on the CPU whatever the cell's device (describe() says `runs_on: cpu`); batch size has no effect.
rouge-score (and the nltk it imports, slow and large) is imported with this module,
outside the cell's load time, as the worker does for torch and transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from rouge_score import rouge_scorer

from nlgbench.data.items import Item
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.metric_options import RougeOptions

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
NO_MODEL = {"params": 0, "disk_bytes": 0, "weight_bytes": 0, "runs_on": "cpu"}  # describe()'s sizes: nothing loaded


class RougeScorer(ScorerBase[RougeOptions]):
    """One ROUGE type through rouge-score; precision, recall, fmeasure per item (fmeasure primary)."""

    options_class = RougeOptions

    def __init__(
        self, rouge_type: str, options: dict[str, Any], device: str, batch_size: int, context: CellContext | None = None
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.rouge_type = rouge_type
        self.scorer = rouge_scorer.RougeScorer([rouge_type], use_stemmer=self.options.use_stemmer)

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        cols: dict[str, list[float]] = {"precision": [], "recall": [], "fmeasure": []}
        with timer.phase("score"):
            for it in items:
                s = self.scorer.score_multi(list(it.references), it.hypothesis)[self.rouge_type]
                cols["precision"].append(float(s.precision))
                cols["recall"].append(float(s.recall))
                cols["fmeasure"].append(float(s.fmeasure))
        return Scores(primary="fmeasure", columns=cols)

    def describe(self) -> dict[str, Any]:
        return {
            **NO_MODEL,
            "library": {"rouge-score": version("rouge-score")},
            "rouge_type": self.rouge_type,
            "use_stemmer": self.options.use_stemmer,
        }


def rouge_info(rouge_type: str) -> MetricInfo:
    """The registry entry of one ROUGE type."""

    def build(
        encoder_ref: Any, options: dict[str, Any], device: str, batch_size: int, context: CellContext | None = None
    ) -> RougeScorer:
        return RougeScorer(rouge_type, options, device, batch_size, context)

    return MetricInfo(
        name=rouge_type,
        description=f"{rouge_type} (rouge_score RougeScorer; 0-1): P, R, F (F primary), "
        "several references: the best by F; English-only tokenizer; runs no model",
        needs=("reference",),
        higher_is_better=True,
        corpus_state=False,
        options_class=RougeOptions,
        accepts_aligners=False,
        build=build,
        encoder_kinds=(NO_ENCODER,),
        multi_reference="native",
        libraries=("rouge-score",),
        blank_texts=BlankTexts(
            scored=("hypothesis", "reference"),
            value="P = R = F = 0, as rouge-score; with several references the best by F is kept",
        ),
    )


ROUGE1_INFO, ROUGE2_INFO, ROUGEL_INFO = (rouge_info(t) for t in ROUGE_TYPES)
