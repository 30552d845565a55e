"""The report's tables as LaTeX for a paper: tradeoff.tex and relative.tex hold one complete table
float per dataset and device (rows grouped under each metric, not the metric, dataset and device
repeated on every row), quantities.tex one; each caption names the dataset, its subset, the human
dimension, the level and the method (the table's note), and each label is stable: table, dataset
and device, `tab:tradeoff-wmt16-100-cpu`. preview.tex sets them all (and figures.tex where present)
in one document. The floats themselves are drawn by `nlgbench.reporting.markup.latex`."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.reporting.markup import LATEX_PACKAGES, LatexFloat, LatexGroup, latex, latex_text, unique_name
from nlgbench.reporting.quantities_table import QuantityMatrix, quantity_csv
from nlgbench.reporting.relative_table import CUT, SAMPLE, mean_label, score_types
from nlgbench.reporting.tradeoff_table import LEXICAL, base_word
from nlgbench.statistics.correlation import MIN_FISHER_POINTS

if TYPE_CHECKING:
    import pandas as pd

MAX_ROWS = 40  # rows of one float (a \small table of more does not fit a page): more go to the next float
PREVIEW_TABLES = ("tradeoff", "relative")
PREVIEW_OPTIONAL = (
    "quantities",
    "figures",
)  # .tex files of the report folder that preview.tex inputs only where present


def dataset_words(label: str, means: dict[str, list[str]] | None = None) -> str:
    """A dataset label as words for a caption (LaTeX): `wmt16[:100]` -> 'wmt16, the first 100 segments
    per language pair'; `wmt17[~50,seed=0]` -> 'wmt17, 50 segments per language pair drawn with seed 0';
    a mean label (`mean (DA)`) -> 'the mean over the DA datasets (wmt15, the first ...; wmt16, ...)',
    the datasets from `means`."""
    if means and label in means:
        kind = label.removeprefix("mean").strip(" ()")
        over = "; ".join(dataset_words(d) for d in means[label])
        return f"the mean over the {latex_text(kind) + ' ' if kind else ''}datasets ({over})"
    if m := CUT.fullmatch(label):
        return f"\\texttt{{{latex_text(m['name'])}}}, the first {m['n']} segments per language pair"
    if m := SAMPLE.fullmatch(label):
        return f"\\texttt{{{latex_text(m['name'])}}}, {m['n']} segments per language pair drawn with seed {m['seed']}"
    return f"\\texttt{{{latex_text(label)}}}"


def dataset_short(label: str) -> str:
    """A dataset label for a short caption (the list of tables), LaTeX: `wmt16[:100]` -> 'wmt16 (first
    100 per pair)', `wmt17[~50,seed=0]` -> 'wmt17 (50 per pair, seed 0)'."""
    if m := CUT.fullmatch(label):
        return f"{latex_text(m['name'])} (first {m['n']} per pair)"
    if m := SAMPLE.fullmatch(label):
        return f"{latex_text(m['name'])} ({m['n']} per pair, seed {m['seed']})"
    return latex_text(label)


def label(*parts: str) -> str:
    """A stable `\\label` key: 'tab:' and the parts in lower case, runs of other characters as '-'."""
    slugs = [re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts]
    return "tab:" + "-".join(s for s in slugs if s)


def sentence(note: str) -> str:
    """A note as a caption's sentence (LaTeX): capitalised, with a full stop."""
    note = note.strip()
    return latex_text(note[:1].upper() + note[1:] + ("" if note.endswith(".") else "."))


def number(value: float, digits: int, missing: str = fmt.UNKNOWN) -> str:
    """A number for an S column: `digits` decimals, `missing` when not finite."""
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and math.isfinite(value) else missing


def interval(low: float, high: float, digits: int) -> str:
    """An interval as LaTeX text, '[91.7, 100.4]', a minus sign as such; '' when unknown (the baseline's row)."""
    finite = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high))
    return f"[{low:.{digits}f}, {high:.{digits}f}]".replace("-", "$-$") if finite else ""


def split(
    key: str,
    short: str,
    caption: str,
    header: list[str],
    numeric: list[bool],
    groups: list[LatexGroup],
    taken: set[str],
) -> list[LatexFloat]:
    """The floats of one table part: one, or several of at most MAX_ROWS rows each where it is longer
    (whole groups; later ones labelled `key-2`, ... and captioned as continued). Each label is one
    that no float of the file (`taken`) has (`unique_name`): `a+b` and `a_b` both give `a-b`."""
    chunks: list[list[LatexGroup]] = [[]]
    rows = 0
    for group in groups:
        if chunks[-1] and rows + len(group.rows) > MAX_ROWS:
            chunks.append([])
            rows = 0
        chunks[-1].append(group)
        rows += len(group.rows) + 1
    labels = [unique_name(key if k == 0 else f"{key}-{k + 1}", taken) for k in range(len(chunks))]
    return [
        LatexFloat(
            labels[k],
            short if k == 0 else f"{short} (continued)",
            caption if k == 0 else f"Continued from Table~\\ref{{{labels[0]}}}. {caption}",
            header,
            numeric,
            chunk,
        )
        for k, chunk in enumerate(chunks)
    ]


