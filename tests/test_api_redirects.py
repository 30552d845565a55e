"""bert_score's names in nlgbench's own API (`model_type`, `num_layers`, `return_hash`, `cands`/`refs`) taken
or answered with nlgbench's exact spelling, the API's errors in the keywords the caller wrote (not the spec's
`score.options.idf`), and its warnings reported at the caller's line, not inside the package."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import nlgbench
from nlgbench.api import BlankTextWarning, IdfWarning
from nlgbench.apiwords import BertScoreNameWarning
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.component  # a registered encoder is checked in its folder (the weights header)

HYPS = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]
REFS = ["a cat sat on the mat", "the dog runs through the park", "today it rains"]


@contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def refusal(call: Callable[[], Any]) -> str:
    """The one-line UserError `call` raises."""
    with pytest.raises(UserError) as info:
        call()
    return str(info.value)


# --------------------------------------------------------------------------- errors in the caller's words


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"metric": "sentbleu", "reference_policy": "best"},
            "reference_policy must be one of first, max, mean",
        ),
        ({"metric": "chrf", "word_order": "2"}, "word_order must be int, got '2'"),
        ({"metric": "sentbleu", "aligner": "wmd"}, "aligner: metric 'sentbleu' takes no aligner"),
        ({"idf": "yes"}, "idf must be bool, got 'yes'"),
        ({"encoder": {"name": "all-MiniLM-L6-v2", "num_layerz": 3}}, "encoder: unknown encoder option 'num_layerz'"),
        ({"encoder": {"name": "all-MiniLM-L6-v2", "num_layers": 0}}, "encoder: num_layers must be >= 1, got 0"),
        ({"metric": "sentbleu", "lowercase": 1, "nonsense": 2}, "unknown keyword argument 'nonsense'"),
    ],
)
def test_scorer_errors_name_the_keyword(arguments: dict[str, Any], expected: str) -> None:
    """The keyword as written (`idf`, `encoder`, `reference_policy`), never the spec's `score.options...` or
    `score.encoders[0]` labels; the same line from `nlgbench.score`."""
    message = refusal(lambda: nlgbench.Scorer(**arguments))
    assert message.startswith(expected), message
    assert "score." not in message and "encoders[" not in message, message
    assert refusal(lambda: nlgbench.score(HYPS, REFS, **arguments)) == message


def test_lang_errors_name_lang() -> None:
    """An encoder `lang` chose is named by `lang`, as the caller wrote it, beside the option's own line."""
    message = refusal(lambda: nlgbench.Scorer(lang="en", idf="yes"))
    assert message.splitlines()[0] == "idf must be bool, got 'yes'"
    assert all(not line.startswith("score.") for line in message.splitlines()), message


# --------------------------------------------------------------------------- bert_score's names


def test_cands_and_refs_are_the_texts() -> None:
    """bert_score's keywords score as nlgbench's own, in `score`, `score_outputs` and a Scorer's methods."""
    expected = nlgbench.score(HYPS, REFS, metric="sentbleu")
    assert nlgbench.score(cands=HYPS, refs=REFS, metric="sentbleu") == expected
    assert nlgbench.score_outputs(cands=HYPS, refs=REFS, metric="sentbleu")["score"] == expected
    scorer = nlgbench.Scorer("sentbleu")
    assert scorer.score(cands=HYPS, refs=REFS) == expected
    assert scorer.score(HYPS, refs=REFS) == expected


def test_cands_beside_hypotheses_is_one_line() -> None:
    assert refusal(lambda: nlgbench.score(HYPS, REFS, metric="sentbleu", cands=HYPS)) == (
        "cands is bert_score's name for hypotheses, and both are given: give hypotheses alone"
    )
    assert refusal(lambda: nlgbench.Scorer("sentbleu").score(HYPS, REFS, refs=REFS)) == (
        "refs is bert_score's name for references, and both are given: give references alone"
    )
    assert "no hypotheses" in refusal(lambda: nlgbench.score(refs=REFS, metric="sentbleu"))


