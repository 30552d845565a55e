"""The trade-off table of a report (tradeoff.{csv,md,tex}): per metric x dataset x device, each
encoder against the baseline encoder with `nlgbench compare`'s numbers (quality retained with its
paired-bootstrap interval, speed-up with its range, the bootstrap p-value)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.renderers import TextTable
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

if TYPE_CHECKING:
    import pandas as pd

TRADEOFF_COLUMNS = [
    "metric",
    "dataset",
    "device",
    "encoder",
    "baseline",
    "n",
    "quality",
    "retained",
    "retained_ci_low",
    "retained_ci_high",
    "speedup",
    "speedup_low",
    "speedup_high",
    "p_bootstrap",
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
    bootstrap interval, speed-up with its range and the bootstrap p-value against the baseline:
    `nlgbench.reporting.compare.compare`'s numbers, with its resamples and seed."""
    import pandas as pd

    rows = []
    for metric, base in baselines.items():
        if base == NO_ENCODER:
            continue  # lexical metrics: no encoder to trade
        cells = df[df["metric"] == metric]
        rows += [_baseline_row(run, metric, b) for _, b in cells[cells["encoder"] == base].iterrows()]
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
                        "retained": r["retained"],
                        "retained_ci_low": r["retained_ci"][0],
                        "retained_ci_high": r["retained_ci"][1],
                        "speedup": r["speedup"],
                        "speedup_low": r["speedup_range"][0],
                        "speedup_high": r["speedup_range"][1],
                        "p_bootstrap": r["p_bootstrap"],
                    }
                )
    return _in_report_order(pd.DataFrame(rows, columns=TRADEOFF_COLUMNS), df)


def _baseline_row(run: RunData, metric: str, b: pd.Series) -> dict[str, Any]:
    """The baseline encoder's own row of the trade-off table: all of its quality retained, no speed-up."""
    repeats = b["ms_per_segment_repeats"]
    return {
        "metric": metric,
        "dataset": b["dataset"],
        "device": b["device"] if not b["imported"] else "imported",
        "encoder": b["encoder"],
        "baseline": b["encoder"],
        "n": len(run.segments(b["cell_id"])),
        "quality": b["quality"],
        "retained": 1.0 if math.isfinite(b["quality"]) and b["quality"] else math.nan,
        "retained_ci_low": math.nan,
        "retained_ci_high": math.nan,
        "speedup": 1.0 if len(repeats) else math.nan,
        "speedup_low": math.nan,
        "speedup_high": math.nan,
        "p_bootstrap": math.nan,
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


def tradeoff_rows(table: pd.DataFrame, n_resamples: int) -> TextTable:
    """The trade-off table as text; the baseline's own row says 'baseline' for its p-value."""
    header = [
        "metric",
        "dataset",
        "device",
        "encoder",
        "n",
        "quality",
        "retained [95% CI]",
        "speed-up [range]",
        "p vs baseline",
    ]
    rows = []
    for _, r in table.iterrows():
        is_base = r["encoder"] == r["baseline"]
        rows.append(
            [
                r["metric"],
                r["dataset"],
                r["device"],
                r["encoder"],
                str(r["n"]),
                fmt.number(r["quality"], missing=fmt.UNDEFINED),
                fmt.percent_ci(r["retained"], r["retained_ci_low"], r["retained_ci_high"], missing=fmt.UNDEFINED),
                fmt.times_range(r["speedup"], r["speedup_low"], r["speedup_high"]),
                "baseline" if is_base else fmt.p_value(r["p_bootstrap"], n_resamples, missing=fmt.UNDEFINED),
            ]
        )
    return header, rows
