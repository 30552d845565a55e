"""Test-only nlgbench metrics, registered as a plugin is (the `nlgbench.metrics` entry point of
`nlgbench_testmetrics-0.1.dist-info` beside this file; the `wordcount_metric` fixture of tests/conftest.py
puts this folder on the path of the tests and their worker processes).

`wordcount`: the number of whitespace-separated words of the hypothesis. It runs no model and imports
neither torch nor any other model library, so a sweep of it runs a sweep's mechanics (workers, the fork
server, the store, resume) in a fraction of a model cell's time; its `describe()` records which of
HEAVY_LIBRARIES the worker process had imported by then (`loaded_libraries`), so a test can check that a
cell imports only what it needs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nlgbench.data.items import Item
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.metrics.base import BlankTexts, MetricInfo, PhaseTimer, ScorerBase, Scores

HEAVY_LIBRARIES = ("torch", "transformers", "onnx", "onnxruntime", "openvino", "ot", "safetensors")


@dataclass
class WordCountOptions:
    """`scale`: a factor on every count (so a cell with another option is another cell)."""

    scale: float = 1.0


class WordCountScorer(ScorerBase[WordCountOptions]):
    options_class = WordCountOptions

    def __init__(
        self,
        encoder_ref: Any,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        with timer.phase("count"):
            counts = [self.options.scale * len(it.hypothesis.split()) for it in items]
        return Scores(primary="words", columns={"words": counts})

    def describe(self) -> dict[str, Any]:
        return {
            "params": 0,
            "disk_bytes": 0,
            "weight_bytes": 0,
            "runs_on": "cpu",
            "loaded_libraries": [name for name in HEAVY_LIBRARIES if name in sys.modules],
        }


INFO = MetricInfo(
    name="wordcount",
    description="words in the hypothesis (test plugin: runs no model, imports no torch)",
    needs=(),
    higher_is_better=True,
    corpus_state=False,
    options_class=WordCountOptions,
    accepts_aligners=False,
    build=WordCountScorer,
    encoder_kinds=(NO_ENCODER,),
    blank_texts=BlankTexts(scored=("hypothesis",), value="0 words"),
)
