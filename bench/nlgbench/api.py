"""The Python API: score lists of strings, run a sweep, read a run folder, compare two encoders,
correlate scores with human judgments at any level.

`score` builds the metric exactly as a sweep cell does (the spec's option and encoder checks,
`MetricInfo.make`, corpus state prepared over all the given items, then one scoring pass), so
its numbers equal the cell's `scores.csv` for the same items, batch size and device.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE
from nlgbench.core.result import CellResult, json_safe
from nlgbench.core.scores import read_scores
from nlgbench.core.signature import reference_use, scorer_signature
from nlgbench.core.spec import SweepSpec, load_spec, parse_metric_entry, parse_spec
from nlgbench.data.items import Item
from nlgbench.execution.sweep import run as run_sweep
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.devices import check_device
from nlgbench.metrics import default_encoder, get_metric
from nlgbench.metrics.base import REFERENCE_POLICY, MetricInfo, PhaseTimer, ReferencePolicy
from nlgbench.reporting.compare import compare as compare_encoders
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.folder import cell_dir
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from nlgbench.statistics.summary import signed_segments

if TYPE_CHECKING:
    import pandas as pd

EncoderSpec = str | dict[str, Any]  # a registered name, a Hub id, a local folder, or {name: ..., num_layers: 3, ...}
References = (
    Iterable[str] | Iterable[Sequence[str]]
)  # one text per hypothesis, or a list of texts (several) per hypothesis


def _as_list(name: str, values: Iterable[Any], what: str = "a list of strings") -> list[Any]:
    """Any iterable (a list, a tuple, a generator) as a list; one clear error for one string or a non-iterable."""
    if isinstance(values, str):
        raise UserError(f"{name} must be {what}, not one string")
    try:
        return list(values)
    except TypeError:
        raise UserError(f"{name} must be {what}, got {type(values).__name__}") from None


def _texts(name: str, values: Iterable[str] | None, n: int) -> list[str]:
    """A list of n strings, or one clear error naming the argument and the line (1-based, as the
    `line` column of `nlgbench score`'s output). Blank texts pass: the metric's rule decides (`_items`)."""
    if values is None:
        return [""] * n
    out = _as_list(name, values)
    if len(out) != n:
        raise UserError(f"{name} has {len(out)} items but hypotheses has {n}")
    bad = [i for i, v in enumerate(out) if not isinstance(v, str)]
    if bad:
        raise UserError(f"{name} line {bad[0] + 1} is {type(out[bad[0]]).__name__}, not a string")
    return out


def _references(values: References | None, n: int) -> list[tuple[str, ...]]:
    """Each hypothesis's references, from texts (one each) or lists of texts (several each,
    bert_score's format). One clear error otherwise, naming the line (1-based)."""
    if values is None:
        return [("",)] * n
    out = _as_list("references", values, "a list of strings (or of lists of strings)")
    if len(out) != n:
        raise UserError(f"references has {len(out)} items but hypotheses has {n}")
    refs: list[tuple[str, ...]] = []
    for i, value in enumerate(out):
        group = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
        if group is None or not all(isinstance(v, str) for v in group):
            raise UserError(f"references line {i + 1} is {type(value).__name__}, not a string or a list of strings")
        if not group:
            raise UserError(f"references line {i + 1} is an empty list: give at least one reference")
        refs.append(group)
    return refs


ARGUMENTS = {"hypothesis": "hypotheses", "reference": "references", "source": "sources"}  # item field -> argument
LINES_SHOWN = 10  # blank lines named per argument in the warning; the rest counted


class BlankTextWarning(UserWarning):
    """Blank texts (empty or whitespace only) that the metric scored as it defines them
    (`MetricInfo.blank_texts`: BERTScore P = R = F1 = 0 as bert_score, BLEU 0 ...)."""


def _line(items: Sequence[Item], field: str, position: int) -> str:
    """Where a blank text is, as the caller gave it: `hypotheses line 3`, `references line 2,
    reference 2` (1-based; the reference named where the line has several)."""
    where = f"{ARGUMENTS[field]} line {position + 1}"
    refs = items[position].references
    if field != "reference" or len(refs) == 1:
        return where
    return f"{where}, reference {next(k for k, text in enumerate(refs) if not text.strip()) + 1}"


def blank_warning(info: MetricInfo, options: dict[str, Any], items: Sequence[Item]) -> str | None:
    """The one-line warning on the blank texts the metric scores among `items` (how many, which lines,
    1-based, and what they score), or None when there are none."""
    rule = info.blank_rule(options)
    found = {field: positions for field, positions in rule.found(items).items() if field in rule.scored}
    if not found:
        return None
    count = len({i for positions in found.values() for i in positions})
    where = "; ".join(
        f"{ARGUMENTS[field]} line{'s' if len(positions) > 1 else ''} "
        + ", ".join(str(i + 1) for i in positions[:LINES_SHOWN])
        + (f" ... ({len(positions)} in all)" if len(positions) > LINES_SHOWN else "")
        for field, positions in found.items()
    )
    return f"{count} of {len(items)} lines hold a blank text ({where}); {info.name} scores a blank text: {rule.value}"


def _items(
    info: MetricInfo,
    options: dict[str, Any],
    hypotheses: Iterable[str],
    references: References | None,
    sources: Iterable[str] | None,
) -> list[Item]:
    """The texts as items, after their checks (one clear error naming the argument and the 1-based
    line): the references and sources the metric needs, as many as hypotheses; a blank text only
    where the metric defines a value for one (`MetricInfo.blank_rule`)."""
    hyps = _as_list("hypotheses", hypotheses)
    hyps = _texts("hypotheses", hyps, len(hyps))
    given = {"reference": references, "source": sources}
    rule = info.blank_rule(options)
    reads_references = info.reads_references(options)  # SentSim's `against: reference` too
    read = {*info.needs, *(["reference"] if reads_references else []), *rule.scored, *rule.refused} - {"hypothesis"}
    for need in sorted(read):  # BARTScore's faithfulness reads sources too
        if given[need] is None:
            raise UserError(f"metric {info.name!r} needs {need}s: pass {need}s=[...]")
    refs = _references(references, len(hyps))
    srcs = _texts("sources", sources, len(hyps))
    items = [
        Item(lp="", seg_id=i + 1, system="", source=s, reference=r[0], hypothesis=h, human=float("nan"), references=r)
        for i, (h, r, s) in enumerate(zip(hyps, refs, srcs, strict=True))
    ]
    refused = rule.refusal(info.name, items, lambda field, i: _line(items, field, i))
    if refused is not None:
        raise UserError(refused)
    return items


def check_texts(
    metric: str, hypotheses: Iterable[str], references: References | None, sources: Iterable[str] | None, **options: Any
) -> None:
    """The texts' checks of `score` (`_items`: one clear error naming the argument and the 1-based line),
    before any model loads; nothing to check for a metric name that `Scorer` will refuse."""
    if isinstance(metric, str) and metric.strip():
        _items(get_metric(metric), options, hypotheses, references, sources)


def _auto_device(device: str) -> str:
    """`auto`: CUDA where torch sees a GPU, else the CPU; any other value checked as given."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    check_device(device)
    return device


class Scorer:
    """A metric with its model loaded once, to score any number of batches (as bert_score's
    `BERTScorer`).

    `options` are the metric's spec options (`nlgbench list metrics`), e.g. `idf=True, layer=4`;
    `device="auto"` takes CUDA when available. Corpus state (idf) is prepared over the texts of
    each `score` call, as `nlgbench.score` and a sweep cell do over theirs. `context` (its own `CellContext`)
    holds what its models record: texts cut to their maximum length, seconds exporting for a backend.

    Examples:
        >>> scorer = nlgbench.Scorer("bertscore", encoder="all-MiniLM-L6-v2")
        >>> scorer.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
        [0.9071274399757385]
        >>> scorer.signature.split("|")[:4]  # then options, reference use, versions
        ['bertscore', 'enc:sentence-transformers/all-MiniLM-L6-v2@34bb7e1', 'L6', 'idf:no']
    """

    def __init__(
        self,
        metric: str = "bertscore",
        encoder: EncoderSpec | None = None,
        *,
        aligner: str | None = None,
        device: str = "auto",
        batch_size: int = 64,
        **options: Any,
    ) -> None:
        if not isinstance(metric, str) or not metric.strip():
            raise UserError(f"metric must be a registered metric's name, got {metric!r} (nlgbench list metrics)")
        if isinstance(encoder, str) and not encoder.strip():
            raise UserError("encoder is empty: give a registered name, a Hub id or a local folder (or leave it out)")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise UserError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.metric = metric
        self.device = _auto_device(device)
        self.info = get_metric(metric)
        # reference_policy is the harness's option, not the metric's: MetricInfo.make checks and applies it
        harness = {key: options.pop(key) for key in [REFERENCE_POLICY] if key in options}
        raw: dict[str, Any] = {
            "metric": metric,
            "options": options,
            "encoders": [encoder if encoder is not None else default_encoder(metric)],
        }
        if aligner is not None:
            raw["aligners"] = [aligner]
        entry = parse_metric_entry(raw, "score", Path.cwd())
        self.options: dict[str, Any] = {**entry.options, **harness}
        extra = {"aligner": entry.aligners[0]} if self.info.accepts_aligners else {}
        self.context = CellContext()
        self._scorer = self.info.make(entry.encoders[0], self.options, self.device, batch_size, self.context, **extra)
        self._aligner = entry.aligners[0] if self.info.accepts_aligners else None
        self._signature: str | None = None

    @property
    def references(self) -> str:
        """How several references per hypothesis are used: the reference_policy option, else the
        metric's own rule (max, mean, native); `one` where the metric takes one, `none` without references."""
        return reference_use(self.info, self.options)

    @property
    def signature(self) -> str:
        """The reproducibility signature (nlgbench.core.signature): metric, encoder@revision, layer,
        variant, options, reference use, versions."""
        if self._signature is None:
            self._signature = scorer_signature(self.info, self.options, self._aligner, self._scorer.describe())
        return self._signature

    def _items(
        self, hypotheses: Iterable[str], references: References | None, sources: Iterable[str] | None
    ) -> list[Item]:
        return _items(self.info, self.options, hypotheses, references, sources)

    def score_outputs(
        self, hypotheses: Iterable[str], references: References | None = None, *, sources: Iterable[str] | None = None
    ) -> dict[str, list[float]]:
        """Every output per hypothesis: `score` (the primary one, as in scores.csv) first, then the
        metric's further columns (precision, recall, directions, distances)."""
        items = self._items(hypotheses, references, sources)
        warning = blank_warning(self.info, self.options, items)
        if warning is not None:
            warnings.warn(warning, BlankTextWarning, stacklevel=2)
        if isinstance(self._scorer, ReferencePolicy):
            try:
                self._scorer.policy(items)  # a metric that cannot use several references, and no reference_policy
            except ValueError as exc:
                raise UserError(str(exc)) from None
        self._scorer.prepare(items)
        scores = self._scorer.score(items, PhaseTimer())
        return {"score": list(scores.score), **{k: list(v) for k, v in scores.columns.items() if k != scores.primary}}

    def score(
        self, hypotheses: Iterable[str], references: References | None = None, *, sources: Iterable[str] | None = None
    ) -> list[float]:
        """The metric's primary score per hypothesis (BERTScore F1, MoverScore, BaryScore distance, ...)."""
        return self.score_outputs(hypotheses, references, sources=sources)["score"]


def score_outputs(
    hypotheses: Iterable[str],
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    sources: Iterable[str] | None = None,
    aligner: str | None = None,
    device: str = "auto",
    batch_size: int = 64,
    **options: Any,
) -> dict[str, list[float]]:
    """Every output of the metric per hypothesis: `score` (the primary one, as in scores.csv)
    first, then the metric's further columns (precision, recall, directions, distances). Loads the
    model on every call: to score several batches, build one `Scorer`.

    `hypotheses`, `references` and `sources` may be any iterable (a list, a tuple, a generator).
    `references` gives one text per hypothesis, or a list of texts (several references) per
    hypothesis; the metric uses several as its reference code does, or as `reference_policy`
    (first, max or mean) says.

    Examples:
        >>> out = nlgbench.score_outputs(["The cat sat on the mat."], ["A cat was sitting on the mat."])
        >>> list(out), out["precision"]
        (['score', 'precision', 'recall'], [0.9186349511146545])
    """
    hyps = _as_list("hypotheses", hypotheses)
    refs = (
        _as_list("references", references, "a list of strings (or of lists of strings)") if references else references
    )
    srcs = _as_list("sources", sources) if sources is not None else None
    check_texts(metric, hyps, refs, srcs, **options)  # before the model loads
    scorer = Scorer(metric, encoder, aligner=aligner, device=device, batch_size=batch_size, **options)
    return scorer.score_outputs(hyps, refs, sources=srcs)


def score(
    hypotheses: Iterable[str],
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    sources: Iterable[str] | None = None,
    aligner: str | None = None,
    device: str = "auto",
    batch_size: int = 64,
    **options: Any,
) -> list[float]:
    """The metric's primary score per hypothesis (BERTScore F1, MoverScore, BaryScore distance, ...).

    `options` are the metric's spec options (`nlgbench list metrics`), e.g. `idf=True, layer=4`;
    `encoder` a registered name, a Hub id, a local folder, or a variant as a dict. The model loads on
    every call: to score several batches, build one `Scorer`.

    Examples:
        >>> hyps = ["The cat sat on the mat.", "A dog is running in the park."]
        >>> refs = ["A cat was sitting on the mat.", "The dog runs through the park."]
        >>> nlgbench.score(hyps, refs)  # BERTScore F1 with all-MiniLM-L6-v2
        [0.9071274399757385, 0.8599725961685181]
        >>> nlgbench.score(hyps, refs, encoder={"name": "all-MiniLM-L6-v2", "num_layers": 3}, idf=False)
        [0.8733524680137634, 0.8841153979301453]
    """
    return score_outputs(
        hypotheses,
        references,
        metric,
        encoder,
        sources=sources,
        aligner=aligner,
        device=device,
        batch_size=batch_size,
        **options,
    )["score"]


def _as_spec(spec: str | Path | dict[str, Any] | SweepSpec) -> SweepSpec:
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, "spec", Path.cwd())
    if not isinstance(spec, (str, PathLike)):
        raise UserError(f"spec must be a spec file's path, a dict or a SweepSpec, got {type(spec).__name__}")
    return load_spec(spec)


