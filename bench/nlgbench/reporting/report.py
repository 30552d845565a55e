"""`nlgbench report DIR`: the efficiency-quality trade-off of a run folder, for people to read and
for papers to print.

Writes DIR/report/:

- per device and dataset, runtime-vs-quality and memory-vs-quality figures (PNG, PDF, SVG): one
  panel per metric (memory: model memory beside process peak), every encoder in its own colour and
  marker throughout, the 95% bootstrap interval of each quality as a bar, the Pareto front, the
  baseline starred, lexical baselines (no encoder) as grey diamonds in every panel; a figure of
  the mean over datasets only for datasets of one kind of human score (`score_type`: DA, MQM,
  a named dimension), titled as such;
- the trade-off table (`tradeoff.{md,tex,csv}`): per metric x dataset x device, each encoder's
  quality, quality retained with its paired-bootstrap interval, speed-up with its range and the
  bootstrap p-value against the baseline, the numbers `nlgbench compare` prints;
- the baseline-relative table (`relative.*`, quality retained and speed-up per dataset, with a
  mean per kind of human score where there are several datasets of it; the study's Table 3), the
  correlation matrix of the measured quantities with the number of encoders behind each entry
  (`quantities.*`; Table 4), and an offline index.html showing all of it;
- `cells.jsonl` and `metric_scores.csv` (nlgbench.runs.rundata.write_published): what report and compare
  need to run again from this folder alone, without human scores or texts.

A cell whose quality is undefined (constant human or metric scores, too few segments) shows "n/a"
with the reason and is left out of the plots.
"""

from __future__ import annotations

import html
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pandas as pd

from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.reporting.quality import QualityOptions  # noqa: F401  (re-exported: report's and compare's quality)
from nlgbench.foundations.files import write_atomic
from nlgbench.runs.folder import check_links, own_folder
from nlgbench.runs.rundata import RunData, load_run, memory_columns, write_published
from nlgbench.statistics.stats import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, GROUPING, LEVEL_ALIASES, LEVELS, METHODS, Segments,
                            canonical_level, has_docs, has_systems, left_out_note, percentile_interval, quality,
                            quality_note, speedup, too_small_lps)
from nlgbench.reporting.tables import markdown

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

