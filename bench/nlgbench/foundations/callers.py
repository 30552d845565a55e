"""Warnings attributed to the caller's line: the first frame outside the nlgbench package, however deep in
it the warning is raised (a fixed `stacklevel` points into the package when the same check is reached from
`nlgbench.score`, a `Scorer` or `nlgbench.bert_score`)."""

from __future__ import annotations

import os
import sys
import warnings

# the folder as imported (not resolved): a frame's file name is the path its module was imported by
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn(message, category)` reported at the file and line of the first frame outside the
    package (the user's script, a test, the console script)."""
    frame = sys._getframe(0)  # this function's: stacklevel 1
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    warnings.warn(message, category, stacklevel=level)
