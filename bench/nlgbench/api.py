"""The Python API: score lists of strings, run a sweep, read a run folder, compare two encoders,
correlate scores with human judgments at any level.

`score` builds the metric exactly as a sweep cell does (the spec's option and encoder checks, the
scorer's `Recipe`, corpus state prepared over all the given items, then one scoring pass), so
its numbers equal the cell's `scores.csv` for the same items, batch size and device.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.apiwords import API_WHERE, bert_score_texts, caller_words, redirect_names
from nlgbench.core.cell import RESULT_FILE, SCORES_FILE
from nlgbench.core.recipe import Recipe, api_encoder
from nlgbench.core.result import json_safe
from nlgbench.core.scores import UncheckedScores, read_scores
from nlgbench.core.spec import SweepSpec, load_spec, parse_spec
from nlgbench.encoders.languages import lang_choice, lang_metric_encoder
from nlgbench.execution.sweep import run as run_sweep
from nlgbench.foundations.arguments import check_arguments, number_list, optional_sequence, path_argument
from nlgbench.foundations.callers import warn_caller
from nlgbench.foundations.cellcontext import CellContext, TqdmProgress
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.devices import auto_device
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import CorpusScore, FixedIdf, PhaseTimer, ReferencePolicy
from nlgbench.metrics.texts import (
    MIN_IDF_TEXTS,
    BlankTextWarning,
    IdfWarning,
    References,
    TokenCheck,
    as_list,
    blank_warning,
    check_texts,
    check_tokens,
    texts_as_items,
)
from nlgbench.reporting.compare import compare as compare_encoders
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.folder import cell_dir
from nlgbench.runs.resultfile import read_result
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from nlgbench.statistics.summary import signed_segments

if TYPE_CHECKING:
    import pandas as pd

PRF = tuple[list[float], list[float], list[float]]
EncoderSpec = str | dict[str, Any]  # a registered name, a Hub id, a local folder, or {name: ..., num_layers: 3, ...}


class Scorer:
    """A metric with its model loaded once, to score any number of batches (as bert_score's
    `BERTScorer`).

    `options` are the metric's spec options (`nlgbench list metrics`), e.g. `idf=True, layer=4`,
    `rescale_with_baseline=True`; `lang="en"` picks bert_score's model for a language (roberta-large,
    layer 17) instead of `encoder`; `device="auto"` takes CUDA when available. Corpus state (idf) is
    prepared over the texts of each `score` call, as `nlgbench.score` and a sweep cell do over theirs,
    unless `idf_sents` (with `idf=True`) fixes it from a corpus for the scorer's life. `verbose=True`
    draws a tqdm progress bar (and says which model `lang` chose). `context` (its own `CellContext`)
    holds what its models record: texts cut to their maximum length, seconds exporting for a backend.
    `backend`: the encoder's inference backend; by default `auto`, the fastest installed one that scores equal
    to torch, measured once per model and machine (`NLGBENCH_BACKEND` sets another default; `torch` opts out).

    Examples:
        >>> scorer = nlgbench.Scorer("bertscore", encoder="all-MiniLM-L6-v2")
        >>> scorer.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
        [0.9071274399757385]
        >>> scorer.signature.split("|")[:3]  # then the backend chosen, options, reference use, versions
        ['bertscore', 'enc:sentence-transformers/all-MiniLM-L6-v2@34bb7e1', 'L6']
    """

    def __init__(
        self,
        metric: str = "bertscore",
        encoder: EncoderSpec | None = None,
        *,
        lang: str | None = None,
        aligner: str | None = None,
        device: str = "auto",
        batch_size: int = 64,
        idf_sents: Iterable[str] | None = None,
        verbose: bool = False,
        backend: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(metric, str) or not metric.strip():
            raise UserError(f"metric must be a registered metric's name, got {metric!r} (nlgbench list metrics)")
        encoder, options = redirect_names(metric, encoder, options)  # bert_score's model_type, num_layers
        if isinstance(encoder, str) and not encoder.strip():
            raise UserError("encoder is empty: give a registered name, a Hub id or a local folder (or leave it out)")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise UserError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        check_arguments("flag", verbose=verbose)
        idf_sents = as_list("idf_sents", idf_sents) if idf_sents is not None else None  # a set: before the model
        self.metric = metric
        self.device = auto_device(device)
        self.info = get_metric(metric)
        self.lang_choice = None  # the line saying which model `lang` chose
        if lang is not None:
            encoder = lang_metric_encoder(metric, encoder, lang)
            self.lang_choice = lang_choice(lang)
        if verbose and self.lang_choice is not None:
            print(self.lang_choice, file=sys.stderr, flush=True)
        encoder = api_encoder(metric, encoder, backend)  # `backend: auto` unless named (or NLGBENCH_BACKEND)
        with caller_words("encoder" if lang is None else f"lang={lang!r}"):  # `idf`, not `score.options.idf`
            self.recipe = Recipe.parse(metric, encoder, options, aligner, API_WHERE)
        self.options: dict[str, Any] = self.recipe.options
        self.encoder = self.recipe.encoder.label
        self._check_tokens = TokenCheck(self.info, self.options, self.recipe.encoder)  # its tokenizer, once
        self.context = CellContext(progress=TqdmProgress() if verbose else None)
        self._scorer = self.recipe.build(self.device, batch_size, self.context)
        self._signature: str | None = None
        self._idf_fixed = idf_sents is not None
        self._idf_warned = False
        if idf_sents is not None:
            self.fix_idf(idf_sents)

    def fix_idf(self, idf_sents: Iterable[str]) -> None:
        """idf from `idf_sents` for the scorer's life from now on (bert_score's `idf_sents` and `compute_idf`)."""
        texts: list[str] = as_list("idf_sents", idf_sents)
        bad = [i for i, text in enumerate(texts) if not isinstance(text, str)]
        if bad:
            raise UserError(f"idf_sents line {bad[0] + 1} is {type(texts[bad[0]]).__name__}, not a string")
        if not any(text.strip() for text in texts):
            raise UserError("idf_sents holds no text: give the corpus to compute idf from")
        if not self.options.get("idf"):
            raise UserError("idf_sents is given but idf is off: set idf=True (as bert_score's BERTScorer)")
        inner = self._scorer.inner if isinstance(self._scorer, ReferencePolicy) else self._scorer
        if not isinstance(inner, FixedIdf):
            raise UserError(f"metric {self.metric!r} takes no idf corpus (idf_sents): bertscore does")
        inner.fix_idf(texts)
        if len(texts) < MIN_IDF_TEXTS:
            self._warn_idf(len(texts), "idf_sents")
        self._idf_fixed, self._signature = True, None

    def _warn_idf(self, count: int, where: str) -> None:
        """Once per scorer: idf from too few texts to weigh tokens meaningfully."""
        if not self._idf_warned:
            self._idf_warned = True
            message = (
                f"idf is computed from {count} text{'s' if count != 1 else ''} ({where}; fewer than "
                f"{MIN_IDF_TEXTS}): its weights are chance, and from one text every token weighs log(2/2) = 0; "
                "give idf_sents=[...] (a fixed corpus; `--idf-sents FILE` on the command line)"
            )
            warn_caller(message, IdfWarning)

    def __repr__(self) -> str:
        described = self._scorer.describe()
        return (
            f"Scorer(metric={self.metric!r}, encoder={self.encoder!r}, layer={described.get('layer')!r}, "
            f"options={self.options!r}, device={self.device!r})"
        )

    @property
    def references(self) -> str:
        """How several references per hypothesis are used: the reference_policy option, else the
        metric's own rule (max, mean, native); `one` where the metric takes one, `none` without references."""
        return self.recipe.references

    @property
    def signature(self) -> str:
        """The reproducibility signature (nlgbench.core.signature): metric, encoder@revision, layer,
        variant, options, rescaling, reference use, versions."""
        if self._signature is None:
            self._signature = self.recipe.signature(self._scorer.describe())
        return self._signature

    def score_outputs(
        self,
        hypotheses: Iterable[str] | None = None,
        references: References | None = None,
        *,
        sources: Iterable[str] | None = None,
        cands: Iterable[str] | None = None,
        refs: References | None = None,
    ) -> dict[str, list[float]]:
        """Every output per hypothesis: `score` (the primary one, as in scores.csv) first, then the
        metric's further columns (precision, recall, directions, distances). `cands`/`refs`: bert_score's names."""
        hyps, references = bert_score_texts(hypotheses, references, cands, refs)
        items = texts_as_items(self.info, self.options, hyps, references, sources)
        self._check_tokens(items)  # a text without a token the metric weighs: its line, not a ValueError
        warning = blank_warning(self.info, self.options, items)
        if warning is not None:
            warn_caller(warning, BlankTextWarning)
        if self.options.get("idf") and not self._idf_fixed and len(items) < MIN_IDF_TEXTS:
            self._warn_idf(len(items), "this call's texts")
        if isinstance(self._scorer, ReferencePolicy):
            try:
                self._scorer.policy(items)  # a metric that cannot use several references, and no reference_policy
            except ValueError as exc:
                raise UserError(str(exc)) from None
        self._scorer.prepare(items)
        scores = self._scorer.score(items, PhaseTimer())
        return {"score": list(scores.score), **{k: list(v) for k, v in scores.columns.items() if k != scores.primary}}

    def score(
        self,
        hypotheses: Iterable[str] | None = None,
        references: References | None = None,
        *,
        sources: Iterable[str] | None = None,
        cands: Iterable[str] | None = None,
        refs: References | None = None,
    ) -> list[float]:
        """The metric's primary score per hypothesis (BERTScore F1, MoverScore, BaryScore distance, ...)."""
        return self.score_outputs(hypotheses, references, sources=sources, cands=cands, refs=refs)["score"]

    def score_prf(
        self,
        hypotheses: Iterable[str] | None = None,
        references: References | None = None,
        *,
        cands: Iterable[str] | None = None,
        refs: References | None = None,
    ) -> tuple[list[float], list[float], list[float]]:
        """Precision, recall and F per hypothesis, as bert_score's `P, R, F = scorer.score(cands, refs)`."""
        outputs = self.score_outputs(hypotheses, references, cands=cands, refs=refs)
        if not {"precision", "recall"} <= set(outputs):
            raise UserError(f"metric {self.metric!r} has no precision and recall (its outputs: {', '.join(outputs)})")
        return outputs["precision"], outputs["recall"], outputs["score"]

    def corpus_score(self, hypotheses: Iterable[str], references: References) -> dict[str, Any]:
        """sentBLEU's and chrF's corpus-level score, as sacrebleu's `corpus_bleu` / `corpus_chrf` compute it:
        `score`, sacrebleu's `signature` of it, and `segment_mean` (the mean of the segment scores)."""
        if not isinstance(self._scorer, CorpusScore):
            raise UserError(f"metric {self.metric!r} has no corpus-level score: sentbleu and chrf have")
        self.score_outputs(hypotheses, references)
        return self._scorer.corpus_score()

    @property
    def corpus(self) -> dict[str, Any] | None:
        """`corpus_score` of the texts last scored; None before any, and for metrics without one."""
        return (self._scorer.corpus_score() or None) if isinstance(self._scorer, CorpusScore) else None