QUANTITIES = {  # Table 4's measured quantities: column -> readable name; then quality per kind of human score
    "cpu_ms": "CPU time", "gpu_ms": "GPU time", "model_mb": "model memory", "params": "parameters",
    "disk_mb": "disk",
}
MIN_ENCODERS = 3  # a metric's quantity correlations need at least this many encoders
FIGURE_FORMATS = ("png", "pdf", "svg")
DPI = 200  # figures are drawn (and PNGs saved) at this resolution
LABEL_SIZE = 8  # points: labels beside the plotted points
PALETTE = ("tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
MARKERS = ("o", "s", "^", "v", "P", "X", "h", "<", ">")
ANCHOR_COLOR, FRONT_COLOR = "tab:gray", "tab:orange"  # lexical baselines; the Pareto front


def with_quality(run: RunData, options: QualityOptions, cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """The run's cells (or `cells`, some of them) with a `quality` column recomputed from segment
    scores, `lps_left_out`: the language pairs too small for the level (see
    nlgbench.statistics.stats.too_small_lps), and `quality_note`: why quality is undefined ('' when defined)."""
    options.check()
    df = (run.cells if cells is None else cells).copy()
    segments = [run.segments(c) for c in df["cell_id"]]
    options.check_segments(segments)
    df["quality"] = [options.value(seg) for seg in segments]
    df["lps_left_out"] = [tuple(too_small_lps(seg, options.level)) for seg in segments]
    df["quality_note"] = [quality_note(seg, options.method, options.level, options.threshold) if not math.isfinite(q)
                          else "" for seg, q in zip(segments, df["quality"])]
    return df


def left_out_notes(df: pd.DataFrame, level: str) -> list[str]:
    """Per dataset, the line naming the language pairs its cells leave out of the level's mean."""
    by_dataset = {d: lps for d, lps in zip(df["dataset"], df["lps_left_out"]) if lps}
    return [f"{dataset}: {left_out_note(level, lps)}" for dataset, lps in by_dataset.items()]


def undefined_quality_notes(df: pd.DataFrame) -> list[str]:
    """One line per cell whose quality is undefined, with the reason (these are not plotted)."""
    return [f"quality n/a for {r['metric']} / {r['encoder']} / {r['dataset']} / {r['device']}: {r['quality_note']}"
            for _, r in df.iterrows() if not math.isfinite(r["quality"])]


def pareto_front(times: Sequence[float], qualities: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats (as fast or faster and as good or better,
    strictly better in one), ordered by time."""
    pts = [(t, q, i) for i, (t, q) in enumerate(zip(times, qualities)) if math.isfinite(t) and math.isfinite(q)]
    front = []
    for t, q, i in pts:
        dominated = any((t2 <= t and q2 >= q) and (t2 < t or q2 > q) for t2, q2, _ in pts)
        if not dominated:
            front.append((t, i))
    return [i for _, i in sorted(front)]


def choose_baselines(df: pd.DataFrame, baseline: str | None) -> dict[str, str]:
    """The baseline encoder of each metric: the one asked for, else the one with the most parameters."""
    out = {}
    for metric, group in df.groupby("metric", sort=False):
        encoders = list(dict.fromkeys(group["encoder"]))
        if baseline is not None:
            if baseline in encoders:
                out[metric] = baseline
            continue
        timed = group.dropna(subset=["params"])
        out[metric] = str(timed.sort_values("params", ascending=False)["encoder"].iloc[0]) if len(timed) else encoders[0]
    if baseline is not None and not out:
        raise unknown_name("baseline encoder", baseline, sorted(set(df["encoder"])))
    return out


def _score_types(df: pd.DataFrame) -> pd.Series:
    """Each row's kind of human score (nlgbench.runs.rundata.score_type); one kind for frames without it."""
    return df["score_type"] if "score_type" in df else pd.Series([""] * len(df), index=df.index)


def mean_label(score_type: str) -> str:
    """The dataset column of a mean over the datasets of one kind of human score: 'mean (DA)'."""
    return f"mean ({score_type})" if score_type else "mean"


def relative_table(df: pd.DataFrame, baselines: dict[str, str]) -> pd.DataFrame:
    """Table 3: per metric x encoder x device and dataset, quality, quality retained (quality /
    baseline quality) and speed-up (`nlgbench.statistics.stats.speedup`: median baseline time / median time);
    a mean row per kind of human score (`mean (DA)`) where the encoder has two or more datasets of it."""
    rows = []
    df = df.assign(score_type=_score_types(df))
    for (metric, device), group in df.groupby(["metric", "device"], sort=False):
        if metric not in baselines:
            continue
        base = group[group["encoder"] == baselines[metric]].set_index("dataset")
        for encoder, enc_rows in group.groupby("encoder", sort=False):
            per = []
            for _, r in enc_rows.iterrows():
                b = base.loc[r["dataset"]] if r["dataset"] in base.index else None
                retained = r["quality"] / b["quality"] if b is not None else np.nan
                speed = speedup(b["ms_per_segment_repeats"], r["ms_per_segment_repeats"]).value if b is not None else np.nan
                per.append({"metric": metric, "encoder": encoder, "device": device, "dataset": r["dataset"],
                            "baseline": baselines[metric], "quality": r["quality"], "retained": retained,
                            "ms_per_segment": r["ms_per_segment"], "speedup": speed, "score_type": r["score_type"]})
            for kind in dict.fromkeys(p["score_type"] for p in per):
                same = [p for p in per if p["score_type"] == kind]
                rows += same
                if len(same) < 2:
                    continue  # one dataset: its row is the mean
                rows.append({"metric": metric, "encoder": encoder, "device": device, "dataset": mean_label(kind),
                             "baseline": baselines[metric], "score_type": kind,
                             **{k: float(np.nanmean([p[k] for p in same])) if any(np.isfinite(p[k]) for p in same)
                                else np.nan for k in ("quality", "retained", "ms_per_segment", "speedup")}})
    return pd.DataFrame(rows)


def quality_columns(df: pd.DataFrame) -> list[str]:
    """per_encoder's quality column(s): `quality`, or one per kind of human score, `quality (DA)`,
    `quality (MQM)`, where the cells have several (correlations with different kinds of human
    scores are not averaged)."""
    kinds = list(dict.fromkeys(_score_types(df)))
    return ["quality"] if len(kinds) <= 1 else [f"quality ({k})" for k in kinds]


def per_encoder(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4's inputs: per metric x encoder, the quantities averaged over datasets (quality per
    kind of human score, `quality_columns`); model memory is RSS growth over the post-import
    baseline on CPU, peak CUDA memory allocated on GPU; peak memory the process peak (peak RSS on
    CPU, peak CUDA memory reserved on GPU)."""
    rows = []
    kinds = _score_types(df)
    columns = quality_columns(df)
    for (metric, encoder), g in df.groupby(["metric", "encoder"], sort=False):
        cpu, gpu = g[g["device"] == "cpu"], g[g["device"] == "cuda"]
        qualities = ({"quality": g["quality"].mean()} if columns == ["quality"] else
                     {f"quality ({k})": g[kinds[g.index] == k]["quality"].mean() for k in dict.fromkeys(kinds)})
        rows.append({
            "metric": metric, "encoder": encoder,
            "cpu_ms": cpu["ms_per_segment"].mean() if len(cpu) else np.nan,
            "gpu_ms": gpu["ms_per_segment"].mean() if len(gpu) else np.nan,
            "model_mb": cpu["rss_growth_mb"].mean() if len(cpu) else gpu["cuda_peak_allocated_mb"].mean(),
            "peak_mb": cpu["peak_rss_mb"].mean() if len(cpu) else gpu["cuda_peak_reserved_mb"].mean(),
            "params": g["params"].mean(), "disk_mb": g["disk_mb"].mean(), **qualities,
        })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class QuantityMatrix:
    """Table 4: `r`, the Pearson correlation of two measured quantities across encoders, per metric
    (metrics with at least MIN_ENCODERS encoders), averaged over metrics; `n`, the encoders behind
    each entry, summed over the metrics averaged; `measured`, whether both quantities were measured
    on enough encoders (r NaN where measured: a quantity constant across a metric's encoders)."""

    r: pd.DataFrame
    n: pd.DataFrame
    measured: pd.DataFrame
    n_metrics: int


def quantity_correlations(df: pd.DataFrame, min_encoders: int = MIN_ENCODERS) -> QuantityMatrix:
    """Table 4 from the cells (see QuantityMatrix); a metric with fewer than `min_encoders`
    encoders has no matrix (through 2 points every correlation is +-1)."""
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
        counts.append(np.where(np.isfinite(r), both, 0))
        measured.append(both >= min_encoders)
    if not mats:
        return QuantityMatrix(pd.DataFrame(np.nan, index=names, columns=names),
                              pd.DataFrame(0, index=names, columns=names),
                              pd.DataFrame(False, index=names, columns=names), 0)
    with np.errstate(invalid="ignore"), _quiet():
        mean = np.nanmean(np.stack(mats), axis=0)
    return QuantityMatrix(pd.DataFrame(mean, index=names, columns=names),
                          pd.DataFrame(np.sum(counts, axis=0), index=names, columns=names),
                          pd.DataFrame(np.any(measured, axis=0), index=names, columns=names), len(mats))


class _quiet:
    """Silence numpy's 'mean of empty slice' warning (an all-NaN cell stays NaN, which is what we want)."""

    def __enter__(self) -> None:
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)


# ----------------------------------------------------------------------------- intervals of plotted points


class QualityIntervals:
    """95% bootstrap intervals of cells' quality, resampling segments (nlgbench.statistics.stats; the resampled
    qualities kept by the run, `RunData.replicates`, which compare's paired tests reuse). One
    cell's interval is `bootstrap_ci` of its segments with `seed`; a mean over the cells of several
    datasets resamples each dataset on its own stream (seed, seed + 1, ...) and takes the
    percentile interval of the resampled means."""

    def __init__(self, run: RunData, options: QualityOptions, n_resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> None:
        self.run, self.options, self.n_resamples, self.seed = run, options, n_resamples, seed

    def replicates(self, cell_id: str, seed: int) -> np.ndarray:
        return self.run.replicates(cell_id, self.options, self.options.value, self.n_resamples, seed)

    def interval(self, cell_ids: Sequence[str]) -> tuple[float, float]:
        if len(cell_ids) == 1:
            return percentile_interval(self.replicates(cell_ids[0], self.seed))
        stacked = np.stack([self.replicates(c, self.seed + k) for k, c in enumerate(cell_ids)])
        return percentile_interval(stacked.mean(axis=0))


# ----------------------------------------------------------------------------- what a figure shows


@dataclass(frozen=True)
class DatasetGroup:
    """The datasets one figure shows: one dataset, or the mean over the datasets of one kind of human score."""

    name: str  # the dataset's label, or mean_label(kind)
    datasets: tuple[str, ...]
    score_type: str

    @property
    def title(self) -> str:
        if len(self.datasets) == 1:
            return f"{self.datasets[0]} ({self.score_type})" if self.score_type else self.datasets[0]
        kind = f"{self.score_type} " if self.score_type else ""
        return f"mean over the {len(self.datasets)} {kind}datasets ({', '.join(self.datasets)})"


def dataset_groups(df: pd.DataFrame) -> list[DatasetGroup]:
    """Every dataset on its own, then per kind of human score with two or more datasets their mean."""
    kinds = dict(zip(df["dataset"], _score_types(df)))
    groups = [DatasetGroup(d, (d,), kind) for d, kind in kinds.items()]
    for kind in dict.fromkeys(kinds.values()):
        same = tuple(d for d, k in kinds.items() if k == kind)
        if len(same) > 1:
            groups.append(DatasetGroup(mean_label(kind), same, kind))
    return groups


def slug(text: str) -> str:
    """A file-name part: `wmt16[:100]` -> `wmt16_100`, `mean (DA)` -> `mean_DA`."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_") or "data"


def figure_points(df: pd.DataFrame, group: DatasetGroup, columns: Sequence[str],
                  intervals: QualityIntervals) -> pd.DataFrame:
    """Per metric x encoder with a cell of defined quality in every dataset of the group: each of
    `columns` and the quality averaged over those datasets, with the quality's 95% interval
    (`ci_low`, `ci_high`); cells of one device (the caller's)."""
    rows = []
    data = df[df["dataset"].isin(group.datasets) & np.isfinite(df["quality"].astype(float))]
    for (metric, encoder), g in data.groupby(["metric", "encoder"], sort=False):
        cells = [g[g["dataset"] == d] for d in group.datasets]
        if any(len(c) != 1 for c in cells):
            continue  # not measured on every dataset of the group: its mean would be over others
        cells_df = pd.concat(cells)
        lo, hi = intervals.interval(list(cells_df["cell_id"]))
        rows.append({"metric": metric, "encoder": encoder, "quality": float(cells_df["quality"].mean()),
                     "ci_low": lo, "ci_high": hi, "cell_ids": tuple(cells_df["cell_id"]),
                     **{c: float(cells_df[c].astype(float).mean()) for c in columns}})
    return pd.DataFrame(rows, columns=["metric", "encoder", "quality", "ci_low", "ci_high", "cell_ids", *columns])


# ----------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Style:
    color: str
    marker: str


def encoder_styles(encoders: Sequence[str]) -> dict[str, Style]:
    """A colour and marker per encoder, the same in every panel and figure of a report (encoders in
    the order given); no encoder (`none`, lexical baselines) is a grey diamond."""
    styles = {NO_ENCODER: Style(ANCHOR_COLOR, "D")}
    models = [e for e in dict.fromkeys(encoders) if e != NO_ENCODER]
    for i, encoder in enumerate(models):  # pairs of colour and marker stay distinct past 8 encoders
        styles[encoder] = Style(PALETTE[i % len(PALETTE)], MARKERS[(i + i // len(PALETTE)) % len(MARKERS)])
    return styles


def log_ticks(lo: float, hi: float) -> tuple[list[float], float, float]:
    """Labelled ticks of a log axis from lo to hi (> 0), readable in any range: over a decade or
    more, powers of ten where three fit, else 1-2-5 steps; within one decade, at least 3 round
    values (1, 2, 2.5 or 5 times a power of ten apart). Returns (ticks, lo, hi), the limits widened by
    10% each way when lo == hi."""
    from matplotlib.ticker import MaxNLocator

    if hi <= lo:
        lo, hi = lo / 1.1, hi * 1.1

    def steps(mantissas: Sequence[int]) -> list[float]:
        out = []
        for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
            out += [v for m in mantissas if lo <= (v := float(f"{m}e{k}")) <= hi]
        return out

    if hi / lo >= 10:
        powers = steps((1,))
        return (powers if len(powers) >= 3 else steps((1, 2, 5))), lo, hi
    for bins in (5, 8, 12):
        values = MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        ticks = [float(f"{v:.12g}") for v in values if lo <= v <= hi and v > 0]
        if len(ticks) >= 3:
            break
    return ticks, lo, hi


def _set_log_x(ax: Axes, values: Sequence[float]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    finite = [v for v in values if math.isfinite(v) and v > 0]
    lo, hi = math.log10(min(finite)), math.log10(max(finite))
    pad = max(0.12 * (hi - lo), 0.08)  # decades
    ticks, a, b = log_ticks(10 ** (lo - pad), 10 ** (hi + pad))
    ax.set_xscale("log")
    ax.set_xlim(a, b)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _set_y(ax: Axes, values: Sequence[float]) -> None:
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = min(finite), max(finite)
    pad = max(0.1 * (hi - lo), 0.01)
    ax.set_ylim(lo - pad, hi + pad)


def _draw_pareto(ax: Axes, xs: np.ndarray, qs: np.ndarray) -> None:
    """The Pareto front as the boundary of what its points dominate (a dashed staircase from the
    bottom of the axes to its right edge), its points ringed: visible for one point too."""
    front = pareto_front(list(xs), list(qs))
    if not front:
        return
    fx, fq = xs[front], qs[front]
    (y0, _), (_, x1) = ax.get_ylim(), ax.get_xlim()
    px, py = [fx[0]], [y0]
    for i in range(len(front)):
        px += [fx[i], fx[i + 1] if i + 1 < len(front) else x1]
        py += [fq[i], fq[i]]
    ax.plot(px, py, linestyle="--", color=FRONT_COLOR, linewidth=1.2, zorder=1)
    ax.scatter(fx, fq, s=170, facecolors="none", edgecolors=FRONT_COLOR, linewidths=1.5, zorder=2)


def _draw_points(ax: Axes, pts: pd.DataFrame, x: str, styles: dict[str, Style]) -> None:
    for _, p in pts.iterrows():
        style = styles[p["encoder"]]
        err = None
        if math.isfinite(p["ci_low"]) and math.isfinite(p["ci_high"]):
            err = [[max(0.0, p["quality"] - p["ci_low"])], [max(0.0, p["ci_high"] - p["quality"])]]
        ax.errorbar([p[x]], [p["quality"]], yerr=err, fmt=style.marker, color=style.color, markersize=7,
                    markeredgecolor="white", markeredgewidth=0.6, capsize=3, elinewidth=1.1, zorder=3)


@dataclass(frozen=True)
class PointLabel:
    """A label to place beside a plotted point, which with its interval bar (low..high) and a marker
    of `radius` points the label should not cover."""

    x: float
    y: float
    text: str
    color: str
    low: float
    high: float
    radius: float = 6.0


def _panel(ax: Axes, pts: pd.DataFrame, anchors: pd.DataFrame, x: str, xlabel: str, ylabel: str, title: str,
           styles: dict[str, Style], baseline: str | None) -> list[PointLabel]:
    """One metric's panel; returns the labels to place."""
    _draw_points(ax, anchors, x, styles)
    _draw_points(ax, pts, x, styles)
    base = pts[pts["encoder"] == baseline]
    if len(base):
        ax.scatter(base[x], base["quality"], marker="*", s=420, facecolors="none", edgecolors="black",
                   linewidths=1.0, zorder=2)
    every = pd.concat([pts, anchors])
    _set_log_x(ax, list(every[x]))
    _set_y(ax, [*every["quality"], *every["ci_low"], *every["ci_high"]])
    _draw_pareto(ax, pts[x].to_numpy(float), pts["quality"].to_numpy(float))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return ([PointLabel(p[x], p["quality"], _short(p["encoder"]), "black", p["ci_low"], p["ci_high"],
                        11.0 if p["encoder"] == baseline else 6.0) for _, p in pts.iterrows()]
            + [PointLabel(a[x], a["quality"], str(a["metric"]), ANCHOR_COLOR, a["ci_low"], a["ci_high"])
               for _, a in anchors.iterrows()])


def _legend_handles(encoders: Sequence[str], styles: dict[str, Style], anchors: bool, baseline: bool) -> list[Any]:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], linestyle="none", marker=styles[e].marker, color=styles[e].color, markersize=7,
                      markeredgecolor="white", label=e) for e in encoders]
    if anchors:
        handles.append(Line2D([], [], linestyle="none", marker="D", color=ANCHOR_COLOR, markersize=6,
                              label="lexical baseline (no encoder)"))
    if baseline:
        handles.append(Line2D([], [], linestyle="none", marker="*", markersize=14, markerfacecolor="none",
                              markeredgecolor="black", label="baseline encoder"))
    handles.append(Line2D([], [], linestyle="--", color=FRONT_COLOR, marker="o", markersize=10, markerfacecolor="none",
                          markeredgecolor=FRONT_COLOR, label="Pareto front"))
    handles.append(Line2D([], [], linestyle="none", marker="|", markersize=14, color="black",
                          label="95% bootstrap interval"))
    return handles


def tradeoff_figure(points: pd.DataFrame, columns: Sequence[tuple[str, str]], quality_label: str,
                    styles: dict[str, Style], baselines: dict[str, str], title: str) -> Figure | None:
    """One panel per metric and x column (`columns`: (column, axis label); two columns put a metric's
    panels side by side), quality on y with its interval, x on a log scale, the Pareto front, the
    baseline starred, a legend of every encoder below; metrics without an encoder (lexical
    baselines) are grey diamonds in every panel (their own panels when there is nothing else).
    Point labels stay inside their axes. None when there is nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = points[np.all([(points[c] > 0) & np.isfinite(points[c]) for c, _ in columns], axis=0)] if len(points) else points
    is_anchor = points["encoder"] == NO_ENCODER
    if len(points) and is_anchor.all():
        is_anchor = ~is_anchor  # only lexical metrics: each gets its own panel
    anchors, data = points[is_anchor], points[~is_anchor]
    metrics = list(dict.fromkeys(data["metric"]))
    if not metrics:
        return None
    if len(columns) == 1:
        ncols = min(3, len(metrics))
        cells = [(m, columns[0]) for m in metrics]
    else:
        ncols = len(columns)
        cells = [(m, c) for m in metrics for c in columns]
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(4.6 * ncols, 7.0), 3.7 * nrows + 0.9), squeeze=False, dpi=DPI,
                             layout="constrained")
    labels: list[tuple[Axes, list[PointLabel]]] = []
    for ax, (metric, (x, xlabel)) in zip(axes.flat, cells):
        pts = data[data["metric"] == metric]
        labels.append((ax, _panel(ax, pts, anchors, x, xlabel, quality_label, str(metric), styles, baselines.get(metric))))
    for ax in list(axes.flat)[len(cells):]:
        ax.set_visible(False)
    encoders = [e for e in styles if e in set(data["encoder"])]
    has_base = any((data["encoder"] == baselines.get(m)).any() for m in metrics)
    handles = _legend_handles(encoders, styles, bool(len(anchors)), has_base)
    _fit_title_and_legend(fig, title, handles)  # the layout is final before labels are placed (they take no part in it)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax, items in labels:
        place_labels(ax, items, renderer)
    return fig


def _fit_title_and_legend(fig: Figure, title: str, handles: list[Any]) -> None:
    """The title wrapped and the legend (below the panels) in as many columns (at most 3) as fit
    the figure's width; drawn, so the layout is final."""
    import textwrap

    width = fig.bbox.width
    for columns in range(min(3, len(handles)), 0, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncols=columns, fontsize=8, frameon=False)
        fig.canvas.draw()
        if legend.get_window_extent().width <= width or columns == 1:
            break
        legend.remove()
    extra = legend.get_window_extent().height / fig.dpi - 0.6  # inches of legend beyond what the height allows for
    if extra > 0:  # many or long legend entries: a taller figure, not flatter panels
        fig.set_figheight(fig.get_figheight() + extra)
    for chars in range(90, 20, -10):
        text = fig.suptitle("\n".join(textwrap.fill(line, chars) for line in title.splitlines()), fontsize=11)
        fig.canvas.draw()
        if text.get_window_extent().width <= width:
            break


def _short(name: str) -> str:
    return name.split("/")[-1]


_OFFSETS = ((6, 0, "left", "center"), (-6, 0, "right", "center"), (0, 7, "center", "bottom"),
            (0, -7, "center", "top"), (5, 5, "left", "bottom"), (5, -5, "left", "top"), (-5, 5, "right", "bottom"),
            (-5, -5, "right", "top"))  # points from the marker, text alignment


def place_labels(ax: Axes, items: Sequence[PointLabel], renderer: Any) -> list[Any]:
    """Annotate each point beside it, inside the axes: the first position (right, left, above,
    below, diagonals; then farther out with a leader line) whose text lies inside the axes and
    covers no other label, marker or interval bar; where none is free, the inside position
    covering least; a label wider than the axes is shortened ('...') until it fits."""
    from matplotlib.transforms import Bbox

    box = ax.get_window_extent(renderer).padded(-2)
    pixels = DPI / 72
    obstacles = []  # (index of the point, box in pixels): markers and interval bars
    for k, item in enumerate(items):
        mx, my = ax.transData.transform((item.x, item.y))
        r = item.radius * pixels
        obstacles.append((k, Bbox([[mx - r, my - r], [mx + r, my + r]])))
        if math.isfinite(item.low) and math.isfinite(item.high):
            (_, y0), (_, y1) = ax.transData.transform([(item.x, item.low), (item.x, item.high)])
            obstacles.append((-1, Bbox([[mx - 3 * pixels, y0], [mx + 3 * pixels, y1]])))
    placed: list[Any] = []
    out = []

    def overlap(a: Any, b: Any) -> float:
        w, h = min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def cost(b: Any, own: int) -> float:
        if not (b.x0 >= box.x0 and b.x1 <= box.x1 and b.y0 >= box.y0 and b.y1 <= box.y1):
            return math.inf
        return sum(overlap(b, o) for k, o in obstacles if k != own) + sum(overlap(b, other) for other in placed)

    def best_position(k: int, x: float, y: float, text: str, color: str) -> Any | None:
        best: tuple[float, Any] | None = None
        for scale in (items[k].radius / 6, 2.6, 4.2):  # beside the marker (a baseline's star is larger), then farther
            for dx, dy, ha, va in _OFFSETS:
                arrow = {"arrowstyle": "-", "color": "0.5", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 4} if scale > 2 else None
                ann = ax.annotate(text, (x, y), xytext=(dx * scale, dy * scale), textcoords="offset points", ha=ha,
                                  va=va, fontsize=LABEL_SIZE, color=color, arrowprops=arrow, zorder=5)
                ann.set_in_layout(False)
                c = cost(ann.get_window_extent(renderer), k)
                if best is None or c < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (c, ann)
                else:
                    ann.remove()
                if best[0] == 0:
                    return best[1]
        if best is not None and math.isfinite(best[0]):
            return best[1]
        if best is not None:
            best[1].remove()
        return None

    for k, item in enumerate(items):
        shown = item.text
        ann = best_position(k, item.x, item.y, shown, item.color)
        while ann is None and len(shown) > 4:  # wider than the axes everywhere: shorten it
            shown = shown[: len(shown) - 4 if not shown.endswith("...") else len(shown) - 7] + "..."
            ann = best_position(k, item.x, item.y, shown, item.color)
        if ann is not None:
            placed.append(ann.get_window_extent(renderer))
            out.append(ann)
    return out


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """The figure as PNG (DPI), PDF and SVG (text kept as text, TrueType fonts in the PDF), without
    creation dates, so a regenerated report differs only where its content does."""
    import matplotlib.pyplot as plt

    metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None},
                "svg": {"Date": None, "Creator": None}}
    paths = []
    with plt.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "nlgbench"}):
        for ext in FIGURE_FORMATS:
            path = stem.with_name(f"{stem.name}.{ext}")
            image = io.BytesIO()
            fig.savefig(image, format=ext, dpi=DPI, metadata=metadata[ext])
            write_atomic(path, image.getvalue())
            paths.append(path)
    plt.close(fig)
    return paths


RUNTIME_COLUMNS = [("ms_per_segment", "ms per segment (median of repeats, log)")]


@dataclass(frozen=True)
class FigureFile:
    title: str
    device: str
    group: DatasetGroup
    paths: list[Path]  # png, pdf, svg


def build_figures(df: pd.DataFrame, options: QualityOptions, baselines: dict[str, str],
                  intervals: QualityIntervals) -> Iterator[tuple[str, str, str, DatasetGroup, Figure]]:
    """Runtime and memory figures per device and dataset group (see `dataset_groups`), each as
    (file name stem, title, device, group, figure); encoder styles shared by all of them."""
    styles = encoder_styles(list(df["encoder"]))
    names: set[str] = set()
    note = (f"bars: 95% bootstrap interval of the quality ({intervals.n_resamples} resamples of segments, "
            f"seed {intervals.seed})")
    for device in dict.fromkeys(df["device"]):
        cells = df[df["device"] == device]
        for group in dataset_groups(cells):
            for kind, columns in (("runtime", RUNTIME_COLUMNS), ("memory", memory_columns(device))):
                points = figure_points(cells, group, [c for c, _ in columns], intervals)
                title = f"{kind.capitalize()} vs quality, {device}, {group.title}"
                fig = tradeoff_figure(points, columns, options.label, styles, baselines, f"{title}\n{note}")
                if fig is None:
                    continue
                name = f"{kind}_{device}_{slug(group.name)}"
                while name in names:
                    name += "_"
                names.add(name)
                yield name, title, device, group, fig


def write_figures(df: pd.DataFrame, out: Path, options: QualityOptions, baselines: dict[str, str],
                  intervals: QualityIntervals) -> list[FigureFile]:
    """`build_figures`, each saved as PNG, PDF and SVG into `out`."""
    return [FigureFile(title, device, group, save_figure(fig, out / name))
            for name, title, device, group, fig in build_figures(df, options, baselines, intervals)]


# ----------------------------------------------------------------------------- tables


def relative_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Table 3 as text: 'n/a' for an undefined quality (and so its retained share), '-' for
    what is unknown (no baseline cell, no timing)."""
    header = ["metric", "encoder", "device", "dataset", "quality", "retained", "ms/seg", "speed-up"]
    rows = [[r["metric"], r["encoder"], r["device"], r["dataset"], fmt.number(r["quality"], missing=fmt.UNDEFINED),
             fmt.percent(r["retained"], missing=fmt.UNDEFINED if not math.isfinite(r["quality"]) else fmt.UNKNOWN),
             fmt.number(r["ms_per_segment"], 1), fmt.times(r["speedup"])] for _, r in table.iterrows()]
    return header, rows


TRADEOFF_COLUMNS = ["metric", "dataset", "device", "encoder", "baseline", "n", "quality", "retained", "retained_ci_low",
                    "retained_ci_high", "speedup", "speedup_low", "speedup_high", "p_bootstrap"]


def tradeoff_table(run: RunData, df: pd.DataFrame, baselines: dict[str, str], options: QualityOptions,
                   n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """The paper's quality-vs-speed table: per metric (with encoders) x dataset x device, the
    baseline encoder's row, then each other encoder's quality, quality retained with its paired
    bootstrap interval, speed-up with its range and the bootstrap p-value against the baseline:
    `nlgbench.reporting.compare.compare`'s numbers, with its resamples and seed."""
    from nlgbench.reporting.compare import compare

    rows = []
    for metric, base in baselines.items():
        if base == NO_ENCODER:
            continue  # lexical metrics: no encoder to trade
        cells = df[df["metric"] == metric]
        for _, b in cells[cells["encoder"] == base].iterrows():
            repeats = b["ms_per_segment_repeats"]
            rows.append({"metric": metric, "dataset": b["dataset"], "device": b["device"] if not b["imported"] else "imported",
                         "encoder": base, "baseline": base, "n": len(run.segments(b["cell_id"])), "quality": b["quality"],
                         "retained": 1.0 if math.isfinite(b["quality"]) and b["quality"] else math.nan,
                         "retained_ci_low": math.nan, "retained_ci_high": math.nan,
                         "speedup": 1.0 if len(repeats) else math.nan, "speedup_low": math.nan, "speedup_high": math.nan,
                         "p_bootstrap": math.nan})
        for encoder in dict.fromkeys(cells["encoder"]):
            if encoder == base:
                continue
            try:
                result = compare(run, encoder, base, metric, options, n_resamples=n_resamples, seed=seed)
            except UserError:
                continue  # no cell pairs with the baseline's (other datasets or devices)
            for r in result["rows"]:
                rows.append({"metric": metric, "dataset": r["dataset"], "device": r["device"], "encoder": encoder,
                             "baseline": base, "n": r["n"], "quality": r["quality_candidate"], "retained": r["retained"],
                             "retained_ci_low": r["retained_ci"][0], "retained_ci_high": r["retained_ci"][1],
                             "speedup": r["speedup"], "speedup_low": r["speedup_range"][0],
                             "speedup_high": r["speedup_range"][1], "p_bootstrap": r["p_bootstrap"]})
    table = pd.DataFrame(rows, columns=TRADEOFF_COLUMNS)
    order = {k: i for i, k in enumerate(dict.fromkeys(df["metric"]))}
    datasets = {k: i for i, k in enumerate(dict.fromkeys(df["dataset"]))}
    encoders = {k: i for i, k in enumerate(dict.fromkeys(df["encoder"]))}
    key = table.apply(lambda r: (order[r["metric"]], datasets[r["dataset"]], r["device"].split(" / ")[0],
                                 r["encoder"] != r["baseline"], encoders[r["encoder"]]), axis=1) if len(table) else []
    return table.iloc[sorted(range(len(table)), key=lambda i: key.iloc[i])].reset_index(drop=True) if len(table) else table


def tradeoff_rows(table: pd.DataFrame, n_resamples: int) -> tuple[list[str], list[list[str]]]:
    """The trade-off table as text; the baseline's own row says 'baseline' for its p-value."""
    header = ["metric", "dataset", "device", "encoder", "n", "quality", "retained [95% CI]", "speed-up [range]",
              "p vs baseline"]
    rows = []
    for _, r in table.iterrows():
        is_base = r["encoder"] == r["baseline"]
        rows.append([r["metric"], r["dataset"], r["device"], r["encoder"], str(r["n"]),
                     fmt.number(r["quality"], missing=fmt.UNDEFINED),
                     fmt.percent_ci(r["retained"], r["retained_ci_low"], r["retained_ci_high"], missing=fmt.UNDEFINED),
                     fmt.times_range(r["speedup"], r["speedup_low"], r["speedup_high"]),
                     "baseline" if is_base else fmt.p_value(r["p_bootstrap"], n_resamples, missing=fmt.UNDEFINED)])
    return header, rows


def latex(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 4,
          comments: Sequence[str] = ()) -> str:
    """A booktabs tabular; the first `text_columns` columns left-aligned, the rest right-aligned;
    `comments` as % lines above it."""
    special = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "_": "\\_", "#": "\\#", "$": "\\$",
               "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}"}

    def esc(text: str) -> str:
        return "".join(special.get(ch, ch) for ch in text)

    lines = [f"% {c}" for c in comments]
    lines += ["\\begin{tabular}{" + "l" * text_columns + "r" * (len(header) - text_columns) + "}", "\\toprule",
              " & ".join(esc(h) for h in header) + " \\\\", "\\midrule"]
    lines += [" & ".join(esc(c) for c in r) + " \\\\" for r in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "", text_columns: int = 2) -> str:
    """A table for index.html; the first `text_columns` columns left-aligned, numbers right-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class='t'>{html.escape(c)}</td>" if k < text_columns else
                                    f"<td>{html.escape(c)}</td>" for k, c in enumerate(r)) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def quantity_rows(matrix: QuantityMatrix) -> tuple[list[str], list[list[str]]]:
    """Table 4 as text: 'r (n)' off the diagonal, n the encoders behind it; '-' where not measured,
    'n/a' where a quantity is constant; the diagonal blank."""
    header = ["", *matrix.r.columns]
    rows = []
    for name in matrix.r.index:
        cells = []
        for other in matrix.r.columns:
            r, n = matrix.r.loc[name, other], int(matrix.n.loc[name, other])
            text = f"{r:.2f} ({n})" if math.isfinite(r) else fmt.UNDEFINED if matrix.measured.loc[name, other] else fmt.UNKNOWN
            cells.append("" if name == other else text)
        rows.append([name, *cells])
    return header, rows


def quantity_note(matrix: QuantityMatrix) -> str:
    if not matrix.n_metrics:
        return (f"No matrix: no metric has {MIN_ENCODERS} or more encoders with these quantities measured (through "
                "2 points every correlation is +-1).")
    return (f"Pearson r across encoders, per metric with at least {MIN_ENCODERS} encoders ({matrix.n_metrics} here), "
            "averaged over metrics; in brackets n, the encoders behind the entry summed over those metrics. No interval: "
            "with few encoders these are descriptive only. '-': not measured (e.g. no GPU cells); n/a: a quantity "
            "constant across the encoders (e.g. the disk size of one checkpoint run at fewer layers).")


# ----------------------------------------------------------------------------- the report


def write_report(folder: Path, baseline: str | None = None, options: QualityOptions = QualityOptions(),
                 human: str | None = None, metric: str | None = None, aligner: str | None = None,
                 n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Path:
    """Write DIR/report/ and return the path of its index.html; `human` names the human dimension
    (data with several), default each cell's first; `metric` and `aligner` select metrics as
    `nlgbench.reporting.compare.select_metrics`."""
    from nlgbench.reporting.compare import select_metrics

    run = load_run(folder, human)
    picked = select_metrics(run.cells, metric, aligner)
    options.check()
    cells = run.cells if picked is None else run.cells[run.cells["metric"].isin(picked)]
    df = with_quality(run, options, cells)
    check_links(folder)
    out = own_folder(folder / "report")
    baselines = choose_baselines(df, baseline)
    intervals = QualityIntervals(run, options, n_resamples, seed)
    figures = write_figures(df[~df["imported"]], out, options, baselines, intervals)

    trade = tradeoff_table(run, df, baselines, options, n_resamples, seed)
    write_atomic(out / "tradeoff.csv", trade.to_csv(index=False))
    theader, trows = tradeoff_rows(trade, n_resamples)
    tnote = (f"quality = {options.label}; retained = quality / baseline quality, 95% paired-bootstrap interval; "
             f"p = two-sided paired bootstrap test of equal quality ({n_resamples} resamples of segments, seed {seed}; "
             "as `nlgbench compare`); speed-up = median baseline ms/segment / median ms/segment, range over every pair "
             "of repeats (nlgbench.statistics.stats.speedup)")
    write_atomic(out / "tradeoff.md", markdown(theader, trows) + f"\n{tnote}\n")
    write_atomic(out / "tradeoff.tex", latex(theader, trows, comments=[tnote]))

    rel = relative_table(df, baselines)
    write_atomic(out / "relative.csv", rel.to_csv(index=False))
    header, rows = relative_rows(rel)
    write_atomic(out / "relative.md", markdown(header, rows))
    write_atomic(out / "relative.tex", latex(header, rows))

    matrix = quantity_correlations(df)
    write_atomic(out / "quantities.csv", matrix.r.to_csv())
    write_atomic(out / "quantities_n.csv", matrix.n.to_csv())
    qnote = quantity_note(matrix)
    cheader, crows = quantity_rows(matrix)
    write_atomic(out / "quantities.md", markdown(cheader, crows) + f"\n{qnote}\n")
    write_atomic(out / "quantities.tex", latex(cheader, crows, text_columns=1, comments=[qnote]))
    write_published(run, out)

    enc = per_encoder(df)
    qcolumns = quality_columns(df)
    eheader = ["metric", "encoder", "CPU ms/seg", "GPU ms/seg", "model memory MiB", "peak memory MiB", "params (M)",
               "disk MiB", *qcolumns]
    erows = [[r["metric"], r["encoder"], fmt.number(r["cpu_ms"], 1), fmt.number(r["gpu_ms"], 1),
              fmt.number(r["model_mb"], 0), fmt.number(r["peak_mb"], 0), fmt.number(r["params"] / 1e6, 1),
              fmt.number(r["disk_mb"], 1), *(fmt.number(r[q], missing=fmt.UNDEFINED) for q in qcolumns)]
             for _, r in enc.iterrows()]

    env = sorted({(c, g) for c, g in zip(df["cpu_model"], df["gpu"])})
    machine = "; ".join(f"{c}" + (f", GPU {g}" if g else "") for c, g in env if c) or "unknown"
    kinds = ", ".join(f"{d}: {k}" for d, k in dict(zip(df["dataset"], df["score_type"])).items())

    def figure_html(f: FigureFile) -> str:
        png, *vector = f.paths
        links = ", ".join(f"<a href='{p.name}'>{p.suffix[1:].upper()}</a>" for p in vector)
        return (f"<figure><img src='{png.name}' alt='{html.escape(f.title)}'><figcaption>{html.escape(f.title)} "
                f"({links})</figcaption></figure>")

    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>nlgbench report: {html.escape(folder.name)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
        "td.t,th{text-align:left}caption{text-align:left;font-weight:bold}"
        "img{max-width:100%;border:1px solid #ddd}</style></head><body>",
        f"<h1>nlgbench report: {html.escape(folder.name)}</h1>",
        f"<p>{len(df)} finished cells; quality = {html.escape(options.label)} with human judgments "
        f"({html.escape(', '.join(dict.fromkeys(df['human_dim'])))}); kinds of human score: {html.escape(kinds)}; "
        f"baselines: {html.escape(', '.join(f'{m}: {e}' for m, e in baselines.items()))}. Machine: {html.escape(machine)}. "
        f"Read from {html.escape(run.source.name if run.source else 'results.sqlite')}.</p>",
        *[f"<p>{html.escape(note)}</p>" for note in left_out_notes(df, options.level) + undefined_quality_notes(df)],
        "<h2>Trade-off plots</h2>",
        "<p>Per device and dataset; a mean over datasets only within one kind of human score. Memory: model memory "
        "(RSS growth over the post-import baseline on CPU, peak CUDA memory allocated on GPU) beside the process peak, "
        "in MiB.</p>",
        *([] if figures else ["<p>No plot: no measured cell has a defined quality.</p>"]),
        *[figure_html(f) for f in figures],
        "<h2>Trade-off table</h2>",
        f"<p>{html.escape(tnote)}. Files: <a href='tradeoff.md'>Markdown</a>, <a href='tradeoff.tex'>LaTeX</a>, "
        "<a href='tradeoff.csv'>CSV</a>.</p>",
        html_table(theader, trows, "Quality retained, speed-up and significance against the baseline encoder", 4),
        "<h2>Relative to the baseline (quality retained, speed-up)</h2>",
        "<p>Files: <a href='relative.md'>Markdown</a>, <a href='relative.tex'>LaTeX</a>, <a href='relative.csv'>CSV</a>.</p>",
        html_table(header, rows, "Quality retained and speed-up per dataset (and the mean per kind of human score)", 4),
        "<h2>Per encoder, averaged over datasets</h2>",
        html_table(eheader, erows, "Measured quantities"),
        "<h2>Correlation of the measured quantities</h2>",
        f"<p>{html.escape(qnote)} Files: <a href='quantities.md'>Markdown</a>, <a href='quantities.tex'>LaTeX</a>, "
        "<a href='quantities.csv'>CSV</a> (n: <a href='quantities_n.csv'>CSV</a>).</p>",
        html_table(cheader, crows, "Correlation matrix of measured quantities", 1),
        "</body></html>",
    ]
    index = out / "index.html"
    write_atomic(index, "\n".join(parts))
    return index
