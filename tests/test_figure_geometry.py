"""The report's figures are print-ready, checked from matplotlib's own geometry.

Every figure type (runtime, model memory, peak memory; one dataset and the mean over datasets) of
copies of the committed reports/example and reports/similarity is drawn at a single column (3.3 in)
and at both columns (6.9 in), and measured after layout in display pixels: each point label's text
box (`Text.get_window_extent`) against every marker (Line2D markers and error-bar caps, scatter
rings: their centres through the data transform, their size in points), every error-bar segment
(LineCollection), every line (the Pareto front's Line2D path) and every other label; every text
inside its axes; the smallest font; the width asked for. A planted label on a marker, a bar, the
front or another label is caught, and placement that ignores lines is caught too.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.integration
INCLUDE = "\\includegraphics[width=\\linewidth,height=0.9\\textheight,keepaspectratio]"  # figures.tex's

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from helpers import committed_copy  # noqa: E402
from nlgbench.cli import main  # noqa: E402
from nlgbench.reporting.figures import placement  # noqa: E402
from nlgbench.reporting.figures.drawing import DrawnFigure, build_figures, write_figures  # noqa: E402
from nlgbench.reporting.figures.style import COLUMN_WIDTHS, FRONT_COLOR, SPREAD_LABEL, FigureOptions  # noqa: E402
from nlgbench.reporting.quality import QualityOptions  # noqa: E402
from nlgbench.reporting.relative_table import QualityIntervals, choose_baselines, pareto_front, with_quality  # noqa: E402
from nlgbench.runs.rundata import RunData  # noqa: E402

PEARSON = QualityOptions()
RESAMPLES = 100  # enough for the bars' geometry; the report's own number is tested in test_report*.py
TOLERANCE = 0.5  # pixels: boxes that overlap by less are taken as touching
MIN_FONT = 7.0  # points


@dataclass
class Run:
    run: RunData
    df: pd.DataFrame
    baselines: dict[str, str]
    intervals: QualityIntervals

    def figures(self, width: float) -> Iterator[DrawnFigure]:
        yield from build_figures(
            self.df[~self.df["imported"]], PEARSON, self.baselines, self.intervals, FigureOptions(width)
        )

    def runtime(self, width: float) -> DrawnFigure:
        """The (one) runtime figure, open; the other figures closed at once."""
        drawn = list(self.figures(width))
        for other in drawn:
            if other.kind.name != "runtime":
                plt.close(other.figure)
        (runtime,) = [d for d in drawn if d.kind.name == "runtime"]
        return runtime


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    out = {}
    for name in ("example", "similarity"):
        run = RunData.open(committed_copy(name, tmp_path_factory.mktemp(name)))
        df = with_quality(run, PEARSON)
        out[name] = Run(run, df, choose_baselines(df, None), QualityIntervals(run, PEARSON, RESAMPLES))
    return out


# ----------------------------------------------------------------------------- the geometry


def boxes_overlap(a: Any, b: Any) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE


def segment_meets_box(p: np.ndarray, q: np.ndarray, half: float, box: Any) -> bool:
    """Whether the segment p-q, `half` pixels either side, meets the box shrunk by TOLERANCE:
    sampled densely along the segment (an independent check, not the placement's clipping)."""
    x0, y0, x1, y1 = box.x0 + TOLERANCE, box.y0 + TOLERANCE, box.x1 - TOLERANCE, box.y1 - TOLERANCE
    n = max(2, int(math.hypot(*(q - p)) / 0.5) + 1)
    pts = p + np.linspace(0, 1, n)[:, None] * (q - p)
    return bool(
        np.any(
            (pts[:, 0] >= x0 - half) & (pts[:, 0] <= x1 + half) & (pts[:, 1] >= y0 - half) & (pts[:, 1] <= y1 + half)
        )
    )


def disc_meets_box(centre: np.ndarray, r: float, box: Any) -> bool:
    """Whether a disc meets the box shrunk by TOLERANCE (nearest point of the box within r)."""
    nx = min(max(centre[0], box.x0 + TOLERANCE), box.x1 - TOLERANCE)
    ny = min(max(centre[1], box.y0 + TOLERANCE), box.y1 - TOLERANCE)
    return math.hypot(centre[0] - nx, centre[1] - ny) < r


def drawn_things(ax: Any) -> Iterator[tuple[str, Any]]:
    """What a label must not cover, in display pixels: ('marker', (centre, radius)) for every Line2D
    marker (points, error-bar caps) and scatter ring, ('bar', (p, q, half width)) for every
    LineCollection segment (error bars), ('line', (p, q, half width)) for every drawn Line2D path
    (the Pareto front)."""
    px = ax.figure.dpi / 72
    for line in ax.lines:
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        if line.get_marker() not in (None, "None", "", " ", "none"):
            for centre in xy:
                yield "marker", (centre, line.get_markersize() / 2 * px)
        if line.get_linestyle() not in ("None", "", " ", "none"):
            for p, q in zip(xy[:-1], xy[1:], strict=True):
                yield "line", (p, q, line.get_linewidth() / 2 * px)
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            width = float(np.max(coll.get_linewidths())) / 2 * px
            for seg in coll.get_segments():
                xy = coll.get_transform().transform(np.asarray(seg, float))
                for p, q in zip(xy[:-1], xy[1:], strict=True):
                    yield "bar", (p, q, width)
        elif isinstance(coll, PathCollection):
            offsets = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float))
            sizes = coll.get_sizes()
            for k, centre in enumerate(offsets):
                yield "marker", (centre, math.sqrt(float(sizes[k % len(sizes)])) / 2 * px)


