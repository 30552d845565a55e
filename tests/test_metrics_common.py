"""The metrics' shared pieces: length-sorted batching, padding, options declared once in a dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from nlgbench.encoders.runtime import pad_ids
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric, metric_names
from nlgbench.metrics.base import MetricInfo, option_table, with_second_model
from nlgbench.metrics.common import length_sorted_batches, length_sorted_map, pad_tensors

pytestmark = pytest.mark.unit


def test_length_sorted_batches_put_the_longest_first_and_keep_ties_in_input_order() -> None:
    lengths = [3, 7, 1, 7, 5]
    assert list(length_sorted_batches(lengths, 2)) == [[1, 3], [4, 0], [2]]
    assert list(length_sorted_batches([], 4)) == []


def test_length_sorted_map_returns_results_in_input_order() -> None:
    lengths = [3, 7, 1, 7, 5]
    seen: list[list[int]] = []

    def fn(batch: list[int]) -> list[str]:
        seen.append(batch)
        return [f"item{i}:{lengths[i]}" for i in batch]

    assert length_sorted_map(fn, lengths, 2) == ["item0:3", "item1:7", "item2:1", "item3:7", "item4:5"]
    assert seen == [[1, 3], [4, 0], [2]]
    with pytest.raises(ValueError):  # one result per index, or the order could not be restored
        length_sorted_map(lambda batch: [0.0], lengths, 2)


def test_padding() -> None:
    ids, mask = pad_ids([[5, 6, 7], [8]], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    padded = pad_tensors([torch.ones(2, 3), torch.ones(1, 3)])
    assert padded.shape == (2, 2, 3) and padded[1, 1].abs().sum() == 0


@dataclass
class DemoOptions:
    depth: int = 3
    name: str | None = None
    weights: list[float] = field(default_factory=list)
    scale: float = 0.5
    on: bool = True


def _check_depth(options: dict[str, Any]) -> None:
    if options.get("depth") is not None and options["depth"] < 1:
        raise UserError(f"depth must be >= 1, got {options['depth']}")


DEMO = MetricInfo(
    name="demo",
    description="",
    needs=("reference",),
    higher_is_better=True,
    corpus_state=False,
    options_class=DemoOptions,
    accepts_aligners=False,
    build=lambda *args: None,
    check_values=_check_depth,
)


def test_options_table_is_read_from_the_dataclass() -> None:
    assert option_table(DemoOptions) == {
        "depth": (int, 3),
        "name": (str, None),
        "weights": (list, []),
        "scale": (float, 0.5),
        "on": (bool, True),
    }
    assert DEMO.options == option_table(DemoOptions)
    for name in metric_names():  # every packaged metric: one options dataclass, the table derived from it
        info = get_metric(name)
        assert list(info.options) == list(option_table(info.options_class))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"depth": "3"}, "metrics[0].options.depth must be int, got '3'"),
        ({"depth": True}, "metrics[0].options.depth must be int, got True"),
        ({"on": 1}, "metrics[0].options.on must be bool, got 1"),
        ({"weights": (1.0,)}, "metrics[0].options.weights must be list, got (1.0,)"),
        ({"depth": 0}, "metrics[0].options: depth must be >= 1, got 0"),
        ({"dpth": 2}, "metrics[0].options: metric demo has no option 'dpth'"),
    ],
)
def test_bad_options_give_one_line_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as info:
        DEMO.check_options(options, "metrics[0].options")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_good_options_pass() -> None:
    DEMO.check_options({"depth": 2, "name": None, "weights": [0.1], "scale": 1.5, "on": False})
    DEMO.check_options({})


def test_with_second_model_adds_sizes_and_keeps_the_rest() -> None:
    first = {"params": 10, "disk_bytes": 100, "weight_bytes": 40, "layer": 3}
    second = {"params": 1, "disk_bytes": 2, "weight_bytes": 4, "layer": 9, "source": "x"}
    assert with_second_model(first, second) == {"params": 11, "disk_bytes": 102, "weight_bytes": 44, "layer": 3}
