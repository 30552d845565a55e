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

import html
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.files import write_atomic
from nlgbench.reporting.figures.content import (
    DatasetGroup,
    FigureKind,
    bars_note,
    dataset_groups,
    figure_caption,
    figure_kinds,
    figure_points,
    figures_tex,
    method_text,
    point_gid,
    point_tooltips,
    slug,
)
from nlgbench.reporting.figures.placement import PointLabel, drop_unseen, hotspots, place_all
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
    MIN_SPREAD,
    STYLE_FILE,
    FigureOptions,
    Style,
    axis_label,
    encoder_styles,
    fit_title_and_legend,
    legend_handles,
    needs_log,
    row_sizes,
    set_x,
    y_limits,
)
from nlgbench.reporting.markup import unique_name
from nlgbench.reporting.published import quality_title
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import QualityIntervals, Reference, pareto_front

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SPREAD_GID, FRONT_GID, BASE_GID = "spread", "pareto", "baseline"  # gids: spread bars, the front's line, the ring


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
        ax.plot(px, py, linestyle="--", color=FRONT_COLOR, linewidth=0.9, zorder=1, gid=FRONT_GID)
    ax.scatter(fx, fq, s=FRONT_RING**2, facecolors="none", edgecolors=FRONT_COLOR, linewidths=0.9, zorder=2)


