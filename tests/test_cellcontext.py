"""The per-cell context (`nlgbench.foundations.cellcontext`): two scorers in one process keep their token
budget, progress hook and records (texts cut, export seconds) apart; a metric build that takes no context
still runs, and a token budget it cannot honour is refused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import nlgbench
from nlgbench.core.recipe import Recipe
from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import MetricInfo, PhaseTimer, Scores
from tiny import TEXTS, make_tiny_bert

pytestmark = pytest.mark.component

MAX_TOKENS = 8  # the model's maximum length: [CLS] + 6 word pieces + [SEP] (every text of TEXTS fits)
LONG = "the cat sat on the mat while a dog ran in the park"  # cut at MAX_TOKENS


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT whose tokenizer cuts texts at MAX_TOKENS tokens."""
    folder = make_tiny_bert(tmp_path_factory.mktemp("context") / "short", [*TEXTS, LONG], num_layers=2)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["model_max_length"] = MAX_TOKENS
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def items(hypotheses: list[str], references: list[str]) -> list[Item]:
    return [
        Item("de-en", k + 1, "", "", ref, hyp, float(k))
        for k, (hyp, ref) in enumerate(zip(hypotheses, references, strict=True))
    ]


def test_two_scorers_in_one_process_keep_their_contexts_apart(short_model: Path) -> None:
    heard: dict[str, list[tuple[str, int, int]]] = {"long": [], "short": []}
    contexts = {
        name: CellContext(
            batch_tokens=budget, progress=lambda what, done, total, name=name: heard[name].append((what, done, total))
        )
        for name, budget in (("long", 16), ("short", None))
    }
    info = get_metric("bertscore")
    scorers = {
        name: Recipe(info, EncoderRef(str(short_model)), {"idf": False}).build("cpu", 4, context)
        for name, context in contexts.items()
    }
    data = {
        "long": items([LONG, TEXTS[1], TEXTS[2]], [TEXTS[0], TEXTS[3], TEXTS[4]]),
        "short": items(TEXTS[:3], TEXTS[3:6]),
    }
    scores = {}
    for name, scorer in scorers.items():
        scorer.prepare(data[name])
        scores[name] = scorer.score(data[name], PhaseTimer()).score
    assert contexts["long"].truncated == {LONG} and contexts["short"].truncated == set()
    # each hook heard its own scorer's batches only: 6 texts of <= 8 tokens in batches of 2 (16 tokens)
    # under the long cell's budget, of 4 then 2 (batch_size) in the short cell
    assert heard["long"] == [("texts encoded", 2, 6), ("texts encoded", 4, 6), ("texts encoded", 6, 6)]
    assert heard["short"] == [("texts encoded", 4, 6), ("texts encoded", 6, 6)]
    assert contexts["long"].export_seconds is None  # torch: nothing exported
    plain = Recipe(info, EncoderRef(str(short_model)), {"idf": False}).build("cpu", 4)  # a context of its own
    assert plain.score(data["short"], PhaseTimer()).score == pytest.approx(scores["short"], abs=1e-6)
    plain.score(data["long"], PhaseTimer())  # cuts LONG again: into its own context, not into the cells'
    assert contexts["short"].truncated == set() and contexts["long"].truncated == {LONG}


def test_the_api_scorer_has_a_context_of_its_own(short_model: Path) -> None:
    first = nlgbench.Scorer("bertscore", encoder=str(short_model), device="cpu")
    second = nlgbench.Scorer("bertscore", encoder=str(short_model), device="cpu")
    first.score([LONG], [TEXTS[0]])
    second.score([TEXTS[1]], [TEXTS[2]])
    assert first.context.truncated == {LONG} and second.context.truncated == set()


@dataclass
class LengthOptions:
    """No options."""


class Length:
    """A plugin's scorer written before the context existed: its build takes none."""

    def __init__(self, encoder_ref: Any, options: dict[str, Any], device: str, batch_size: int) -> None:
        self.batch_size = batch_size

    def prepare(self, items: list[Item]) -> None:
        """No corpus state."""

    def score(self, items: list[Item], timer: PhaseTimer) -> Scores:
        return Scores(primary="length", columns={"length": [float(len(it.hypothesis)) for it in items]})

    def describe(self) -> dict[str, Any]:
        return {}


OLD_PLUGIN = MetricInfo(
    name="length",
    description="hypothesis length",
    needs=(),
    higher_is_better=True,
    corpus_state=False,
    options_class=LengthOptions,
    accepts_aligners=False,
    build=Length,
)


def test_a_build_without_context_runs_but_cannot_take_a_token_budget() -> None:
    assert not OLD_PLUGIN.takes_context and get_metric("bertscore").takes_context
    scorer = Recipe(OLD_PLUGIN, None, {}).build("cpu", 4, CellContext())
    assert scorer.score(items(["abc"], ["x"]), PhaseTimer()).score == [3.0]
    with pytest.raises(UserError, match="metric length: its build takes no context argument, so a token budget"):
        Recipe(OLD_PLUGIN, None, {}).build("cpu", 4, CellContext(batch_tokens=64))
