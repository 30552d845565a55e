"""The report's figures (matplotlib, imported on first use), sized for print: per device and dataset
group, runtime, model memory and peak memory against quality, one panel per metric, each encoder in
its own colour and marker, the 95% bootstrap interval of the quality as a vertical bar, the spread of
the timed repeats as a horizontal bar, the Pareto front between its points, the baseline ringed,
point labels that cover nothing (nlgbench.reporting.figures.placement).

A figure is drawn at the width asked for (`FigureOptions`: a paper's single or double column) in
the package's style file (`STYLE_FILE`: sizes in points, nothing below 7 pt), its panels in rows
of at most 3 that fit that width, at most MAX_ROWS rows (more panels: several figures, `_part1`,
`_part2`), one y range for all panels. Titles say what is plotted; how (method, interval, data,
machine) is in the caption (nlgbench.reporting.figures.content.figure_caption), shown in index.html and
written into figures.tex."""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.files import write_atomic
from nlgbench.reporting.figures.content import (
    DatasetGroup,
    FigureKind,
    dataset_groups,
    figure_caption,
    figure_kinds,
    figure_points,
    figures_tex,
    slug,
)
from nlgbench.reporting.figures.placement import PointLabel, place_labels
from nlgbench.reporting.figures.style import (
    ANCHOR_COLOR,
    BASELINE_COLOR,
    BASELINE_RING,
    DEFAULT_FIGURES,
    FIGURE_FORMATS,
    FRONT_COLOR,
    FRONT_RING,
    MARKER_SIZE,
    MAX_ROWS,
    STYLE_FILE,
    FigureOptions,
    Style,
    encoder_styles,
    row_sizes,
    set_log_x,
    y_limits,
)
from nlgbench.reporting.markup import unique_name
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import QualityIntervals, pareto_front, resampling_words

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INTERVAL_LABEL, SPREAD_LABEL = "95% bootstrap interval", "min-max of timed repeats"
MAKE_ROOM = 3  # times the y range may grow to give a label a free place


# ----------------------------------------------------------------------------- one panel


def _draw_pareto(ax: Axes, xs: np.ndarray, qs: np.ndarray) -> None:
    """The Pareto front: a dashed staircase from its fastest point to its best (right along the
    quality reached, up at the next point's time), its points ringed; a front of one point is its ring."""
    front = pareto_front(list(xs), list(qs))
    if not front:
        return
    fx, fq = xs[front], qs[front]
    if len(front) > 1:
        px, py = [fx[0]], [fq[0]]
        for i in range(1, len(front)):
            px += [fx[i], fx[i]]
            py += [fq[i - 1], fq[i]]
        ax.plot(px, py, linestyle="--", color=FRONT_COLOR, linewidth=0.9, zorder=1)
    ax.scatter(fx, fq, s=FRONT_RING**2, facecolors="none", edgecolors=FRONT_COLOR, linewidths=0.9, zorder=2)


def _draw_points(ax: Axes, pts: pd.DataFrame, x: str, styles: dict[str, Style]) -> None:
    """Each point with its quality interval (vertical, capped) and, where measured, the spread of
    its x (horizontal, no caps)."""
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
            markersize=MARKER_SIZE,
            markeredgecolor="white",
            markeredgewidth=0.4,
            capsize=2,
            capthick=0.8,
            elinewidth=0.8,
            zorder=3,
        )
        lo, hi = p.get(f"{x}_low", math.nan), p.get(f"{x}_high", math.nan)
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            xerr = [[max(0.0, p[x] - lo)], [max(0.0, hi - p[x])]]
            ax.errorbar(
                [p[x]], [p["quality"]], xerr=xerr, fmt="none", ecolor=style.color, elinewidth=0.8, capsize=0, zorder=3
            )


def _panel(
    ax: Axes,
    pts: pd.DataFrame,
    anchors: pd.DataFrame,
    x: str,
    styles: dict[str, Style],
    baseline: str | None,
) -> list[PointLabel]:
    """One metric's points, front and baseline ring; returns the labels to place."""
    _draw_points(ax, anchors, x, styles)
    _draw_points(ax, pts, x, styles)
    base = pts[pts["encoder"] == baseline]
    if len(base):
        ax.scatter(
            base[x],
            base["quality"],
            marker="o",
            s=BASELINE_RING**2,
            facecolors="none",
            edgecolors=BASELINE_COLOR,
            linewidths=0.8,
            zorder=2,
        )
    _draw_pareto(ax, pts[x].to_numpy(float), pts["quality"].to_numpy(float))
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    return [PointLabel(p[x], p["quality"], _short(p["encoder"]), "black") for _, p in pts.iterrows()] + [
        PointLabel(a[x], a["quality"], str(a["metric"]), ANCHOR_COLOR) for _, a in anchors.iterrows()
    ]


