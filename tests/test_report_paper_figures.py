"""Figures a paper can use: labels inside the axes, a legend, readable log ticks, a Pareto front for
one point, PNG, PDF and SVG, bars equal to the bootstrap interval, one colour and marker per encoder,
model memory in MiB, means only within one kind of human score.
"""

from __future__ import annotations

import html
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from helpers import read_csv
from nlgbench.reporting.figures.drawing import (
    FRONT_COLOR,
    DatasetGroup,
    build_figures,
    dataset_groups,
    encoder_styles,
    figure_points,
    tradeoff_figure,
)
from nlgbench.reporting.figures.style import axis_label, log_ticks
from nlgbench.reporting.relative_table import QualityIntervals, Reference, choose_baselines, with_quality
from nlgbench.runs.rundata import RunData
from paperkit import PEARSON, stratified_draw

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def figures(paper_run: Path) -> Iterator[list[tuple[str, object]]]:
    """Every figure the report draws for the run, not saved; closed after the module's tests."""
    run = RunData.open(paper_run)
    df = with_quality(run, PEARSON)
    baselines = choose_baselines(df, None)
    drawn = [
        (drawn.name, drawn.figure)
        for drawn in build_figures(df[~df["imported"]], PEARSON, baselines, QualityIntervals(run, PEARSON))
    ]
    yield drawn
    for _, fig in drawn:
        plt.close(fig)  # type: ignore[arg-type]


def label_boxes_outside(fig) -> list[str]:  # type: ignore[no-untyped-def]
    """The texts inside panels (point labels) whose bounding box leaves their axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            b = text.get_window_extent(renderer)
            if not (b.x0 >= box.x0 - 0.5 and b.x1 <= box.x1 + 0.5 and b.y0 >= box.y0 - 0.5 and b.y1 <= box.y1 + 0.5):
                bad.append(text.get_text())
    return bad


def assert_inside_figure(fig) -> None:  # type: ignore[no-untyped-def]
    """The title and the legend lie within the figure (nothing cut off in the saved file)."""
    renderer = fig.canvas.get_renderer()
    for artist in [a for a in (fig._suptitle, *fig.legends) if a is not None]:
        b = artist.get_window_extent(renderer)
        assert b.x0 >= -0.5 and b.y0 >= -0.5 and b.x1 <= fig.bbox.width + 0.5 and b.y1 <= fig.bbox.height + 0.5, (
            artist.get_text() if hasattr(artist, "get_text") else "legend"
        )


# ----------------------------------------------------------------------------- figures


def test_figures_per_dataset_and_a_mean_only_within_one_kind_of_human_score(paper_run: Path) -> None:
    out = paper_run / "report"
    stems = sorted({p.stem for p in out.glob("runtime_*")})
    # each dataset, and the two DA datasets' mean; WMT21 (MQM) is never averaged with them
    assert stems == ["runtime_cpu_mean_DA", "runtime_cpu_wmt15_6", "runtime_cpu_wmt16_5", "runtime_cpu_wmt21_20"]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "mean over the 2 DA datasets (wmt15[:6], wmt16[:5])" in page and "wmt21[:20] (MQM)" in page
    rel = pd.read_csv(out / "relative.csv")
    assert set(rel["dataset"]) == {"wmt15[:6]", "wmt16[:5]", "wmt21[:20]", "mean (DA)"}
    for _, mean in rel[rel["dataset"] == "mean (DA)"].iterrows():
        da = rel[
            (rel["encoder"] == mean["encoder"])
            & (rel["metric"] == mean["metric"])
            & rel["dataset"].isin(["wmt15[:6]", "wmt16[:5]"])
        ]
        assert mean["quality"] == pytest.approx(da["quality"].mean(), abs=1e-12)
    # the per-encoder table and the quantity matrix keep one quality per kind of human score
    assert "<th>quality (DA)</th><th>quality (MQM)</th>" in page.replace("\n", "")
    # two encoders per metric: no quantity correlation is defined (no bare r from too few
    # encoders): no quantities file, and the page says why, naming the per-kind quality columns it would use
    assert not (out / "quantities.csv").exists()
    assert "no metric has 3 or more encoders" in page and "per kind of human score" in page


def test_png_pdf_and_svg_are_written(paper_run: Path) -> None:
    out = paper_run / "report"
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 12  # runtime, model memory and peak memory x 4 dataset groups
    for png in pngs:
        pdf, svg = png.with_suffix(".pdf"), png.with_suffix(".svg")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg") and len(list(root.iter())) > 50
        assert "time per segment" in svg.read_text(encoding="utf-8") or "MiB" in svg.read_text(
            encoding="utf-8"
        )  # text stays text


def test_no_label_leaves_its_axes_and_every_figure_has_a_legend(figures: list[tuple[str, object]]) -> None:
    assert len(figures) == 12
    for name, fig in figures:
        assert fig.legends, name  # type: ignore[attr-defined]
        labels = [t.get_text() for t in fig.legends[0].get_texts()]  # type: ignore[attr-defined]
        assert {"Pareto front", "95% interval", "baseline"} <= set(labels)
        assert sum(len(ax.texts) for ax in fig.axes) >= 2, name  # type: ignore[attr-defined]  # points are labelled
        assert label_boxes_outside(fig) == [], name
        assert_inside_figure(fig)


def test_crowded_long_labels_stay_inside(tmp_path: Path) -> None:
    """Long variant labels on points at the axes' edges, several at one spot: all inside."""
    names = [f"sentence-transformers/all-MiniLM-L6-v2[num_layers={k},quantize=int8,early_exit=0.{k}]" for k in range(6)]
    points = pd.DataFrame(
        [
            {
                "metric": "bertscore",
                "encoder": n,
                "quality": q,
                "ci_low": q - 0.05,
                "ci_high": q + 0.05,
                "cell_ids": (),
                "ms_per_segment": x,
            }
            for n, x, q in zip(
                names, [1.0, 1.0, 1.01, 50.0, 50.0, 49.0], [0.2, 0.21, 0.2, 0.7, 0.71, 0.69], strict=True
            )
        ]
    )
    fig = tradeoff_figure(
        points,
        [("ms_per_segment", "ms")],
        "pearson",
        encoder_styles(names),
        {"bertscore": Reference("bertscore", names[3])},
        "t",
    )
    assert fig is not None and fig.legends
    assert len(fig.axes[0].texts) == 6
    assert label_boxes_outside(fig) == []
    assert_inside_figure(fig)
    plt.close(fig)


