"""Table 4 of a report (`quantities.{csv,md,tex}`, index.html): the Pearson correlation, across
encoders, of the measured quantities (time, memory, parameters, disk, quality), each r with n, the
encoders behind it, and its 95% Fisher z interval; quantities measured on no pair of encoders left out.

A metric's encoders give one matrix (metrics with fewer than MIN_ENCODERS encoders give none:
through 2 points every correlation is +-1); the table is the mean over metrics. The metrics share
their encoders, so averaging over them adds no independent encoders: an entry's n is the fewest
encoders behind any of the metrics' r it averages, and its interval is the Fisher z interval of one
r from n encoders (`nlgbench.statistics.correlation.fisher_interval`), which is wider than the
mean's. Below MIN_FISHER_POINTS encoders there is no interval, said in the cell ("n/a: n<4")."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.foundations import fmt
from nlgbench.reporting.markup import TextTable
from nlgbench.reporting.relative_table import per_encoder, quality_columns
from nlgbench.statistics.correlation import MIN_FISHER_POINTS, fisher_interval

if TYPE_CHECKING:
    import pandas as pd

QUANTITIES = {  # Table 4's measured quantities: column -> readable name; then quality per kind of human score
    "cpu_ms": "CPU time",
    "gpu_ms": "GPU time",
    "model_mb": "model memory",
    "params": "parameters",
    "disk_mb": "disk",
}
MIN_ENCODERS = 3  # a metric's quantity correlations need at least this many encoders
CSV_COLUMNS = ["quantity", "other", "r", "ci_low", "ci_high", "n", "metrics", "note"]


@dataclass(frozen=True)
class QuantityMatrix:
    """Table 4: `r`, the Pearson correlation of two measured quantities across encoders, per metric
    (metrics with at least MIN_ENCODERS encoders), averaged over metrics; `n`, the fewest encoders
    behind any metric's r averaged (0: none); `metrics`, how many metrics' r each entry averages;
    `measured`, whether both quantities were measured on enough encoders (r NaN where measured: a
    quantity constant across a metric's encoders); `n_metrics`, the metrics with a matrix."""

    r: pd.DataFrame
    n: pd.DataFrame
    metrics: pd.DataFrame
    measured: pd.DataFrame
    n_metrics: int

    def interval(self, a: str, b: str) -> tuple[float, float]:
        """The 95% Fisher z interval of entry (a, b) from its n encoders; NaN below MIN_FISHER_POINTS."""
        return fisher_interval(float(entry(self.r, a, b)), int(entry(self.n, a, b)))

    def unmeasured(self) -> list[str]:
        """The quantities measured together with no other one (e.g. GPU time in a CPU-only run): the
        table leaves them out, and its note names them."""
        names = list(self.r.index)
        return [a for a in names if not any(bool(entry(self.measured, a, b)) for b in names if b != a)]

    def shown(self) -> list[str]:
        """The quantities the table shows: all but `unmeasured`."""
        left_out = self.unmeasured()
        return [a for a in self.r.index if a not in left_out]


def entry(frame: pd.DataFrame, a: str, b: str) -> Any:
    """Entry (a, b) of one of QuantityMatrix's frames (pandas' scalar)."""
    return frame.loc[a, b]


def quantity_correlations(df: pd.DataFrame, min_encoders: int = MIN_ENCODERS) -> QuantityMatrix:
    """Table 4 from the cells (see QuantityMatrix); a metric with fewer than `min_encoders`
    encoders has no matrix (through 2 points every correlation is +-1)."""
    import pandas as pd

    enc = per_encoder(df)
    columns = [*QUANTITIES, *quality_columns(df)]
    names = [*QUANTITIES.values(), *quality_columns(df)]
    mats, counts, measured = [], [], []
    for _, g in enc.groupby("metric", sort=False):
        if len(g) < min_encoders:
            continue
        values = g[columns].astype(float)
        r = values.corr(method="pearson", min_periods=min_encoders).to_numpy()
        finite = np.isfinite(values.to_numpy())
        both = (finite[:, :, None] & finite[:, None, :]).sum(axis=0)
        mats.append(r)
        counts.append(np.where(np.isfinite(r), both, np.iinfo(np.int64).max))
        measured.append(both >= min_encoders)

    def frame(values: Any) -> pd.DataFrame:
        return pd.DataFrame(values, index=names, columns=names)

    if not mats:
        return QuantityMatrix(frame(np.nan), frame(0), frame(0), frame(False), 0)
    stacked = np.stack(mats)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 'mean of empty slice': an all-NaN entry stays NaN
        mean = np.nanmean(stacked, axis=0)
    fewest = np.min(np.stack(counts), axis=0)
    return QuantityMatrix(
        frame(mean),
        frame(np.where(fewest == np.iinfo(np.int64).max, 0, fewest)),
        frame(np.isfinite(stacked).sum(axis=0)),
        frame(np.any(measured, axis=0)),
        len(mats),
    )


def entry_text(matrix: QuantityMatrix, a: str, b: str) -> str:
    """One entry of Table 4 as text: 'r [low, high] (n=N)'; 'r [n/a: n<4] (n=3)' where n is too small
    for an interval (an r from 3 encoders is never shown bare); the metrics averaged where fewer than
    the table's; 'n/a' where a quantity is constant, '-' where not measured, '' on the diagonal."""
    if a == b:
        return ""
    r, n = float(entry(matrix.r, a, b)), int(entry(matrix.n, a, b))
    if not math.isfinite(r):
        return fmt.UNDEFINED if entry(matrix.measured, a, b) else fmt.UNKNOWN
    low, high = matrix.interval(a, b)
    interval = f"[{low:.2f}, {high:.2f}]" if math.isfinite(low) else f"[{fmt.UNDEFINED}: n<{MIN_FISHER_POINTS}]"
    metrics = int(entry(matrix.metrics, a, b))
    averaged = f", {metrics} of {matrix.n_metrics} metrics" if metrics != matrix.n_metrics else ""
    return f"{r:.2f} {interval} (n={n}{averaged})"


def quantity_rows(matrix: QuantityMatrix) -> TextTable:
    """Table 4 as text (`entry_text`), the quantities measured with no other one left out."""
    shown = matrix.shown()
    return ["", *shown], [[a, *(entry_text(matrix, a, b) for b in shown)] for a in shown]


def quantity_csv(matrix: QuantityMatrix) -> pd.DataFrame:
    """Table 4 as quantities.csv: one row per pair of quantities shown (CSV_COLUMNS): r, its 95%
    Fisher z interval, n, the metrics averaged, and a note where a number is missing and why."""
    import pandas as pd

    shown = matrix.shown()
    rows = []
    for i, a in enumerate(shown):
        for b in shown[i + 1 :]:
            r, n = float(entry(matrix.r, a, b)), int(entry(matrix.n, a, b))
            low, high = matrix.interval(a, b)
            note = (
                ("" if math.isfinite(low) else f"no interval: n < {MIN_FISHER_POINTS}")
                if math.isfinite(r)
                else "n/a: a quantity constant across the encoders"
                if entry(matrix.measured, a, b)
                else "not measured"
            )
            rows.append([a, b, r, low, high, n, int(entry(matrix.metrics, a, b)), note])
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


def quantity_note(matrix: QuantityMatrix, quality: str = "") -> str:
    """The note under Table 4; `quality` says which quality its quality column(s) hold (e.g.
    'pearson (global), against human dimension relevance')."""
    which = (
        f" The quality column(s): {quality}, per encoder the mean over its datasets (per kind of human score)."
        if quality
        else ""
    )
    if not matrix.n_metrics:
        return (
            f"No matrix: no metric has {MIN_ENCODERS} or more encoders with these quantities measured (through "
            f"2 points every correlation is +-1).{which}"
        )
    left_out = matrix.unmeasured()
    return (
        f"Pearson r across encoders, per metric with at least {MIN_ENCODERS} encoders ({matrix.n_metrics} here), "
        f"averaged over metrics; [low, high]: its 95% Fisher z interval from n, the encoders behind each metric's r "
        f"(the fewest, where they differ: the metrics share their encoders, so averaging over them adds none "
        f"and the interval is that of one metric's r); n/a below {MIN_FISHER_POINTS} encoders. Nothing resampled "
        f"and no test: with few encoders these are descriptive.{which} '-': not measured; n/a: a quantity "
        "constant across the encoders (e.g. the disk "
        "size of one checkpoint run at fewer layers)."
        + (f" Left out, measured with no other quantity: {', '.join(left_out)}." if left_out else "")
    )
