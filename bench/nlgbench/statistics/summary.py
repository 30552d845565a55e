"""A cell's correlations as result.json and results.csv store them (`correlate`): the segment level
per language pair and its mean, the global, item and system levels, every figure as a long table, and
bootstrap intervals; `correlation_note` says why some are undefined."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, percentile_interval
from nlgbench.statistics.correlation import MIN_POINTS, correlation_function
from nlgbench.statistics.levels import (
    Segments,
    figure_table,
    group_statistic,
    has_docs,
    has_systems,
    level_groups,
    quality_note,
)
from nlgbench.statistics.resampling import UNIT_LABELS, resample_distribution, resampling_unit


def _check_finite(name: str, values: np.ndarray) -> None:
    """Raise ValueError naming how many values are non-finite and the first index."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"{bad.size} non-finite {name} value(s) (NaN or inf), first at index {int(bad[0])}")


SUMMARY_METHODS = ("pearson", "kendall", "spearman")  # the methods of correlate's level sections


def correlate(
    scores: Sequence[float],
    human: Sequence[float],
    lps: Sequence[str],
    systems: Sequence[str | None] | None = None,
    docs: Sequence[str | None] | None = None,
    *,
    seg_ids: Sequence[object] | None = None,
    threshold: float = 0.0,
    higher_is_better: bool = True,
    bootstrap: int = 0,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """A cell's correlations as stored in result.json and results.csv. Segment level: Pearson,
    Kendall (tau-b) and Spearman per language pair (`per_lp`) and their mean (`pearson`,
    `kendall`, `spearman`); global (`*_pooled`); `system` (None without system names, or when
    every system has one segment per lp); `item` (None without document ids); `figures`, every
    level x METHODS as figure_table's rows (`seg_ids`, each segment's source id within its lp, pair
    the translations of one source for darr_kendall and acc_eq; None: every segment its own
    source; `threshold` that of darr_kendall and kendall_like_all_pairs); `source` (None unless a
    source has several translations); with `bootstrap` > 0 resamples the 95% intervals of the
    pooled Pearson and Kendall, resampling the global level's unit (whole sources where a source
    has several translations, else segments; stratified by lp) and naming it (`resampled`).

    Lower-is-better metrics are negated first so positive always means agreement; plain floats
    (NaN where a correlation is undefined). `n_lps` counts all language pairs, `n_lps_too_small`
    those with fewer than MIN_POINTS segments (NaN, left out of the mean like constant ones).
    `note` says why correlations or levels are undefined (`correlation_note`), None when all are."""
    n = len(scores)
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 resamples, got {bootstrap}")
    sign = 1 if higher_is_better else -1
    seg = signed_segments(scores, human, lps, systems, docs, sign, seg_ids)
    figures = figure_table(seg, threshold=threshold)
    value = {(f["level"], f["method"]): f for f in figures}
    segment = value["segment", "pearson"]
    return {
        **_section(value, "segment"),
        "n_lps": segment["n_groups"],
        "n_lps_too_small": segment["n_groups_too_small"],
        "min_points": MIN_POINTS,
        **{f"{m}_pooled": value["global", m]["value"] for m in SUMMARY_METHODS},
        "n": n,
        "per_lp": _per_group(seg, "segment", "n"),
        "system": _system_section(seg, value),
        "item": _item_section(value),
        "source": _source_section(value),
        "bootstrap": _pooled_intervals(seg, bootstrap, seed),
        "sign": sign,
        "note": correlation_note(seg) or None,
        "figures": figures,
    }


def _check_sizes(
    n: int,
    human: Sequence[float],
    lps: Sequence[str],
    systems: Sequence[str | None] | None,
    docs: Sequence[str | None] | None,
    seg_ids: Sequence[object] | None = None,
) -> None:
    """Raise ValueError where the columns differ in length from the n scores."""
    if len(human) != n or len(lps) != n:
        raise ValueError(f"length mismatch: {n} scores, {len(human)} human judgments, {len(lps)} language pairs")
    if systems is not None and len(systems) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(systems)} system names")
    if seg_ids is not None and len(seg_ids) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(seg_ids)} segment ids")
    if docs is not None and len(docs) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(docs)} document ids")


def signed_segments(
    scores: Sequence[float],
    human: Sequence[float],
    lps: Sequence[str],
    systems: Sequence[str | None] | None,
    docs: Sequence[str | None] | None,
    sign: int,
    seg_ids: Sequence[object] | None = None,
) -> Segments:
    """The cell's `Segments`, metric scores times `sign` (higher is better); columns of another
    length than the scores, and non-finite scores, refused (ValueError)."""
    n = len(scores)
    _check_sizes(n, human, lps, systems, docs, seg_ids)
    raw = np.asarray(scores, dtype=float).reshape(-1)
    h = np.asarray(human, dtype=float).reshape(-1)
    _check_finite("metric score", raw)
    _check_finite("human judgment", h)

    def names(values: Sequence[str | None] | None) -> np.ndarray:
        texts = values if values is not None else [""] * n
        return np.array(["" if v is None else str(v) for v in texts], dtype=object)

    return Segments(
        raw * sign,
        h,
        np.array([str(lp) for lp in lps], dtype=object),
        names(systems),
        np.arange(n) if seg_ids is None else np.array([str(s) for s in seg_ids], dtype=object),
        None if docs is None else names(docs),
    )


