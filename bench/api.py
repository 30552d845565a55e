"""The Python API: score lists of strings, run a sweep, read a run folder.

`score` builds the metric exactly as a sweep cell does (the spec's option and encoder checks,
`MetricInfo.make`, corpus state prepared over all the given items, then one scoring pass), so
its numbers equal the cell's `scores.csv` for the same items, batch size and device.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from nlgbench.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

    from nlgbench.spec import SweepSpec

EncoderSpec = str | dict[str, Any]  # a registered name, a Hub id, a local folder, or {name: ..., num_layers: 3, ...}
References = Sequence[str] | Sequence[Sequence[str]]  # one text per hypothesis, or a list of texts (several) per hypothesis


def _texts(name: str, values: Sequence[str] | None, n: int, required: bool = True) -> list[str]:
    """A list of n non-blank strings (any strings when not required), or one clear error naming the argument."""
    if values is None:
        return [""] * n
    if isinstance(values, str):
        raise UserError(f"{name} must be a list of strings, not one string")
    out = list(values)
    if len(out) != n:
        raise UserError(f"{name} has {len(out)} items but hypotheses has {n}")
    bad = [i for i, v in enumerate(out) if not isinstance(v, str)]
    if bad:
        raise UserError(f"{name}[{bad[0]}] is {type(out[bad[0]]).__name__}, not a string")
    blank = [i for i, v in enumerate(out) if required and not v.strip()]
    if blank:
        raise UserError(f"{name}[{blank[0]}] is blank ({len(blank)} blank in all): every text must be non-empty")
    return out


def _references(values: References | None, n: int, required: bool) -> list[tuple[str, ...]]:
    """Each hypothesis's references, from a list of texts (one each) or of lists of texts (several
    each, bert_score's format); non-blank where the metric reads them. One clear error otherwise."""
    if values is None:
        return [("",)] * n
    if isinstance(values, str):
        raise UserError("references must be a list of strings (or of lists of strings), not one string")
    out = list(values)
    if len(out) != n:
        raise UserError(f"references has {len(out)} items but hypotheses has {n}")
    refs: list[tuple[str, ...]] = []
    for i, value in enumerate(out):
        group = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
        if group is None or not all(isinstance(v, str) for v in group):
            raise UserError(f"references[{i}] is {type(value).__name__}, not a string or a list of strings")
        if not group:
            raise UserError(f"references[{i}] is an empty list: give at least one reference")
        blank = [k for k, v in enumerate(group) if required and not v.strip()]
        if blank:
            where = f"references[{i}]" if isinstance(value, str) else f"references[{i}][{blank[0]}]"
            raise UserError(f"{where} is blank: every text must be non-empty")
        refs.append(group)
    return refs


DEFAULT_ENCODER = "all-MiniLM-L6-v2"  # the encoder when none is given, for metrics that run one


def default_encoder(metric: str) -> str:
    """The encoder of `score` when none is given: `none` for a metric that runs no model (sentbleu,
    chrf, rouge1 ...), else DEFAULT_ENCODER."""
    from nlgbench.labels import NO_ENCODER
    from nlgbench.metrics import get_metric

    return NO_ENCODER if NO_ENCODER in get_metric(metric).encoder_kinds else DEFAULT_ENCODER


