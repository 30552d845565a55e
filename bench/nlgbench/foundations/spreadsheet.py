"""Names that a spreadsheet would run as a formula. nlgbench writes data names (language pairs,
systems, documents, datasets, human dimensions, encoder labels) unchanged into the CSV files people
open (results.csv, correlations.csv, scores.csv, a report's metric_scores.csv); a name such as
`=HYPERLINK("http://x","y")` would be evaluated there. Such names are refused where they enter
(`refuse_formula`), so the files stay exactly what nlgbench reads back."""

from __future__ import annotations

import re

from nlgbench.foundations.errors import UserError

# What a spreadsheet reads as the start of a formula (OWASP's list: tab and carriage return too,
# which some programs strip before they look).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def formula_like(text: str) -> bool:
    """Whether a spreadsheet would read `text` as a formula: it starts with =, +, -, @, a tab or a
    carriage return, and is neither a plain number (`-1`, `+2.5e3`: read as that number) nor a lone
    `-` (a placeholder; no formula)."""
    return text.startswith(FORMULA_STARTS) and text != "-" and PLAIN_NUMBER.fullmatch(text) is None


def refuse_formula(text: str, what: str, where: str) -> str:
    """`text` unchanged, or one line naming `where` and `what` (`system`, `lp`, ...) when a
    spreadsheet opening nlgbench's CSV files would run it as a formula (`formula_like`)."""
    if formula_like(text):
        raise UserError(
            f"{where}: {what} {text!r} starts with {text[0]!r}, which a spreadsheet opening results.csv or "
            "scores.csv would run as a formula; rename it (a plain number or a lone '-' is fine)"
        )
    return text