# a Scorer's arguments, beside lang and options
SCORER_ARGUMENTS = ("aligner", "device", "batch_size", "idf_sents", "verbose", "backend")


def score_outputs(
    hypotheses: Iterable[str] | None = None,
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    sources: Iterable[str] | None = None,
    lang: str | None = None,
    aligner: str | None = None,
    device: str = "auto",
    batch_size: int = 64,
    idf_sents: Iterable[str] | None = None,
    verbose: bool = False,
    cands: Iterable[str] | None = None,
    refs: References | None = None,
    **options: Any,
) -> dict[str, list[float]]:
    """Every output of the metric per hypothesis: `score` (the primary one, as in scores.csv)
    first, then the metric's further columns (precision, recall, directions, distances). Loads the
    model on every call: to score several batches, build one `Scorer` (whose arguments these are).

    `hypotheses`, `references` and `sources` may be any iterable (a list, a tuple, a generator);
    `cands` and `refs` are bert_score's names for the first two. `references` gives one text per
    hypothesis, or a list of texts (several references) per hypothesis; the metric uses several as
    its reference code does, or as `reference_policy` (first, max or mean) says.

    Examples:
        >>> out = nlgbench.score_outputs(["The cat sat on the mat."], ["A cat was sitting on the mat."])
        >>> list(out), out["precision"]
        (['score', 'precision', 'recall'], [0.9186349511146545])
    """
    setup = {"aligner": aligner, "device": device, "batch_size": batch_size, "idf_sents": idf_sents, "verbose": verbose}
    texts = (*bert_score_texts(hypotheses, references, cands, refs), sources)
    return _scored(texts, metric, encoder, lang, {**setup, **options})[1]