def other_dimension(table: pd.DataFrame, part: pd.DataFrame) -> str:
    """Where the table's datasets have different human dimensions (the note lists them all), the
    sentence naming this part's; '' otherwise."""
    if len(set(table["human_dim"])) <= 1:
        return ""
    return f" Human dimension here: {latex_text('; '.join(dict.fromkeys(part['human_dim'])))}."


# ----------------------------------------------------------------------------- the trade-off table


def tradeoff_latex(table: pd.DataFrame, note: str, n_resamples: int, names: Names = DEFAULT_NAMES) -> str:
    """tradeoff.tex from `nlgbench.reporting.tradeoff_table.tradeoff_table`: per dataset and device a float,
    rows grouped by metric, the baseline first; quality, quality retained (%) with its 95% interval,
    speed-up with its range, p against the baseline; n in the caption where every row has the same;
    encoders and metrics under their `names`."""
    floats: list[LatexFloat] = []
    labels: set[str] = set()
    for (dataset, device), part in table.groupby(["dataset", "device"], sort=False):
        same_n = part["n"].nunique() == 1
        groups = [
            LatexGroup(
                f"{latex_text(names(str(metric)))}; "
                + (
                    "lexical baseline (no encoder)"
                    if rows["baseline"].iloc[0] == NO_ENCODER
                    else f"baseline {latex_text(names(str(rows['baseline'].iloc[0])))}"
                ),
                [tradeoff_cells(r, n_resamples, not same_n, names) for _, r in rows.iterrows()],
            )
            for metric, rows in part.groupby("metric", sort=False)
        ]
        header = [
            "encoder",
            "quality",
            "ms",
            "retained (\\%)",
            "95\\% CI",
            "speed-up ($\\times$)",
            "range",
            "$p$",
        ]
        numeric = [False, True, True, True, False, True, False, True]
        if not same_n:
            header.insert(1, "$n$")
            numeric.insert(1, True)
        n_words = f", $n = {int(part['n'].iloc[0])}$ segments" if same_n else ""
        where = f"{dataset_words(str(dataset))}, device {latex_text(str(device))}"
        caption = (
            f"Trade-off on {where}{n_words}: per metric, each encoder against the metric's baseline encoder "
            f"(its first row).{other_dimension(table, part)} {sentence(note)}"
        )
        short = f"Trade-off on {dataset_short(str(dataset))}, {latex_text(str(device))}"
        floats += split(label("tradeoff", str(dataset), str(device)), short, caption, header, numeric, groups, labels)
    what = "tradeoff.tex, written by `nlgbench report`: the trade-off table, one table float per dataset and device"
    return latex(floats, what, [note])


def tradeoff_cells(r: pd.Series, n_resamples: int, with_n: bool, names: Names = DEFAULT_NAMES) -> list[str]:
    """One trade-off row's LaTeX cells: retained in percent, 'baseline' for the baseline's own p (and
    'lexical baseline' for a metric without an encoder, whose time and quality alone are known)."""
    p = base_word(r) or latex_text(fmt.p_value(r["p_value"], n_resamples, missing=fmt.UNDEFINED))
    return [
        latex_text(LEXICAL if r["encoder"] == NO_ENCODER else names(str(r["encoder"]))),
        *([str(r["n"])] if with_n else []),
        number(r["quality"], 3, fmt.UNDEFINED),
        number(r.get("ms_per_segment", math.nan), 1),
        number(100 * r["retained"], 1, fmt.UNDEFINED),
        interval(100 * r["retained_ci_low"], 100 * r["retained_ci_high"], 1),
        number(r["speedup"], 2),
        interval(r["speedup_low"], r["speedup_high"], 2),
        p,
    ]


# ----------------------------------------------------------------------------- Table 3: relative


