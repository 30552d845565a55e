"""Texts without a token the metric weighs: '...' for MoverScore (punctuation carries no mass), a text of
zero-width or invisible characters (U+200B, U+FEFF, U+00AD, NUL, combining marks, which BERT's tokenizer
drops) for BaryScore, XMoverScore and SentSim's transport part. Such a text is blank to the metric: refused
as its blank texts are, one line naming the item and showing the text escaped, before the model loads,
through the API, `nlgbench score` and a sweep. MoverScore's idf of one pair weighs every token
log(2/2) = 0: that text falls back to uniform weights, as BaryScore's does, instead of a ValueError."""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import nlgbench
import nlgbench.api
from helpers import assert_one_line, minimal_spec, write_jsonl, write_spec
from helpers import cli_subprocess as cli
from nlgbench.core.recipe import Recipe
from nlgbench.core.spec import load_spec
from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import load_encoder
from nlgbench.encoders.tokenization import load_tokenizer
from nlgbench.execution.preflight import check_datasets
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.moverscore import cloud
from tiny import TEXTS

pytestmark = pytest.mark.component

ARGUMENT = {"hypothesis": "hypotheses", "reference": "references", "source": "sources"}
# Texts BERT's tokenizer leaves without a word (it drops control and format characters, and accents when it
# lower-cases), as the messages show them: escaped, never ''.
INVISIBLE = {
    "\u200b": r"'\u200b'",
    "\ufeff": r"'\ufeff'",
    "\u00ad": r"'\xad'",
    "\x00": r"'\x00'",
    "\u0301\u0300": r"'\u0301\u0300'",
    "\ufeff \u200b": r"'\ufeff \u200b'",
}