def _scored(
    texts: tuple[Iterable[str], References | None, Iterable[str] | None],
    metric: str,
    encoder: EncoderSpec | None,
    lang: str | None,
    arguments: dict[str, Any],
) -> tuple[Scorer, dict[str, list[float]]]:
    """`score_outputs` of the texts (hypotheses, references, sources) and the Scorer that computed them."""
    hypotheses, references, sources = texts
    hyps = as_list("hypotheses", hypotheses)
    refs = as_list("references", references, "a list of strings (or of lists of strings)") if references else references
    srcs = as_list("sources", sources) if sources is not None else None
    setup = {key: arguments.pop(key) for key in SCORER_ARGUMENTS if key in arguments}
    encoder, options = redirect_names(metric, encoder, arguments)  # bert_score's names: one line each, here
    check_texts(metric, hyps, refs, srcs, **options)  # before the model loads
    check_tokens(metric, encoder, lang, hyps, refs, srcs, **options)  # with the tokenizer alone
    scorer = Scorer(metric, encoder, lang=lang, **setup, **options)
    return scorer, scorer.score_outputs(hyps, refs, sources=srcs)


def score(
    hypotheses: Iterable[str] | None = None,
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    return_all: bool = False,
    return_hash: bool = False,
    cands: Iterable[str] | None = None,
    refs: References | None = None,
    **arguments: Any,
) -> list[float] | PRF | tuple[list[float] | PRF, str]:
    """The metric's primary score per hypothesis (BERTScore F1, MoverScore, BaryScore distance, ...);
    with `return_all=True` BERTScore's (P, R, F), as bert_score's `P, R, F = score(cands, refs)`; with
    `return_hash=True` a pair, that result and the scorer's signature (`Scorer.signature`), as
    bert_score's `(P, R, F), hash = score(..., return_hash=True)`. `cands`, `refs`: bert_score's names.

    `arguments` are `score_outputs`'s (`sources`, `lang`, `aligner`, `device`, `batch_size`,
    `idf_sents`, `verbose`) and the metric's spec options (`nlgbench list metrics`), e.g. `idf=True,
    layer=4, rescale_with_baseline=True`; `encoder` a registered name, a Hub id, a local folder, or a
    variant as a dict. The model loads on every call: to score several batches, build one `Scorer`.

    Examples:
        >>> hyps = ["The cat sat on the mat.", "A dog is running in the park."]
        >>> refs = ["A cat was sitting on the mat.", "The dog runs through the park."]
        >>> nlgbench.score(hyps, refs)  # BERTScore F1 with all-MiniLM-L6-v2
        [0.9071274399757385, 0.8599725961685181]
        >>> nlgbench.score(hyps, refs, encoder={"name": "all-MiniLM-L6-v2", "num_layers": 3}, idf=False)
        [0.8733524680137634, 0.8841153979301453]
        >>> P, R, F = nlgbench.score(hyps, refs, return_all=True)
        >>> (P, R, F), signature = nlgbench.score(cands=hyps, refs=refs, return_all=True, return_hash=True)
    """
    check_arguments("flag", return_all=return_all, return_hash=return_hash)
    texts = (*bert_score_texts(hypotheses, references, cands, refs), arguments.pop("sources", None))
    scorer, outputs = _scored(texts, metric, encoder, arguments.pop("lang", None), arguments)
    result: list[float] | PRF = outputs["score"]
    if return_all:
        if not {"precision", "recall"} <= set(outputs):
            raise UserError(f"metric {metric!r} has no precision and recall (its outputs: {', '.join(outputs)})")
        result = outputs["precision"], outputs["recall"], outputs["score"]
    return (result, scorer.signature) if return_hash else result