def _x_values(frame: pd.DataFrame, x: str) -> list[float]:
    """The x values a panel's axis must show: the points and their spread."""
    return [float(v) for c in (x, f"{x}_low", f"{x}_high") if c in frame for v in frame[c]]


def _legend_handles(
    encoders: Sequence[str], styles: dict[str, Style], anchors: bool, baseline: bool, spread: bool
) -> list[Any]:
    from matplotlib.lines import Line2D

    def point(label: str, **kw: Any) -> Line2D:
        return Line2D([], [], linestyle="none", label=label, **{"markersize": MARKER_SIZE, **kw})

    handles = [point(e, marker=styles[e].marker, color=styles[e].color, markeredgecolor="white") for e in encoders]
    if anchors:
        handles.append(point("lexical baseline (no encoder)", marker="D", color=ANCHOR_COLOR))
    if baseline:
        handles.append(
            point(
                "baseline encoder",
                marker="o",
                markersize=BASELINE_RING * 0.8,
                markerfacecolor="none",
                markeredgecolor=BASELINE_COLOR,
                markeredgewidth=0.8,
            )
        )
    handles.append(
        Line2D(
            [],
            [],
            linestyle="--",
            linewidth=0.9,
            color=FRONT_COLOR,
            marker="o",
            markersize=FRONT_RING,
            markerfacecolor="none",
            markeredgecolor=FRONT_COLOR,
            markeredgewidth=0.9,
            label="Pareto front",
        )
    )
    handles.append(point(INTERVAL_LABEL, marker="|", markersize=10, color="black", markeredgewidth=0.8))
    if spread:
        handles.append(point(SPREAD_LABEL, marker="_", markersize=10, color="black", markeredgewidth=0.8))
    return handles


# ----------------------------------------------------------------------------- one figure


def tradeoff_figure(
    points: pd.DataFrame,
    columns: Sequence[tuple[str, str]],
    quality_label: str,
    styles: dict[str, Style],
    baselines: dict[str, str],
    title: str,
    options: FigureOptions = DEFAULT_FIGURES,
) -> Figure | None:
    """One figure of panels per metric and x column (`columns`: (column, axis label); the panel
    title is the metric, with the column's label where there are several), quality on y (one range
    for all panels) with its interval, x on a log scale with its spread, the Pareto front, the
    baseline ringed, the legend below; metrics without an encoder (lexical baselines) are grey
    diamonds in every panel (their own panels when there is nothing else). `options.width` wide,
    rows of `options.per_row` panels, a shorter last row centred (no empty slot). Point labels are
    placed last and cover nothing. None when there is nothing to plot. An open pyplot figure: the
    caller closes it (`plt.close`); one that fails half-way is closed here."""
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
    cells = [(m, c) for m in metrics for c in columns]
    rows = row_sizes(len(cells), min(options.per_row, len(cells)))
    per_row = max(rows)
    panel_w = options.width / per_row
    panel_h = min(max(0.7 * panel_w, 1.9), 2.4)  # inches: a single-column figure of 3 rows stays under 9 in
    with plt.style.context(STYLE_FILE):
        fig = plt.figure(figsize=(options.width, panel_h * len(rows) + 0.3), layout="constrained")
        try:
            grid = fig.add_gridspec(len(rows), 2 * per_row)
            axes: list[Axes] = []
            for r, n in enumerate(rows):
                start = per_row - n  # half-slots: a shorter row centred
                axes += [fig.add_subplot(grid[r, start + 2 * k : start + 2 * k + 2]) for k in range(n)]
            firsts = {sum(rows[:r]) for r in range(len(rows))}  # the first panel of each row
            labels: list[tuple[Axes, list[PointLabel]]] = []
            ys = [*points["quality"], *points["ci_low"], *points["ci_high"]]
            ylim = y_limits(ys)
            for k, (ax, (metric, (x, xlabel))) in enumerate(zip(axes, cells, strict=True)):
                pts = data[data["metric"] == metric]
                items = _panel(ax, pts, anchors, x, styles, baselines.get(metric))
                labels.append((ax, items))
                set_log_x(ax, _x_values(pts, x) + _x_values(anchors, x))
                ax.set_ylim(*ylim)
                ax.set_title(f"{metric}: {xlabel.split(' (')[0]}" if len(columns) > 1 else str(metric))
                ax.set_xlabel(xlabel)
                if k in firsts:
                    ax.set_ylabel(quality_label)
                else:
                    ax.tick_params(axis="y", labelleft=False)
            encoders = [e for e in styles if e in set(data["encoder"])]
            has_base = any((data["encoder"] == baselines.get(m)).any() for m in metrics)
            spread = any(f"{c}_low" in points and points[f"{c}_low"].notna().any() for c, _ in columns)
            handles = _legend_handles(encoders, styles, bool(len(anchors)), has_base, spread)
            _fit_title_and_legend(fig, title, handles)
            _place(fig, labels, ylim)
        except BaseException:
            plt.close(fig)  # drawing failed half-way: the figure is nobody's to close
            raise
    return fig


