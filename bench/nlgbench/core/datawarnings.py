"""A cell's data warnings: what a run says about the data behind a cell's figures, kept with the cell
(result.json `warnings`, the store, results.csv's `warnings` column, the report page).

One place builds them, for measured cells (`nlgbench.execution.measured.measured_result`) and imported
ones (`nlgbench.runs.importscores`) alike, so both apply the same checks:

- the dataset's own warnings (`Dataset.warnings`): a `max_segments` head ordered by human score
  (`nlgbench.data.items.sorted_head_warnings`), a `sample` larger than a language pair;
- segments the model cut to its maximum length (`truncated_segments` of the scorer);
- blank texts the cell's metric scored as it defines them (`MetricInfo.blank_rule`: BERTScore 0 ...);
- items without a human score, per human dimension (`n_missing_human` of the correlation section);
- correlations left undefined, e.g. by constant groups (the correlation section's `note`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nlgbench.data.items import Dataset, blank_positions, item_name
from nlgbench.metrics.base import BlankTexts

ITEMS_NAMED = 3  # items named in a blank-text warning; the rest counted


def truncation_text(truncated: int, n_segments: int | None) -> str:
    """The warning that `truncated` of `n_segments` segments were cut to the model's maximum length."""
    return f"{truncated} of {n_segments} segments were longer than the model's maximum length and were cut"


def blank_text_warnings(dataset: Dataset, rule: BlankTexts | None) -> list[str]:
    """Per field in which the metric scores a blank text (`rule.scored`) and the dataset has one: how
    many items, the first ITEMS_NAMED of them by their ids, and what such a text scores."""
    out: list[str] = []
    if rule is None:
        return out
    for field in rule.scored:
        positions = blank_positions(dataset.items, field)
        if positions:
            named = ", ".join(item_name(dataset.items[i]) for i in positions[:ITEMS_NAMED])
            more = ", ..." if len(positions) > ITEMS_NAMED else ""
            out.append(
                f"{len(positions)} of {len(dataset.items)} items have a blank {field} ({named}{more}), "
                f"scored as the metric defines it: {rule.value}"
            )
    return out


def correlation_sections(correlation: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The correlation section of each human dimension (one for data with one human score)."""
    dims = correlation.get("dimensions")
    return list(dims.values()) if isinstance(dims, Mapping) and dims else [correlation]


def section_warnings(section: Mapping[str, Any], n_items: int) -> list[str]:
    """One human dimension's warnings: items without a human score on it, correlations left undefined."""
    dim = section.get("human_dim", "")
    out = []
    missing = section.get("n_missing_human") or 0
    if missing:
        out.append(
            f"{missing} of {n_items} items have no human score on {dim!r}; "
            f"its correlations use the other {n_items - missing}"
        )
    if section.get("note"):
        out.append(f"correlations undefined on {dim!r}: {section['note']}")
    return out


def data_warnings(
    dataset: Dataset, correlation: Mapping[str, Any] | None, truncated: int = 0, blank: BlankTexts | None = None
) -> list[str]:
    """Every data warning of a cell over `dataset` (as loaded: its subset warnings included), whose
    correlation section is `correlation`, whose model cut `truncated` segments and whose metric treats
    blank texts as `blank` says; in that order, each once."""
    n_items = len(dataset.items)
    found: Sequence[str] = [
        *dataset.warnings,
        *([truncation_text(truncated, n_items)] if truncated else []),
        *blank_text_warnings(dataset, blank),
        *[w for section in correlation_sections(correlation or {}) for w in section_warnings(section, n_items)],
    ]
    return list(dict.fromkeys(found))
