"""The API's texts as items: lists of strings (hypotheses, references, sources) checked against what a
metric reads and its blank-text rule (`MetricInfo.blank_rule`), each error one line naming the argument
and the 1-based line, as `nlgbench score`'s `line` column counts; what `nlgbench.Scorer` and
`nlgbench score` read before any model loads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from nlgbench.data.items import Item
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import MetricInfo

References = (
    Iterable[str] | Iterable[Sequence[str]]
)  # one text per hypothesis, or a list of texts (several) per hypothesis


def as_list(name: str, values: Iterable[Any], what: str = "a list of strings") -> list[Any]:
    """Any iterable (a list, a tuple, a generator) as a list; one clear error for one string or a non-iterable."""
    if isinstance(values, str):
        raise UserError(f"{name} must be {what}, not one string")
    try:
        return list(values)
    except TypeError:
        raise UserError(f"{name} must be {what}, got {type(values).__name__}") from None


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


def _line(items: Sequence[Item], field: str, position: int) -> str:
    """Where a blank text is, as the caller gave it: `hypotheses line 3`, `references line 2,
    reference 2` (1-based; the reference named where the line has several)."""
    where = f"{ARGUMENTS[field]} line {position + 1}"
    refs = items[position].references
    if field != "reference" or len(refs) == 1:
        return where
    return f"{where}, reference {next(k for k, text in enumerate(refs) if not text.strip()) + 1}"


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
