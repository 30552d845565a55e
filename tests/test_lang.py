"""`lang=` picks BERTScore's model as bert_score does: its `lang2model` table and the layer of its
`model2layers`, read from the installed bert_score (no model downloaded); the one line that names the
choice; the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

import nlgbench
from helpers import cli_subprocess as run_cli
from nlgbench.encoders.languages import LANGUAGE_ENCODERS, lang_choice, lang_encoder
from nlgbench.encoders.registry import EncoderRef, default_layer, registry
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

# bert_score's special cases, then languages that fall to its default (multilingual BERT); "EN" as bert_score lowers it
LANGUAGES = ["en", "zh", "tr", "en-sci", "de", "fr", "ru", "cs", "fi", "ro", "ja", "EN"]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_lang_picks_bert_scores_model_and_layer(lang: str) -> None:
    utils = pytest.importorskip("bert_score.utils")
    model = utils.lang2model[lang.lower()]
    name = lang_encoder(lang)
    assert registry().get(name).hub_id == model
    assert default_layer(EncoderRef(name), "bertscore") == utils.model2layers[model]
    assert (
        lang_choice(lang)
        == f"lang {lang}: {name} ({model}, layer {utils.model2layers[model]}), bert_score's model for it"
    )


def test_every_special_language_is_bert_scores() -> None:
    """The table holds exactly bert_score's special cases; every other code is its default."""
    utils = pytest.importorskip("bert_score.utils")
    default = utils.lang2model.default_factory()
    special = {lang: model for lang, model in utils.lang2model.items() if model != default}  # lookups add defaults
    assert {lang: registry().get(name).hub_id for lang, name in LANGUAGE_ENCODERS.items()} == special
    assert registry().get(lang_encoder("xx")).hub_id == default


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lang": "en", "encoder": "all-MiniLM-L6-v2"}, "give lang or encoder, not both"),
        ({"metric": "sentbleu", "lang": "en"}, "lang picks BERTScore's model"),
        ({"lang": "1x"}, "lang must be a language code"),
        ({"lang": ""}, "lang must be a language code"),
    ],
)
def test_lang_refusals_are_one_line(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        nlgbench.Scorer(device="cpu", **kwargs)


def test_lang_loads_the_chosen_model() -> None:
    """Offline, the model lang=de picks (bert-base-multilingual-cased, not cached here) is the one asked for."""
    try:
        scorer = nlgbench.Scorer(lang="de", device="cpu")
    except UserError as exc:
        assert "'mbert' (bert-base-multilingual-cased) is not in the local Hugging Face cache" in str(exc)
    else:  # a machine with the model cached
        assert scorer.encoder == "mbert" and "layer=9" in repr(scorer)


@pytest.mark.integration
def test_cli_lang_says_which_model(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("Ein Hund.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("Der Hund.\n", encoding="utf-8")
    proc = run_cli("score", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"), "--lang", "de")
    first = proc.stderr.splitlines()[0]
    assert first == "lang de: mbert (bert-base-multilingual-cased, layer 9), bert_score's model for it"
    assert "Traceback" not in proc.stderr