def _as_spec(spec: str | Path | dict[str, Any] | SweepSpec) -> SweepSpec:
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, "spec", Path.cwd())
    if not isinstance(spec, (str, PathLike)):
        raise UserError(f"spec must be a spec file's path, a dict or a SweepSpec, got {type(spec).__name__}")
    return load_spec(spec)


def run(
    spec: str | Path | dict[str, Any] | SweepSpec,
    out: str | Path | None = None,
    *,
    force: bool = False,
    quiet: bool = False,
) -> pd.DataFrame:
    """Run a sweep (a spec file, a dict shaped like the YAML, or a SweepSpec) into `out`
    (default reports/<name>), resuming finished cells; returns `load_run(out)`.

    Examples:
        >>> cells = nlgbench.run("examples/quickstart.yaml", out="runs/q")
        >>> cells[["encoder", "status", "ms_per_segment_median", "pearson_global"]]
    """
    folder = path_argument("out", out, "a folder's path") if out is not None else None
    check_arguments("flag", force=force, quiet=quiet)
    sweep = _as_spec(spec)
    folder = folder if folder is not None else Path("reports") / sweep.name
    run_sweep(sweep, folder, force=force, log=(lambda _msg: None) if quiet else print)
    return load_run(folder)


def load_run(path: str | Path) -> pd.DataFrame:
    """One row per cell of a run folder, failed cells too (the columns of results.csv), ids and
    labels kept as text. A thin wrapper: the folder is read by `nlgbench.runs.rundata.RunData`
    (`RunData.open` for the finished cells with their segment scores, as report and compare read them).

    Examples:
        >>> cells = nlgbench.load_run("reports/example")  # the committed quickstart run
        >>> list(cells.encoder), cells.pearson_global.round(4).tolist()
        (['all-mpnet-base-v2', 'all-MiniLM-L6-v2', 'all-MiniLM-L6-v2[num_layers=3]'], [0.6231, 0.5981, 0.6076])
    """
    import pandas as pd

    text = RunData.results_csv(path_argument("path", path, "a run folder's path"))
    text_columns = ("cell_id", "metric", "metric_options", "encoder", "aligner", "dataset", "device", "status", "error")
    return pd.read_csv(io.StringIO(text), dtype={c: str for c in text_columns})