def label_box(text: Text, renderer: Any) -> Any:
    """A point label's text box alone (an Annotation's own extent adds its leader line's)."""
    if hasattr(text, "update_positions"):
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def problems(fig: Any) -> list[str]:
    """Every overlap and escape in a laid-out figure: a label over a marker, a bar, a line or another
    label, or outside its axes; x tick labels overlapping each other."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        labels = [(t.get_text(), label_box(t, renderer)) for t in ax.texts]
        things = list(drawn_things(ax))
        for k, (text, box) in enumerate(labels):
            where = f"{ax.get_title()}: {text!r}"
            if not (
                box.x0 >= frame.x0 - TOLERANCE
                and box.y0 >= frame.y0 - TOLERANCE
                and box.x1 <= frame.x1 + TOLERANCE
                and box.y1 <= frame.y1 + TOLERANCE
            ):
                found.append(f"{where} leaves its axes")
            for kind, shape in things:
                hit = disc_meets_box(*shape, box) if kind == "marker" else segment_meets_box(*shape, box)
                if hit:
                    found.append(f"{where} covers a {kind}")
            found += [f"{where} overlaps {other!r}" for other, b in labels[k + 1 :] if boxes_overlap(box, b)]
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        lo, hi = frame.x0 - 1, frame.x1 + 1
        ticks = [b for b in ticks if lo <= (b.x0 + b.x1) / 2 <= hi]
        pairs = zip(ticks[:-1], ticks[1:], strict=True)
        found += [f"{ax.get_title()}: x tick labels overlap" for a, b in pairs if boxes_overlap(a, b)]
    return found


def smallest_font(fig: Any) -> float:
    """The smallest size (points) of any visible, non-empty text of the figure."""
    return min(
        t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure is not None
    )


# ----------------------------------------------------------------------------- every figure


@pytest.mark.parametrize("column", ["single", "double"])
def test_every_figure_is_print_ready(runs: dict[str, Run], column: str) -> None:
    """Each figure of both committed reports at the column's width: labels cover nothing and stay
    inside their axes, no text under 7 pt, the width asked for, one y range, unique panel titles
    (metric plus aligner), at most 3 panels a row, short axis labels, no method text in the title,
    a mean over datasets named as one on its y axis."""
    width = COLUMN_WIDTHS[column]
    kinds: set[str] = set()
    for name, run in runs.items():
        for drawn in run.figures(width):
            fig = drawn.figure
            where = f"{name}/{drawn.name} ({column})"
            kinds.add(drawn.kind.name + (" mean" if len(drawn.group.datasets) > 1 else ""))
            assert problems(fig) == [], where
            assert smallest_font(fig) >= MIN_FONT, where
            assert fig.get_figwidth() == pytest.approx(width, abs=1e-9), where
            assert fig.get_figheight() <= 9.0, where  # fits a page
            axes = fig.axes
            assert len({ax.get_ylim() for ax in axes}) == 1, where  # one quality range in all panels
            titles = [ax.get_title() for ax in axes]
            assert len(set(titles)) == len(titles) and all(t in drawn.metrics for t in titles), where
            rows = {round(ax.get_position().y0, 3) for ax in axes}
            assert len(axes) <= 3 * len(rows) and (column == "double" or len(axes) == len(rows)), where
            assert all(ax.has_data() for ax in axes), where  # no empty slot
            assert all(len(ax.get_xlabel()) <= 30 for ax in axes), where
            assert all(ax.get_xlabel().endswith(", log)") == (ax.get_xscale() == "log") for ax in axes), where
            assert fig._suptitle is None, where  # the caption says what is plotted
            ylabels = [ax.get_ylabel() for ax in axes if ax.get_ylabel()]
            if len(drawn.group.datasets) > 1:
                assert ylabels and all(
                    y == f"mean Pearson (global)\nover {len(drawn.group.datasets)} DA datasets" for y in ylabels
                ), where
            else:
                assert ylabels and set(ylabels) == {"Pearson (global)"}, where
            plt.close(fig)
    assert kinds == {"runtime", "memory", "peak_memory", "runtime mean", "memory mean", "peak_memory mean"}


def test_pareto_front_runs_between_its_points_and_the_baseline_stays_visible(runs: dict[str, Run]) -> None:
    """The front is a staircase from its fastest point to its best (no drop to the axes' bottom, no
    run to the right edge), ringed points, a legend entry; the baseline's point and bar are drawn
    above its ring."""
    for drawn in runs["similarity"].figures(COLUMN_WIDTHS["double"]):
        fig = drawn.figure
        assert "Pareto front" in [t.get_text() for t in fig.legends[0].get_texts()]
        for ax in fig.axes:
            points = [
                (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
                for line in ax.lines
                if line.get_marker() not in (None, "None", "", "_", "|") and line.get_color() != "tab:gray"
            ]
            xs, qs = [p[0] for p in points], [p[1] for p in points]
            front = sorted(points[i] for i in pareto_front(xs, qs))
            dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
            if len(front) == 1:
                assert not dashed
                continue
            (line,) = dashed
            assert matplotlib.colors.same_color(line.get_color(), FRONT_COLOR)
            lx, ly = (np.asarray(v, float) for v in line.get_data())
            assert (lx[0], ly[0]) == pytest.approx(front[0]) and (lx[-1], ly[-1]) == pytest.approx(front[-1])
            assert lx.min() >= front[0][0] - 1e-12 and lx.max() <= front[-1][0] + 1e-12  # no run to an edge
            assert ly.min() >= front[0][1] - 1e-12  # no drop to the bottom
            rings = [c for c in ax.collections if isinstance(c, PathCollection)]
            assert rings and max(c.get_zorder() for c in rings) < min(
                line.get_zorder() for line in ax.lines if line.get_marker() not in (None, "None", "")
            )
        plt.close(fig)


def test_time_spread_bars_are_the_fastest_and_slowest_repeat(runs: dict[str, Run]) -> None:
    """Runtime figures: each point's horizontal bar runs from its cell's fastest repeat to its
    slowest (result.json timing), its vertical bar is its quality interval."""
    run = runs["example"]
    drawn = run.runtime(COLUMN_WIDTHS["double"])  # the repeats lie within 9%: seen at this width only
    ax = drawn.figure.axes[0]
    horizontal = sorted(
        (round(float(s[0][0]), 9), round(float(s[1][0]), 9))
        for c in ax.collections
        if isinstance(c, LineCollection)
        for s in c.get_segments()
        if s[0][1] == s[1][1] and s[0][0] != s[1][0]
    )
    cells = run.df[(run.df["metric"] == "bertscore")]
    want = sorted(
        (round(min(r.timing.ms_per_segment), 9), round(max(r.timing.ms_per_segment), 9))
        for r in (run.run.results[c] for c in cells["cell_id"])
        if r.timing is not None
    )
    # a bar is drawn only where it reaches beyond its marker and ring at 6.9 in: repeats within 8% of
    # each other hide there; the legend names the bar only when one is drawn
    assert len(want) == 3 and set(horizontal) <= set(want)
    assert all(hi / lo < 1.08 for lo, hi in set(want) - set(horizontal))
    legend = [t.get_text() for t in drawn.figure.legends[0].get_texts()]
    assert (SPREAD_LABEL in legend) == bool(horizontal)
    plt.close(drawn.figure)


# ----------------------------------------------------------------------------- the checker can fail


def test_planted_collisions_are_caught(runs: dict[str, Run]) -> None:
    """The check fails on a label planted on a marker, on an error bar, on the front line, on
    another label and outside the axes (so a clean figure means something)."""

    def fresh() -> Any:
        drawn = runs["example"].runtime(COLUMN_WIDTHS["double"])
        assert problems(drawn.figure) == []
        return drawn.figure

    fig = fresh()
    ax = fig.axes[0]
    marker = next(line for line in ax.lines if line.get_marker() == "s")  # the MiniLM square
    ax.annotate("planted", (marker.get_xdata()[0], marker.get_ydata()[0]), ha="center", va="center", fontsize=7)
    assert any("'planted' covers a marker" in p for p in problems(fig))
    plt.close(fig)

    fig = fresh()
    ax = fig.axes[0]
    bar = next(c for c in ax.collections if isinstance(c, LineCollection)).get_segments()[0]
    ax.annotate("planted", ((bar[0][0] + bar[1][0]) / 2, (bar[0][1] + bar[1][1]) / 2), ha="center", fontsize=7)
    assert any("'planted' covers a bar" in p for p in problems(fig))
    plt.close(fig)

    fig = fresh()
    ax = fig.axes[0]
    (front,) = [line for line in ax.lines if line.get_linestyle() == "--"]
    x, y = front.get_data()
    ax.annotate("planted", (math.sqrt(x[0] * x[1]), y[0]), xytext=(0, 0), textcoords="offset points", fontsize=7)
    assert any("'planted' covers a line" in p for p in problems(fig))
    plt.close(fig)

    fig = fresh()
    ax = fig.axes[0]
    other = ax.texts[0]
    ax.annotate(
        "planted", other.xy, xytext=other.xyann, textcoords="offset points", ha=other.get_ha(), va=other.get_va()
    )
    assert any("overlaps 'planted'" in p for p in problems(fig))
    plt.close(fig)

    fig = fresh()
    ax = fig.axes[0]
    ax.annotate("planted", (1.02, 0.5), xycoords="axes fraction", fontsize=7)
    assert any("'planted' leaves its axes" in p for p in problems(fig))
    plt.close(fig)


def test_placement_blind_to_lines_is_caught(runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels placed the old way, seeing markers but not the bars and the front's segments,
    cover some of them in the similarity figures: the check reports it."""
    seeing_all = placement.axes_obstacles

    def markers_only(ax: Any) -> placement.Obstacles:
        return placement.Obstacles(boxes=seeing_all(ax).boxes)

    monkeypatch.setattr(placement, "axes_obstacles", markers_only)
    monkeypatch.setattr(placement, "MAKE_ROOM", 0)
    found = []
    for drawn in runs["similarity"].figures(COLUMN_WIDTHS["double"]):
        if drawn.kind.name == "runtime":
            found += problems(drawn.figure)
        plt.close(drawn.figure)
    assert any("covers a line" in p or "covers a bar" in p for p in found)


