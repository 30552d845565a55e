"""Metric registry: name -> `MetricInfo`, each loaded on first use.

Packaged metrics are modules defining `INFO`; their options classes (`nlgbench.metrics.metric_options`) are
read without loading those modules and the libraries they import (`options_class`). Installed distributions
add metrics through the `nlgbench.metrics` entry-point group, without editing this package: the entry point's
value names a module defining `INFO` (`my_pkg.my_metric`) or the MetricInfo itself
(`my_pkg.my_metric:INFO`); an entry point named like a packaged metric replaces it.
"""

from __future__ import annotations

from functools import lru_cache, partial
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.lazyregistry import Registry
from nlgbench.metrics.base import HARNESS_OPTIONS, MetricInfo, option_table
from nlgbench.metrics.metric_options import (
    BartScoreOptions,
    BaryScoreOptions,
    BertScoreOptions,
    ChrfOptions,
    FrugalScoreOptions,
    MoverScoreOptions,
    RougeOptions,
    SentBleuOptions,
    SentSimOptions,
    XMoverScoreOptions,
)

ENTRY_POINT_GROUP = "nlgbench.metrics"

PACKAGED: dict[str, str] = {
    "bertscore": "nlgbench.metrics.bertscore:INFO",
    "moverscore": "nlgbench.metrics.moverscore:INFO",
    "baryscore": "nlgbench.metrics.baryscore:INFO",
    "bartscore": "nlgbench.metrics.bartscore:INFO",
    "xmoverscore": "nlgbench.metrics.xmoverscore:INFO",
    "sentsim": "nlgbench.metrics.sentsim:INFO",
    "frugalscore": "nlgbench.metrics.frugalscore:INFO",
    # lexical baselines (no encoder): sacrebleu and rouge-score
    "sentbleu": "nlgbench.metrics.sacrebleu_metrics:SENTBLEU_INFO",
    "chrf": "nlgbench.metrics.sacrebleu_metrics:CHRF_INFO",
    "rouge1": "nlgbench.metrics.rouge:ROUGE1_INFO",
    "rouge2": "nlgbench.metrics.rouge:ROUGE2_INFO",
    "rougeL": "nlgbench.metrics.rouge:ROUGEL_INFO",
}

#: The packaged metrics' options classes (each `MetricInfo.options_class`), read without importing the modules above.
PACKAGED_OPTIONS: dict[str, type] = {
    "bertscore": BertScoreOptions,
    "moverscore": MoverScoreOptions,
    "baryscore": BaryScoreOptions,
    "bartscore": BartScoreOptions,
    "xmoverscore": XMoverScoreOptions,
    "sentsim": SentSimOptions,
    "frugalscore": FrugalScoreOptions,
    "sentbleu": SentBleuOptions,
    "chrf": ChrfOptions,
    "rouge1": RougeOptions,
    "rouge2": RougeOptions,
    "rougeL": RougeOptions,
}


def _metric_info(obj: object) -> object:
    """What a metric module or entry point names, as a registry entry: a module's `INFO`, else the object."""
    return getattr(obj, "INFO", obj) if isinstance(obj, ModuleType) else obj


def _load_entry_point(point: EntryPoint) -> object:
    """The registry entry an installed entry point names (loaded on first use)."""
    return _metric_info(point.load())


@lru_cache(maxsize=1)
def metric_registry() -> Registry[MetricInfo]:
    """Packaged metrics, then the installed `nlgbench.metrics` entry points (read once per process)."""
    registry: Registry[MetricInfo] = Registry("metric", MetricInfo)
    for name, path in PACKAGED.items():
        registry.register_lazy(name, path)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        registry.register_lazy(point.name, partial(_load_entry_point, point))
    return registry


def metric_names() -> list[str]:
    """Names of all registered metrics."""
    return metric_registry().names()


def get_metric(name: str) -> MetricInfo:
    """The MetricInfo of a registered metric; UserError with the closest names otherwise."""
    return metric_registry().get(name)


def options_class(name: str) -> type:
    """A registered metric's options class (`MetricInfo.options_class`): a packaged metric's without importing
    its module, which imports torch (or sacrebleu, rouge-score); an entry point's from its MetricInfo. UserError
    with the closest names for an unknown metric."""
    if name in PACKAGED and metric_registry().path(name) == PACKAGED[name]:  # not replaced by an entry point
        return PACKAGED_OPTIONS[name]
    return get_metric(name).options_class


def option_defaults(name: str) -> dict[str, Any]:
    """option -> default of a registered metric, its harness options' (`reference_policy`: None) included, read
    without loading a packaged metric (`options_class`): what a label compares a cell's options with."""
    return {key: default for key, (_, default) in {**option_table(options_class(name)), **HARNESS_OPTIONS}.items()}


DEFAULT_ENCODER = "all-MiniLM-L6-v2"  # the encoder when none is given, for metrics that run one


def default_encoder(metric: str) -> str:
    """The encoder of `score` and `distill` when none is given: `none` for a metric that runs no
    model (sentbleu, chrf, rouge1 ...), else DEFAULT_ENCODER."""
    return NO_ENCODER if NO_ENCODER in get_metric(metric).encoder_kinds else DEFAULT_ENCODER