def load_scores(path: str | Path, cell_id: str) -> pd.DataFrame:
    """A cell's segment scores (`cells/<cell_id>/scores.csv`): lp, seg_id, system, score, human, extras,
    checked against the row count and sha256 its result.json records.

    Examples:
        >>> cells = nlgbench.run("examples/quickstart.yaml", out="runs/q")
        >>> scores = nlgbench.load_scores("runs/q", cells.cell_id[0])
        >>> list(scores.columns[:5])
        ['lp', 'seg_id', 'system', 'score', 'human']
    """
    import pandas as pd

    folder = path_argument("path", path, "a run folder's path")
    if not isinstance(cell_id, str) or Path(cell_id).name != cell_id or cell_id in ("", ".", ".."):
        raise UserError(f"cell_id must be a cell's id (a folder name under cells/), got {cell_id!r}")
    cell = cell_dir(folder, cell_id)
    csv_path = cell / SCORES_FILE
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: no such file (is {cell_id!r} a finished cell of {path}?)")
    # ids and texts stay text, checked against result.json where there is one
    result = read_result(cell) if (cell / RESULT_FILE).is_file() else None
    columns, rows = read_scores(csv_path, result, unchecked=UncheckedScores())
    return pd.DataFrame(rows, columns=columns)


def compare(
    path: str | Path,
    candidate: str,
    baseline: str,
    *,
    metric: str | None = None,
    method: str = "pearson",
    level: str = "global",
    threshold: float = 0.0,
    resample: str = "auto",
    test: str = "bootstrap",
    human: str | None = None,
    convention: str = "nlgbench",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    perm_test: str = "scores",
) -> dict[str, Any]:
    """`nlgbench compare PATH --candidate C --baseline B --json` as a dict: per metric x dataset x
    device the two encoders' quality (`method` at `level`, docs/concepts/correlation.md), the
    difference with its interval, the `test` at the level's resampling unit and Williams' test per
    group of the level, each row naming its test, resampling unit and n. `perm_test="pairs"` (with
    method acc_eq and test permutation): WMT23/24's permutation test, epsilons fixed.

    Examples:
        >>> result = nlgbench.compare("reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2")
        >>> row = result["rows"][0]  # one per metric x dataset x device
        >>> round(row["retained"], 3), row["p_value"], round(row["speedup"], 2)
        (0.96, 0.068, 7.01)
    """
    folder = path_argument("path", path, "a run folder's path")
    check_arguments("string", candidate=candidate, baseline=baseline)
    check_arguments("string", optional=True, metric=metric, human=human)
    options = QualityOptions(method, level, threshold, resample, test, convention, perm_test)  # its field order
    options.check()  # before the run folder is read
    return json_safe(
        compare_encoders(RunData.open(folder, human), candidate, baseline, metric, options, resamples, seed)
    )