def score_outputs(
    hypotheses: Sequence[str],
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    sources: Sequence[str] | None = None,
    aligner: str | None = None,
    device: str = "cpu",
    batch_size: int = 64,
    **options: Any,
) -> dict[str, list[float]]:
    """Every output of the metric per hypothesis: `score` (the primary one, as in scores.csv)
    first, then the metric's further columns (precision, recall, directions, distances).

    `references` gives one text per hypothesis, or a list of texts (several references) per
    hypothesis; the metric uses several as its reference code does, or as `reference_policy`
    (first, max or mean) says."""
    from nlgbench.data import Item
    from nlgbench.metrics import get_metric
    from nlgbench.metrics.base import REFERENCE_POLICY, PhaseTimer, ReferencePolicy
    from nlgbench.spec import DEVICE_RE, parse_metric_entry

    hyps = _texts("hypotheses", hypotheses, len(hypotheses) if not isinstance(hypotheses, str) else -1)
    info = get_metric(metric)
    encoder = encoder if encoder is not None else default_encoder(metric)
    given = {"reference": references, "source": sources}
    reads_references = info.reads_references(options)  # SentSim's `against: reference` too
    for need in sorted({*info.needs, *(["reference"] if reads_references else [])}):
        if given[need] is None:
            raise UserError(f"metric {metric!r} needs {need}s: pass {need}s=[...]")
    refs = _references(references, len(hyps), reads_references)
    srcs = _texts("sources", sources, len(hyps), "source" in info.needs)
    if not DEVICE_RE.match(device):
        raise UserError(f"unknown device {device!r} (use cpu, cuda or cuda:N)")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UserError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    # reference_policy is the harness's option, not the metric's: MetricInfo.make checks and applies it
    harness = {key: options.pop(key) for key in [REFERENCE_POLICY] if key in options}
    raw: dict[str, Any] = {"metric": metric, "options": options, "encoders": [encoder]}
    if aligner is not None:
        raw["aligners"] = [aligner]
    entry = parse_metric_entry(raw, "score", Path.cwd())
    items = [Item(lp="", seg_id=i + 1, system="", source=s, reference=r[0], hypothesis=h, human=float("nan"),
                  references=r)
             for i, (h, r, s) in enumerate(zip(hyps, refs, srcs))]
    extra = {"aligner": entry.aligners[0]} if info.accepts_aligners else {}
    scorer = info.make(entry.encoders[0], {**entry.options, **harness}, device, batch_size, **extra)
    if isinstance(scorer, ReferencePolicy):
        try:
            scorer.policy(items)  # a metric that cannot use several references, and no reference_policy
        except ValueError as exc:
            raise UserError(str(exc)) from None
    scorer.prepare(items)
    scores = scorer.score(items, PhaseTimer())
    return {"score": list(scores.score), **{k: list(v) for k, v in scores.columns.items() if k != scores.primary}}


def score(
    hypotheses: Sequence[str],
    references: References | None = None,
    metric: str = "bertscore",
    encoder: EncoderSpec | None = None,
    *,
    sources: Sequence[str] | None = None,
    aligner: str | None = None,
    device: str = "cpu",
    batch_size: int = 64,
    **options: Any,
) -> list[float]:
    """The metric's primary score per hypothesis (BERTScore F1, MoverScore, BaryScore distance, ...).

    `options` are the metric's spec options (`nlgbench list metrics`), e.g. `idf=True, layer=4`.
    """
    return score_outputs(hypotheses, references, metric, encoder, sources=sources, aligner=aligner,
                         device=device, batch_size=batch_size, **options)["score"]


def _as_spec(spec: "str | Path | dict[str, Any] | SweepSpec") -> "SweepSpec":
    from nlgbench.spec import SweepSpec, load_spec, parse_spec

    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, "spec", Path.cwd())
    return load_spec(spec)


def run(spec: "str | Path | dict[str, Any] | SweepSpec", out: str | Path | None = None, *,
        force: bool = False, quiet: bool = False) -> "pd.DataFrame":
    """Run a sweep (a spec file, a dict shaped like the YAML, or a SweepSpec) into `out`
    (default reports/<name>), resuming finished cells; returns `load_run(out)`."""
    from nlgbench.sweep import run as run_sweep

    sweep = _as_spec(spec)
    folder = Path(out) if out is not None else Path("reports") / sweep.name
    run_sweep(sweep, folder, force=force, log=(lambda _msg: None) if quiet else print)
    return load_run(folder)


def load_run(path: str | Path) -> "pd.DataFrame":
    """One row per cell of a run folder (the columns of results.csv)."""
    import pandas as pd

    csv_path = Path(path) / "results.csv"
    if not csv_path.is_file():
        raise UserError(f"{path}: no results.csv (not a run folder, or no cell has finished yet)")
    text_columns = ("cell_id", "metric", "metric_options", "encoder", "aligner", "dataset", "device", "status", "error")
    return pd.read_csv(csv_path, dtype={c: str for c in text_columns})


def load_scores(path: str | Path, cell_id: str) -> "pd.DataFrame":
    """A cell's segment scores (`cells/<cell_id>/scores.csv`): lp, seg_id, system, score, human, extras."""
    import pandas as pd

    csv_path = Path(path) / "cells" / cell_id / "scores.csv"
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: no such file (is {cell_id!r} a finished cell of {path}?)")
    frame = pd.read_csv(csv_path, dtype={"lp": str, "system": str}, keep_default_na=False)
    for column in frame.columns:
        if column not in ("lp", "system"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame
