"""The Python API checks its arguments' types at the boundary: one UserError line naming the argument, the type
it takes and what was given (not a TypeError or AttributeError from deep inside); texts and scores in an order
of their own (a set, whose order can differ between processes, or a dict) refused; `lang` an ASCII code (a
full-width `ｅｎ` fell to multilingual BERT)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlgbench
from nlgbench.cli import main
from nlgbench.encoders.languages import lang_encoder
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

HYPS = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]
REFS = ["a cat sat on the mat", "the dog runs through the park", "today it rains"]
METRIC, HUMAN = [0.9, 0.2, 0.5, 0.4], [80.0, 10.0, 40.0, 50.0]
RUN = Path("no-such-run")  # the arguments are checked before the run folder is opened


def correlation(**kwargs: Any) -> Callable[[], Any]:
    return lambda: nlgbench.correlation(kwargs.pop("metric_scores", METRIC), kwargs.pop("human", HUMAN), **kwargs)


def compare(**kwargs: Any) -> Callable[[], Any]:
    arguments = {"candidate": "a", "baseline": "b", **kwargs}
    return lambda: nlgbench.compare(RUN, **arguments)


def chrf(*args: Any, **kwargs: Any) -> Callable[[], Any]:
    """nlgbench.score with chrF (no model): the checks in front of every metric."""
    return lambda: nlgbench.score(*args, **{"metric": "chrf", "encoder": "none", **kwargs})


CASES = [
    # correlation: the reported cases, and every other argument
    (correlation(convention=None), "convention must be a string, got None"),
    (correlation(convention=3), "convention must be a string, got int 3"),
    (correlation(method=None), "method must be a string, got None"),
    (correlation(level=["global"]), "level must be a string, got list ['global']"),
    (correlation(threshold="x"), "threshold must be a number, got str 'x'"),
    (correlation(threshold=None), "threshold must be a number, got None"),
    (correlation(threshold=True), "threshold must be a number, got bool True"),
    (correlation(metric_scores=None), "metric_scores must be a sequence of numbers, got NoneType"),
    (correlation(metric_scores=3), "metric_scores must be a sequence of numbers, got int"),
    (correlation(metric_scores="0.9"), "metric_scores must be a sequence of numbers, not one string"),
    (correlation(metric_scores=["a", "b", "c", "d"]), "metric_scores item 1 is str 'a', not a number"),
    (correlation(metric_scores=[0.9, None, 0.5, 0.4]), "metric_scores item 2 is None, not a number"),
    (correlation(metric_scores=np.array([METRIC, METRIC])), "metric_scores must be a sequence of numbers, one per"),
    (correlation(metric_scores={0.9, 0.2, 0.5, 0.4}), "metric_scores must be a sequence of numbers, not a set"),
    (correlation(human={1: 80, 2: 10, 3: 40, 4: 50}), "human_scores must be a sequence of numbers, not a dict"),
    (correlation(lps="abcd"), "lps must be a sequence, not one string"),
    (correlation(lps=3), "lps must be a sequence, got int"),
    (correlation(systems=3), "systems must be a sequence, got int"),
    (correlation(seg_ids=5), "seg_ids must be a sequence, got int"),
    (correlation(docs={"a", "b", "c", "d"}), "docs must be a sequence, not a set"),
    # compare: names and quality options (an AttributeError or TypeError before)
    (compare(candidate=None), "candidate must be a string, got None"),
    (compare(baseline=3), "baseline must be a string, got int 3"),
    (compare(metric=3), "metric must be a string or None, got int 3"),
    (compare(human=3), "human must be a string or None, got int 3"),
    (compare(convention=None), "convention must be a string, got None"),
    (compare(test=None), "test must be a string, got None"),
    (compare(perm_test=1), "perm_test must be a string, got int 1"),
    (compare(resample=None), "resample must be a string, got None"),
    (compare(level=2), "level must be a string, got int 2"),
    (compare(threshold="0"), "threshold must be a number, got str '0'"),
    # score, Scorer, run: flags
    (chrf(HYPS, REFS, return_all="x"), "return_all must be True or False, got str 'x'"),
    (chrf(HYPS, REFS, verbose="yes"), "verbose must be True or False, got str 'yes'"),
    (lambda: nlgbench.Scorer("chrf", "none", verbose=1), "verbose must be True or False, got int 1"),
    (lambda: nlgbench.run({"name": "x"}, out="x", force="no"), "force must be True or False, got str 'no'"),
    (lambda: nlgbench.run({"name": "x"}, out="x", quiet=None), "quiet must be True or False, got None"),
    # texts in no order of their own: a set's order differs between processes, a dict gives its keys
    (chrf({"a b", "c d"}, ["a b", "c d"]), "hypotheses must be a list of strings, not a set"),
    (chrf(["a b", "c d"], {"a b": 1, "c d": 2}), "references must be a list of strings (or of lists"),
    (chrf(["a b", "c d"], frozenset({"a b", "c d"})), "not a frozenset"),
    (chrf(["a b"], ["a b"], sources={"a b"}), "sources must be a list of strings, not a set"),
]


@pytest.mark.parametrize("call, message", CASES, ids=[str(i) for i in range(len(CASES))])
def test_a_wrong_type_is_one_line_naming_the_argument(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(UserError) as err:
        call()
    assert message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_a_set_says_why_and_what_to_pass() -> None:
    with pytest.raises(UserError) as err:
        nlgbench.correlation({0.9, 0.2, 0.5, 0.4}, HUMAN)
    assert str(err.value) == (
        "metric_scores must be a sequence of numbers, not a set: a set has no order of its own (it can differ "
        "from one run to the next); pass a list (sorted(...) where the order does not matter)"
    )


@pytest.mark.parametrize(
    "idf_sents, given", [({"a b", "c d"}, "set"), (frozenset({"a"}), "frozenset"), ({"a b": 1}, "dict")]
)
def test_idf_sents_in_no_order_of_its_own_is_refused_before_the_model_loads(idf_sents: Any, given: str) -> None:
    """idf_sents as a set gave another `idf:sents@` digest in each process (a unit test may open no model file:
    the refusal comes first)."""
    for call in (
        lambda: nlgbench.Scorer("bertscore", idf=True, idf_sents=idf_sents, device="cpu"),
        lambda: nlgbench.score(HYPS, REFS, idf=True, idf_sents=idf_sents, device="cpu"),
    ):
        with pytest.raises(UserError, match=f"^idf_sents must be a list of strings, not a {given}"):
            call()


def test_ordered_sequences_are_still_taken() -> None:
    """Lists, tuples, numpy arrays, generators and dict views (their order is the insertion order) pass."""
    expected = nlgbench.correlation(METRIC, HUMAN)
    assert nlgbench.correlation(tuple(METRIC), np.array(HUMAN)) == expected
    assert nlgbench.correlation((m for m in METRIC), [int(h) for h in HUMAN]) == expected
    assert nlgbench.correlation(np.array(METRIC, dtype=np.float32).tolist(), HUMAN) == pytest.approx(expected)
    assert nlgbench.correlation(METRIC, HUMAN, threshold=np.float64(0), lps=np.array(["a"] * 4)) == expected
    assert nlgbench.correlation({i: m for i, m in enumerate(METRIC)}.values(), HUMAN) == expected
    scores = nlgbench.score(HYPS, REFS, metric="chrf", encoder="none")
    assert nlgbench.score(dict.fromkeys(HYPS).keys(), tuple(REFS), metric="chrf", encoder="none") == scores


def test_numpy_numbers_are_numbers() -> None:
    with pytest.raises(UserError, match="no results.sqlite"):  # past the type checks: the folder is missing
        nlgbench.compare(RUN, "a", "b", threshold=np.float32(0), method=np.str_("pearson"))


# --------------------------------------------------------------------------- lang: ASCII codes only


@pytest.mark.parametrize("lang", ["ｅｎ", "ＥＮ", "eｎ", "ен", "zh\u0301", "ｔｒ", " en", "en-", "-"])
def test_a_non_ascii_language_code_is_refused(lang: str) -> None:
    """Full-width `ｅｎ` is str.isalpha() and fell to bert_score's default for unknown codes (multilingual BERT)."""
    with pytest.raises(UserError) as err:
        lang_encoder(lang)
    assert str(err.value) == (
        f"lang must be a language code of ASCII letters such as 'en', 'zh' or 'de', got {lang!r} (bert_score's "
        "own models: en, zh, tr, en-sci; any other code takes bert-base-multilingual-cased)"
    )
    with pytest.raises(UserError, match="ASCII letters"):
        nlgbench.Scorer(lang=lang, device="cpu")


@pytest.mark.parametrize(
    "lang, name",
    [("en", "roberta-large"), ("EN", "roberta-large"), ("En-Sci", "scibert-scivocab-uncased"), ("de", "mbert")],
)
def test_ascii_codes_keep_their_models(lang: str, name: str) -> None:
    assert lang_encoder(lang) == name


def test_cli_lang_full_width_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.txt"
    path.write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    assert main(["score", "-c", str(path), "-r", str(path), "--lang", "ｅｎ", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("nlgbench: error: lang must be a language code of ASCII letters")
