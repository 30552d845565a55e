"""How the report's figures look, apart from what they show: the package's matplotlib style file
(`STYLE_FILE`: sizes in points at the printed width, nothing below 7 pt), the width asked for and
the formats written (`FigureOptions`), how many panels a row holds, the colour and marker of each
encoder, the log axes' labelled ticks and the one y range of a figure's panels."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGURE_FORMATS = ("png", "pdf", "svg")
COLUMN_WIDTHS = {"single": 3.3, "double": 6.9}  # inches: a paper's column and its full text width
WIDTH_RANGE = (2.5, 20.0)  # inches: below 2.5 no panel has room for its 7 pt labels
STYLE_FILE = Path(__file__).with_name("nlgbench.mplstyle")
PANEL_MIN_WIDTH = 2.2  # inches a panel needs (axes, ticks and labels): fewer per row below it
MAX_PER_ROW, MAX_ROWS = 3, 3
PALETTE = ("tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
MARKERS = ("o", "s", "^", "v", "P", "X", "h", "<", ">")
ANCHOR_COLOR, FRONT_COLOR, BASELINE_COLOR = "tab:gray", "tab:orange", "black"
INTERVAL_LABEL, SPREAD_LABEL = "95% interval", "fastest-slowest repeat"  # the legend's entries
BASELINE_LABEL, FRONT_LABEL = "baseline", "Pareto front"
MARKER_SIZE = 5.0  # points
MIN_SPREAD = 3.0  # points a horizontal bar must reach out of its marker and rings, on one side, to be seen
FRONT_RING, BASELINE_RING = MARKER_SIZE + 4, MARKER_SIZE + 9  # ring diameters (points), drawn behind the marker


FIGURE_KINDS = ("runtime", "memory", "peak_memory")  # what `--figures` names: figure_kinds' names
LOG_SPAN = 10.0  # an x range at least this wide (largest / smallest) is drawn on a log axis


@dataclass(frozen=True)
class FigureOptions:
    """How figures are drawn: `width` in inches (COLUMN_WIDTHS: `--column single|double`, a single
    column by default), the file formats written, whether a title is drawn inside the figure
    (`--titles`: for slides; a paper's caption says it instead), and the kinds of figure figures.tex
    takes (`--figures`; index.html shows all)."""

    width: float = COLUMN_WIDTHS["single"]
    formats: tuple[str, ...] = FIGURE_FORMATS
    titles: bool = False
    tex_kinds: tuple[str, ...] = ("runtime",)

    def check(self) -> None:
        lo, hi = WIDTH_RANGE
        if not (math.isfinite(self.width) and lo <= self.width <= hi):
            raise UserError(f"--figure-width must be between {lo:g} and {hi:g} inches, got {self.width:g}")
        unknown = [f for f in self.formats if f not in FIGURE_FORMATS]
        if unknown or not self.formats:
            raise UserError(
                f"--format takes a comma-separated list of {', '.join(FIGURE_FORMATS)}, got {','.join(self.formats)!r}"
            )
        unknown = [k for k in self.tex_kinds if k not in FIGURE_KINDS]
        if unknown or not self.tex_kinds:
            raise UserError(
                f"--figures takes a comma-separated list of {', '.join(FIGURE_KINDS)}, got {','.join(self.tex_kinds)!r}"
            )

    @property
    def per_row(self) -> int:
        """Panels per row: as many as fit the width (at least 1, at most MAX_PER_ROW)."""
        return max(1, min(MAX_PER_ROW, int(self.width // PANEL_MIN_WIDTH)))


DEFAULT_FIGURES = FigureOptions()


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


def log_ticks(
    lo: float, hi: float, axis_points: float = math.inf, char_points: float = 4.2
) -> tuple[list[float], float, float]:
    """Labelled ticks of a log axis from lo to hi (> 0), readable in any range: over a decade or
    more, powers of ten where three fit, else 1-2-5 steps; within one decade, at least 3 round
    values (1, 2, 2.5 or 5 times a power of ten apart). On an axis `axis_points` long, whose tick
    labels take `char_points` per character, only sets of round values whose labels do not touch;
    among those, one with 3 or more ticks, one labelling the axis' first quarter, about 5 ticks.
    Returns (ticks, lo, hi), the limits widened by 10% each way when lo == hi."""
    from matplotlib.ticker import MaxNLocator

    if hi <= lo:
        lo, hi = lo / 1.1, hi * 1.1

    def steps(mantissas: Sequence[float]) -> list[float]:
        out = []
        for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
            out += [v for m in mantissas if lo <= (v := float(f"{m}e{k}")) <= hi]
        return out

    def spaced(ticks: list[float]) -> bool:
        per_decade = axis_points / math.log10(hi / lo)
        return all(
            math.log10(b / a) * per_decade >= (len(f"{a:g}") + len(f"{b:g}")) / 2 * char_points + 4
            for a, b in zip(ticks[:-1], ticks[1:], strict=True)
        )

    if hi / lo >= 10:
        powers = steps((1,))
        sets = [steps((1, 2, 5)), powers, steps((1, 3)), steps((1, 2, 3, 5))]
        ticks = powers if len(powers) >= 3 else sets[0]
    else:
        sets = []
        for bins in (2, 3, 4, 5, 6, 8, 10, 12):
            values = MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
            sets.append([float(f"{v:.12g}") for v in values if lo <= v <= hi and v > 0])
        ticks = next((t for t in sets[3:] if len(t) >= 3), sets[-1])
        sets += [steps((1, 2, 3, 5)), steps((1, 1.5, 2, 3, 5, 7))]
    fitting = [t for t in [ticks, *sets] if len(t) >= 2 and spaced(t)]
    if not fitting:
        return min((t for t in sets if len(t) >= 2), key=len, default=ticks), lo, hi

    def score(t: list[float]) -> tuple[bool, bool, int]:  # 3 or more; one in the axis' first quarter; about 5
        return len(t) >= 3, math.log10(t[0] / lo) <= 0.25 * math.log10(hi / lo), -abs(len(t) - 5)

    return max(fitting, key=score), lo, hi


def needs_log(values: Sequence[float]) -> bool:
    """Whether an x range needs a log axis: its largest value LOG_SPAN times its smallest or more."""
    finite = [v for v in values if math.isfinite(v) and v > 0]
    return bool(finite) and max(finite) >= LOG_SPAN * min(finite)


def axis_label(label: str, log: bool) -> str:
    """An x axis label with ', log' in its unit's brackets on a log axis: 'time per segment (ms, log)'."""
    return f"{label[:-1]}, log)" if log and label.endswith(")") else (f"{label} (log)" if log else label)


def set_x(ax: Axes, values: Sequence[float], log: bool) -> None:
    """The x axis over the values: a log one (`set_log_x`), or a linear one with 12% spare each way."""
    if log:
        set_log_x(ax, values)
        return
    from matplotlib.ticker import MaxNLocator

    finite = [v for v in values if math.isfinite(v)]
    lo, hi = min(finite), max(finite)
    pad = max(0.12 * (hi - lo), 0.05 * abs(hi) or 0.1)
    ax.set_xlim(max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))


