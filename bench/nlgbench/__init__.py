"""nlgbench: benchmark the efficiency-quality trade-off of NLG evaluation metrics.

Python API (docs/reference/api.md): `Scorer` / `score` / `score_outputs` for lists of strings, `run`
for a sweep spec, `load_run` / `load_scores` for a run folder, `compare` and `correlation`. The package
sits above every layer; its API names (`PUBLIC_API`) load `nlgbench.api` on first use (PEP 562), so
`import nlgbench` and `nlgbench --help` stay light.

Examples:
    >>> import nlgbench
    >>> nlgbench.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
    [0.9071274399757385]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nlgbench.foundations.version import __version__

if TYPE_CHECKING:
    from nlgbench.api import Scorer, compare, correlation, load_run, load_scores, run, score, score_outputs

#: Public name -> the module that defines it, imported on first access.
PUBLIC_API = {
    "score": "nlgbench.api",
    "score_outputs": "nlgbench.api",
    "run": "nlgbench.api",
    "load_run": "nlgbench.api",
    "load_scores": "nlgbench.api",
    "Scorer": "nlgbench.api",
    "compare": "nlgbench.api",
    "correlation": "nlgbench.api",
}

#: Old public names that moved: old name -> "module:new name" (none so far; a renamed public
#: name is kept here, and only here, so that old code keeps working).
LEGACY_EXPORTS: dict[str, str] = {}

__all__ = [
    "Scorer",
    "__version__",
    "compare",
    "correlation",
    "load_run",
    "load_scores",
    "run",
    "score",
    "score_outputs",
]


def __getattr__(name: str) -> Any:
    """An API name from its module (PEP 562), kept in the package once loaded."""
    if name in PUBLIC_API:
        module, attribute = PUBLIC_API[name], name
    elif name in LEGACY_EXPORTS:
        module, _, attribute = LEGACY_EXPORTS[name].partition(":")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC_API, *LEGACY_EXPORTS})
