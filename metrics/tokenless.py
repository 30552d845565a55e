"""Texts that a metric finds no token in: not blank, but left without any token the metric weighs by its
encoder's tokenizer and the metric's own filter (`MetricInfo.weighed_tokens`): '...' for MoverScore, which
gives punctuation no mass; U+200B, U+FEFF, U+00AD, NUL or combining marks, which BERT's tokenizer drops,
for every metric that gives special tokens no mass. Such a text is as blank to the metric, so it is
refused where the metric refuses a blank text (`BlankTexts.refused`), in one line naming the item and
showing the text escaped, by the same checks before any model loads (`nlgbench score`, the API, a
sweep's preflight). Reading tokens needs the tokenizer, and only that is loaded (`load_tokenizer`); a
model not on this machine is not downloaded for it, and its scorer refuses the text once loaded."""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from nlgbench.data.items import Item, item_name
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.tokenization import Tokenized, TokenizerAlone, load_tokenizer
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import MetricInfo, TokenRule

SHOWN_CHARACTERS = 60  # of a text, in a message
PUNCTUATION = frozenset(string.punctuation)  # tokens MoverScore gives no mass (`kept_tokens`)


def shown(text: str) -> str:
    """`text` as a message shows it: Python's repr (control and invisible characters escaped: '\\u200b'),
    with combining marks escaped too, so that a text without a visible character never shows as '';
    cut after SHOWN_CHARACTERS characters."""
    cut = text[:SHOWN_CHARACTERS]
    quoted = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c).startswith("M") else c for c in repr(cut))
    return quoted + ("..." if len(text) > SHOWN_CHARACTERS else "")


class Tokenizers:
    """Each model's tokenizer (`load_tokenizer`), loaded once per model name for the checks of one caller
    (a sweep's preflight, one `Scorer`): variants tokenise as their model does."""

    def __init__(self) -> None:
        self.loaded: dict[str, TokenizerAlone | None] = {}

    def __call__(self, ref: EncoderRef) -> TokenizerAlone | None:
        if ref.name not in self.loaded:
            self.loaded[ref.name] = load_tokenizer(EncoderRef(ref.name))
        return self.loaded[ref.name]


def texts_of(item: Item, field: str) -> tuple[str, ...]:
    """The item's texts of `field`: its references, or the one text."""
    return item.references if field == "reference" else (getattr(item, field),)


def tokenless_texts(
    rule: TokenRule, tokenizer: TokenizerAlone, items: Sequence[Item], field: str
) -> list[tuple[int, int]]:
    """(item position, number of the text among the item's `field` texts) of each non-blank text of `field`
    that keeps no token `rule` weighs, tokenised as the encoder's cells tokenise (blank texts are the
    blank rule's)."""
    distinct = list(dict.fromkeys(text for item in items for text in texts_of(item, field) if text.strip()))
    weighs = dict(zip(distinct, map(rule.weighs, tokenizer.tokenize(distinct)), strict=True))
    return [
        (i, k)
        for i, item in enumerate(items)
        for k, text in enumerate(texts_of(item, field))
        if text.strip() and not weighs[text]
    ]


def tokenless_line(
    metric: str, field: str, where: str, text: str, rule: TokenRule, encoder: str, reason: str, count: int = 1
) -> str:
    """The one line refusing a `field` text without a token the metric weighs (`where` names the item)."""
    more = f", {count} such in all" if count > 1 else ""
    return (
        f"{metric} cannot score a {field} without a token it weighs ({where}: {shown(text)}{more}): encoder "
        f"{encoder}'s tokenizer gives it no {rule.kept}, so it is as blank: {reason}"
    )


def tokenless_refusal(
    info: MetricInfo,
    options: dict[str, Any],
    encoder: EncoderRef,
    items: Sequence[Item],
    tokenizers: Callable[[EncoderRef], TokenizerAlone | None],
    where: Callable[[str, int, int], str],
) -> str | None:
    """The one line refusing the first text, in a field where the metric refuses a blank text, that keeps no
    token it weighs (`where(field, position, number)` names the item); None where there is none, where the
    metric keeps a token in every non-blank text (no token rule: `MetricInfo.weighed_tokens`), or where the
    model is not on this machine (its scorer refuses the text once loaded). `encoder`: the cell's, unless
    the rule's option names another."""
    rule = info.weighed_tokens(options)
    blank = info.blank_rule(options)
    if rule is None or not blank.refused:
        return None
    named = options.get(rule.encoder_option) if rule.encoder_option is not None else None
    ref = EncoderRef(named) if named else encoder
    tokenizer = tokenizers(ref)
    if tokenizer is None:
        return None
    for field in blank.refused:
        found = tokenless_texts(rule, tokenizer, items, field)
        if found:
            position, number = found[0]
            text = texts_of(items[position], field)[number]
            return tokenless_line(
                info.name, field, where(field, position, number), text, rule, ref.label, blank.reason, len(found)
            )
    return None


def scorer_refusal(
    metric: str, field: str, item: Item, text: str, rule: TokenRule, encoder: str, reason: str
) -> UserError:
    """What a scorer raises when it meets a text without a token it weighs (no check ran before it: a sweep
    whose model was not on disk at its start): the checks' line, naming the item by its ids."""
    return UserError(tokenless_line(metric, field, f"item {item_name(item)}", text, rule, encoder, reason))


def has_word(tok: Tokenized) -> bool:
    """Whether a tokenised text holds a token besides the special ones ([CLS], [SEP], <s>, </s>)."""
    return not all(tok.special)


#: The rule of the metrics that weigh every token but the special ones (BaryScore, XMoverScore, SentSim's
#: transport part): a text the tokenizer leaves only its special tokens has none.
WORD_TOKENS = TokenRule(weighs=has_word, kept="token besides the special ones ([CLS], [SEP], <s>, </s> ...)")


def kept_tokens(tok: Tokenized, stop_words: frozenset[str]) -> list[bool]:
    """Which tokens carry mass for MoverScore: word starts that are neither punctuation, special, nor stop
    words (the rest weigh nothing)."""
    return [
        tok.word_start[j]
        and not tok.special[j]
        and tok.surface(j) not in PUNCTUATION
        and tok.surface(j).lower() not in stop_words
        for j in range(len(tok.ids))
    ]
