"""What the report's figures show, apart from drawing them (nlgbench.reporting.figures.drawing draws): the
dataset groups (one dataset, or a mean over datasets of one kind of human score), the kinds of
figure (what the x axis measures), the plotted points with their quality interval and time spread,
each figure's caption, and figures.tex (one LaTeX `figure` float per figure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.devicenames import CPU
from nlgbench.reporting.markup import latex_text
from nlgbench.reporting.published import dataset_name, dataset_short, device_name, method_name
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import (
    QualityIntervals,
    Reference,
    human_words,
    mean_label,
    reference_name,
    resampling_words,
    score_types,
)
from nlgbench.runs.rundata import memory_columns
from nlgbench.statistics.correlation import canonical_method
from nlgbench.statistics.levels import canonical_level

if TYPE_CHECKING:
    import pandas as pd

SPREADS = {"ms_per_segment": "ms_per_segment_repeats"}  # x columns with a spread: the column of repeats
LEVEL_WORDS = {
    "global": "pooled over all segments",
    "segment": "per language pair over its segments, then the mean",
    "item": "per document over its segments, then the mean",
    "source": "per source over its translations (one per system), then the mean",
    "system": "per language pair over the systems' mean scores, then the mean",
}


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

    def quality_label(self, label: str) -> str:
        """The y axis: the quality's label (`QualityOptions.label`), for a mean over datasets named
        as such on two lines: 'mean pearson (global)' / 'over 2 DA datasets'."""
        if len(self.datasets) == 1:
            return label
        kind = f"{self.score_type} " if self.score_type else ""
        return f"mean {label}\nover {len(self.datasets)} {kind}datasets"


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


@dataclass(frozen=True)
class FigureKind:
    """What a figure's x axis measures: `name` starts its files, `title` its title, `label` is the
    short axis label (with unit), `words` what it is for the caption."""

    name: str
    title: str
    column: str
    label: str
    words: str


def figure_kinds(device: str) -> list[FigureKind]:
    """The figures of one device: runtime, model memory, process peak memory (one x column each)."""
    (model, _), (peak, _) = memory_columns(device)
    if device == CPU:
        model_words = "model memory (the growth of the process's resident set size over its post-import baseline, MiB)"
        peak_words = "the process's peak resident set size (RSS, MiB)"
        model_label, peak_label = "model memory (MiB)", "peak RSS (MiB)"
    else:
        model_words = "model memory (the peak CUDA memory allocated, MiB)"
        peak_words = "the peak CUDA memory reserved by the process (MiB)"
        model_label, peak_label = "CUDA allocated (MiB)", "CUDA reserved (MiB)"
    return [
        FigureKind("runtime", "Runtime", "ms_per_segment", "time per segment (ms)", "time per segment (ms)"),
        FigureKind("memory", "Model memory", model, model_label, model_words),
        FigureKind("peak_memory", "Peak memory", peak, peak_label, peak_words),
    ]


def figure_points(
    df: pd.DataFrame, group: DatasetGroup, columns: Sequence[str], intervals: QualityIntervals
) -> pd.DataFrame:
    """Per metric x encoder with a cell of defined quality in every dataset of the group: each of
    `columns` and the quality averaged over those datasets, with the quality's 95% interval
    (`ci_low`, `ci_high`) and, for a column with repeats (SPREADS), the spread `<column>_low` ..
    `<column>_high`: the fastest and slowest repeat (averaged over the datasets); cells of one device
    (the caller's)."""
    import pandas as pd

    rows = []
    data = df[df["dataset"].isin(group.datasets) & np.isfinite(df["quality"].astype(float))]
    spread = [c for c in columns if c in SPREADS and SPREADS[c] in df]
    for (metric, encoder), g in data.groupby(["metric", "encoder"], sort=False):
        cells = [g[g["dataset"] == d] for d in group.datasets]
        if any(len(c) != 1 for c in cells):
            continue  # not measured on every dataset of the group: its mean would be over others
        cells_df = pd.concat(cells)
        lo, hi = intervals.interval(list(cells_df["cell_id"]))
        row = {
            "metric": metric,
            "encoder": encoder,
            "quality": float(cells_df["quality"].mean()),
            "ci_low": lo,
            "ci_high": hi,
            "cell_ids": tuple(cells_df["cell_id"]),
            **{c: float(cells_df[c].astype(float).mean()) for c in columns},
        }
        for c in spread:
            repeats = [list(r) for r in cells_df[SPREADS[c]]]
            known = all(len(r) for r in repeats)
            row[f"{c}_low"] = float(np.mean([min(r) for r in repeats])) if known else np.nan
            row[f"{c}_high"] = float(np.mean([max(r) for r in repeats])) if known else np.nan
        rows.append(row)
    names = [f"{c}_{end}" for c in spread for end in ("low", "high")]
    fixed = ["metric", "encoder", "quality", "ci_low", "ci_high", "cell_ids"]
    return pd.DataFrame(rows, columns=[*fixed, *columns, *names])


def point_gid(cell_ids: Sequence[str]) -> str:
    """The id of a plotted point (or a lexical baseline's line) in the SVG: `cell-` and its cells' ids."""
    return "cell-" + "-".join(cell_ids)


def point_tooltips(points: pd.DataFrame, kind: FigureKind, names: Names = DEFAULT_NAMES) -> dict[str, str]:
    """Each plotted point's tooltip (index.html, and a `<title>` in the SVG), by `point_gid`: encoder
    and metric, the x value with its unit, the quality with its 95% interval, the cell id(s)."""
    what, _, unit = kind.label.partition(" (")
    unit = unit.split(",")[0].rstrip(")")
    out = {}
    for _, p in points.iterrows():
        who = f"{names(p['metric'])} (lexical baseline)" if p["encoder"] == NO_ENCODER else names(p["encoder"])
        where = "" if p["encoder"] == NO_ENCODER else f" ({names(p['metric'])})"
        out[point_gid(p["cell_ids"])] = (
            f"{who}{where}\n{what}: {p[kind.column]:.3g} {unit}\nquality {p['quality']:.3f} "
            f"[95% {p['ci_low']:.3f}, {p['ci_high']:.3f}]\ncell {', '.join(p['cell_ids'])}"
        )
    return out


# ----------------------------------------------------------------------------- captions


def bars_note(cells: pd.DataFrame, options: QualityOptions, intervals: QualityIntervals) -> str:
    """What a figure's bars are: the 95% percentile bootstrap interval, the unit it resamples for
    these cells (`relative_table.resampling_words`), the resamples and the seed."""
    return (
        f"bars: 95% bootstrap interval of the quality, resampling {resampling_words(intervals.run, options, cells)}; "
        f"{intervals.n_resamples} resamples, seed {intervals.seed}"
    )


def _words(values: Sequence[object]) -> str:
    """Distinct values as a list in words ('unknown' for none); whole floats as integers (1.0 -> 1)."""
    whole = [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]
    distinct = [str(v) for v in dict.fromkeys(whole) if v is not None and str(v) not in ("", "nan")]
    return ", ".join(distinct) if distinct else "unknown"


def subset_words(intervals: QualityIntervals, cells: pd.DataFrame) -> str:
    """Each dataset of the cells, with the subset its cells scored, e.g. 'wmt16[:100]: the first
    100 segments of each language pair (600 segments)'."""
    parts = []
    for dataset, g in cells.groupby("dataset", sort=False):
        ref = intervals.run.results[str(g["cell_id"].iloc[0])].config.dataset
        if ref.sample:
            what = f"a random sample of {ref.sample[0]} segments (or documents) per language pair, seed {ref.sample[1]}"
        elif ref.max_segments:
            what = f"the first {ref.max_segments} segments of each language pair"
        else:
            what = "all segments"
        parts.append(f"{dataset}: {what} ({_words(list(g['n_segments']))} segments)")
    return "; ".join(parts)


def machine_words(cells: pd.DataFrame, device: str) -> str:
    """The machine and settings the cells ran with: CPU model, GPU, torch threads, batch sizes."""
    cpu = _words(list(cells["cpu_model"])) if "cpu_model" in cells else "unknown"
    threads = _words(list(cells["threads"])) if "threads" in cells else "unknown"
    text = f"CPU {cpu}, {threads} torch threads"
    if device != CPU:
        text = f"GPU {_words(list(cells['gpu'])) if 'gpu' in cells else 'unknown'} ({text})"
    return f"{text}; batch size {_words(list(cells['batch_size']))}"


LEVEL_SHORT = {
    "global": "pooled over all segments",
    "segment": "averaged over language pairs",
    "item": "averaged over documents",
    "source": "averaged over sources",
    "system": "over systems",
}


def group_words(group: DatasetGroup) -> str:
    """The datasets of a figure as a caption names them: 'WMT16, first 30 segments per language
    pair', or a mean: 'mean over WMT15, WMT16 and WMT21 (DA)'."""
    if len(group.datasets) == 1:
        return dataset_name(group.datasets[0])
    names = [dataset_short(d) for d in group.datasets]
    listed = f"{', '.join(names[:-1])} and {names[-1]}"
    return f"mean over {listed}" + (f" ({group.score_type})" if group.score_type else "")


def figure_caption(
    kind: FigureKind,
    group: DatasetGroup,
    device: str,
    cells: pd.DataFrame,
    baselines: dict[str, Reference],
    options: QualityOptions,
    spread_shown: bool,
    log_x: bool,
    names: Names = DEFAULT_NAMES,
) -> str:
    """One figure's caption as a paper prints it (under 50 words, no command syntax): what is plotted
    against what (and a log axis where there is one), the data and the machine, the quality, the
    bars, the timed repeats' spread (in words where the figure cannot draw it: `spread_shown`), the
    baseline, the metrics without a model. `cells`: the plotted points' cells. How it was made in
    full is `method_text`."""
    kinds = _words(list(score_types(cells)))
    human = f"human {kinds} scores" if kinds != "unknown" else "human scores"
    cpu = _words(list(cells["cpu_model"])) if "cpu_model" in cells else "unknown CPU"
    gpu = _words(list(cells["gpu"])) if device != CPU and "gpu" in cells else ""
    what = kind.label.split(" (")[0]
    level = LEVEL_SHORT.get(canonical_level(options.level), canonical_level(options.level))
    text = [
        f"{method_name(options.method)} correlation with {human} ({level}) against {what}"
        f"{' (log axis)' if log_x else ''}; {group_words(group)}; {device_name(device)} ({gpu or cpu}).",
        "Bars: 95% bootstrap intervals.",
    ]
    if kind.column in SPREADS:
        text.append(spread_words(cells, spread_shown))
    chosen = dict.fromkeys(
        reference_name(r.metric, r.encoder, m, names) for m, r in baselines.items() if m in set(cells["metric"])
    )
    if chosen:
        text.append(f"Ringed: the baseline ({', '.join(chosen)}).")
    if (cells["encoder"] == NO_ENCODER).any():
        text.append("Grey diamonds: metrics without a model.")
    return " ".join(text)


def spread_words(cells: pd.DataFrame, shown: bool) -> str:
    """The timed repeats' spread over the plotted points' cells in words: what the horizontal bars
    are where some are drawn (`shown`), else (too small to see at the figure's size) the largest
    slowest-to-fastest ratio."""
    repeats = [list(r) for r in cells["ms_per_segment_repeats"] if len(r) > 1 and min(r) > 0]
    if not repeats:
        return "One timed repeat per cell."
    counts = _words([len(r) for r in repeats])
    if shown:
        return f"Horizontal bars: range of {counts} timed repeats, where visible."
    worst = max(max(r) / min(r) - 1 for r in repeats)
    return f"{counts} timed repeats, at most {100 * worst:.1f}% apart (not drawn)."


def method_text(
    kind: FigureKind,
    group: DatasetGroup,
    device: str,
    cells: pd.DataFrame,
    metrics: Sequence[str],
    baselines: dict[str, Reference],
    options: QualityOptions,
    intervals: QualityIntervals,
    log_x: bool = True,
) -> str:
    """How one figure was made, in full: what is plotted, the human dimension, the quality's level and
    method, the interval and its resampling unit, the repeats, the marks, the data subset, the machine
    (index.html, and figures.tex as a LaTeX comment; the caption is `figure_caption`). `cells`: the
    cells behind the figure (device and datasets of the group)."""
    level = canonical_level(options.level)
    method = canonical_method(options.method)
    repeats = [len(r) for r in cells["ms_per_segment_repeats"]] if "ms_per_segment_repeats" in cells else []
    mean = len(group.datasets) > 1
    text = [
        f"{kind.title} against quality on {device}, {group.title}: {kind.words} "
        f"(x{', log scale' if log_x else ''}) and quality (y) per encoder, "
        f"one panel per metric ({', '.join(metrics)}).",
        f"Quality: {options.label}, the {method} correlation of the metric's scores with {human_words(cells)}, "
        f"at the {level} level ({LEVEL_WORDS.get(level, level)}).",
    ]
    if mean:
        text.append(
            f"Each point is the mean over the {len(group.datasets)} datasets of the quality and of the x value; "
            "its interval is the percentile interval of the mean of the datasets' bootstrap replicates "
            "(each dataset resampled on its own)."
        )
    text.append(
        f"Vertical bars: 95% percentile bootstrap interval of the quality, resampling "
        f"{resampling_words(intervals.run, options, cells)}; {intervals.n_resamples} resamples, seed {intervals.seed}."
    )
    if kind.column in SPREADS:
        text.append(
            "Points: the median over the timed repeats"
            + (f" ({_words(repeats)} per cell)" if repeats else "")
            + "; horizontal bars, where wide enough to be seen: the fastest to the slowest repeat"
            + (" (means over the datasets)." if mean else ".")
        )
    chosen = ", ".join(
        f"{reference_name(baselines[m].metric, baselines[m].encoder, m)} for {m}" for m in metrics if m in baselines
    )
    lexical = sorted({str(m) for m, e in zip(cells["metric"], cells["encoder"], strict=True) if e == NO_ENCODER})
    text.append(
        "Dashed line and orange rings: the Pareto front (no other encoder of the panel has both a lower or equal "
        "x and a higher or equal quality)"
        + (f"; black ring: the baseline ({chosen})" if chosen else "")
        + (f"; grey diamonds, in every panel: metrics without a model ({', '.join(lexical)})" if lexical else "")
        + "."
    )
    text.append(f"Data: {subset_words(intervals, cells)}. Machine: {machine_words(cells, device)}.")
    return " ".join(text)


def figures_tex(entries: Sequence[tuple[Path, str, str, str]], width: float) -> str:
    """figures.tex: one `figure` float per figure (`entries`: the PDF (or PNG) file, its caption,
    its name, and how it was made (`method_text`), kept above the float as a LaTeX comment),
    `\\includegraphics` at the line width (at most 0.9 of the text height: a tall figure stays on its
    page), `\\caption`, `\\label{fig:<name>}`; figures
    wider than a single column as `figure*` (both columns of a two-column paper; a plain figure in
    a one-column one). Needs graphicx."""
    env = "figure*" if width > 3.6 else "figure"
    lines = [
        "% figures.tex, written by `nlgbench report`: one float per figure; \\input it from this folder",
        "% needs \\usepackage{graphicx}",
        f"% drawn {width:g} in wide with text of 7-9 pt at that width: to print them at 100%, give",
        "% `nlgbench report --figure-width` your paper's \\linewidth (\\textwidth for figure*) in inches;",
        "% `--figures runtime,memory,peak_memory` picks the figures set here (index.html shows all).",
    ]
    for path, caption, name, method in entries:
        file = f"{{{path.stem}}}{path.suffix}" if "." in path.stem else path.name  # graphicx and dotted names
        lines += [
            "",
            *(f"% {line}" for line in re.split(r"(?<=\.) (?=[A-Z])", f"How fig:{name} was made: {method}")),
            f"\\begin{{{env}}}[tbp]",
            "  \\centering",
            f"  \\includegraphics[width=\\linewidth,height=0.9\\textheight,keepaspectratio]{{{file}}}",
            f"  \\caption{{{latex_text(caption)}}}",
            f"  \\label{{fig:{name}}}",
            f"\\end{{{env}}}",
        ]
    return "\n".join(lines) + "\n"