def correlation(
    metric_scores: Sequence[float],
    human_scores: Sequence[float],
    *,
    method: str = "pearson",
    level: str = "global",
    lps: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    seg_ids: Sequence[Any] | None = None,
    docs: Sequence[str] | None = None,
    threshold: float = 0.0,
    convention: str = "nlgbench",
) -> float:
    """One figure of `method` at `level` for scores you have (higher is better): the groups are
    `lps` (default one), `systems` (system level), `seg_ids` (translations of one source share a
    seg_id within an lp: darr_kendall, acc_eq, the source level) and `docs` (item level); NaN where
    undefined. `convention="mt-metrics-eval"`: WMT's code's conventions (docs/concepts/correlation.md).

    Examples:
        >>> round(nlgbench.correlation([0.9, 0.2, 0.5, 0.4], [80, 10, 40, 50]), 4)  # pooled Pearson
        0.9414
        >>> nlgbench.correlation([0.9, 0.2, 0.5, 0.4], [80, 10, 40, 50], method="acc_eq", seg_ids=[1, 2, 1, 2])
        1.0
    """
    options = QualityOptions(method=method, level=level, threshold=threshold, convention=convention)
    options.check()
    scores, human = number_list("metric_scores", metric_scores), number_list("human_scores", human_scores)
    lps, systems = optional_sequence("lps", lps), optional_sequence("systems", systems)
    seg_ids, docs = optional_sequence("seg_ids", seg_ids), optional_sequence("docs", docs)
    try:  # the figure report and compare compute (`QualityOptions.value`), on the signed segments
        seg = signed_segments(scores, human, lps if lps is not None else ["-"] * len(scores), systems, docs, 1, seg_ids)
    except ValueError as e:
        raise UserError(str(e)) from None
    return float(options.value(seg))