def test_one_point_pareto_front_is_drawn_and_in_the_legend() -> None:
    points = pd.DataFrame(
        [
            {
                "metric": "m",
                "encoder": "only",
                "quality": 0.5,
                "ci_low": 0.4,
                "ci_high": 0.6,
                "cell_ids": (),
                "ms_per_segment": 7.0,
            }
        ]
    )
    fig = tradeoff_figure(points, [("ms_per_segment", "ms")], "pearson", encoder_styles(["only"]), {}, "t")
    assert fig is not None
    ax = fig.axes[0]
    dashed = [
        line
        for line in ax.lines
        if line.get_linestyle() == "--" and matplotlib.colors.same_color(line.get_color(), FRONT_COLOR)
    ]
    assert dashed == []  # a front of one point is no line (no staircase to the axes' edges) ...
    rings = [c for c in ax.collections if matplotlib.colors.same_color(c.get_edgecolor()[0], FRONT_COLOR)]
    assert len(rings) == 1 and [tuple(o) for o in rings[0].get_offsets()] == [(7.0, 0.5)]  # ... but its ring
    assert "Pareto front" in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)


@pytest.mark.parametrize(
    "lo, hi",
    [
        (70.3, 71.0),
        (5.1, 9.8),
        (55.0, 140.0),
        (0.21, 0.29),
        (1010.0, 1900.0),
        (0.0031, 0.0042),
        (0.5, 20000.0),
        (100.0, 100.0),
    ],
)
def test_log_ticks_label_any_range(lo: float, hi: float) -> None:
    ticks, a, b = log_ticks(lo, hi)
    assert a <= lo and b >= hi and len(ticks) >= 2 and all(a <= t <= b for t in ticks)
    assert len(ticks) <= 10


def test_tick_labels_present_when_the_data_fit_one_decade() -> None:
    points = pd.DataFrame(
        [
            {
                "metric": "m",
                "encoder": e,
                "quality": q,
                "ci_low": q - 0.1,
                "ci_high": q + 0.1,
                "cell_ids": (),
                "peak_rss_mb": x,
            }
            for e, x, q in (("a", 1010.0, 0.5), ("b", 1130.0, 0.6))
        ]
    )
    fig = tradeoff_figure(points, [("peak_rss_mb", "MiB")], "pearson", encoder_styles(["a", "b"]), {}, "t")
    assert fig is not None
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
    assert len(shown) >= 2, shown  # numbers on the axis, not only '1000' or none
    plt.close(fig)


