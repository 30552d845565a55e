"""User-facing errors: one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


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


class ErrorLines:
    """The errors of independent checks (a spec's datasets, metric entries, encoders, settings), gathered
    so that one pass names every one: raised together as one UserError, a line each (the CLI prints
    each line as an error line of its own)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def attempt(self, check: Callable[[], T]) -> T | None:
        """`check()`'s value, or None with its error's lines kept (each once)."""
        try:
            return check()
        except UserError as exc:
            self.lines += [line for line in str(exc).splitlines() if line not in self.lines]
            return None

    def raise_any(self) -> None:
        """One UserError of every kept line, if any."""
        if self.lines:
            raise UserError("\n".join(self.lines))
