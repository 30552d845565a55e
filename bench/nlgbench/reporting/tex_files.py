"""The report's tables as LaTeX for a paper: tradeoff.tex holds one complete table float per
dataset and device (rows grouped under each metric, not the metric, dataset and device repeated on
every row), quantities.tex one; a caption says what a reader needs in a paper's words, in at most
three lines of a column (the dataset as every caption names it: `published.dataset_name`); how it
was computed (the table's note) is a % comment above the floats. Each label is stable: table,
dataset and device, `tab:tradeoff-wmt16-100-cpu`. preview.tex sets them all (and figures.tex where present)
in one document. The floats themselves are drawn by `nlgbench.reporting.markup.latex`."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.foundations import fmt
from nlgbench.reporting.markup import LATEX_PACKAGES, LatexFloat, LatexGroup, latex, latex_text, unique_name
from nlgbench.reporting.published import dataset_name, device_name
from nlgbench.reporting.quantities_table import QuantityMatrix, quantity_csv
from nlgbench.reporting.relative_table import reference_name
from nlgbench.reporting.tradeoff_table import base_word, row_name
from nlgbench.statistics.correlation import MIN_FISHER_POINTS

if TYPE_CHECKING:
    import pandas as pd

MAX_ROWS = 40  # rows of one float (a \small table of more does not fit a page): more go to the next float
PREVIEW_TABLES = ("tradeoff",)
PREVIEW_OPTIONAL = (
    "quantities",
    "figures",
)  # .tex files of the report folder that preview.tex inputs only where present


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


# ----------------------------------------------------------------------------- the trade-off table


def tradeoff_caption(dataset: str, device: str, n: int | None) -> str:
    """The trade-off table's caption (LaTeX): the data, the device and what the columns are, short
    enough for three lines of a paper's column; the method is the file's % comment."""
    n_words = f", $n = {n}$" if n is not None else ""
    return (
        f"{latex_text(dataset_name(dataset))}; {latex_text(device_name(device))}{n_words}. Quality (95\\% CI), "
        "ms per segment, and retained quality, speed-up and $p$ against the baseline."
    )


def tradeoff_latex(table: pd.DataFrame, note: str, n_resamples: int, names: Names = DEFAULT_NAMES) -> str:
    """tradeoff.tex from `nlgbench.reporting.tradeoff_table.tradeoff_table`: per dataset and device a float,
    rows grouped by metric (each group's reference first); quality with its 95% interval, ms per
    segment, quality retained (%) with its 95% interval, speed-up (its range: .md, .csv), p against the
    reference; n in the caption where every row has the same; encoders and metrics under their
    `names`; `note` (how the numbers were computed) as a % comment."""
    floats: list[LatexFloat] = []
    labels: set[str] = set()
    for (dataset, device), part in table.groupby(["dataset", "device"], sort=False):
        same_n = part["n"].nunique() == 1
        groups = [
            LatexGroup(
                f"{latex_text(names(str(group)))}; baseline "
                + latex_text(
                    reference_name(
                        str(rows["baseline_metric"].iloc[0]), str(rows["baseline"].iloc[0]), str(group), names
                    )
                ),
                [tradeoff_cells(r, n_resamples, not same_n, names) for _, r in rows.iterrows()],
            )
            for group, rows in part.groupby("group", sort=False)
        ]
        header = [
            "encoder",
            "quality",
            "95\\% CI",
            "ms",
            "retained (\\%)",
            "95\\% CI",
            "speed-up ($\\times$)",
            "$p$",
        ]
        numeric = [False, True, False, True, True, False, True, True]
        if not same_n:
            header.insert(1, "$n$")
            numeric.insert(1, True)
        caption = tradeoff_caption(str(dataset), str(device), int(part["n"].iloc[0]) if same_n else None)
        short = f"Trade-off on {latex_text(dataset_name(str(dataset)))}, {latex_text(device_name(str(device)))}"
        floats += split(label("tradeoff", str(dataset), str(device)), short, caption, header, numeric, groups, labels)
    what = "tradeoff.tex, written by `nlgbench report`: the trade-off table, one table float per dataset and device"
    return latex(floats, what, [note])


def tradeoff_cells(r: pd.Series, n_resamples: int, with_n: bool, names: Names = DEFAULT_NAMES) -> list[str]:
    """One trade-off row's LaTeX cells: quality with its interval, retained in percent with its
    interval, 'baseline' for the reference's own p."""
    p = base_word(r) or latex_text(fmt.p_value(r["p_value"], n_resamples, missing=fmt.UNDEFINED))
    return [
        latex_text(row_name(r, names)),
        *([str(r["n"])] if with_n else []),
        number(r["quality"], 3, fmt.UNDEFINED),
        interval(r["quality_ci_low"], r["quality_ci_high"], 2),  # 2 decimals: the table fits a text width
        number(r.get("ms_per_segment", math.nan), 1),
        number(100 * r["retained"], 1, fmt.UNDEFINED),
        interval(100 * r["retained_ci_low"], 100 * r["retained_ci_high"], 1),
        number(r["speedup"], 2),  # its range over the repeats: tradeoff.md and .csv (a column too many here)
        p,
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