def _path(name: str, value: str | PathLike[str], what: str) -> Path:
    """A str or path-like argument as a Path; one clear error naming the argument otherwise."""
    if not isinstance(value, (str, PathLike)):
        raise UserError(f"{name} must be {what}, got {type(value).__name__}")
    return Path(value)


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
    folder = _path("out", out, "a folder's path") if out is not None else None
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

    text = RunData.results_csv(_path("path", path, "a run folder's path"))
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

    folder = _path("path", path, "a run folder's path")
    if not isinstance(cell_id, str) or Path(cell_id).name != cell_id or cell_id in ("", ".", ".."):
        raise UserError(f"cell_id must be a cell's id (a folder name under cells/), got {cell_id!r}")
    cell = cell_dir(folder, cell_id)
    csv_path = cell / SCORES_FILE
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: no such file (is {cell_id!r} a finished cell of {path}?)")
    # ids and texts stay text, checked against result.json where there is one
    columns, rows = read_scores(csv_path, CellResult.read(cell) if (cell / RESULT_FILE).is_file() else None)
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
) -> dict[str, Any]:
    """`nlgbench compare PATH --candidate C --baseline B --json` as a dict: per metric x dataset x
    device the two encoders' quality (`method` at `level`, docs/concepts/correlation.md), the
    difference with its interval, the `test` at the level's resampling unit and Williams' test per
    group of the level, each row naming its test, resampling unit and n.

    Examples:
        >>> result = nlgbench.compare("reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2")
        >>> row = result["rows"][0]  # one per metric x dataset x device
        >>> round(row["retained"], 3), row["p_value"], round(row["speedup"], 2)
        (0.96, 0.068, 7.01)
    """
    folder = _path("path", path, "a run folder's path")
    options = QualityOptions(
        method=method, level=level, threshold=threshold, resample=resample, test=test, convention=convention
    )
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
    n = len(metric_scores)
    lps, seg_ids = list(lps) if lps is not None else ["-"] * n, list(seg_ids) if seg_ids is not None else None
    try:  # the figure report and compare compute (`QualityOptions.value`), on the signed segments
        seg = signed_segments(metric_scores, human_scores, lps, systems, docs, 1, seg_ids)
    except ValueError as e:
        raise UserError(str(e)) from None
    return float(options.value(seg))
