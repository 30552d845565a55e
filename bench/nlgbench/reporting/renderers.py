"""Tables as text, one renderer per format: Markdown (the terminal and .md files), LaTeX booktabs
(.tex files for papers) and HTML (index.html). Each takes a header and rows of strings."""

from __future__ import annotations

import html
from collections.abc import Sequence

TextTable = tuple[list[str], list[list[str]]]  # (header, rows) of strings: what the renderers take
LATEX_SPECIAL = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "_": "\\_",
    "#": "\\#",
    "$": "\\$",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
}


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex(
    header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 4, comments: Sequence[str] = ()
) -> str:
    """A booktabs tabular; the first `text_columns` columns left-aligned, the rest right-aligned;
    `comments` as % lines above it."""
    lines = [f"% {c}" for c in comments]
    lines += [
        "\\begin{tabular}{" + "l" * text_columns + "r" * (len(header) - text_columns) + "}",
        "\\toprule",
        " & ".join(latex_escape(h) for h in header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in r) + " \\\\" for r in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "", text_columns: int = 2) -> str:
    """A table for index.html; the first `text_columns` columns left-aligned, numbers right-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='t'>{html.escape(c)}</td>" if k < text_columns else f"<td>{html.escape(c)}</td>"
            for k, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
