"""The trade-off table of a report (tradeoff.{csv,md,tex}): per metric x dataset x device, each
encoder against the baseline encoder with `nlgbench compare`'s numbers (quality retained with its
paired-bootstrap interval, speed-up with its range, the p-value of compare's chosen test), each row
naming its quality (human dimension, level, method), the test and the unit resampled."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare
from nlgbench.reporting.markup import TextTable
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import dataset_plain, human_words, quality_columns_of
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

if TYPE_CHECKING:
    import pandas as pd

LEXICAL = "none (lexical)"  # a lexical baseline's encoder column in the text tables
TRADEOFF_COLUMNS = [
    "metric",
    "dataset",
    "device",
    "encoder",
    "baseline",
    "n",
    "quality",
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
    baselines: dict[str, str],
    options: QualityOptions,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """The paper's quality-vs-speed table: per metric (with encoders) x dataset x device, the
    baseline encoder's row, then each other encoder's quality, quality retained with its paired
    bootstrap interval, speed-up with its range and the p-value of the chosen test (`options.test`;
    `p_bootstrap` is the bootstrap's whichever test is chosen) against the baseline:
    `nlgbench.reporting.compare.compare`'s numbers, with its resamples and seed; each metric without
    an encoder (a lexical baseline: `baseline` NO_ENCODER) as rows of its own, time and quality only,
    for comparing an encoder with it. Every row names the test, the unit resampled, the cells' human
    dimension, the level and the method."""
    import pandas as pd

    named = quality_columns_of(options)
    dims = {
        (m, d): "; ".join(dict.fromkeys(g["human_dim"])) for (m, d), g in df.groupby(["metric", "dataset"], sort=False)
    }
    times = {(r["metric"], r["encoder"], r["dataset"], r["device"]): r["ms_per_segment"] for _, r in df.iterrows()}
    rows = []
    for metric, base in baselines.items():
        cells = df[df["metric"] == metric]
        rows += [
            {
                **_baseline_row(run, metric, b),
                "test": options.test_label,
                "resampling": options.unit_label(run.segments(b["cell_id"])),
                "human_dim": b["human_dim"],
                **named,
            }
            for _, b in cells[cells["encoder"] == base].iterrows()
        ]
        if base == NO_ENCODER:
            continue  # a lexical baseline: no encoder to trade, its own rows only
        for encoder in dict.fromkeys(cells["encoder"]):
            if encoder == base:
                continue
            try:
                result = compare(run, encoder, base, metric, options, n_resamples=n_resamples, seed=seed)
            except UserError:
                continue  # no cell pairs with the baseline's (other datasets or devices)
            for r in result["rows"]:
                rows.append(
                    {
                        "metric": metric,
                        "dataset": r["dataset"],
                        "device": r["device"],
                        "encoder": encoder,
                        "baseline": base,
                        "n": r["n"],
                        "quality": r["quality_candidate"],
                        "ms_per_segment": times.get((metric, encoder, r["dataset"], r["device"]), math.nan),
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


def _baseline_row(run: RunData, metric: str, b: pd.Series) -> dict[str, Any]:
    """The baseline encoder's own row of the trade-off table: all of its quality retained, no speed-up;
    a lexical baseline's (no encoder): its time and quality alone."""
    repeats = b["ms_per_segment_repeats"]
    lexical = b["encoder"] == NO_ENCODER
    return {
        "metric": metric,
        "dataset": b["dataset"],
        "device": b["device"],  # `imported` for an imported cell (RunData.cells)
        "encoder": b["encoder"],
        "baseline": b["encoder"],
        "n": len(run.segments(b["cell_id"])),
        "quality": b["quality"],
        "ms_per_segment": b["ms_per_segment"],
        "retained": 1.0 if not lexical and math.isfinite(b["quality"]) and b["quality"] else math.nan,
        "retained_ci_low": math.nan,
        "retained_ci_high": math.nan,
        "speedup": 1.0 if len(repeats) and not lexical else math.nan,
        "speedup_low": math.nan,
        "speedup_high": math.nan,
        "p_bootstrap": math.nan,
        "p_value": math.nan,
    }


def _in_report_order(table: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """The trade-off rows in the run's order of metrics, datasets and encoders, by device, the baseline first."""
    if not len(table):
        return table
    order = {k: i for i, k in enumerate(dict.fromkeys(df["metric"]))}
    datasets = {k: i for i, k in enumerate(dict.fromkeys(df["dataset"]))}
    encoders = {k: i for i, k in enumerate(dict.fromkeys(df["encoder"]))}
    key = table.apply(
        lambda r: (
            order[r["metric"]],
            datasets[r["dataset"]],
            r["device"].split(" / ")[0],
            r["encoder"] != r["baseline"],
            encoders[r["encoder"]],
        ),
        axis=1,
    )
    return table.iloc[sorted(range(len(table)), key=lambda i: key.iloc[i])].reset_index(drop=True)


def tradeoff_rows(table: pd.DataFrame, n_resamples: int, names: Names = DEFAULT_NAMES) -> TextTable:
    """The trade-off table as text, encoders and metrics under their `names`; p is the chosen test's
    (`p_value`); the baseline's own row says 'baseline' for its p-value."""
    header = [
        "metric",
        "dataset",
        "device",
        "encoder",
        "n",
        "quality",
        "ms/seg",
        "retained [95% CI]",
        "speed-up [range]",
        "p vs baseline",
    ]
    rows = []
    for _, r in table.iterrows():
        lexical = r["encoder"] == NO_ENCODER
        rows.append(
            [
                names(r["metric"]),
                r["dataset"],
                r["device"],
                LEXICAL if lexical else names(r["encoder"]),
                str(r["n"]),
                fmt.number(r["quality"], missing=fmt.UNDEFINED),
                fmt.number(r["ms_per_segment"], 1),
                fmt.UNDEFINED
                if lexical
                else fmt.percent_ci(r["retained"], r["retained_ci_low"], r["retained_ci_high"], missing=fmt.UNDEFINED),
                fmt.UNDEFINED if lexical else fmt.times_range(r["speedup"], r["speedup_low"], r["speedup_high"]),
                base_word(r) or fmt.p_value(r["p_value"], n_resamples, missing=fmt.UNDEFINED),
            ]
        )
    return header, rows


def base_word(r: pd.Series) -> str:
    """A baseline row's p column: 'baseline' (the metric's baseline encoder), 'lexical baseline' (a
    metric without an encoder), '' for a compared encoder."""
    if r["encoder"] == NO_ENCODER:
        return "lexical baseline"
    return "baseline" if r["encoder"] == r["baseline"] else ""


def tradeoff_note(table: pd.DataFrame, options: QualityOptions, n_resamples: int, seed: int) -> str:
    """The note under the trade-off table (tradeoff.md, tradeoff.tex, index.html): the quality (method
    and level), the human dimension(s), the test, what is resampled, the resamples and the seed."""
    if not len(table):
        return f"no rows: no metric has two encoders on the same segments to compare (quality = {options.label})"
    units = list(dict.fromkeys(table["resampling"]))
    if len(units) > 1:
        by_dataset = dict(zip(table["dataset"], table["resampling"], strict=True))
        resampled = "; ".join(f"{dataset_plain(d)}: {u}" for d, u in by_dataset.items())
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
        f"quality = {options.label}, against {human_words(table)}; retained = quality / baseline quality, with "
        f"its 95% paired-bootstrap percentile interval; {test}; bootstrap resampling {resampled} ({n_resamples} "
        f"resamples, seed {seed}; as `nlgbench compare`); speed-up = median baseline ms/segment / median "
        "ms/segment, range over every pair of repeats; ms/seg (ms in "
        "LaTeX) = median time per segment; lexical baselines (no encoder): their time and quality only"
    )
