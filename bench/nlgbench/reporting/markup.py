"""Tables as text, one renderer per format: Markdown (the terminal and .md files), LaTeX table
floats (.tex files for papers: `LatexFloat`, `latex`) and HTML (index.html). Markdown and HTML take
a header and rows of strings; LaTeX takes floats whose cells are LaTeX already (`latex_text`)."""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

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


MARKDOWN_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown_text(text: str) -> str:
    """Text for a Markdown file, which a docs build serves as HTML: &, < and > as entities, so that a
    name such as `<img onerror=...>` shows as written and never becomes markup."""
    return "".join(MARKDOWN_HTML.get(ch, ch) for ch in text)


def markdown_cell(text: str, html: bool = True) -> str:
    """One table cell: on one line, a backslash and | escaped (a bare | starts another column) and,
    with `html`, &, < and > as entities (`markdown_text`)."""
    cell = re.sub(r"[\r\n]+", " ", text).replace("\\", "\\\\").replace("|", "\\|")
    return markdown_text(cell) if html else cell


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], *, html: bool = True) -> str:
    """A GitHub-flavoured Markdown table, every cell escaped (`markdown_cell`); `html=False` for the
    terminal, where an entity would print as such."""
    lines = ["| " + " | ".join(markdown_cell(h, html) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(markdown_cell(c, html) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def unique_name(name: str, taken: set[str]) -> str:
    """`name`, or where `taken` holds it already (two names that differ only in characters a file name
    or a LaTeX label leaves out: `a+b` and `a_b`), `name` with `_` added until it is free; added to
    `taken`."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


LATEX_PACKAGES = ("booktabs", "siunitx")  # what `latex`'s floats need: rules, decimal-aligned S columns
LATEX_SYMBOLS = {"<": "$<$", ">": "$>$", "|": "\\textbar{}", "+-": "$\\pm$", "\u00b1": "$\\pm$", "\u00d7": "$\\times$"}
NUMBER = re.compile(r"([+-]?)(\d+)(?:\.(\d+))?(?:e([+-]?)(\d+))?")  # what an S column aligns; the rest is text


# What pdflatex prints beyond ASCII in a document that loads no font encoding (OT1, LaTeX's default,
# as a paper may): a letter of Latin Extended-A with one of these accents over or under it ...
LATEX_ACCENTS = frozenset("\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u030a\u030b\u030c\u0327")
# ... and these (Latin-1 but for T1's guillemets, eth and thorn; the letters of Latin Extended-A that
# OT1 has; dashes and quotes).
LATEX_CHARACTERS = frozenset(
    {chr(c) for c in range(0xA0, 0x100)} - set("\u00ab\u00bb\u00d0\u00de\u00f0\u00fe")
    | set("\u0131\u0141\u0142\u0152\u0153\u2013\u2014\u2018\u2019\u201c\u201d")
)


def latex_printable(ch: str) -> bool:
    """Whether pdflatex prints `ch` without a font package: ASCII, LATEX_CHARACTERS, or a letter of Latin
    Extended-A that is an ASCII letter with one accent of LATEX_ACCENTS (ň, ő; not ą, whose ogonek is
    T1's). Not CJK, Cyrillic, Greek or emoji, nor most accented letters beyond Extended-A: pdflatex
    stops at them ("Unicode character ... not set up for use with LaTeX") unless the document loads
    their fonts."""
    if ch.isascii() or ch in LATEX_CHARACTERS:
        return True
    if not "\u0100" <= ch <= "\u017f":
        return False
    parts = unicodedata.normalize("NFD", ch)
    return len(parts) == 2 and parts[0].isascii() and parts[0].isalpha() and parts[1] in LATEX_ACCENTS


def latex_printable_text(text: str) -> str:
    """`text` with each character pdflatex cannot print without a font package (`latex_printable`)
    written as its code point, `[U+6570]`: a name in Chinese still compiles, and says which it was."""
    return "".join(ch if latex_printable(ch) else f"[U+{ord(ch):04X}]" for ch in text)


def latex_text(text: str) -> str:
    """Free text (a name, a note) as LaTeX that prints what it says under any font encoding: specials
    escaped, `code` in typewriter, <, >, |, +- as symbols (OT1 prints a bare < as an inverted
    exclamation mark), opening quotes as such, a line break allowed after each dot of a dotted
    name (module paths), and a character no font encoding of pdflatex's own prints as its code
    point (`latex_printable_text`)."""
    text = latex_printable_text(text)
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd backtick: no code spans
        parts = [text]
    out = []
    for k, part in enumerate(parts):
        escaped = latex_escape(part)
        for plain, symbol in LATEX_SYMBOLS.items():
            escaped = escaped.replace(plain, symbol)
        escaped = re.sub(r"(?<=[a-z]{2})\.(?=[a-z]{2})", lambda _: ".\\allowbreak{}", escaped)
        escaped = re.sub(r"(?<![^\s(\[])'(?=\S)", "`", escaped)  # an opening quote: 'x' prints as `x' does
        out.append(f"\\texttt{{{escaped}}}" if k % 2 else escaped)
    return "".join(out)


@dataclass(frozen=True)
class LatexGroup:
    """Rows under one heading (a metric, a dataset), in place of a column repeating it on every row;
    `heading` is LaTeX ('' for none), each cell LaTeX (`latex_text`), numbers as plain decimals."""

    heading: str
    rows: list[list[str]]


@dataclass(frozen=True)
class LatexFloat:
    """One complete table float: caption (LaTeX; `short_caption` for the list of tables), label,
    header, which columns are numbers (S columns aligned on the decimal point), groups of rows."""

    label: str
    short_caption: str
    caption: str
    header: list[str]
    numeric: list[bool]
    groups: list[LatexGroup]


def table_format(cells: Sequence[str]) -> str:
    """siunitx's `table-format` that fits every number among `cells` (sign, integer and decimal
    digits, exponent): '-1.3', '3.1', '1.1e-2'; '1.0' when none is a number."""
    found = [m for m in (NUMBER.fullmatch(c.strip()) for c in cells) if m]
    if not found:
        return "1.0"
    sign = "-" if any(m[1] for m in found) else ""
    integer = max(len(m[2]) for m in found)
    decimals = max(len(m[3] or "") for m in found)
    exponents = [m for m in found if m[5]]
    spec = f"{sign}{integer}.{decimals}" if decimals else f"{sign}{integer}"
    if exponents:
        spec += "e" + ("-" if any(m[4] for m in exponents) else "") + str(max(len(m[5]) for m in exponents))
    return spec


def _cell(text: str, numeric: bool) -> str:
    """A cell as the tabular reads it: text in an S column in braces (siunitx sets it as text), and
    `{}` before a leading [ or * (which `\\\\` of the row above would take as its argument)."""
    if numeric and not NUMBER.fullmatch(text.strip()):
        return "{" + text + "}"
    return "{}" + text if text[:1] in ("[", "*") else text


def latex_float(table: LatexFloat) -> str:
    """`table` as a `table*` float (the full text width in a two-column paper, as `table` in a
    one-column one): caption above, label, booktabs rules, S columns, each group's heading as a row
    across the table with a little space above it."""
    columns = [
        "S[table-format=" + table_format([r[k] for g in table.groups for r in g.rows]) + "]" if numeric else "l"
        for k, numeric in enumerate(table.numeric)
    ]
    width = len(columns)
    lines = [
        "\\begin{table*}[tbp]",
        "\\centering",
        "\\small",
        "\\setlength{\\tabcolsep}{3pt}",  # 6 pt by default: long encoder names leave little room
        f"\\caption[{{{table.short_caption}}}]{{{table.caption}}}",  # braces: a ] in the short caption
        f"\\label{{{table.label}}}",
        "\\begin{tabular}{@{}" + " ".join(columns) + "@{}}",
        "\\toprule",
        " & ".join("{" + h + "}" if n else h for h, n in zip(table.header, table.numeric, strict=True)) + " \\\\",
        "\\midrule",
    ]
    for k, group in enumerate(table.groups):
        if k:
            lines.append("\\addlinespace")
        if group.heading:
            lines.append(f"\\multicolumn{{{width}}}{{@{{}}l}}{{\\textit{{{group.heading}}}}} \\\\")
        lines += [
            " & ".join(_cell(c, n) for c, n in zip(row, table.numeric, strict=True)) + " \\\\" for row in group.rows
        ]
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table*}"]
    return "\n".join(lines) + "\n"


def latex(floats: Sequence[LatexFloat], what: str, comments: Sequence[str] = ()) -> str:
    """A .tex file of table floats to `\\input` into a paper: % lines saying `what` it holds, the
    packages it needs (`% needs \\usepackage{booktabs,siunitx}`) and `comments`, then the floats."""
    said = [" ".join(c.split()) for c in (what, *comments)]  # a comment is one line
    lines = [f"% {said[0]}", f"% needs \\usepackage{{{','.join(LATEX_PACKAGES)}}}", *(f"% {c}" for c in said[1:])]
    return "\n".join(lines) + "\n\n" + "\n".join(latex_float(f) for f in floats)


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
