"""The scorer recipe (`nlgbench.core.recipe`): one recipe for a sweep cell, the API and a teacher, and the
rules that depend on a metric's options asked of its options class (`MetricOptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nlgbench.core.recipe import Recipe
from nlgbench.core.spec import parse_spec
from nlgbench.distillation.teacher import Teacher
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import MetricInfo, MetricOptions

pytestmark = pytest.mark.unit

DESCRIBED = {"source": "no-such-model-folder", "layer": 6}  # a scorer's describe(), without loading one


@pytest.mark.component  # the encoder's depth is read from its model files
def test_the_api_and_a_teacher_parse_the_recipe_of_the_spec_cell() -> None:
    """The same metric entry read by a spec, the API and a teacher gives one recipe, so one signature."""
    options = {"idf": False, "n_gram": 2, "reference_policy": "max"}
    spec = parse_spec(
        {
            "name": "recipe",
            "datasets": [{"name": "wmt16"}],
            "metrics": [{"metric": "moverscore", "options": options, "encoders": ["all-MiniLM-L6-v2"]}],
        },
        "spec",
        Path.cwd(),
    )
    (cell,) = spec.cells()
    of_cell = Recipe.of_cell(cell)
    parsed = Recipe.parse("moverscore", "all-MiniLM-L6-v2", options, None, "score")
    teacher = Teacher.parse("moverscore", "all-MiniLM-L6-v2", options).recipe
    assert of_cell == parsed == teacher
    assert of_cell.aligner == "wmd" and of_cell.references == "max"
    signature = of_cell.signature(DESCRIBED)
    assert signature.startswith("moverscore|enc:no-such-model-folder|L6|aligner:wmd|")
    assert "|refs:max|" in signature and "reference_policy" not in signature


@pytest.mark.component  # the encoder's depth is read from its model files
def test_parse_names_where_a_bad_reference_policy_was_given() -> None:
    with pytest.raises(UserError, match=r"^teacher\.options\.reference_policy must be one of"):
        Recipe.parse("bertscore", "all-MiniLM-L6-v2", {"reference_policy": "median"}, None, "teacher")
    with pytest.raises(UserError, match=r"^score\.options: metric sentsim reads no references with these options"):
        Recipe.parse("sentsim", "all-MiniLM-L6-v2", {"reference_policy": "max"}, None, "score")


def test_options_decide_the_rules_that_depend_on_them() -> None:
    sentsim, bertscore, baryscore = get_metric("sentsim"), get_metric("bertscore"), get_metric("baryscore")
    assert all(sentsim.options_decide(rule) for rule in ("reads_references", "blank_texts", "token_rule"))
    assert bertscore.options_decide("blank_texts") and not bertscore.options_decide("reads_references")
    assert not any(baryscore.options_decide(rule) for rule in ("reads_references", "blank_texts", "token_rule"))
    assert sentsim.reads_references({"against": "reference"}) and not sentsim.reads_references({})
    assert sentsim.weighed_tokens({}) is None and sentsim.weighed_tokens({"token_part": "wmd"}) is not None
    assert baryscore.weighed_tokens({}) is baryscore.token_rule  # its fixed declaration
    # asked of options not yet checked (the API's text checks run first): unknown names and odd values pass
    assert sentsim.blank_rule({"token_part": 5, "reference_polcy": "max"}).refused == ("hypothesis", "source")


@dataclass
class PlainOptions:  # a plugin's options, written before MetricOptions: the fixed declarations apply
    depth: int = 1


def test_a_plugin_with_plain_options_gets_its_declarations() -> None:
    def build(encoder_ref: Any, options: dict[str, Any], device: str, batch_size: int) -> Any:
        raise AssertionError("not built")

    info = MetricInfo("plain", "", ("reference",), True, False, PlainOptions, False, build)
    assert not info.options_decide("reads_references") and type(info.rules({"depth": 2})) is MetricOptions
    assert info.reads_references({}) and info.weighed_tokens({}) is None
    assert info.blank_rule({}).refused == ("hypothesis", "reference")
