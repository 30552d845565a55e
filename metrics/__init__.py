"""Metric registry: name -> module defining `INFO` (a MetricInfo). Modules load lazily."""

from __future__ import annotations

import importlib

from nlgbench.errors import unknown_name

_MODULES: dict[str, str] = {
    "bertscore": "nlgbench.metrics.bertscore",
    "moverscore": "nlgbench.metrics.moverscore",
    "baryscore": "nlgbench.metrics.baryscore",
    "bartscore": "nlgbench.metrics.bartscore",
    "xmoverscore": "nlgbench.metrics.xmoverscore",
    "sentsim": "nlgbench.metrics.sentsim",
    "frugalscore": "nlgbench.metrics.frugalscore",
}


def metric_names() -> list[str]:
    """Names of all registered metrics."""
    return sorted(_MODULES)


def get_metric(name: str):  # -> nlgbench.metrics.base.MetricInfo
    """The MetricInfo of a registered metric; UserError with the closest names otherwise."""
    if name not in _MODULES:
        raise unknown_name("metric", name, _MODULES)
    return importlib.import_module(_MODULES[name]).INFO
