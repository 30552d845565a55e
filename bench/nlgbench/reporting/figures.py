"""The report's figures (matplotlib, imported on first use): runtime and memory against quality per
device and dataset group, one panel per metric, each encoder in its own colour and marker, the 95%
bootstrap interval as a bar (what it resamples in the title's second line), the Pareto front, point
labels kept inside their axes."""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.files import write_atomic
from nlgbench.reporting.numbers import QualityIntervals, mean_label, pareto_front, resampling_words, score_types
from nlgbench.reporting.placement import PointLabel, place_labels
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.rundata import memory_columns

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGURE_FORMATS = ("png", "pdf", "svg")
DPI = 200  # figures are drawn (and PNGs saved) at this resolution
PALETTE = ("tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
MARKERS = ("o", "s", "^", "v", "P", "X", "h", "<", ">")
ANCHOR_COLOR, FRONT_COLOR = "tab:gray", "tab:orange"  # lexical baselines; the Pareto front
RUNTIME_COLUMNS = [("ms_per_segment", "ms per segment (median of repeats, log)")]


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
    kinds = dict(zip(df["dataset"], score_types(df), strict=True))
    groups = [DatasetGroup(d, (d,), kind) for d, kind in kinds.items()]
    for kind in dict.fromkeys(kinds.values()):
        same = tuple(d for d, k in kinds.items() if k == kind)
        if len(same) > 1:
            groups.append(DatasetGroup(mean_label(kind), same, kind))
    return groups


def slug(text: str) -> str:
    """A file-name part: `wmt16[:100]` -> `wmt16_100`, `mean (DA)` -> `mean_DA`."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_") or "data"


def figure_points(
    df: pd.DataFrame, group: DatasetGroup, columns: Sequence[str], intervals: QualityIntervals
) -> pd.DataFrame:
    """Per metric x encoder with a cell of defined quality in every dataset of the group: each of
    `columns` and the quality averaged over those datasets, with the quality's 95% interval
    (`ci_low`, `ci_high`); cells of one device (the caller's)."""
    import pandas as pd

    rows = []
    data = df[df["dataset"].isin(group.datasets) & np.isfinite(df["quality"].astype(float))]
    for (metric, encoder), g in data.groupby(["metric", "encoder"], sort=False):
        cells = [g[g["dataset"] == d] for d in group.datasets]
        if any(len(c) != 1 for c in cells):
            continue  # not measured on every dataset of the group: its mean would be over others
        cells_df = pd.concat(cells)
        lo, hi = intervals.interval(list(cells_df["cell_id"]))
        rows.append(
            {
                "metric": metric,
                "encoder": encoder,
                "quality": float(cells_df["quality"].mean()),
                "ci_low": lo,
                "ci_high": hi,
                "cell_ids": tuple(cells_df["cell_id"]),
                **{c: float(cells_df[c].astype(float).mean()) for c in columns},
            }
        )
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
        ax.errorbar(
            [p[x]],
            [p["quality"]],
            yerr=err,
            fmt=style.marker,
            color=style.color,
            markersize=7,
            markeredgecolor="white",
            markeredgewidth=0.6,
            capsize=3,
            elinewidth=1.1,
            zorder=3,
        )


def _panel(
    ax: Axes,
    pts: pd.DataFrame,
    anchors: pd.DataFrame,
    x: str,
    xlabel: str,
    ylabel: str,
    title: str,
    styles: dict[str, Style],
    baseline: str | None,
) -> list[PointLabel]:
    """One metric's panel; returns the labels to place."""
    import pandas as pd

    _draw_points(ax, anchors, x, styles)
    _draw_points(ax, pts, x, styles)
    base = pts[pts["encoder"] == baseline]
    if len(base):
        ax.scatter(
            base[x], base["quality"], marker="*", s=420, facecolors="none", edgecolors="black", linewidths=1.0, zorder=2
        )
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
    return [
        PointLabel(
            p[x],
            p["quality"],
            _short(p["encoder"]),
            "black",
            p["ci_low"],
            p["ci_high"],
            11.0 if p["encoder"] == baseline else 6.0,
        )
        for _, p in pts.iterrows()
    ] + [
        PointLabel(a[x], a["quality"], str(a["metric"]), ANCHOR_COLOR, a["ci_low"], a["ci_high"])
        for _, a in anchors.iterrows()
    ]


def _legend_handles(encoders: Sequence[str], styles: dict[str, Style], anchors: bool, baseline: bool) -> list[Any]:
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            linestyle="none",
            marker=styles[e].marker,
            color=styles[e].color,
            markersize=7,
            markeredgecolor="white",
            label=e,
        )
        for e in encoders
    ]
    if anchors:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="D",
                color=ANCHOR_COLOR,
                markersize=6,
                label="lexical baseline (no encoder)",
            )
        )
    if baseline:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="*",
                markersize=14,
                markerfacecolor="none",
                markeredgecolor="black",
                label="baseline encoder",
            )
        )
    handles.append(
        Line2D(
            [],
            [],
            linestyle="--",
            color=FRONT_COLOR,
            marker="o",
            markersize=10,
            markerfacecolor="none",
            markeredgecolor=FRONT_COLOR,
            label="Pareto front",
        )
    )
    handles.append(
        Line2D([], [], linestyle="none", marker="|", markersize=14, color="black", label="95% bootstrap interval")
    )
    return handles