def test_bars_are_the_cells_bootstrap_interval(paper_run: Path) -> None:
    run = RunData.open(paper_run)
    df = with_quality(run, PEARSON)
    intervals = QualityIntervals(run, PEARSON)
    group = next(g for g in dataset_groups(df) if g.name == "wmt16[:5]")
    points = figure_points(df[df["device"] == "cpu"], group, ["ms_per_segment"], intervals)
    assert len(points) == 3
    for _, p in points.iterrows():
        (cell_id,) = p["cell_ids"]
        seg = run.segments(cell_id)
        # segments resampled within each language pair, by an independent loop: seed 0, 1000 draws
        rng = np.random.default_rng(0)
        draws = []
        for _ in range(1000):
            idx = stratified_draw(seg.lp, rng)
            draws.append(stats.pearsonr(seg.score[idx], seg.human[idx])[0])
        want = tuple(float(v) for v in np.percentile(draws, [2.5, 97.5]))
        assert (p["ci_low"], p["ci_high"]) == pytest.approx(want, abs=1e-12)
        assert p["quality"] == pytest.approx(stats.pearsonr(seg.score, seg.human)[0], abs=1e-12)
        # the pooled Pearson interval the worker stored (same resamples, same seed) is the same interval
        row = next(r for r in read_csv(paper_run / "results.csv") if r["cell_id"] == cell_id)
        assert float(row["pearson_global_ci_low"]) == pytest.approx(want[0], abs=1e-12)
    # and the bars drawn in the figure are these numbers (the encoders' points)
    points = points[points["encoder"] != "none"]
    fig = tradeoff_figure(
        points, [("ms_per_segment", "ms")], "pearson", encoder_styles(list(points["encoder"])), {}, "t"
    )
    assert fig is not None
    drawn = sorted(
        (round(seg[0][1], 12), round(seg[1][1], 12))
        for coll in fig.axes[0].collections
        if hasattr(coll, "get_segments")
        for seg in coll.get_segments()
        if seg[0][0] == seg[1][0]
    )
    assert drawn == sorted(
        (round(lo, 12), round(hi, 12)) for lo, hi in zip(points["ci_low"], points["ci_high"], strict=True)
    )
    plt.close(fig)


def test_one_colour_and_marker_per_encoder_in_every_figure(paper_run: Path, figures: list[tuple[str, object]]) -> None:
    """Each encoder keeps its colour and marker in every figure (the points are named by their labels,
    not in the legend): the point of each cell, found by its cell ids in the SVG id, has one style."""
    run = RunData.open(paper_run)
    encoder_of = dict(zip(run.cells["cell_id"], run.cells["encoder"], strict=True))
    seen: dict[str, tuple[str, str]] = {}
    for name, fig in figures:
        for ax in fig.axes:  # type: ignore[attr-defined]
            for line in ax.lines:
                gid = line.get_gid() or ""
                if gid.startswith("cell-") and line.get_marker() not in (None, "None", ""):
                    encoder = encoder_of[gid.split("-")[1]]
                    style = (matplotlib.colors.to_hex(line.get_color()), line.get_marker())
                    assert seen.setdefault(encoder, style) == style, (name, encoder)
    assert len(seen) == 3 and len(set(seen.values())) == 3  # the tiny BERT, its cut, sentBLEU (encoder none)


def test_memory_figure_shows_model_memory_beside_process_peak_in_mib(
    paper_run: Path, figures: list[tuple[str, object]]
) -> None:
    # model memory and the process peak, each its own figure, short axis labels in MiB
    for name, label in (("memory_cpu_wmt16_5", "model memory (MiB)"), ("peak_memory_cpu_wmt16_5", "peak RSS (MiB)")):
        for ax in dict(figures)[name].axes:  # type: ignore[attr-defined]
            assert ax.get_xlabel() == axis_label(label, ax.get_xscale() == "log")
    page = html.unescape((paper_run / "report" / "index.html").read_text(encoding="utf-8"))  # the method text
    assert "model memory (the growth of the process's resident set size over its post-import baseline, MiB)" in page
    run = RunData.open(paper_run)
    df = with_quality(run, PEARSON)
    group = DatasetGroup("wmt16[:5]", ("wmt16[:5]",), "DA")
    points = figure_points(df, group, ["rss_growth_mb", "peak_rss_mb"], QualityIntervals(run, PEARSON))
    for _, p in points.iterrows():
        (cell_id,) = p["cell_ids"]
        if p["encoder"] == "none":  # sentBLEU: no model, no model memory
            assert math.isnan(p["rss_growth_mb"]) and p["peak_rss_mb"] > 0
            continue
        memory = run.results[cell_id].memory
        assert memory is not None and p["rss_growth_mb"] == memory.rss_growth_mb
        assert memory.rss_growth_mb == pytest.approx(memory.peak_rss_mb - memory.baseline_rss_mb, abs=1e-9)
        assert p["peak_rss_mb"] == memory.peak_rss_mb and 0 < p["rss_growth_mb"] < p["peak_rss_mb"]
    assert " MB" not in (paper_run / "report" / "index.html").read_text(encoding="utf-8")