def test_return_hash_returns_the_signature() -> None:
    """`nlgbench.score(..., return_hash=True)`: bert_score's shape, the result and the signature a Scorer has."""
    scores, signature = nlgbench.score(HYPS, REFS, metric="sentbleu", return_hash=True)
    assert scores == nlgbench.score(HYPS, REFS, metric="sentbleu")
    assert signature == nlgbench.Scorer("sentbleu").signature


def test_return_hash_on_a_scorer_names_its_signature() -> None:
    message = refusal(lambda: nlgbench.Scorer("sentbleu", return_hash=True))
    assert "Scorer(...).signature" in message


def test_model_type_beside_encoder_says_what_to_write() -> None:
    message = refusal(lambda: nlgbench.score(HYPS, REFS, encoder="all-MiniLM-L6-v2", model_type="roberta-large"))
    assert message == (
        "model_type is bert_score's name for encoder, and both are given: write encoder='all-MiniLM-L6-v2' alone"
    )


def test_num_layers_beside_layer_says_what_to_write() -> None:
    message = refusal(lambda: nlgbench.Scorer(encoder="all-MiniLM-L6-v2", num_layers=3, layer=4))
    assert "write layer=4 alone" in message
    assert "encoder={'name': 'all-MiniLM-L6-v2', 'num_layers': 3}" in message


def test_num_layers_without_a_layer_option_names_the_variant() -> None:
    message = refusal(lambda: nlgbench.Scorer("sentbleu", num_layers=3))
    assert message.startswith("num_layers: bert_score's num_layers is nlgbench's layer option"), message


# --------------------------------------------------------------------------- warnings at the caller's line


def test_blank_text_warning_names_this_file() -> None:
    hyps = ["", *HYPS[1:]]
    scorer = nlgbench.Scorer("sentbleu")
    calls = [
        lambda: nlgbench.score(hyps, REFS, metric="sentbleu"),
        lambda: nlgbench.score_outputs(hyps, REFS, metric="sentbleu"),
        lambda: scorer.score(hyps, REFS),
        lambda: scorer.score_outputs(hyps, REFS),
    ]
    for call in calls:
        with recorded() as caught:
            call()
        blank = [w for w in caught if issubclass(w.category, BlankTextWarning)]
        assert [w.filename for w in blank] == [__file__], [(w.filename, w.lineno) for w in blank]


def test_model_type_and_num_layers_score_as_encoder_and_layer(tiny_bert: Callable[..., Path]) -> None:
    """Taken as nlgbench's names, one warning line each at the caller's line naming the spelling to write."""
    tiny = str(tiny_bert(HYPS + REFS, num_layers=2, name="bert"))
    expected = nlgbench.score(HYPS, REFS, encoder=tiny, layer=1, device="cpu")
    with recorded() as caught:
        scores = nlgbench.score(HYPS, REFS, model_type=tiny, num_layers=1, device="cpu")
    assert scores == expected
    said = [w for w in caught if issubclass(w.category, BertScoreNameWarning)]
    assert [w.filename for w in said] == [__file__, __file__]
    assert f"write encoder={tiny!r}" in str(said[0].message)
    assert "write layer=1" in str(said[1].message)
    assert f"encoder={{'name': {tiny!r}, 'num_layers': 1}}" in str(said[1].message)


def test_idf_warning_names_this_file(tiny_bert: Callable[..., Path]) -> None:
    tiny = str(tiny_bert(HYPS + REFS, num_layers=2, name="bert"))
    with recorded() as caught:
        nlgbench.score(HYPS, REFS, encoder=tiny, layer=1, idf=True, device="cpu")
        nlgbench.Scorer(encoder=tiny, layer=1, idf=True, device="cpu").score(HYPS, REFS)
        nlgbench.Scorer(encoder=tiny, layer=1, idf=True, device="cpu", idf_sents=HYPS)
        nlgbench.Scorer(encoder=tiny, layer=1, idf=True, device="cpu").fix_idf(HYPS)
    idf = [w for w in caught if issubclass(w.category, IdfWarning)]
    assert [w.filename for w in idf] == [__file__] * 4, [(w.filename, w.lineno) for w in idf]
