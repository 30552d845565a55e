"""The API's texts as items: lists of strings (hypotheses, references, sources) checked against what a
metric reads and its blank-text rule (`MetricInfo.blank_rule`), each error one line naming the argument
and the 1-based line, as `nlgbench score`'s `line` column counts; what `nlgbench.Scorer` and
`nlgbench score` read before any model loads. A text its encoder's tokenizer leaves without a token the
metric weighs counts as blank (`check_tokens`, `TokenCheck`: `nlgbench.metrics.tokenless`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef, parse_encoder_ref
from nlgbench.encoders.tokenization import TokenizerAlone
from nlgbench.foundations.arguments import ordered
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import default_encoder, get_metric
from nlgbench.metrics.base import MetricInfo
from nlgbench.metrics.tokenless import Tokenizers, tokenless_refusal

References = (
    Iterable[str] | Iterable[Sequence[str]]
)  # one text per hypothesis, or a list of texts (several) per hypothesis


def as_list(name: str, values: Iterable[Any], what: str = "a list of strings") -> list[Any]:
    """Any ordered iterable (a list, a tuple, a generator) as a list; one clear error for one string, a set or a
    dict (no order of their own: the pairs would differ between runs) or a non-iterable (`ordered`)."""
    return ordered(name, values, what)


def _texts(name: str, values: Iterable[str] | None, n: int) -> list[str]:
    """A list of n strings, or one clear error naming the argument and the line (1-based, as the
    `line` column of `nlgbench score`'s output). Blank texts pass: the metric's rule decides (`texts_as_items`)."""
    if values is None:
        return [""] * n
    out = as_list(name, values)
    if len(out) != n:
        raise UserError(f"{name} has {len(out)} items but hypotheses has {n}")
    bad = [i for i, v in enumerate(out) if not isinstance(v, str)]
    if bad:
        raise UserError(f"{name} line {bad[0] + 1} is {type(out[bad[0]]).__name__}, not a string")
    return out


def _references(values: References | None, n: int) -> list[tuple[str, ...]]:
    """Each hypothesis's references, from texts (one each) or lists of texts (several each,
    bert_score's format). One clear error otherwise, naming the line (1-based)."""
    if values is None:
        return [("",)] * n
    out = as_list("references", values, "a list of strings (or of lists of strings)")
    if len(out) != n:
        raise UserError(f"references has {len(out)} items but hypotheses has {n}")
    refs: list[tuple[str, ...]] = []
    for i, value in enumerate(out):
        group = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
        if group is None or not all(isinstance(v, str) for v in group):
            raise UserError(f"references line {i + 1} is {type(value).__name__}, not a string or a list of strings")
        if not group:
            raise UserError(f"references line {i + 1} is an empty list: give at least one reference")
        refs.append(group)
    return refs


ARGUMENTS = {"hypothesis": "hypotheses", "reference": "references", "source": "sources"}  # item field -> argument
LINES_SHOWN = 10  # blank lines named per argument in the warning; the rest counted


class BlankTextWarning(UserWarning):
    """Blank texts (empty or whitespace only) that the metric scored as it defines them
    (`MetricInfo.blank_texts`: BERTScore P = R = F1 = 0 as bert_score, BLEU 0 ...)."""


MIN_IDF_TEXTS = 10  # idf from fewer texts weighs tokens by chance; from one, each of its tokens weighs log(2/2) = 0


class IdfWarning(UserWarning):
    """idf computed from fewer than MIN_IDF_TEXTS texts of one call: pass a fixed corpus (`idf_sents`)."""


def _line(items: Sequence[Item], field: str, position: int, number: int | None = None) -> str:
    """Where a text is, as the caller gave it: `hypotheses line 3`, `references line 2, reference 2`
    (1-based; the reference named where the line has several: `number`, 0-based, else its first blank one)."""
    where = f"{ARGUMENTS[field]} line {position + 1}"
    refs = items[position].references
    if field != "reference" or len(refs) == 1:
        return where
    if number is None:
        number = next(k for k, text in enumerate(refs) if not text.strip())
    return f"{where}, reference {number + 1}"


def blank_warning(info: MetricInfo, options: dict[str, Any], items: Sequence[Item]) -> str | None:
    """The one-line warning on the blank texts the metric scores among `items` (how many, which lines,
    1-based, and what they score), or None when there are none."""
    rule = info.blank_rule(options)
    found = {field: positions for field, positions in rule.found(items).items() if field in rule.scored}
    if not found:
        return None
    count = len({i for positions in found.values() for i in positions})
    where = "; ".join(
        f"{ARGUMENTS[field]} line{'s' if len(positions) > 1 else ''} "
        + ", ".join(str(i + 1) for i in positions[:LINES_SHOWN])
        + (f" ... ({len(positions)} in all)" if len(positions) > LINES_SHOWN else "")
        for field, positions in found.items()
    )
    return f"{count} of {len(items)} lines hold a blank text ({where}); {info.name} scores a blank text: {rule.value}"


def texts_as_items(
    info: MetricInfo,
    options: dict[str, Any],
    hypotheses: Iterable[str],
    references: References | None,
    sources: Iterable[str] | None,
) -> list[Item]:
    """The texts as items, after their checks (one clear error naming the argument and the 1-based
    line): the references and sources the metric needs, as many as hypotheses; a blank text only
    where the metric defines a value for one (`MetricInfo.blank_rule`)."""
    hyps = as_list("hypotheses", hypotheses)
    hyps = _texts("hypotheses", hyps, len(hyps))
    given = {"reference": references, "source": sources}
    rule = info.blank_rule(options)
    reads_references = info.reads_references(options)  # SentSim's `against: reference` too
    read = {*info.needs, *(["reference"] if reads_references else []), *rule.scored, *rule.refused} - {"hypothesis"}
    for need in sorted(read):  # BARTScore's faithfulness reads sources too
        if given[need] is None:
            raise UserError(f"metric {info.name!r} needs {need}s: pass {need}s=[...]")
    refs = _references(references, len(hyps))
    srcs = _texts("sources", sources, len(hyps))
    items = [
        Item(lp="", seg_id=i + 1, system="", source=s, reference=r[0], hypothesis=h, human=float("nan"), references=r)
        for i, (h, r, s) in enumerate(zip(hyps, refs, srcs, strict=True))
    ]
    refused = rule.refusal(info.name, items, lambda field, i: _line(items, field, i))
    if refused is not None:
        raise UserError(refused)
    return items


def check_texts(
    metric: str, hypotheses: Iterable[str], references: References | None, sources: Iterable[str] | None, **options: Any
) -> None:
    """The texts' checks of `score` (`texts_as_items`: one clear error naming the argument and the 1-based line),
    before any model loads; nothing to check for a metric name that `Scorer` will refuse."""
    if isinstance(metric, str) and metric.strip():
        texts_as_items(get_metric(metric), options, hypotheses, references, sources)


def refuse_tokenless(
    info: MetricInfo,
    options: dict[str, Any],
    encoder: EncoderRef,
    items: Sequence[Item],
    tokenizers: Callable[[EncoderRef], TokenizerAlone | None],
) -> None:
    """One clear error naming the argument, the 1-based line and the text where a text keeps no token the
    metric weighs and it refuses a blank one there (`nlgbench.metrics.tokenless`): with the tokenizer alone,
    before the model loads where it is on this machine."""
    refused = tokenless_refusal(
        info, options, encoder, items, tokenizers, lambda field, i, number: _line(items, field, i, number)
    )
    if refused is not None:
        raise UserError(refused)


class TokenCheck:
    """A `Scorer`'s check of its texts' tokens (`refuse_tokenless`), its tokenizer loaded once, when first needed."""

    def __init__(self, info: MetricInfo, options: dict[str, Any], encoder: EncoderRef) -> None:
        self.info, self.options, self.encoder = info, options, encoder
        self.tokenizers = Tokenizers()

    def __call__(self, items: Sequence[Item]) -> None:
        refuse_tokenless(self.info, self.options, self.encoder, items, self.tokenizers)


def check_tokens(
    metric: str,
    encoder: str | dict[str, Any] | None,
    lang: str | None,
    hypotheses: Iterable[str],
    references: References | None,
    sources: Iterable[str] | None,
    **options: Any,
) -> None:
    """`score`'s token check (`refuse_tokenless`) before the model loads: the arguments read as `Scorer` reads
    them. Nothing to check for a metric without a token rule (BERTScore: `lang`), or for arguments that
    `Scorer` refuses, with its own line."""
    if not isinstance(metric, str) or not metric.strip() or lang is not None:
        return
    info = get_metric(metric)
    if info.token_rule is None and not info.options_decide("token_rule"):
        return
    try:
        ref = parse_encoder_ref(encoder if encoder is not None else default_encoder(metric), "encoder")
        scored_with = info.cell_options(options, "score")
    except UserError:
        return
    refuse_tokenless(
        info, scored_with, ref, texts_as_items(info, scored_with, hypotheses, references, sources), Tokenizers()
    )