def relative_latex(table: pd.DataFrame, note: str, names: Names = DEFAULT_NAMES) -> str:
    """relative.tex from `nlgbench.reporting.relative_table.relative_table`: per dataset (and per mean over
    the datasets of one kind of human score) and device a float, rows grouped by metric, the
    baseline first; quality, quality retained (%), ms per segment, speed-up."""
    floats: list[LatexFloat] = []
    if not len(table):
        return latex(floats, "relative.tex, written by `nlgbench report`: no rows", [note])
    kinds = score_types(table)
    means: dict[str, list[str]] = {}  # a mean row's label -> the datasets it averages
    for dataset, kind in zip(table["dataset"], kinds, strict=True):
        key = mean_label(kind)
        if dataset != key and dataset not in means.setdefault(key, []):
            means[key].append(dataset)
    header = ["encoder", "quality", "retained (\\%)", "ms/segment", "speed-up ($\\times$)"]
    numeric = [False, True, True, True, True]
    labels: set[str] = set()
    for (dataset, device), part in table.groupby(["dataset", "device"], sort=False):
        groups = []
        for metric, rows in part.groupby("metric", sort=False):
            base = str(rows["baseline"].iloc[0])
            ordered = rows.iloc[sorted(range(len(rows)), key=lambda i: rows["encoder"].iloc[i] != base)]
            groups.append(
                LatexGroup(
                    f"{latex_text(names(str(metric)))}; baseline {latex_text(names(base))}",
                    [relative_cells(r, names) for _, r in ordered.iterrows()],
                )
            )
        caption = (
            f"Quality retained and speed-up on {dataset_words(str(dataset), means)}, device "
            f"{latex_text(str(device))}: per metric, each encoder against the metric's baseline encoder "
            f"(its first row).{other_dimension(table, part)} {sentence(note)}"
        )
        short = f"Quality retained and speed-up on {dataset_short(str(dataset))}, {latex_text(str(device))}"
        floats += split(label("relative", str(dataset), str(device)), short, caption, header, numeric, groups, labels)
    what = "relative.tex, written by `nlgbench report`: Table 3, one table float per dataset (or mean) and device"
    return latex(floats, what, [note])


def relative_cells(r: pd.Series, names: Names = DEFAULT_NAMES) -> list[str]:
    """One row of Table 3 as LaTeX cells: 'n/a' for an undefined quality (and its retained share),
    '-' for what is unknown (no baseline cell, no timing)."""
    undefined = not math.isfinite(r["quality"])
    return [
        latex_text(names(str(r["encoder"]))),
        number(r["quality"], 3, fmt.UNDEFINED),
        number(100 * r["retained"], 1, fmt.UNDEFINED if undefined else fmt.UNKNOWN),
        number(r["ms_per_segment"], 1),
        number(r["speedup"], 2),
    ]


# ----------------------------------------------------------------------------- Table 4: quantities


def quantities_latex(matrix: QuantityMatrix, note: str) -> str:
    """quantities.tex from Table 4 (`nlgbench.reporting.quantities_table`), one float: a row per pair of
    quantities shown (as quantities.csv, a square matrix of 'r [low, high] (n)' being too wide for a
    page), grouped under the first of the pair; r, its 95% Fisher z interval, n, and the metrics
    averaged where some entry averages fewer than the others."""
    pairs = quantity_csv(matrix)
    with_metrics = pairs["metrics"].nunique() > 1
    header = ["with", "$r$", "95\\% CI", "$n$", *(["metrics"] if with_metrics else [])]
    numeric = [False, True, False, True, *([True] if with_metrics else [])]
    groups = [
        LatexGroup(latex_text(str(quantity)), [quantity_cells(r, with_metrics) for _, r in rows.iterrows()])
        for quantity, rows in pairs.groupby("quantity", sort=False)
    ]
    table = LatexFloat(
        label("quantities"),
        "Correlation of the measured quantities",
        f"Correlation of the measured quantities across encoders, one row per pair. {sentence(note)}",
        header,
        numeric,
        groups,
    )
    return latex([table], "quantities.tex, written by `nlgbench report`: Table 4, one table float", [note])


def quantity_cells(r: pd.Series, with_metrics: bool) -> list[str]:
    """One pair of Table 4 as LaTeX cells: 'n/a' for r where a quantity is constant, '-' where not
    measured; the interval 'n/a ($n < 4$)' where too few encoders give one."""
    measured = math.isfinite(r["r"])
    missing = fmt.UNDEFINED if str(r["note"]).startswith(fmt.UNDEFINED) else fmt.UNKNOWN
    span = interval(r["ci_low"], r["ci_high"], 2)
    return [
        latex_text(str(r["other"])),
        number(r["r"], 2, missing),
        (span or f"{fmt.UNDEFINED} ($n < {MIN_FISHER_POINTS}$)") if measured else "",
        str(int(r["n"])) if measured else "",
        *([str(int(r["metrics"]))] if with_metrics else []),
    ]


# ----------------------------------------------------------------------------- the preview document


def preview_document() -> str:
    """preview.tex: a document setting every table of the report folder (quantities.tex and figures.tex
    where present) at a paper's text width (6.3 in): `pdflatex preview.tex` in DIR/report."""
    inputs = [f"\\input{{{name}}}" for name in PREVIEW_TABLES]
    optional = [f"\\IfFileExists{{{name}.tex}}{{\\input{{{name}}}}}{{}}" for name in PREVIEW_OPTIONAL]
    return "\n".join(
        [
            "% preview.tex, written by `nlgbench report`: every table (and figures.tex, where present) in one",
            "% document; `pdflatex preview.tex` here. In a paper, \\input the files and load their packages.",
            "\\documentclass{article}",
            "\\usepackage[textwidth=6.3in,textheight=9in]{geometry}",
            f"\\usepackage{{{','.join((*LATEX_PACKAGES, 'graphicx'))}}}",
            "\\begin{document}",
            *inputs,
            *optional,
            "\\end{document}",
            "",
        ]
    )
