"""User-facing errors: one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user (spec, data, names); the CLI prints it as one line, exit 2."""


def closest(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """The valid names closest to `name` (for "did you mean" hints)."""
    choices = list(valid)
    ratio = {c: difflib.SequenceMatcher(None, name, c).ratio() for c in choices}
    hits = sorted((c for c in choices if ratio[c] >= 0.5), key=lambda c: (-ratio[c], c))[:n]
    if not hits:
        lowered = name.lower()
        hits = [c for c in choices if lowered in c.lower() or c.lower() in lowered][:n]
    return hits


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> UserError:
    """An error for an unknown registry name, naming the closest valid ones."""
    choices = sorted(valid)
    hits = closest(name, choices)
    hint = f"; did you mean {', '.join(repr(h) for h in hits)}?" if hits else ""
    return UserError(f"unknown {kind} {name!r}{hint} (valid: {', '.join(choices)})")