@pytest.fixture(scope="module")
def tiny(tiny_bert: Callable[..., Path]) -> str:
    return str(tiny_bert(TEXTS, num_layers=2, name="tokenless"))


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any model's weights loading fails the test: the texts must be refused before."""

    def loaded(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a model's weights loaded before the texts were checked")

    from transformers import AutoModel

    monkeypatch.setattr(AutoModel, "from_pretrained", loaded)


def options(metric: str, tiny: str) -> dict[str, Any]:
    return {"encoder": tiny, **({"last_layers": 2} if metric == "baryscore" else {})}


def pairs(field: str, text: str, line: int = 2) -> tuple[list[str], list[str]]:
    """Four hypotheses and references, `text` in `field`'s line `line` (1-based)."""
    hyps, refs = list(TEXTS[0:4]), list(TEXTS[4:8])
    (hyps if field == "hypothesis" else refs)[line - 1] = text
    return hyps, refs


# ----------------------------------------------------------------------------- the API


CASES = [("moverscore", "...", "'...'"), *[("baryscore", text, shown) for text, shown in INVISIBLE.items()]]


@pytest.mark.parametrize("field", ["hypothesis", "reference"])
@pytest.mark.parametrize(("metric", "text", "shown"), CASES, ids=[f"{m}-{s}" for m, _, s in CASES])
def test_the_api_refuses_a_tokenless_text_before_the_model_loads(
    tiny: str, no_model: None, metric: str, text: str, shown: str, field: str
) -> None:
    hyps, refs = pairs(field, text)
    with pytest.raises(UserError) as err:
        nlgbench.score(hyps, refs, metric=metric, device="cpu", **options(metric, tiny))
    message = str(err.value)
    assert message.startswith(
        f"{metric} cannot score a {field} without a token it weighs ({ARGUMENT[field]} line 2: {shown}): "
    ), message
    assert "''" not in message and "\n" not in message
    assert get_metric(metric).blank_rule({}).reason in message  # refused as a blank text is, for its reason


def test_the_count_and_the_reference_among_several_are_named(tiny: str, no_model: None) -> None:
    hyps = ["...", "the cat sat", "!?", "a dog"]
    refs = [["the cat", "a dog"], ["the sun", "a cat"], ["we went", "she reads"], ["the mat", ","]]
    with pytest.raises(UserError, match=r"^moverscore cannot score a hypothesis .*\(hypotheses line 1: '\.\.\.', "):
        nlgbench.score(hyps, refs, metric="moverscore", encoder=tiny)
    with pytest.raises(UserError) as err:
        nlgbench.score(TEXTS[:4], refs, metric="moverscore", encoder=tiny)
    assert "(references line 4, reference 2: ',')" in str(err.value)
    with pytest.raises(UserError) as err:
        nlgbench.score(hyps, TEXTS[:4], metric="moverscore", encoder=tiny)
    assert "(hypotheses line 1: '...', 2 such in all)" in str(err.value)


def test_a_scorer_refuses_by_line_and_scores_on(tiny: str) -> None:
    """A `Scorer` (its model loaded) refuses the tokenless text by its line, not with a ValueError, and
    scores the next call."""
    scorer = nlgbench.Scorer("baryscore", encoder=tiny, last_layers=2, device="cpu")
    with pytest.raises(UserError, match=r"^baryscore cannot score a reference without a token it weighs "):
        scorer.score(TEXTS[:2], [TEXTS[2], "\u200b"])
    assert all(math.isfinite(v) for v in scorer.score(TEXTS[:2], TEXTS[2:4]))


def test_what_has_no_token_depends_on_the_tokenizer_and_the_options(tiny: str) -> None:
    """MoverScore's stop words leave 'the a' without a token; without them it is scored. BaryScore weighs
    punctuation, so '...' is scored there."""
    hyps = ["the a", *TEXTS[1:4]]
    with pytest.raises(UserError, match=r"moverscore cannot score a hypothesis without a token it weighs"):
        nlgbench.score(hyps, TEXTS[4:8], metric="moverscore", encoder=tiny, stop_words=["the", "a"])
    assert all(math.isfinite(v) for v in nlgbench.score(hyps, TEXTS[4:8], metric="moverscore", encoder=tiny))
    bary = nlgbench.score(["...", *TEXTS[1:4]], TEXTS[4:8], metric="baryscore", encoder=tiny, last_layers=2)
    assert all(math.isfinite(v) for v in bary)


@pytest.mark.parametrize("metric", ["xmoverscore", "sentsim"])
def test_the_other_transport_metrics_refuse_it_too(tiny: str, no_model: None, metric: str) -> None:
    """XMoverScore and SentSim's transport part move the non-special tokens' mass: none in U+200B."""
    extra = {"layer": 2} if metric == "xmoverscore" else {"token_part": "wmd"}
    with pytest.raises(UserError, match=rf"^{metric} cannot score a hypothesis without a token it weighs "):
        nlgbench.score(["\u200b", *TEXTS[1:4]], TEXTS[4:8], metric=metric, sources=TEXTS[:4], encoder=tiny, **extra)


def test_bertscore_still_scores_such_a_text_zero(tiny: str) -> None:
    """BERTScore keeps [CLS] and [SEP]: a text of them alone is its blank text, scored 0 as bert_score."""
    assert nlgbench.score(["\u200b", TEXTS[1]], TEXTS[2:4], encoder=tiny)[0] == 0.0


# ----------------------------------------------------------------------------- MoverScore's idf of one pair


def test_moverscore_idf_of_one_pair_falls_back_to_uniform_weights(tiny: str) -> None:
    """One pair with idf: every token weighs log(2/2) = 0, so both texts get uniform weights: the score
    equals idf off (it was a ValueError). moverscore_v2 moves no mass there and returns 1."""
    for n_gram in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nlgbench.api.IdfWarning)
            with_idf = nlgbench.score([TEXTS[0]], [TEXTS[1]], metric="moverscore", encoder=tiny, n_gram=n_gram)
        without = nlgbench.score([TEXTS[0]], [TEXTS[1]], metric="moverscore", encoder=tiny, idf=False, n_gram=n_gram)
        assert math.isfinite(with_idf[0]) and with_idf == pytest.approx(without, abs=1e-12)