def _draw_points(ax: Axes, pts: pd.DataFrame, x: str, styles: dict[str, Style]) -> None:
    """Each point with its quality interval (vertical, capped) and, where measured, the spread of
    its x (horizontal, no caps)."""
    for _, p in pts.iterrows():
        style = styles[p["encoder"]]
        err = None
        if math.isfinite(p["ci_low"]) and math.isfinite(p["ci_high"]):
            err = [[max(0.0, p["quality"] - p["ci_low"])], [max(0.0, p["ci_high"] - p["quality"])]]
        point = ax.errorbar(
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
        point.lines[0].set_gid(point_gid(p["cell_ids"]))  # its tooltip (`save_figure`, `hotspots`)
        lo, hi = p.get(f"{x}_low", math.nan), p.get(f"{x}_high", math.nan)
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            xerr = [[max(0.0, p[x] - lo)], [max(0.0, hi - p[x])]]
            bar = ax.errorbar(
                [p[x]], [p["quality"]], xerr=xerr, fmt="none", ecolor=style.color, elinewidth=0.8, capsize=0, zorder=3
            )
            for coll in bar.lines[2]:
                coll.set_gid(SPREAD_GID)


def _panel(
    ax: Axes,
    pts: pd.DataFrame,
    x: str,
    styles: dict[str, Style],
    baseline: Reference | None,
    names: Names,
) -> list[PointLabel]:
    """One metric's points (and the model-free metrics'), front and baseline ring; returns the labels
    to place (encoders' `names`; a model-free metric's name, in grey)."""
    _draw_points(ax, pts, x, styles)
    base = pts[(pts["metric"] == baseline.metric) & (pts["encoder"] == baseline.encoder)] if baseline else pts[:0]
    if len(base):
        ax.scatter(
            base[x],
            base["quality"],
            marker="o",
            s=BASELINE_RING**2,
            facecolors="none",
            edgecolors=BASELINE_COLOR,
            gid=BASE_GID,
            linewidths=0.8,
            zorder=2,
        )
    _draw_pareto(ax, pts[x].to_numpy(float), pts["quality"].to_numpy(float))
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    return [
        PointLabel(p[x], p["quality"], names(str(p["metric"])), ANCHOR_COLOR)
        if p["encoder"] == NO_ENCODER
        else PointLabel(p[x], p["quality"], names(p["encoder"]), "black")
        for _, p in pts.iterrows()
    ]


def _x_values(frame: pd.DataFrame, x: str) -> list[float]:
    """The x values a panel's axis must show: the points and their spread."""
    return [float(v) for c in (x, f"{x}_low", f"{x}_high") if c in frame for v in frame[c]]


# ----------------------------------------------------------------------------- one figure


def tradeoff_figure(
    points: pd.DataFrame,
    columns: Sequence[tuple[str, str]],
    quality_label: str,
    styles: dict[str, Style],
    baselines: dict[str, Reference],
    title: str,
    options: FigureOptions = DEFAULT_FIGURES,
    names: Names = DEFAULT_NAMES,
) -> Figure | None:
    """One figure of panels per metric and x column (`columns`: (column, axis label); the panel
    title is the metric, with the column's label where there are several), quality on y (one range
    for all panels) with its interval, x on a log scale with its spread where it can be seen at this
    size (`placement.drop_unseen`), the Pareto front, the baseline ringed, each point labelled, the
    legend below in at most LEGEND_ROWS rows (what labels cannot say and is drawn: `legend_handles`),
    the title only with `options.titles`; metrics without a model (chrF) are points in every panel,
    on its front (their own panels when there is nothing else); x on a log axis where the figure's x
    values span LOG_SPAN or more (`needs_log`), linear otherwise; encoders and metrics under
    their `names` (nlgbench.core.labels.Names). `options.width` wide, rows of
    `options.per_row` panels, a shorter last row centred (no empty slot). Point labels are placed
    last and cover nothing. None when there is nothing to plot. An open pyplot figure: the caller
    closes it (`plt.close`); one that fails half-way is closed here."""
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
        fig = plt.figure(figsize=(options.width, panel_h * len(rows) + 0.1), layout="constrained")
        try:
            grid = fig.add_gridspec(len(rows), 2 * per_row)
            axes: list[Axes] = []
            for r, n in enumerate(rows):
                start = per_row - n  # half-slots: a shorter row centred
                axes += [fig.add_subplot(grid[r, start + 2 * k : start + 2 * k + 2]) for k in range(n)]
            firsts = {sum(rows[:r]) for r in range(len(rows))}  # the first panel of each row
            labels: list[tuple[Axes, list[PointLabel]]] = []
            ylim = y_limits([*points["quality"], *points["ci_low"], *points["ci_high"]])
            log = {x: needs_log(_x_values(points, x)) for x, _ in columns}
            for k, (ax, (metric, (x, xlabel))) in enumerate(zip(axes, cells, strict=True)):
                pts = pd.concat([data[data["metric"] == metric], anchors])
                labels.append((ax, _panel(ax, pts, x, styles, baselines.get(metric), names)))
                set_x(ax, _x_values(pts, x), log[x])
                ax.set_ylim(*ylim)
                ax.set_title(f"{names(metric)}: {xlabel.split(' (')[0]}" if len(columns) > 1 else names(metric))
                ax.set_xlabel(axis_label(xlabel, log[x]))
                if k in firsts:
                    ax.set_ylabel(quality_label)
                else:
                    ax.tick_params(axis="y", labelleft=False)
            spread = drop_unseen(fig, SPREAD_GID, MARKER_SIZE, MIN_SPREAD)
            drawn = {str(a.get_gid()) for ax in axes for a in ax.get_children()}
            handles = legend_handles(
                BASE_GID in drawn,
                spread,
                FRONT_GID in drawn,
                bool(np.isfinite(points["ci_low"].astype(float)).any()),
            )
            fit_title_and_legend(fig, title if options.titles else "", handles)
            place_all(fig, labels, ylim)
        except BaseException:
            plt.close(fig)  # drawing failed half-way: the figure is nobody's to close
            raise
    return fig


def save_figure(
    fig: Figure, stem: Path, formats: Sequence[str] = FIGURE_FORMATS, tooltips: Mapping[str, str] | None = None
) -> list[Path]:
    """The figure in each format (PNG at the figure's dpi, PDF and SVG with text kept as text:
    the style file), without creation dates, so a regenerated report differs only where its content
    does; at the figure's size (no tight bounding box: the width is the one asked for); in the SVG
    each point's `tooltips` entry as a `<title>` (a browser shows it on hovering). The caller closes
    the figure."""
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
            data = image.getvalue()
            if ext == "svg" and tooltips:
                text = data.decode("utf-8")
                for gid, tip in tooltips.items():
                    text = text.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(tip)}</title>', 1)
                data = text.encode("utf-8")
            write_atomic(path, data)
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
    method: str = ""  # how it was made, in full (`method_text`): index.html, and a comment in figures.tex
    hotspots: tuple[tuple[float, float, str], ...] = ()  # each point's centre in the PNG (pixels) and tooltip
    pixels: tuple[float, float] = (0.0, 0.0)  # the PNG's width and height
    kind: str = "runtime"  # FigureKind.name: what `--figures` picks for figures.tex


