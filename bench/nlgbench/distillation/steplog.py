"""How the distillation steps report: one line per step through a `Log` (stderr by default) and
progress bars refreshed every BAR_INTERVAL seconds."""

from __future__ import annotations

import sys
from collections.abc import Callable

Log = Callable[[str], None]
BAR_INTERVAL = 2.0 if sys.stderr.isatty() else 30.0  # seconds between progress-bar updates (a log file: fewer)


def log_stderr(message: str) -> None:
    """The default `Log`: the line on stderr, flushed."""
    print(message, file=sys.stderr, flush=True)
