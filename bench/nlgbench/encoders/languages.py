"""BERTScore's model per language, as bert_score's `lang=` picks it (bert_score/utils.py `lang2model`,
the layer from its `model2layers`, which the registry's `default_layers: {bertscore: ...}` hold): English
roberta-large (layer 17), Chinese bert-base-chinese (8), Turkish dbmdz/bert-base-turkish-cased (10),
scientific English (`en-sci`) SciBERT (8), every other language bert-base-multilingual-cased (9)."""

from __future__ import annotations

import re

from nlgbench.encoders.registry import EncoderRef, default_layer, registry
from nlgbench.foundations.errors import UserError

#: language code -> registered encoder name (bert_score's lang2model); any other code: OTHER_LANGUAGES
LANGUAGE_ENCODERS = {
    "en": "roberta-large",
    "zh": "bert-base-chinese",
    "tr": "bert-base-turkish-cased",
    "en-sci": "scibert-scivocab-uncased",
}
OTHER_LANGUAGES = "mbert"  # bert-base-multilingual-cased, bert_score's default for every other language
LANGUAGE_CODE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")  # en, EN, en-sci; no space, no letter beyond ASCII


def lang_encoder(lang: str) -> str:
    """The registered encoder bert_score's `lang=` picks for `lang` (lower-cased, as bert_score does); one
    clear error for a value that is no language code: ASCII letters in parts joined by '-' (a full-width 'ｅｎ'
    is letters to str.isalpha but no code bert_score knows, and would fall to its multilingual default)."""
    if not isinstance(lang, str) or not LANGUAGE_CODE.fullmatch(lang):
        known = ", ".join(LANGUAGE_ENCODERS)
        raise UserError(
            f"lang must be a language code of ASCII letters such as 'en', 'zh' or 'de', got {lang!r} (bert_score's "
            f"own models: {known}; any other code takes {registry().get(OTHER_LANGUAGES).hub_id})"
        )
    return LANGUAGE_ENCODERS.get(lang.lower(), OTHER_LANGUAGES)


def lang_choice(lang: str) -> str:
    """The one line saying which model `lang` picked: name, Hub id and BERTScore layer."""
    name = lang_encoder(lang)
    layer = default_layer(EncoderRef(name), "bertscore")
    return f"lang {lang}: {name} ({registry().get(name).hub_id}, layer {layer}), bert_score's model for it"


def lang_metric_encoder(metric: str, encoder: object, lang: str) -> str:
    """The encoder the API's `lang=` picks for `metric` (bert_score's `lang=`): BERTScore's only, and not
    beside an `encoder`; one clear line otherwise."""
    if metric != "bertscore":
        raise UserError(f"lang picks BERTScore's model (bert_score's lang=); for metric {metric!r} give encoder=")
    if encoder is not None:
        raise UserError("give lang or encoder, not both: lang picks the encoder (as bert_score's lang=)")
    return lang_encoder(lang)