# ----------------------------------------------------------------------------- files, captions, command


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def pdf_width_points(path: Path) -> float:
    box = re.search(rb"/MediaBox \[ *0 0 ([\d.]+) ([\d.]+) *\]", path.read_bytes())
    assert box is not None
    return float(box[1])


def test_files_captions_and_figures_tex(runs: dict[str, Run], tmp_path: Path) -> None:
    """write_figures at a single column: PNGs of 3.3 in at the figure's dpi, PDFs 3.3 in wide, one
    caption per figure naming what is plotted, the human dimension, the level and method, the
    interval and its resampling unit, the data subset and the machine; figures.tex holds one float
    per figure including its PDF, its caption and its label."""
    run = runs["similarity"]
    df = run.df[~run.df["imported"]]
    files = write_figures(df, tmp_path, PEARSON, run.baselines, run.intervals, FigureOptions(3.3))
    assert len(files) == 24  # 3 kinds x 4 groups, each split in two figures of at most 3 rows
    tex = (tmp_path / "figures.tex").read_text(encoding="utf-8")
    runtime = [f for f in files if f.kind == "runtime"]  # what figures.tex sets by default
    assert tex.count("\\begin{figure}") == len(runtime) == 8 and "% needs \\usepackage{graphicx}" in tex
    for f in files:
        png, pdf, svg = f.paths
        assert png_size(png)[0] == round(3.3 * 300) and pdf_width_points(pdf) == pytest.approx(3.3 * 72, abs=0.01)
        assert svg.read_text(encoding="utf-8").startswith("<?xml")
        assert (f"{INCLUDE}{{{pdf.name}}}" in tex) == (f in runtime)
        assert len(f.caption.split()) <= 50 and "nlgbench." not in f.caption
        c = f.method  # the full text: index.html, and a comment in figures.tex
        assert c.startswith(f"{f.title.split(' vs ')[0]} against quality on cpu, {f.group.title}: ")
        assert "pearson (global), the pearson correlation of the metric's scores with the dataset's human scores" in c
        assert "at the global level (pooled over all segments)" in c
        # wmt15/16 DA: one translation per source; wmt21 MQM: several, so whole sources are drawn
        assert re.search(r"95% percentile bootstrap interval of the quality, resampling (segments|sources)\b", c)
        assert f"{RESAMPLES} resamples, seed 0" in c and "Machine: CPU AMD EPYC, 2 torch threads; batch size 64" in c
        assert all(f"{d}: the first " in c for d in f.group.datasets)
        assert ("the fastest to the slowest repeat" in c) == f.name.startswith("runtime")
        assert ("Each point is the mean over the 2 datasets" in c) == (len(f.group.datasets) > 1)


