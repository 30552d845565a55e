"""nlgbench: benchmark the efficiency-quality trade-off of NLG evaluation metrics.

Python API (docs/reference/api.md): `Scorer` / `score` / `score_outputs` for lists of strings, `run`
for a sweep spec, `load_run` / `load_scores` for a run folder, `compare` and `correlation`. The package
sits above every layer; its API names (`PUBLIC_API`) load `nlgbench.api` on first use (PEP 562), so
`import nlgbench` and `nlgbench --help` stay light. Above every layer, it also tells the spec (`core`)
where each launcher's own `executor:` settings are (`LAUNCHERS`, by name, imported on first use).

Examples:
    >>> import nlgbench
    >>> nlgbench.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
    [0.9071274399757385]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nlgbench.core.executor_options import LAUNCHERS
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

# Each launcher's settings in a spec's `executor:` block, its own module's (`local`, the default, has none).
LAUNCHERS.register_lazy("slurm", "nlgbench.execution.slurm.options:OPTIONS")

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
    if name not in PUBLIC_API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(PUBLIC_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC_API})