Figures = dict[tuple[str, str], dict[str, Any]]  # (level, method) -> figure_table's row


def _section(value: Figures, level: str) -> dict[str, Any]:
    """A level's figure per summary method."""
    return {m: value[level, m]["value"] for m in SUMMARY_METHODS}


def _per_group(seg: Segments, level: str, size: str) -> dict[str, dict[str, Any]]:
    """Per group of `level` (a language pair): its correlation per summary method and its size (`size`)."""
    groups = {m: level_groups(seg, level, group_statistic(m)) for m in SUMMARY_METHODS}
    return {
        g.name: {**{m: groups[m][i].value for m in SUMMARY_METHODS}, size: g.n} for i, g in enumerate(groups["pearson"])
    }


def _system_section(seg: Segments, value: Figures) -> dict[str, Any] | None:
    """The system level's figures, counts and per-lp values; None where the level is unavailable."""
    if ("system", "pearson") not in value:
        return None
    return {
        **_section(value, "system"),
        "n_lps": value["system", "pearson"]["n_groups"],
        "n_lps_too_small": value["system", "pearson"]["n_groups_too_small"],
        "per_lp": _per_group(seg, "system", "n_systems"),
    }


def _item_section(value: Figures) -> dict[str, Any] | None:
    """The item level's figures and document counts; None without document ids."""
    if ("item", "pearson") not in value:
        return None
    return {
        **_section(value, "item"),
        "n_docs": value["item", "pearson"]["n_groups"],
        "n_docs_too_small": value["item", "pearson"]["n_groups_too_small"],
    }


def _source_section(value: Figures) -> dict[str, Any] | None:
    """The source level's figures and source counts; None unless a source has several translations."""
    if ("source", "pearson") not in value:
        return None
    return {
        **_section(value, "source"),
        "n_sources": value["source", "pearson"]["n_groups"],
        "n_sources_too_small": value["source", "pearson"]["n_groups_too_small"],
    }


def _pooled_intervals(seg: Segments, bootstrap: int, seed: int) -> dict[str, Any] | None:
    """95% bootstrap intervals of the pooled Pearson and Kendall (`bootstrap` resamples of the
    global level's unit, `resampled` in words); None for 0."""
    n = len(seg)
    if bootstrap <= 0 or n == 0:
        return None
    r, tau = correlation_function("pearson"), correlation_function("kendall")
    unit = resampling_unit(seg, "global", "pearson")
    dist = resample_distribution(seg, unit, lambda s: (r(s.score, s.human), tau(s.score, s.human)), bootstrap, seed)
    return {
        "n_resamples": bootstrap,
        "seed": seed,
        "resampled": UNIT_LABELS[unit],
        "pearson_pooled_ci": list(percentile_interval(dist[:, 0])),
        "kendall_pooled_ci": list(percentile_interval(dist[:, 1])),
    }


def correlation_note(seg: Segments) -> str:
    """Why some of a cell's correlations are undefined (Pearson, Kendall and Spearman share the
    reasons): per language pair, then `pooled: ...`, `item level: ...` and `system level: ...`
    (item level only with document ids, system level only with system names); '' when all are."""
    notes = [quality_note(seg, "pearson", "segment")]
    for level, prefix in (("global", "pooled"), ("item", "item level"), ("system", "system level")):
        if (level == "item" and not has_docs(seg)) or (level == "system" and not has_systems(seg)):
            continue
        note = quality_note(seg, "pearson", level)
        notes.append(f"{prefix}: {note}" if note else "")
    return "; ".join(n for n in notes if n)


class JudgedItem(Protocol):
    """What `correlate_scores` reads of an item (`nlgbench.data.items.Item` is one): its ids and its
    human score per dimension."""

    @property
    def lp(self) -> str: ...
    @property
    def seg_id(self) -> int | str: ...
    @property
    def system(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def humans(self) -> Mapping[str, float]: ...


def correlate_scores(
    score: Sequence[float], items: Sequence[JudgedItem], human_dims: Sequence[str], higher_is_better: bool
) -> dict[str, Any]:
    """A cell's correlation section: its scores against the items' human judgments, every level, with
    bootstrap intervals (BOOTSTRAP_RESAMPLES with BOOTSTRAP_SEED, so they are reproducible).

    Per human dimension in `human_dims`, over the items that have a score on it (`n_missing_human`
    counts the others); the section is the first (primary) dimension's (`human_dim`), and with several
    dimensions `dimensions` holds each one's section."""
    docs = any(it.doc_id for it in items)
    sections = {}
    for dim in human_dims:
        kept = [(s, it) for s, it in zip(score, items, strict=True) if dim in it.humans]
        section = correlate(
            [s for s, _ in kept],
            [it.humans[dim] for _, it in kept],
            [it.lp for _, it in kept],
            [it.system for _, it in kept],
            [it.doc_id for _, it in kept] if docs else None,
            seg_ids=[it.seg_id for _, it in kept],
            higher_is_better=higher_is_better,
            bootstrap=BOOTSTRAP_RESAMPLES,
            seed=BOOTSTRAP_SEED,
        )
        sections[dim] = {**section, "human_dim": dim, "n_missing_human": len(items) - len(kept)}
    primary = dict(sections[human_dims[0]])
    if len(sections) > 1:
        primary["dimensions"] = sections
    return primary