def test_report_command_takes_width_and_formats(runs: dict[str, Run], tmp_path: Path, capsys: Any) -> None:
    """`nlgbench report DIR --column single --format pdf` writes only PDFs 3.3 in wide (and figures.tex);
    --figure-width sets any width; a bad width or format is one line, exit 2."""
    run = committed_copy("example", tmp_path)
    assert main(["report", str(run), "--column", "single", "--format", "pdf"]) == 0
    out = run / "report"
    pdfs = sorted(p.name for p in out.glob("*_cpu_*.pdf"))
    assert pdfs == ["memory_cpu_wmt16_100.pdf", "peak_memory_cpu_wmt16_100.pdf", "runtime_cpu_wmt16_100.pdf"]
    assert not list(out.glob("*_cpu_*.png")) and not list(out.glob("*_cpu_*.svg"))
    assert all(pdf_width_points(out / p) == pytest.approx(3.3 * 72, abs=0.01) for p in pdfs)
    assert main(["report", str(run), "--figure-width", "5", "--format", "png"]) == 0
    assert png_size(out / "runtime_cpu_wmt16_100.png")[0] == 1500 and not list(out.glob("*_cpu_*.pdf"))
    assert INCLUDE + "{runtime_cpu_wmt16_100.png}" in (out / "figures.tex").read_text()
    capsys.readouterr()
    assert main(["report", str(run), "--figure-width", "1"]) == 2
    assert main(["report", str(run), "--format", "png,jpg"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("nlgbench: error: ") for line in err)
    assert "between 2.5 and 20 inches" in err[0] and "png, pdf, svg" in err[1]