@dataclass(frozen=True)
class DrawnFigure:
    """One figure of the report, not yet saved: its file stem, title, device, datasets, kind, the
    metrics of its panels and the figure; whether it draws the timed repeats' spread (`spread_shown`)."""

    name: str
    title: str
    device: str
    group: DatasetGroup
    kind: FigureKind
    metrics: list[str]
    figure: Figure
    tooltips: dict[str, str]  # by point_gid
    cell_ids: tuple[str, ...] = ()  # the plotted points' cells

    @property
    def spread_shown(self) -> bool:
        return any(c.get_gid() == SPREAD_GID for ax in self.figure.axes for c in ax.collections)

    @property
    def log_x(self) -> bool:
        return any(ax.get_xscale() == "log" for ax in self.figure.axes)


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
    baselines: dict[str, Reference],
    intervals: QualityIntervals,
    figure_options: FigureOptions = DEFAULT_FIGURES,
    names: Names = DEFAULT_NAMES,
) -> Iterator[DrawnFigure]:
    """Runtime, model-memory and peak-memory figures per device and dataset group (see
    `dataset_groups`), each at most MAX_ROWS rows of panels (more metrics: several figures, named
    `_part1`, `_part2` ...); encoder styles shared by all of them. Each figure is open: the
    consumer closes it (`write_figures` does, once written)."""
    styles = encoder_styles(list(df["encoder"]))
    taken: set[str] = set()
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
                    shown = points[points["metric"].isin(part) | (anchor & with_encoder)]
                    fig = tradeoff_figure(
                        shown,
                        [(kind.column, kind.label)],
                        group.quality_label(quality_title(options)),
                        styles,
                        baselines,
                        title + (f" ({k + 1}/{len(parts)})" if len(parts) > 1 else ""),
                        figure_options,
                        names,
                    )
                    if fig is None:
                        continue
                    name = f"{kind.name}_{device}_{slug(group.name)}" + (f"_part{k + 1}" if len(parts) > 1 else "")
                    tips = point_tooltips(shown, kind, names)
                    ids = tuple(c for cells_of in shown["cell_ids"] for c in cells_of)
                    yield DrawnFigure(unique_name(name, taken), title, device, group, kind, part, fig, tips, ids)


def write_figures(
    df: pd.DataFrame,
    out: Path,
    options: QualityOptions,
    baselines: dict[str, Reference],
    intervals: QualityIntervals,
    figure_options: FigureOptions = DEFAULT_FIGURES,
    names: Names = DEFAULT_NAMES,
) -> list[FigureFile]:
    """`build_figures`, each saved in the formats asked for into `out` with its caption, and
    figures.tex (one float per figure of the kinds `figure_options.tex_kinds` names, where PDF or
    PNG is written); the captions speak of the plotted points' cells only; figure files of an earlier
    report (another width may have split them otherwise) removed first."""
    import matplotlib.pyplot as plt

    figure_options.check()
    for old in sorted(out.glob("*_*.*")):
        if old.suffix[1:] in FIGURE_FORMATS and old.name.split("_")[0] in ("runtime", "memory", "peak"):
            old.unlink()
    files = []
    for drawn in build_figures(df, options, baselines, intervals, figure_options, names):
        try:
            cells = _group_cells(df, drawn.device, drawn.group)
            plotted = cells[cells["cell_id"].isin(drawn.cell_ids)]
            caption = figure_caption(
                drawn.kind,
                drawn.group,
                drawn.device,
                plotted,
                baselines,
                options,
                drawn.spread_shown,
                drawn.log_x,
                names,
            )
            method = method_text(
                drawn.kind, drawn.group, drawn.device, cells, drawn.metrics, baselines, options, intervals, drawn.log_x
            )
            paths = save_figure(drawn.figure, out / drawn.name, figure_options.formats, drawn.tooltips)
            spots = hotspots(drawn.figure, drawn.tooltips)
            pixels = (float(drawn.figure.bbox.width), float(drawn.figure.bbox.height))
        finally:  # each figure closed once written, or when writing it failed: none stays open
            plt.close(drawn.figure)
        files.append(
            FigureFile(
                drawn.title,
                drawn.device,
                drawn.group,
                paths,
                bars_note(cells, options, intervals),
                caption,
                drawn.name,
                method,
                spots,
                pixels,
                drawn.kind.name,
            )
        )
    tex = out / "figures.tex"
    printable = [
        (min(shown, key=lambda p: p.suffix != ".pdf"), f.caption, f.name, f.method)  # the PDF, else the PNG
        for f in files
        if f.kind in figure_options.tex_kinds and (shown := [p for p in f.paths if p.suffix in (".pdf", ".png")])
    ]
    if printable:
        write_atomic(tex, figures_tex(printable, figure_options.width))
    elif tex.exists():
        tex.unlink()
    return files
