"""The trade-off table of a report (tradeoff.{csv,md,tex}): per metric x dataset x device, each
encoder, and each metric without a model (chrF, sentBLEU, ROUGE), against the metric's reference
(its baseline encoder, or the cell `report --baseline METRIC[:ENCODER]` names) with `nlgbench
compare`'s numbers: quality with its bootstrap interval, quality retained with its paired-bootstrap
interval, speed-up with its range, the p-value of compare's chosen test; each row names its quality
(human dimension, level, method), the test and the unit resampled."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare
from nlgbench.reporting.markup import TextTable
from nlgbench.reporting.published import dataset_name, quality_title
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import (
    QualityIntervals,
    Reference,
    human_words,
    model_free_metrics,
    quality_columns_of,
)
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

if TYPE_CHECKING:
    import pandas as pd

NO_MODEL = "no model"  # a model-free metric's encoder column in the text tables
TRADEOFF_COLUMNS = [
    "group",
    "metric",
    "dataset",
    "device",
    "encoder",
    "baseline_metric",
    "baseline",
    "n",
    "quality",
    "quality_ci_low",
    "quality_ci_high",
    "ms_per_segment",
    "retained",
    "retained_ci_low",
    "retained_ci_high",
    "speedup",
    "speedup_low",
    "speedup_high",
    "p_bootstrap",
    "p_value",
    "test",
    "resampling",
    "human_dim",
    "level",
    "method",
]


def tradeoff_table(
    run: RunData,
    df: pd.DataFrame,
    baselines: dict[str, Reference],
    options: QualityOptions,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """The paper's quality-vs-speed table: per group (a metric with encoders: `baselines`' keys) x
    dataset x device, the reference's row, then each of the metric's other encoders and each metric
    without a model, with quality and its 95% bootstrap interval, quality retained with its paired
    bootstrap interval, speed-up with its range and the p-value of the chosen test (`options.test`;
    `p_bootstrap` is the bootstrap's whichever test is chosen) against the reference:
    `nlgbench.reporting.compare.compare`'s numbers, with its resamples and seed. Every row names the
    test, the unit resampled, the cells' human dimension, the level and the method."""
    import pandas as pd

    named = quality_columns_of(options)
    intervals = QualityIntervals(run, options, n_resamples, seed)
    dims = {
        (m, d): "; ".join(dict.fromkeys(g["human_dim"])) for (m, d), g in df.groupby(["metric", "dataset"], sort=False)
    }
    cells = {(r["metric"], r["encoder"], r["dataset"], r["device"]): r for _, r in df.iterrows()}
    free = model_free_metrics(df)
    rows = []
    for group, ref in baselines.items():
        own = df[(df["metric"] == ref.metric) & (df["encoder"] == ref.encoder)]
        rows += [
            {
                **_reference_row(run, group, b, intervals),
                "test": options.test_label,
                "resampling": options.unit_label(run.segments(b["cell_id"])),
                "human_dim": b["human_dim"],
                **named,
            }
            for _, b in own.iterrows()
        ]
        candidates = [(group, str(e)) for e in dict.fromkeys(df[df["metric"] == group]["encoder"])]
        candidates += [(m, NO_ENCODER) for m in free]
        for metric, encoder in dict.fromkeys(candidates):
            if (metric, encoder) == (ref.metric, ref.encoder):
                continue
            try:
                result = compare(
                    run,
                    encoder,
                    ref.encoder,
                    None,
                    options,
                    n_resamples=n_resamples,
                    seed=seed,
                    candidate_metric=metric,
                    baseline_metric=ref.metric,
                )
            except UserError:
                continue  # no cell pairs with the reference's (other datasets or devices)
            for r in result["rows"]:
                cell = cells.get((metric, encoder, r["dataset"], r["device"].split(" / ")[0]))
                low, high = (
                    intervals.interval([cell["cell_id"]])
                    if cell is not None and math.isfinite(r["quality_candidate"])
                    else (math.nan, math.nan)
                )
                rows.append(
                    {
                        "group": group,
                        "metric": metric,
                        "dataset": r["dataset"],
                        "device": r["device"],
                        "encoder": encoder,
                        "baseline_metric": ref.metric,
                        "baseline": ref.encoder,
                        "n": r["n"],
                        "quality": r["quality_candidate"],
                        "quality_ci_low": low,
                        "quality_ci_high": high,
                        "ms_per_segment": math.nan if cell is None else cell["ms_per_segment"],
                        "retained": r["retained"],
                        "retained_ci_low": r["retained_ci"][0],
                        "retained_ci_high": r["retained_ci"][1],
                        "speedup": r["speedup"],
                        "speedup_low": r["speedup_range"][0],
                        "speedup_high": r["speedup_range"][1],
                        "p_bootstrap": r["p_bootstrap"],
                        "p_value": r["p_value"],
                        "test": r["test"],
                        "resampling": r["resampling"],
                        "human_dim": dims.get((metric, r["dataset"]), ""),
                        **named,
                    }
                )
    return _in_report_order(pd.DataFrame(rows, columns=TRADEOFF_COLUMNS), df)


def _reference_row(run: RunData, group: str, b: pd.Series, intervals: QualityIntervals) -> dict[str, Any]:
    """The reference's own row of a group: its quality with its interval and time, all of its quality
    retained, no speed-up over itself."""
    finite = math.isfinite(b["quality"])
    low, high = intervals.interval([b["cell_id"]]) if finite else (math.nan, math.nan)
    return {
        "group": group,
        "metric": b["metric"],
        "dataset": b["dataset"],
        "device": b["device"],  # `imported` for an imported cell (RunData.cells)
        "encoder": b["encoder"],
        "baseline_metric": b["metric"],
        "baseline": b["encoder"],
        "n": len(run.segments(b["cell_id"])),
        "quality": b["quality"],
        "quality_ci_low": low,
        "quality_ci_high": high,
        "ms_per_segment": b["ms_per_segment"],
        "retained": 1.0 if finite and b["quality"] else math.nan,
        "retained_ci_low": math.nan,
        "retained_ci_high": math.nan,
        "speedup": 1.0 if len(b["ms_per_segment_repeats"]) else math.nan,
        "speedup_low": math.nan,
        "speedup_high": math.nan,
        "p_bootstrap": math.nan,
        "p_value": math.nan,
    }


def _in_report_order(table: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """The trade-off rows in the run's order of groups, datasets and devices, the reference first,
    then the group's encoders and the metrics without a model in the run's order."""
    if not len(table):
        return table
    metrics = {k: i for i, k in enumerate(dict.fromkeys(df["metric"]))}
    datasets = {k: i for i, k in enumerate(dict.fromkeys(df["dataset"]))}
    encoders = {k: i for i, k in enumerate(dict.fromkeys(df["encoder"]))}
    key = table.apply(
        lambda r: (
            metrics[r["group"]],
            datasets[r["dataset"]],
            r["device"].split(" / ")[0],
            is_reference(r) is False,
            r["metric"] != r["group"],
            metrics[r["metric"]],
            encoders[r["encoder"]],
        ),
        axis=1,
    )
    return table.iloc[sorted(range(len(table)), key=lambda i: key.iloc[i])].reset_index(drop=True)


def is_reference(r: pd.Series) -> bool:
    """Whether a trade-off row is its group's reference (the row the others are compared with)."""
    return bool(r["encoder"] == r["baseline"] and r["metric"] == r["baseline_metric"])


def row_name(r: pd.Series, names: Names = DEFAULT_NAMES) -> str:
    """What a row is within its group: the encoder of the group's metric; a metric without a model
    by its name; another metric's encoder as 'metric encoder'."""
    if r["encoder"] == NO_ENCODER:
        return names(str(r["metric"]))
    if r["metric"] == r["group"]:
        return names(str(r["encoder"]))
    return f"{names(str(r['metric']))} {names(str(r['encoder']))}"


def tradeoff_rows(table: pd.DataFrame, n_resamples: int, names: Names = DEFAULT_NAMES) -> TextTable:
    """The trade-off table as text, encoders and metrics under their `names`; p is the chosen test's
    (`p_value`); the reference's own row says 'baseline' for its p-value."""
    header = [
        "metric",
        "dataset",
        "device",
        "encoder",
        "n",
        "quality [95% CI]",
        "ms/seg",
        "retained [95% CI]",
        "speed-up [range]",
        "p vs baseline",
    ]
    rows = []
    for _, r in table.iterrows():
        quality = fmt.number(r["quality"], missing=fmt.UNDEFINED)
        if math.isfinite(r["quality_ci_low"]) and math.isfinite(r["quality_ci_high"]):
            quality += f" [{r['quality_ci_low']:.3f}, {r['quality_ci_high']:.3f}]"
        rows.append(
            [
                names(r["metric"]),
                dataset_name(str(r["dataset"])),
                r["device"],
                NO_MODEL if r["encoder"] == NO_ENCODER else names(r["encoder"]),
                str(r["n"]),
                quality,
                fmt.number(r["ms_per_segment"], 1),
                fmt.percent_ci(r["retained"], r["retained_ci_low"], r["retained_ci_high"], missing=fmt.UNDEFINED),
                fmt.times_range(r["speedup"], r["speedup_low"], r["speedup_high"]),
                base_word(r) or fmt.p_value(r["p_value"], n_resamples, missing=fmt.UNDEFINED),
            ]
        )
    return header, rows


def base_word(r: pd.Series) -> str:
    """A row's p column where it has no test: 'baseline' for the group's reference, '' otherwise."""
    return "baseline" if is_reference(r) else ""


def tradeoff_note(table: pd.DataFrame, options: QualityOptions, n_resamples: int, seed: int) -> str:
    """The note under the trade-off table (tradeoff.md, a comment in tradeoff.tex, index.html): the
    quality (method and level), the human dimension(s), the intervals, the test, what is resampled,
    the resamples and the seed, in words (no command syntax)."""
    if not len(table):
        return f"no rows: no metric has two encoders on the same segments to compare (quality = {options.label})"
    units = list(dict.fromkeys(table["resampling"]))
    if len(units) > 1:
        by_dataset = dict(zip(table["dataset"], table["resampling"], strict=True))
        resampled = "; ".join(f"{dataset_name(d)}: {u}" for d, u in by_dataset.items())
    else:
        resampled = units[0]
    if options.test == "permutation":
        test = (
            f"p = two-sided {options.test_label} test of equal quality (each segment's two standardized metric "
            f"scores swapped at random; {n_resamples} permutations, seed {seed})"
        )
    else:
        test = f"p = two-sided {options.test_label} test of equal quality"
    return (
        f"quality = {quality_title(options)}, against {human_words(table)}, with its 95% bootstrap "
        "percentile interval; "
        f"retained = quality / the baseline's quality (each group's first row), with its 95% paired-bootstrap "
        f"percentile interval; {test}; bootstrap resampling {resampled} ({n_resamples} resamples, seed {seed}; "
        "the compare command's numbers); speed-up = the baseline's median time per segment / the row's, range "
        "over every pair of repeats; ms/seg = median time per segment in milliseconds; metrics without a model "
        "(chrF, sentBLEU, ROUGE) are compared with each group's baseline like its encoders"
    )
