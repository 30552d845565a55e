"""Figures as a paper prints them, read from the figure's own artists: no title inside by default, a
legend of at most two rows holding only what point labels cannot say (and its share of a
single-column figure), no entry for what is not drawn, model-free metrics as labelled points in every
panel on the time axis (log only where the span needs it), a y range fitted to what is drawn, and
the timed repeats' bars only where they can be seen at the figure's size."""

from __future__ import annotations

import math
from collections.abc import Iterator

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from nlgbench.reporting.figures.content import spread_words  # noqa: E402
from nlgbench.reporting.figures.drawing import tradeoff_figure  # noqa: E402
from nlgbench.reporting.figures.style import COLUMN_WIDTHS, SPREAD_LABEL, FigureOptions, encoder_styles  # noqa: E402
from nlgbench.reporting.relative_table import Reference  # noqa: E402

pytestmark = pytest.mark.component

SINGLE = FigureOptions(COLUMN_WIDTHS["single"])
X = [("ms_per_segment", "time per segment (ms)")]
ENCODERS = ["all-mpnet-base-v2", "all-MiniLM-L6-v2", "all-MiniLM-L6-v2[num_layers=3]"]
CHRF_QUALITY, SENTBLEU_QUALITY = 0.529, 0.498


def points(spread: float, metrics: tuple[str, ...] = ("bertscore",)) -> pd.DataFrame:
    """Three encoders per metric (55, 7.8 and 4.1 ms/segment, the example run's) and two lexical
    baselines; each time's repeats from time / spread to time * spread."""
    rows = []
    for metric in metrics:
        for encoder, ms, q in zip(ENCODERS, (55.0, 7.8, 4.1), (0.623, 0.598, 0.608), strict=True):
            rows.append((metric, encoder, q, ms))
    rows += [("chrf", "none", CHRF_QUALITY, 0.84), ("sentbleu", "none", SENTBLEU_QUALITY, 0.42)]
    return pd.DataFrame(
        [
            {
                "metric": m,
                "encoder": e,
                "quality": q,
                "ci_low": q - 0.04,
                "ci_high": q + 0.04,
                "cell_ids": (f"{m}-{e}",),
                "ms_per_segment": ms,
                "ms_per_segment_low": ms / spread,
                "ms_per_segment_high": ms * spread,
            }
            for m, e, q, ms in rows
        ]
    )


@pytest.fixture
def drawn() -> Iterator[list[Figure]]:
    figures: list[Figure] = []
    yield figures
    for fig in figures:
        plt.close(fig)


def figure(frame: pd.DataFrame, drawn: list[Figure], options: FigureOptions = SINGLE) -> Figure:
    fig = tradeoff_figure(
        frame,
        X,
        "pearson (global)",
        encoder_styles(ENCODERS),
        {"bertscore": Reference("bertscore", ENCODERS[0])},
        "Runtime vs quality",
        options,
    )
    assert fig is not None
    drawn.append(fig)
    return fig


def legend_texts(fig: Figure) -> list[str]:
    (legend,) = fig.legends
    return [t.get_text() for t in legend.get_texts()]


def test_no_title_inside_a_figure_unless_asked_for(drawn: list[Figure]) -> None:
    plain = figure(points(1.01), drawn)
    assert plain._suptitle is None  # the caption says it
    titled = figure(points(1.01), drawn, FigureOptions(COLUMN_WIDTHS["single"], titles=True))
    assert titled._suptitle is not None and titled._suptitle.get_text() == "Runtime vs quality"


def test_legend_holds_what_labels_cannot_say_in_two_rows_and_a_small_share(drawn: list[Figure]) -> None:
    fig = figure(points(1.5), drawn)
    texts = legend_texts(fig)
    # the encoders and the lexical baselines are named by their labels in the panel, not in the legend
    assert not set(texts) & {*ENCODERS, "chrf", "sentbleu"} and not any("lexical" in t for t in texts)
    assert texts == ["baseline", "Pareto front", "95% interval", SPREAD_LABEL]
    (legend,) = fig.legends
    assert math.ceil(len(texts) / legend._ncols) <= 2  # rows
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    box = legend.get_window_extent(renderer)
    share = box.width * box.height / (fig.bbox.width * fig.bbox.height)
    assert share <= 0.12, f"the legend takes {share:.1%} of a single-column figure"
    labels = {t.get_text().replace("\n", "") for ax in fig.axes for t in ax.texts}
    assert {"all-mpnet-base-v2", "all-MiniLM-L6-v2", "chrf", "sentbleu"} <= labels