def test_a_cloud_whose_idf_weights_are_all_zero_is_uniform(tiny: str) -> None:
    import torch

    (tok,) = load_encoder(EncoderRef(tiny), "cpu").tokenize(["the cat sat on the mat"])
    states = torch.randn(len(tok.ids), 8)
    emb, weights = cloud(tok, states, {token: 0.0 for token in tok.ids}, 0.0, frozenset())
    assert weights.tolist() == [1.0] * 6 and emb.shape == (6, 8)  # the, cat, sat, on, the, mat
    _, idf_weights = cloud(tok, states, {token: 0.5 for token in tok.ids}, 0.0, frozenset())
    assert idf_weights.tolist() == [0.5] * 6  # any mass at all: the idf weights as they are


@pytest.mark.integration  # moverscore_v2's idf runs a process pool
def test_moverscore_v2_moves_nothing_for_a_text_without_mass(tiny: str) -> None:
    """What the reference does (the decision's evidence): with idf, a text without a weighed token, and any
    single pair, score 1 (`1 - 0`: no mass moved), whatever the other text."""
    pytest.importorskip("pyemd")
    from moverscore_reference import load_moverscore_v2

    v2 = load_moverscore_v2(tiny)

    def v2_score(refs: list[str], hyps: list[str]) -> list[float]:
        idf_ref, idf_hyp = v2.get_idf_dict(refs, 1), v2.get_idf_dict(hyps, 1)
        return [float(s) for s in v2.word_mover_score(refs, hyps, idf_ref, idf_hyp, stop_words=[], device="cpu")]

    assert v2_score([TEXTS[0]], [TEXTS[1]]) == [1.0]
    assert v2_score(TEXTS[:2], ["...", TEXTS[3]])[0] == 1.0
    uniform = defaultdict(lambda: 1.0)
    assert v2.word_mover_score([TEXTS[0]], ["..."], uniform, uniform, stop_words=[], device="cpu")[0] < 1.0


# ----------------------------------------------------------------------------- the scorers themselves


@pytest.mark.parametrize("metric", ["moverscore", "baryscore"])
def test_a_scorer_given_such_an_item_names_it(tiny: str, metric: str) -> None:
    """Where no check ran before (a sweep whose model was not on disk at its start), the scorer refuses the
    item by its ids with the text escaped: one line, not a ValueError."""
    info = get_metric(metric)
    opts = info.cell_options({"last_layers": 2} if metric == "baryscore" else {})
    scorer = Recipe(info, EncoderRef(tiny), opts).build("cpu", 4)
    items = [
        Item(lp="de-en", seg_id=i + 1, system="sys", source="", reference=TEXTS[i], hypothesis=TEXTS[i + 1], human=0.0)
        for i in range(3)
    ]
    items[1] = Item(lp="de-en", seg_id=7, system="sys", source="", reference=TEXTS[0], hypothesis="\u200b", human=0.0)
    scorer.prepare(items)
    with pytest.raises(UserError) as err:
        scorer.score(items, PhaseTimer())
    assert str(err.value).startswith(
        f"{metric} cannot score a hypothesis without a token it weighs (item lp='de-en' seg_id=7 system='sys': "
        r"'\u200b'): "
    ), str(err.value)


def test_the_tokenizer_alone_tokenises_as_the_cells_do(tiny: str) -> None:
    """`load_tokenizer` reads the tokenizer and the configuration, no weights: the same ids and maximum
    length (truncation) as the loaded encoder."""
    texts = ["...", "\u200b", TEXTS[0], " ".join(TEXTS) * 40]
    alone, loaded = load_tokenizer(EncoderRef(tiny)), load_encoder(EncoderRef(tiny), "cpu")
    assert alone is not None and alone.max_length == loaded.max_length == 512
    assert [t.ids for t in alone.tokenize(texts)] == [t.ids for t in loaded.tokenize(texts)]


# ----------------------------------------------------------------------------- a sweep's checks


def data_file(folder: Path, text: str) -> Path:
    rows = [
        {"lp": "en-en", "seg_id": i + 1, "system": "s", "reference": TEXTS[i], "hypothesis": TEXTS[i + 1], "human": i}
        for i in range(4)
    ]
    rows[2]["hypothesis"] = text
    return write_jsonl(folder / "data.jsonl", rows, ensure_ascii=True)