def tradeoff_figure(
    points: pd.DataFrame,
    columns: Sequence[tuple[str, str]],
    quality_label: str,
    styles: dict[str, Style],
    baselines: dict[str, str],
    title: str,
) -> Figure | None:
    """One panel per metric and x column (`columns`: (column, axis label); two columns put a metric's
    panels side by side), quality on y with its interval, x on a log scale, the Pareto front, the
    baseline starred, a legend of every encoder below; metrics without an encoder (lexical
    baselines) are grey diamonds in every panel (their own panels when there is nothing else).
    Point labels stay inside their axes. None when there is nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = (
        points[np.all([(points[c] > 0) & np.isfinite(points[c]) for c, _ in columns], axis=0)]
        if len(points)
        else points
    )
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
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(max(4.6 * ncols, 7.0), 3.7 * nrows + 0.9), squeeze=False, dpi=DPI, layout="constrained"
    )
    labels: list[tuple[Axes, list[PointLabel]]] = []
    # the grid may hold more axes than cells: the extra ones are hidden below
    for ax, (metric, (x, xlabel)) in zip(axes.flat, cells, strict=False):
        pts = data[data["metric"] == metric]
        labels.append(
            (ax, _panel(ax, pts, anchors, x, xlabel, quality_label, str(metric), styles, baselines.get(metric)))
        )
    for ax in list(axes.flat)[len(cells) :]:
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


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """The figure as PNG (DPI), PDF and SVG (text kept as text, TrueType fonts in the PDF), without
    creation dates, so a regenerated report differs only where its content does."""
    import matplotlib.pyplot as plt

    metadata = {
        "png": {"Software": None},
        "pdf": {"CreationDate": None, "Producer": None},
        "svg": {"Date": None, "Creator": None},
    }
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


@dataclass(frozen=True)
class FigureFile:
    title: str
    device: str
    group: DatasetGroup
    paths: list[Path]  # png, pdf, svg
    note: str = ""  # what the bars are (`bars_note`)


def bars_note(cells: pd.DataFrame, options: QualityOptions, intervals: QualityIntervals) -> str:
    """What a figure's bars are: the 95% percentile bootstrap interval, the unit it resamples for
    these cells (`numbers.resampling_words`), the resamples and the seed."""
    return (
        f"bars: 95% bootstrap interval of the quality, resampling {resampling_words(intervals.run, options, cells)}; "
        f"{intervals.n_resamples} resamples, seed {intervals.seed}"
    )


def _group_cells(df: pd.DataFrame, device: str, group: DatasetGroup) -> pd.DataFrame:
    return df[(df["device"] == device) & df["dataset"].isin(group.datasets)]


def build_figures(
    df: pd.DataFrame, options: QualityOptions, baselines: dict[str, str], intervals: QualityIntervals
) -> Iterator[tuple[str, str, str, DatasetGroup, Figure]]:
    """Runtime and memory figures per device and dataset group (see `dataset_groups`), each as
    (file name stem, title, device, group, figure); encoder styles shared by all of them."""
    styles = encoder_styles(list(df["encoder"]))
    names: set[str] = set()
    for device in dict.fromkeys(df["device"]):
        cells = df[df["device"] == device]
        for group in dataset_groups(cells):
            note = bars_note(_group_cells(df, device, group), options, intervals)
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


def write_figures(
    df: pd.DataFrame, out: Path, options: QualityOptions, baselines: dict[str, str], intervals: QualityIntervals
) -> list[FigureFile]:
    """`build_figures`, each saved as PNG, PDF and SVG into `out`, with what its bars are."""
    return [
        FigureFile(
            title,
            device,
            group,
            save_figure(fig, out / name),
            bars_note(_group_cells(df, device, group), options, intervals),
        )
        for name, title, device, group, fig in build_figures(df, options, baselines, intervals)
    ]
