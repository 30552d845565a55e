"""A metric's options read without loading the metric: `options_class` hands out a packaged metric's options class
(`nlgbench.metrics.metric_options`) without importing its module and torch, the class its MetricInfo names; an
entry point named like a packaged metric replaces its options too (the registry knows the path it registered,
`Registry.path`). Labels read the defaults so (`option_defaults`); that `report` and `compare` then import no torch
is tests/test_cli_imports.py's."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import nlgbench.metrics
from nlgbench.core.labels import options_label
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.lazyregistry import Registry
from nlgbench.metrics import (
    ENTRY_POINT_GROUP,
    PACKAGED,
    PACKAGED_OPTIONS,
    get_metric,
    metric_registry,
    option_defaults,
    options_class,
)

pytestmark = pytest.mark.unit

PLUGINS = Path(__file__).resolve().parent / "plugins"


def test_path_is_the_dotted_path_an_entry_was_registered_under() -> None:
    reg: Registry[int] = Registry("number", int)
    reg.register_lazy("pi", "math:pi")
    reg.register_lazy("eight", lambda: 8)
    reg.register("seven", 7)
    assert [reg.path(name) for name in ("pi", "eight", "seven", "nine")] == ["math:pi", None, None, None]
    with pytest.raises(UserError, match="registered entry is a float, not a int"):
        reg.get("pi")
    assert reg.path("pi") == "math:pi"  # resolved or not
    reg.register_lazy("pi", lambda: 3)
    assert reg.path("pi") is None  # replaced by a loader


def test_packaged_options_classes_are_the_metrics_own() -> None:
    assert set(PACKAGED_OPTIONS) == set(PACKAGED)
    for name in PACKAGED:
        assert options_class(name) is get_metric(name).options_class, name


def test_option_defaults_are_the_options_class_and_the_harness_option() -> None:
    assert option_defaults("chrf") == {
        "char_order": 6,
        "word_order": 0,
        "beta": 2,
        "remove_whitespace": True,
        "eps_smoothing": False,
        "reference_policy": None,
    }
    assert options_label("chrf", {"char_order": 6, "word_order": 2, "reference_policy": "max"}) == (
        "reference_policy=max,word_order=2"
    )
    with pytest.raises(UserError, match="unknown metric 'chfr'; did you mean 'chrf'"):
        options_class("chfr")


@pytest.fixture
def chrf_replaced(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed entry point named `chrf` (the test plugin's wordcount), read afresh by the metric registry."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    point = EntryPoint(name="chrf", value="nlgbench_testmetrics:INFO", group=ENTRY_POINT_GROUP)
    monkeypatch.setattr(nlgbench.metrics, "entry_points", lambda group: [point] if group == ENTRY_POINT_GROUP else [])
    metric_registry.cache_clear()
    yield
    metric_registry.cache_clear()  # before the patch is undone: the next use reads the real entry points
    sys.modules.pop("nlgbench_testmetrics", None)


def test_an_entry_point_named_like_a_packaged_metric_replaces_its_options(chrf_replaced: None) -> None:
    import nlgbench_testmetrics  # type: ignore[import-not-found]

    assert options_class("chrf") is nlgbench_testmetrics.WordCountOptions is get_metric("chrf").options_class
    assert options_label("chrf", {"word_order": 2, "scale": 2.0}) == "scale=2.0"  # the plugin's options, not chrF's
