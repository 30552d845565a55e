"""The Python API's words: bert_score's argument names taken as nlgbench's (`model_type` -> `encoder`,
`num_layers` -> `layer`, `cands`/`refs`) or answered with nlgbench's exact spelling (`return_hash` on a
`Scorer`), and a recipe's errors, which name a spec's keys (`score.options.idf`), said in the keywords
the caller wrote (`idf`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from nlgbench.foundations.callers import warn_caller
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import default_encoder, get_metric

T = TypeVar("T")
U = TypeVar("U")

API_WHERE = "score"  # the label the API gives `Recipe.parse`; `caller_words` turns it into keywords


class BertScoreNameWarning(UserWarning):
    """bert_score's name for an argument, taken as nlgbench's: the line names nlgbench's spelling."""


def redirect_names(metric: str, encoder: Any, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """`encoder` and the options with bert_score's names replaced by nlgbench's (one warning line each, at
    the caller's line); one UserError saying what to write where both spellings are given, or for
    `return_hash`, which only `nlgbench.score` takes."""
    options = dict(options)
    if "return_hash" in options:
        raise UserError(
            "return_hash: a Scorer's hash is its signature, Scorer(...).signature "
            "(nlgbench.score(..., return_hash=True) returns (scores, signature), as bert_score's score)"
        )
    if "model_type" in options:
        model = options.pop("model_type")
        if encoder is not None:
            raise UserError(
                f"model_type is bert_score's name for encoder, and both are given: write encoder={encoder!r} alone"
            )
        encoder = model
        warn_caller(
            f"model_type is bert_score's name: nlgbench's is encoder (write encoder={model!r})", BertScoreNameWarning
        )
    if "num_layers" in options:
        layers = options.pop("num_layers")
        name = encoder.get("name") if isinstance(encoder, dict) else encoder or default_encoder(metric)
        variant = f"encoder={{'name': {name!r}, 'num_layers': {layers!r}}}"
        if "layer" not in get_metric(metric).options:
            raise UserError(
                f"num_layers: bert_score's num_layers is nlgbench's layer option, which metric {metric!r} has not; "
                f"an encoder cut to its first {layers!r} layers is {variant}"
            )
        if "layer" in options:
            raise UserError(
                "num_layers is bert_score's name for the layer whose output is used, and layer is given too: "
                f"write layer={options['layer']!r} alone (or {variant} to cut the encoder to {layers!r} layers)"
            )
        options["layer"] = layers
        warn_caller(
            f"num_layers is bert_score's name for the layer whose output is used: nlgbench's is layer (write "
            f"layer={layers!r}); {variant} would cut the encoder to {layers!r} layers instead",
            BertScoreNameWarning,
        )
    return encoder, options


def either(name: str, value: T | None, alias: str, alias_value: T | None) -> T | None:
    """An argument given by nlgbench's name or by bert_score's (`cands`, `refs`); one line where both are."""
    if value is not None and alias_value is not None:
        raise UserError(f"{alias} is bert_score's name for {name}, and both are given: give {name} alone")
    return value if value is not None else alias_value


def bert_score_texts(hypotheses: T | None, references: U | None, cands: T | None, refs: U | None) -> tuple[T, U | None]:
    """The hypotheses and references, by nlgbench's names or by bert_score's (`cands`, `refs`)."""
    hyps = either("hypotheses", hypotheses, "cands", cands)
    if hyps is None:
        raise UserError(
            "hypotheses must be a list of strings, got NoneType (no hypotheses: give them first, or as cands=, "
            "bert_score's name)"
        )
    return hyps, either("references", references, "refs", refs)


# a recipe error's label -> the caller's keyword (the label's own key where it names an option)
_LABELS = (
    (re.compile(rf"^{API_WHERE}\.options: unknown key ", re.M), "unknown keyword argument "),
    (re.compile(rf"^{API_WHERE}\.options: ", re.M), ""),
    (re.compile(rf"^{API_WHERE}\.options\.", re.M), ""),
    (re.compile(rf"^{API_WHERE}\.encoders(\[0\])?", re.M), "{encoder}"),
    (re.compile(rf"^{API_WHERE}\.aligners", re.M), "aligner"),
    (re.compile(rf"^{API_WHERE}\.metric", re.M), "metric"),
)


def in_caller_words(message: str, encoder: str = "encoder") -> str:
    """`message` with each line's spec label (`score.options.idf`, `score.encoders[0]`) as the keyword the
    caller wrote (`idf`, `encoder`, or `encoder` the argument that chose it, e.g. `lang='en'`)."""
    for pattern, words in _LABELS:
        message = pattern.sub(words.replace("{encoder}", encoder.replace("\\", "\\\\")), message)
    return message


@contextmanager
def caller_words(encoder: str = "encoder") -> Iterator[None]:
    """Re-raise a UserError of the block in the caller's words (`in_caller_words`)."""
    try:
        yield
    except UserError as exc:
        raise UserError(in_caller_words(str(exc), encoder)) from None