def _place(fig: Figure, labels: list[tuple[Axes, list[PointLabel]]], ylim: tuple[float, float]) -> None:
    """Every panel's point labels, placed on the final layout (frozen, so it stays as they saw it);
    where a label finds no free place, the y range (of every panel) grows by a fifth each way and
    all are placed again, up to MAKE_ROOM times."""
    for attempt in range(MAKE_ROOM + 1):
        fig.set_layout_engine("constrained")
        fig.draw_without_rendering()
        fig.set_layout_engine("none")  # the layout is final: labels are placed against it, and it stays
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        placed = [place_labels(ax, items, renderer) for ax, items in labels]
        if attempt == MAKE_ROOM or not any(p.covering for p in placed):
            return
        for p in placed:
            for ann in p.annotations:
                ann.remove()
        lo, hi = ylim
        ylim = (lo - 0.2 * (hi - lo), hi + 0.2 * (hi - lo))
        for ax, _ in labels:
            ax.set_ylim(*ylim)


def _fit_title_and_legend(fig: Figure, title: str, handles: list[Any]) -> None:
    """The title wrapped to the figure's width and the legend below the panels in as many columns
    (at most 4) as fit; the figure made taller by the legend's and the title's extra lines (the
    panels keep their height); laid out (not rendered), so the layout is final."""
    width = fig.bbox.width - 4
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = None
    for columns in range(min(4, len(handles)), 0, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncols=columns)
        if legend.get_window_extent(renderer).width <= width or columns == 1:
            break
        legend.remove()
    assert legend is not None
    extra = legend.get_window_extent(renderer).height / fig.dpi + 0.05
    for chars in range(110, 20, -5):
        text = fig.suptitle("\n".join(textwrap.fill(line, chars) for line in title.splitlines()))
        if text.get_window_extent(renderer).width <= width:
            break
    extra += text.get_text().count("\n") * float(text.get_fontsize()) * 1.2 / 72
    fig.set_figheight(fig.get_figheight() + extra)
    fig.draw_without_rendering()


def _short(name: str) -> str:
    return name.split("/")[-1]


def save_figure(fig: Figure, stem: Path, formats: Sequence[str] = FIGURE_FORMATS) -> list[Path]:
    """The figure in each format (PNG at the figure's dpi, PDF and SVG with text kept as text:
    the style file), without creation dates, so a regenerated report differs only where its content
    does; at the figure's size (no tight bounding box: the width is the one asked for). The caller
    closes the figure."""
    import matplotlib.pyplot as plt

    metadata = {
        "png": {"Software": None},
        "pdf": {"CreationDate": None, "Producer": None},
        "svg": {"Date": None, "Creator": None},
    }
    paths = []
    with plt.style.context(STYLE_FILE):
        for ext in formats:
            path = stem.with_name(f"{stem.name}.{ext}")
            image = io.BytesIO()
            fig.savefig(image, format=ext, dpi=fig.dpi, metadata=metadata[ext])
            write_atomic(path, image.getvalue())
            paths.append(path)
    return paths


# ----------------------------------------------------------------------------- the report's figures


@dataclass(frozen=True)
class FigureFile:
    title: str
    device: str
    group: DatasetGroup
    paths: list[Path]  # in the order of the formats written (png, pdf, svg by default)
    note: str = ""  # what the bars are (`bars_note`)
    caption: str = ""  # the figure's caption (`figure_caption`), also in figures.tex
    name: str = ""  # the files' stem, figures.tex's label fig:<name>


@dataclass(frozen=True)
class DrawnFigure:
    """One figure of the report, not yet saved: its file stem, title, device, datasets, kind, the
    metrics of its panels and the figure."""

    name: str
    title: str
    device: str
    group: DatasetGroup
    kind: FigureKind
    metrics: list[str]
    figure: Figure


def bars_note(cells: pd.DataFrame, options: QualityOptions, intervals: QualityIntervals) -> str:
    """What a figure's bars are: the 95% percentile bootstrap interval, the unit it resamples for
    these cells (`relative_table.resampling_words`), the resamples and the seed."""
    return (
        f"bars: 95% bootstrap interval of the quality, resampling {resampling_words(intervals.run, options, cells)}; "
        f"{intervals.n_resamples} resamples, seed {intervals.seed}"
    )