@pytest.mark.parametrize(
    ("metric", "text", "shown"), [("moverscore", "...", "'...'"), ("baryscore", "\x00", r"'\x00'")]
)
def test_the_sweep_refuses_the_item_before_any_cell(
    tiny: str, tmp_path: Path, no_model: None, metric: str, text: str, shown: str
) -> None:
    data_file(tmp_path, text)
    entry = {"metric": metric, "encoders": [tiny], **({"options": {"last_layers": 2}} if metric == "baryscore" else {})}
    spec = load_spec(write_spec(tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}], metrics=[entry])))
    for catalogue in (True, False):  # a run, and its --dry-run
        with pytest.raises(UserError) as err:
            check_datasets(spec, catalogue=catalogue)
        assert str(err.value).startswith(
            f"dataset data: {metric} cannot score a hypothesis without a token it weighs "
            f"(item lp='en-en' seg_id=3 system='s': {shown}): "
        ), str(err.value)


def test_a_model_not_on_this_machine_is_not_downloaded_for_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads the tokenizer of a model on disk only (its tokenizer files alone in the cache would
    pass for the model there); another is checked by its cell once loaded, with the Hub on."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert load_tokenizer(EncoderRef("nobody-here/no-such-model")) is None
    data_file(tmp_path, "...")
    entry = {"metric": "moverscore", "encoders": ["nobody-here/no-such-model"]}
    spec = load_spec(write_spec(tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}], metrics=[entry])))
    assert check_datasets(spec)[1] == {"data": 4}


# ----------------------------------------------------------------------------- the command line


@pytest.mark.integration
def test_nlgbench_score_refuses_in_one_line(tiny: str, tmp_path: Path) -> None:
    (tmp_path / "h.txt").write_text(f"{TEXTS[0]}\n...\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text(f"{TEXTS[1]}\n{TEXTS[2]}\n", encoding="utf-8")
    (tmp_path / "z.txt").write_text(f"\u200b\n{TEXTS[3]}\n", encoding="utf-8")
    files = ["-c", str(tmp_path / "h.txt"), "-r", str(tmp_path / "r.txt"), "--encoder", tiny]
    proc = cli("score", "--metric", "moverscore", *files)
    assert_one_line(proc, "moverscore cannot score a hypothesis without a token it weighs (hypotheses line 2: '...')")
    files[1] = str(tmp_path / "z.txt")
    proc = cli("score", "--metric", "baryscore", "--option", "last_layers=2", *files)
    assert_one_line(
        proc, r"baryscore cannot score a hypothesis without a token it weighs (hypotheses line 1: '\u200b')"
    )
    proc = cli(
        "score", "--metric", "moverscore", "-c", str(tmp_path / "r.txt"), "-r", str(tmp_path / "r.txt"), *files[4:]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.integration
def test_nlgbench_score_of_one_pair_with_idf_is_a_score(tiny: str, tmp_path: Path) -> None:
    (tmp_path / "h.txt").write_text(f"{TEXTS[0]}\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text(f"{TEXTS[1]}\n", encoding="utf-8")
    proc = cli(
        "score",
        "--metric",
        "moverscore",
        "-c",
        str(tmp_path / "h.txt"),
        "-r",
        str(tmp_path / "r.txt"),
        "--encoder",
        tiny,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert math.isfinite(json.loads(proc.stdout)["outputs"]["score"][0])
    assert "warning: idf is computed from 1 text" in proc.stderr


@pytest.mark.integration
def test_nlgbench_run_refuses_before_any_cell(tiny: str, tmp_path: Path) -> None:
    data_file(tmp_path, "\u200b")
    spec = write_spec(
        tmp_path,
        minimal_spec(
            datasets=[{"path": "data.jsonl"}],
            metrics=[{"metric": "baryscore", "encoders": [tiny], "options": {"last_layers": 2}}],
        ),
    )
    needle = (
        "dataset data: baryscore cannot score a hypothesis without a token it weighs "
        r"(item lp='en-en' seg_id=3 system='s': '\u200b')"
    )
    assert_one_line(cli("run", str(spec), "--dry-run", cwd=tmp_path), needle)
    assert_one_line(cli("run", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path), needle)
    assert not (tmp_path / "out" / "cells").exists()
