"""Lexical baselines through sacrebleu: sentence BLEU (`sentbleu`) and chrF (`chrf`).

They run no model (encoder `none` in a spec, `nlgbench.encoders.registry.NO_ENCODER`), and are the cheap
anchor of a sweep. Each is sacrebleu's own sentence-level metric, so its scores are
`sacrebleu.sentence_bleu` / `sacrebleu.sentence_chrf` exactly, on sacrebleu's 0-100 scale. The
options are those functions' keyword arguments with their defaults (BLEU: exponential smoothing,
tokenizer 13a; chrF: character 6-grams, beta 2, `word_order: 2` is chrF++), except BLEU's
`use_effective_order`, always on: sentence BLEU without it is what sacrebleu warns against on
every sentence.

Several references per item are sacrebleu's business (`multi_reference="native"`): BLEU clips
n-gram counts against all references and takes the closest reference length; chrF keeps the
best-scoring reference. The scorer builds the sacrebleu object once (the cell's load phase,
exactly as the sentence_* function builds it) and times one phase, `score`. It is
single-threaded Python on the CPU whatever the cell's device: a `cuda` cell measures the same
CPU computation (describe() says `runs_on: cpu`), so a GPU sweep has its anchor too. Batch size
has no effect. sacrebleu is imported with this module, outside the cell's load time, as the
worker does for torch and transformers.

Beside the segment scores, describe() gives the corpus-level score of the items last scored, as a
sacrebleu user reports it (`corpus`: `score`, sacrebleu's `signature` of it, and `segment_mean`, the
mean of the segment scores): BLEU as `sacrebleu.corpus_bleu` computes it (n-gram statistics summed
over the corpus, its default `use_effective_order=False`), chrF as `sacrebleu.corpus_chrf`, with
the cell's options; each item's references as sacrebleu's reference streams (`None` where an item
has fewer, sacrebleu's way of varying their number). It is computed after the timed scoring, so it
costs the cell's timing nothing. The API's `Scorer.corpus_score`, `nlgbench score` and the cell's
result.json (`scorer.corpus`) show it.

describe() records sacrebleu's version and its signature string (`sacrebleu_signature`; `signature` is
nlgbench's, nlgbench.core.signature)
(`nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0`), `nrefs` being the dataset's
number of references per item (`var` when it varies, sacrebleu's own convention).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, TypeVar

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.metrics.base import Metric

from nlgbench.data.items import Item
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.metric_options import ChrfOptions, SentBleuOptions

OptionsT = TypeVar("OptionsT")

NO_MODEL = {"params": 0, "disk_bytes": 0, "weight_bytes": 0, "runs_on": "cpu"}  # describe()'s sizes: nothing loaded


def signature(metric: Metric, items: Sequence[Item]) -> str:
    """sacrebleu's signature string of `metric` (which has scored `items`), its `nrefs` the dataset's:
    the number of references per item, or `var` (sacrebleu's num_refs -1) when it varies.

    sacrebleu sets `num_refs` from each call's references; after the last item it would describe
    that item only."""
    counts = {len(it.references) for it in items}
    metric.num_refs = counts.pop() if len(counts) == 1 else -1
    return str(metric.get_signature())


class SacrebleuScorer(ScorerBase[OptionsT]):
    """One sacrebleu sentence metric, built once by `library_metric`; `column` names its one output."""

    column: str

    def __init__(
        self,
        encoder_ref: Any,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.metric = self.library_metric()
        self.signature: str | None = None  # known once it has scored
        self.scored: Sequence[Item] = ()  # the items last scored, for the corpus score
        self.segment_scores: list[float] = []
        self.corpus: dict[str, Any] | None = None  # of `scored`, computed on first use

    def library_metric(self) -> Metric:
        raise NotImplementedError

    def corpus_metric(self) -> Metric:
        """The metric as sacrebleu's corpus function builds it (chrF: the same as the sentence one)."""
        return self.library_metric()

    def corpus_score(self) -> dict[str, Any]:
        """The corpus-level score of the items last scored, sacrebleu's signature of it and the mean of
        the segment scores; {} before any scoring."""
        if not self.scored:
            return {}
        if self.corpus is None:
            metric = self.corpus_metric()
            most = max(len(it.references) for it in self.scored)
            # None where an item has fewer references: sacrebleu's documented way (its annotation says str only)
            streams: Any = [
                [it.references[k] if k < len(it.references) else None for it in self.scored] for k in range(most)
            ]
            result = metric.corpus_score([it.hypothesis for it in self.scored], streams)
            self.corpus = {
                "score": float(result.score),
                "signature": str(metric.get_signature()),
                "segment_mean": statistics.fmean(self.segment_scores),
            }
        return self.corpus

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        with timer.phase("score"):
            out = [float(self.metric.sentence_score(it.hypothesis, list(it.references)).score) for it in items]
        self.signature = signature(self.metric, items)
        self.scored, self.segment_scores, self.corpus = items, out, None
        return Scores(primary=self.column, columns={self.column: out})

    def describe(self) -> dict[str, Any]:
        corpus = self.corpus_score()
        return {
            **NO_MODEL,
            "library": {"sacrebleu": version("sacrebleu")},
            "sacrebleu_signature": self.signature,
            **({"corpus": corpus} if corpus else {}),
        }


class SentBleuScorer(SacrebleuScorer[SentBleuOptions]):
    options_class = SentBleuOptions
    column = "bleu"

    def library_metric(self) -> Metric:
        """BLEU as `sacrebleu.sentence_bleu` builds it (with its default use_effective_order=True)."""
        o = self.options
        return BLEU(
            lowercase=o.lowercase,
            tokenize=o.tokenize,
            force=False,
            smooth_method=o.smooth_method,
            smooth_value=o.smooth_value,
            effective_order=True,
        )

    def corpus_metric(self) -> Metric:
        """BLEU as `sacrebleu.corpus_bleu` builds it: the same options, its default use_effective_order=False."""
        o = self.options
        return BLEU(
            lowercase=o.lowercase,
            tokenize=o.tokenize,
            force=False,
            smooth_method=o.smooth_method,
            smooth_value=o.smooth_value,
            effective_order=False,
        )


class ChrfScorer(SacrebleuScorer[ChrfOptions]):
    options_class = ChrfOptions
    column = "chrf"

    def library_metric(self) -> Metric:
        """CHRF as `sacrebleu.sentence_chrf` builds it."""
        o = self.options
        return CHRF(
            char_order=o.char_order,
            word_order=o.word_order,
            beta=o.beta,
            whitespace=not o.remove_whitespace,
            eps_smoothing=o.eps_smoothing,
        )


def check_bleu(options: dict[str, Any]) -> None:
    """The tokenizer and smoothing method must be among sacrebleu's own."""
    for key, valid in (("tokenize", BLEU.TOKENIZERS), ("smooth_method", BLEU.SMOOTH_DEFAULTS)):
        if options.get(key) is not None and options[key] not in valid:
            raise UserError(f"{key} must be one of {', '.join(valid)}, got {options[key]!r}")
    if options.get("smooth_value") is not None and options["smooth_value"] < 0:
        raise UserError(f"smooth_value must be >= 0, got {options['smooth_value']}")


def check_chrf(options: dict[str, Any]) -> None:
    """n-gram orders and beta are >= 0, and at least one order counts n-grams."""
    for key in ("char_order", "word_order", "beta"):
        if options.get(key) is not None and options[key] < 0:
            raise UserError(f"{key} must be >= 0, got {options[key]}")
    if options.get("char_order") == 0 and options.get("word_order") == 0:
        raise UserError("char_order and word_order are both 0: chrF would count no n-grams")


SENTBLEU_INFO = MetricInfo(
    name="sentbleu",
    description="sentence BLEU (sacrebleu.sentence_bleu, its defaults; 0-100); runs no model; signature recorded",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=False,
    options_class=SentBleuOptions,
    accepts_aligners=False,
    build=SentBleuScorer,
    encoder_kinds=(NO_ENCODER,),
    check_values=check_bleu,
    multi_reference="native",
    libraries=("sacrebleu",),
    blank_texts=BlankTexts(
        scored=("hypothesis", "reference"),
        value="0, as sacrebleu.sentence_bleu (any smoothing); a blank reference among several is one more reference",
    ),
)

CHRF_INFO = MetricInfo(
    name="chrf",
    description="chrF (sacrebleu.sentence_chrf, its defaults; 0-100; word_order=2 is chrF++); runs no model; "
    "signature recorded",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=False,
    options_class=ChrfOptions,
    accepts_aligners=False,
    build=ChrfScorer,
    encoder_kinds=(NO_ENCODER,),
    check_values=check_chrf,
    multi_reference="native",
    libraries=("sacrebleu",),
    blank_texts=BlankTexts(
        scored=("hypothesis", "reference"),
        value="0, as sacrebleu.sentence_chrf; a blank reference among several is one more reference",
    ),
)