def _group_cells(df: pd.DataFrame, device: str, group: DatasetGroup) -> pd.DataFrame:
    return df[(df["device"] == device) & df["dataset"].isin(group.datasets)]


def _parts(metrics: list[str], cap: int) -> list[list[str]]:
    """The metrics split into as few figures of at most `cap` panels as can be, as even as can be."""
    n = math.ceil(len(metrics) / cap)
    sizes = row_sizes(len(metrics), math.ceil(len(metrics) / n)) if n > 1 else [len(metrics)]
    out, start = [], 0
    for size in sizes:
        out.append(metrics[start : start + size])
        start += size
    return out


def build_figures(
    df: pd.DataFrame,
    options: QualityOptions,
    baselines: dict[str, str],
    intervals: QualityIntervals,
    figure_options: FigureOptions = DEFAULT_FIGURES,
) -> Iterator[DrawnFigure]:
    """Runtime, model-memory and peak-memory figures per device and dataset group (see
    `dataset_groups`), each at most MAX_ROWS rows of panels (more metrics: several figures, named
    `_part1`, `_part2` ...); encoder styles shared by all of them. Each figure is open: the
    consumer closes it (`write_figures` does, once written)."""
    styles = encoder_styles(list(df["encoder"]))
    names: set[str] = set()
    cap = figure_options.per_row * MAX_ROWS
    for device in dict.fromkeys(df["device"]):
        cells = df[df["device"] == device]
        for group in dataset_groups(cells):
            for kind in figure_kinds(device):
                points = figure_points(cells, group, [kind.column], intervals)
                # numbers, also where every cell left the column empty (an object column of NaNs)
                x = pd.to_numeric(points[kind.column], errors="coerce").astype(float)
                points = points[(x > 0) & np.isfinite(x)]
                anchor = points["encoder"] == NO_ENCODER
                with_encoder = bool((~anchor).any())  # else only lexical metrics: each its own panel
                shown = points[~anchor] if with_encoder else points
                metrics = [str(m) for m in dict.fromkeys(shown["metric"])]
                parts = _parts(metrics, cap) if metrics else []
                for k, part in enumerate(parts):
                    title = f"{kind.title} vs quality, {device}, {group.title}"
                    fig = tradeoff_figure(
                        points[points["metric"].isin(part) | (anchor & with_encoder)],
                        [(kind.column, kind.label)],
                        group.quality_label(options.label),
                        styles,
                        baselines,
                        title + (f" ({k + 1}/{len(parts)})" if len(parts) > 1 else ""),
                        figure_options,
                    )
                    if fig is None:
                        continue
                    name = f"{kind.name}_{device}_{slug(group.name)}" + (f"_part{k + 1}" if len(parts) > 1 else "")
                    yield DrawnFigure(unique_name(name, names), title, device, group, kind, part, fig)


def write_figures(
    df: pd.DataFrame,
    out: Path,
    options: QualityOptions,
    baselines: dict[str, str],
    intervals: QualityIntervals,
    figure_options: FigureOptions = DEFAULT_FIGURES,
) -> list[FigureFile]:
    """`build_figures`, each saved in the formats asked for into `out` with its caption, and
    figures.tex (one float per figure, where PDF or PNG is written); figure files of an earlier
    report (another width may have split them otherwise) removed first."""
    import matplotlib.pyplot as plt

    figure_options.check()
    for old in sorted(out.glob("*_*.*")):
        if old.suffix[1:] in FIGURE_FORMATS and old.name.split("_")[0] in ("runtime", "memory", "peak"):
            old.unlink()
    files = []
    for drawn in build_figures(df, options, baselines, intervals, figure_options):
        try:
            cells = _group_cells(df, drawn.device, drawn.group)
            caption = figure_caption(
                drawn.kind, drawn.group, drawn.device, cells, drawn.metrics, baselines, options, intervals
            )
            paths = save_figure(drawn.figure, out / drawn.name, figure_options.formats)
        finally:  # each figure closed once written, or when writing it failed: none stays open
            plt.close(drawn.figure)
        files.append(
            FigureFile(
                drawn.title, drawn.device, drawn.group, paths, bars_note(cells, options, intervals), caption, drawn.name
            )
        )
    tex = out / "figures.tex"
    printable = [
        (min(shown, key=lambda p: p.suffix != ".pdf"), f.caption, f.name)  # the PDF, else the PNG
        for f in files
        if (shown := [p for p in f.paths if p.suffix in (".pdf", ".png")])
    ]
    if printable:
        write_atomic(tex, figures_tex(printable, figure_options.width))
    elif tex.exists():
        tex.unlink()
    return files