def test_model_free_metrics_are_points_on_the_time_axis_in_every_panel(drawn: list[Figure]) -> None:
    """chrF (0.84 ms) and sentBLEU (0.42 ms) are points of every panel at their time, with their
    interval and their name, on a log axis (55 / 0.42 ms is over LOG_SPAN), and on its Pareto front;
    no line across the panel stands for them."""
    fig = figure(points(1.01, ("bertscore", "moverscore")), drawn)
    assert [ax.get_title() for ax in fig.axes] == ["bertscore", "moverscore"]
    for ax in fig.axes:
        across = [line for line in ax.lines if list(line.get_xdata()) == [0, 1]]
        assert not across  # no axhline
        marked = [
            (x, y)
            for line in ax.lines
            if line.get_marker() not in (None, "None", "", "none")
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
        ]
        assert (0.84, CHRF_QUALITY) in marked and (0.42, SENTBLEU_QUALITY) in marked
        assert ax.get_xscale() == "log" and ax.get_xlim()[0] < 0.42
        assert ax.get_xlabel() == "time per segment (ms, log)"
        assert {"chrf", "sentbleu"} <= {t.get_text() for t in ax.texts}
        front = [line for line in ax.lines if line.get_gid() == "pareto"]
        assert len(front) == 1 and 0.42 in list(front[0].get_xdata())  # sentBLEU is the fastest point


def test_a_narrow_time_range_is_a_linear_axis(drawn: list[Figure]) -> None:
    """Times from 4.1 to 8 ms (no model-free metric) span less than LOG_SPAN: a linear axis, its label
    without 'log'."""
    frame = points(1.01)
    frame = frame[frame["encoder"] != "none"].assign(ms_per_segment=[8.0, 6.0, 4.1])
    frame = frame.assign(ms_per_segment_low=frame["ms_per_segment"], ms_per_segment_high=frame["ms_per_segment"])
    fig = figure(frame, drawn)
    (ax,) = fig.axes
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == "time per segment (ms)"
    assert 0 <= ax.get_xlim()[0] < 4.1 and ax.get_xlim()[1] > 8.0


def test_no_legend_entry_for_a_front_line_that_is_not_drawn(drawn: list[Figure]) -> None:
    """One encoder faster and better than the others: a front of one point, drawn as its ring alone;
    the legend's Pareto-front entry is a ring without the dashed line."""
    frame = points(1.01)
    frame = frame[frame["encoder"] != "none"].assign(quality=[0.5, 0.55, 0.7], ci_low=0.45, ci_high=0.75)
    fig = figure(frame, drawn)
    assert not [line for ax in fig.axes for line in ax.lines if line.get_gid() == "pareto"]
    (legend,) = fig.legends
    (entry,) = [h for h, t in zip(legend.legend_handles, legend_texts(fig), strict=True) if t == "Pareto front"]
    assert entry.get_linestyle() in ("None", "none", "")


def test_the_y_range_is_the_drawn_points_and_intervals(drawn: list[Figure]) -> None:
    """The y limits reach no further than 12% of the drawn range (with 0.01 at least) beyond the
    lowest and highest interval end drawn: nothing undrawn stretches the axis."""
    fig = figure(points(1.01), drawn)
    for ax in fig.axes:
        ends = [float(y) for line in ax.lines if line.get_gid() not in ("pareto",) for y in line.get_ydata()] + [
            float(y) for c in ax.collections for seg in getattr(c, "get_segments", list)() for _, y in seg
        ]
        lo, hi = min(ends), max(ends)
        pad = max(0.12 * (hi - lo), 0.01) + 1e-9
        assert lo - pad <= ax.get_ylim()[0] and ax.get_ylim()[1] <= hi + pad, (ax.get_ylim(), lo, hi)


def test_time_spread_bars_only_where_they_can_be_seen(drawn: list[Figure]) -> None:
    """Repeats within 1% (x / 1.01 to x * 1.01: 0.0086 decades) on an axis of about 1.4 decades and
    200 pt: a bar of about 1.2 pt, inside the 5 pt marker: dropped with its legend entry. Repeats 1.5x
    apart span 0.35 decades, about 50 pt: drawn, with the entry."""
    tight = figure(points(1.01), drawn)
    assert SPREAD_LABEL not in legend_texts(tight)
    assert not [c for ax in tight.axes for c in ax.collections if c.get_gid() == "spread"]
    wide = figure(points(1.5), drawn)
    assert SPREAD_LABEL in legend_texts(wide)
    assert len([c for ax in wide.axes for c in ax.collections if c.get_gid() == "spread"]) == 5  # chrF, sentBLEU too


@pytest.mark.parametrize("repeats", [[[5.0, 5.0001]], [[1.0, 2.875]], [[3.0, 3.2, 3.1], [10.0, 14.0]]])
def test_the_spread_in_words_is_no_longer_when_the_bars_are_not_drawn(repeats: list[list[float]]) -> None:
    """The caption's sentence on the timed repeats: the variant for bars too small to draw (which states
    the largest spread) has at most the words of the drawn one, whatever the timings, so a caption's
    length does not depend on the machine's noise."""
    cells = pd.DataFrame({"ms_per_segment_repeats": repeats})
    drawn, not_drawn = spread_words(cells, True), spread_words(cells, False)
    assert "Horizontal bars" in drawn and "(not drawn)" in not_drawn
    assert len(not_drawn.split()) <= len(drawn.split())