def set_log_x(ax: Axes, values: Sequence[float]) -> None:
    """A log x axis over the values (12% spare each way, at least 0.08 decades) with ticks labelled
    far enough apart for their labels at the axes' width (the style's tick label size)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    finite = [v for v in values if math.isfinite(v) and v > 0]
    lo, hi = math.log10(min(finite)), math.log10(max(finite))
    pad = max(0.12 * (hi - lo), 0.08)  # decades
    fig = ax.figure
    width = ax.get_position().width * fig.bbox.width / fig.dpi * 72  # points, before the layout shrinks it a little
    char = 0.62 * float(plt.rcParams["xtick.labelsize"])  # points per digit of a tick label
    ticks, a, b = log_ticks(10 ** (lo - pad), 10 ** (hi + pad), 0.9 * width, char)
    ax.set_xscale("log")
    ax.set_xlim(a, b)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.xaxis.set_minor_formatter(NullFormatter())


def y_limits(values: Sequence[float]) -> tuple[float, float]:
    """The y range of every panel of a figure: the qualities and intervals, 12% spare each way (room
    for labels above the highest point and below the lowest)."""
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = min(finite), max(finite)
    pad = max(0.12 * (hi - lo), 0.01)
    return lo - pad, hi + pad


def row_sizes(n_panels: int, per_row: int) -> list[int]:
    """Panels per row, rows as even as can be, the fuller ones first: 5 by 3 -> [3, 2], 4 by 3 -> [2, 2]."""
    rows = math.ceil(n_panels / per_row)
    base, extra = divmod(n_panels, rows)
    return [base + 1] * extra + [base] * (rows - extra)


def legend_handles(baseline: bool, spread: bool, front_line: bool = True, intervals: bool = True) -> list[Any]:
    """What the point labels cannot say, and only what is drawn: the baseline's ring, the Pareto
    front (its dashed line only where some panel draws one: `front_line`), the quality intervals,
    the repeats' spread; each encoder and each model-free metric is named by its label in the panel."""
    from matplotlib.lines import Line2D

    def point(label: str, **kw: Any) -> Line2D:
        return Line2D([], [], linestyle="none", label=label, **{"markersize": MARKER_SIZE, **kw})

    handles = []
    if baseline:
        handles.append(
            point(
                BASELINE_LABEL,
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
            linestyle="--" if front_line else "none",
            linewidth=0.9,
            color=FRONT_COLOR,
            marker="o",
            markersize=FRONT_RING,
            markerfacecolor="none",
            markeredgecolor=FRONT_COLOR,
            markeredgewidth=0.9,
            label=FRONT_LABEL,
        )
    )
    if intervals:
        handles.append(point(INTERVAL_LABEL, marker="|", markersize=10, color="black", markeredgewidth=0.8))
    if spread:
        handles.append(point(SPREAD_LABEL, marker="_", markersize=10, color="black", markeredgewidth=0.8))
    return handles


LEGEND_ROWS = 2  # at most: the legend holds only what the point labels cannot say


def fit_title_and_legend(fig: Figure, title: str, handles: list[Any]) -> None:
    """The legend below the panels in as many columns as fit the figure's width, at most LEGEND_ROWS
    rows (fewer columns would only add rows), and the title (none where '') wrapped to the width; the
    figure made taller by the legend and the title (the panels keep their height); laid out (not
    rendered), so the layout is final."""
    width = fig.bbox.width - 4
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = None
    fewest = math.ceil(len(handles) / LEGEND_ROWS)
    for columns in range(len(handles), fewest - 1, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncols=columns)
        if legend.get_window_extent(renderer).width <= width or columns == fewest:
            break
        legend.remove()
    assert legend is not None
    extra = legend.get_window_extent(renderer).height / fig.dpi + 0.05
    if title:
        for chars in range(110, 20, -5):
            text = fig.suptitle("\n".join(textwrap.fill(line, chars) for line in title.splitlines()))
            if text.get_window_extent(renderer).width <= width:
                break
        extra += (text.get_text().count("\n") + 1) * float(text.get_fontsize()) * 1.2 / 72
    fig.set_figheight(fig.get_figheight() + extra)
    fig.draw_without_rendering()
