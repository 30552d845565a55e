"""The rule for every name given at input (labels, `--label` names, encoder, metric and dataset names,
data `lp` / `system` / `doc_id` / seg_id / human dimensions): no control character (C0, DEL, C1,
U+2028, U+2029, the bidirectional overrides), and nothing a spreadsheet would run as a formula
(`nlgbench.foundations.spreadsheet`). Names go unchanged into Markdown, LaTeX, index.html, CSV files
and the terminal, where an escape (U+001B) runs terminal sequences on `cat`, pdflatex stops at it,
and an override (U+202E) shows a name reversed. Texts (hypotheses, references) are not names: they
may hold any character."""

from __future__ import annotations

import unicodedata

from nlgbench.foundations.errors import UserError
from nlgbench.foundations.spreadsheet import refuse_formula

# Cc: C0 (U+0000-U+001F, tab and line feed among them), DEL (U+007F) and C1 (U+0080-U+009F);
# Zl, Zp: the line and paragraph separators U+2028, U+2029, which end a line as a newline does.
CONTROL_CATEGORIES = ("Cc", "Zl", "Zp")
# The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder
# the text shown after them, so a name would read as another in a terminal or a page.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unprintable(char: str) -> str:
    """What a character that `str.isprintable` refuses is, for a message: a control character (a
    line break among them), a non-ASCII space (U+00A0 no-break space), an invisible character
    (U+200B zero-width space, a direction mark) or another non-printable one; with its code point."""
    category = unicodedata.category(char)
    if category in CONTROL_CATEGORIES:
        what = "a control character"
    elif char in BIDI_CONTROLS:
        what = "a bidirectional control character"
    elif category == "Zs":
        what = "a non-ASCII space"
    elif category == "Cf":
        what = "an invisible character"
    else:
        what = "a non-printable character"
    return f"{what} ({char!r}, U+{ord(char):04X})"


def control_character(text: str) -> str | None:
    """The first control character of `text` (`CONTROL_CATEGORIES`, `BIDI_CONTROLS`), or None."""
    return next((c for c in text if unicodedata.category(c) in CONTROL_CATEGORIES or c in BIDI_CONTROLS), None)


def escaped(text: str) -> str:
    """`text` with each control character (`control_character`) written as its escape (`\\x1b`),
    for a message naming a place (a file's path) that holds one: the message stays one plain line."""
    return "".join(repr(c)[1:-1] if control_character(c) else c for c in text)


def refuse_control(text: str, what: str, where: str) -> str:
    """`text` unchanged, or one line naming `where`, `what` and the character when it holds a control
    character (`control_character`)."""
    bad = control_character(text)
    if bad is not None:
        raise UserError(
            f"{escaped(where)}: {what} {text!r} holds {unprintable(bad)}, which would be written raw into "
            "reports, LaTeX and the terminal; remove it"
        )
    return text


def refuse_name(text: str, what: str, where: str) -> str:
    """`text` unchanged if it is fit to be a name (no control character: `refuse_control`; no
    spreadsheet formula: `refuse_formula`); else one line naming `where` and `what`."""
    return refuse_formula(refuse_control(text, what, where), what, escaped(where))
