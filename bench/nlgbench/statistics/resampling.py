"""What a bootstrap or permutation test resamples at each level, after Deutsch, Dror & Roth (2021,
"A Statistical Analysis of Summarization Evaluation Metrics using Resampling Methods"):

  global, segment   whole sources (every translation of a source, key (lp, seg_id)), stratified by
                    language pair, wherever a source has several translations: translations of one
                    source are correlated, so drawing them one by one makes intervals and p-values
                    too optimistic (Deutsch et al. 2021; WMT's mt-metrics-eval draws items too);
                    single segments, stratified likewise, where every source has one translation
                    (WMT15/16 DA), which is the same draw. The source-pair methods (darr_kendall,
                    acc_eq) always draw sources.
  item              documents (all of a document's segments), stratified by language pair
  source            sources (all translations of a source), stratified by language pair
  system            systems (boot-systems)

`resample` chooses another unit where it is defined (RESAMPLE_CHOICES; `resample_reason` says
where not): `segments` (global, segment and source levels), `sources` (global, segment and
source levels), `both` (systems and inputs, boot-both: documents where the data name them,
else sources; every level but item; sources alone where the data name no systems).

A unit drawn twice is relabelled (`#k`), so that its copies stay separate systems, documents or
sources and are not merged by the level's grouping. Draws depend only on the segments' keys and
the seed: two cells of the same segments get the same draws, so their statistics pair."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from nlgbench.statistics.correlation import SOURCE_METHODS, canonical_method
from nlgbench.statistics.grouped import group_ids, group_starts
from nlgbench.statistics.levels import Segments, canonical_level, has_docs, has_systems, several_per_source

RESAMPLE_CHOICES = ("auto", "segments", "sources", "both")  # auto: the level's unit (module docstring)
UNIT_LABELS = {
    "segments": "segments, stratified by language pair",
    "sources": "sources (all translations of a source), stratified by language pair",
    "documents": "documents, stratified by language pair",
    "systems": "systems, per language pair",
    "systems+documents": "systems and documents (boot-both), per language pair",
    "systems+sources": "systems and sources (boot-both), per language pair",
}


def resample_reason(level: str, method: str, resample: str) -> str | None:
    """Why `resample` is not offered for `method` at `level`; None where it is."""
    if resample not in RESAMPLE_CHOICES:
        return f"unknown resampling {resample!r} (valid: {', '.join(RESAMPLE_CHOICES)})"
    level = canonical_level(level)
    if resample == "auto":
        return None
    if level == "item":
        return "the item level resamples documents (--resample auto)"
    if resample == "both":
        return None
    if level == "system":
        return f"the system level resamples systems (auto) or systems and inputs (both), not {resample}"
    if resample == "segments" and (canonical_method(method) in SOURCE_METHODS or level == "source"):
        return "pairs of translations of one source need whole sources drawn (--resample sources or auto)"
    return None


def resampling_unit(seg: Segments, level: str, method: str, resample: str = "auto") -> str:
    """The unit resampled for `method` at `level` (a key of UNIT_LABELS; see the module docstring):
    with `resample="auto"` the level's unit, else the one asked for (`resample_reason` refuses
    those a level does not offer: ValueError)."""
    reason = resample_reason(level, method, resample)
    if reason is not None:
        raise ValueError(reason)
    level = canonical_level(level)
    if resample == "both":  # data without system names: only the inputs can be drawn
        if not has_systems(seg):
            return "sources"
        return "systems+documents" if has_docs(seg) else "systems+sources"
    if resample in ("segments", "sources"):
        return resample
    if level == "item":
        return "documents"
    if level == "system":
        return "systems"
    if level == "source" or canonical_method(method) in SOURCE_METHODS or several_per_source(seg):
        return "sources"
    return "segments"


def _relabel(values: np.ndarray, idx: np.ndarray, copy: np.ndarray) -> np.ndarray:
    """values[idx] with each copy's number appended (`name#k`): drawn twice, a unit stays two units.
    An empty name (no system, no document) stays empty: such segments are in no group."""
    return np.array(
        [f"{v}#{k}" if v != "" else "" for v, k in zip(values[idx].tolist(), copy.tolist(), strict=True)],
        dtype=object,
    )


def _draw_units(keys: list[Any], positions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One draw with replacement of the units (`positions` grouped by key, keys in order of first
    appearance): the drawn units' positions one after the other, each unit's in data order, and
    each position's copy number (the k-th unit drawn: k)."""
    ids, n_units = group_ids(keys)
    order = np.argsort(ids, kind="stable")  # each unit's positions together, in data order
    counts = np.bincount(ids, minlength=n_units)
    starts = group_starts(counts)
    chosen = rng.integers(0, n_units, size=n_units)
    lengths = counts[chosen]
    begin = group_starts(lengths)  # where each drawn unit starts in the draw
    within = np.arange(int(lengths.sum())) - np.repeat(begin, lengths)
    return positions[order[np.repeat(starts[chosen], lengths) + within]], np.repeat(np.arange(n_units), lengths)


def _inputs(seg: Segments) -> np.ndarray:
    """Each segment's input for boot-both: its document where the data name documents, else its source."""
    return seg.doc if seg.doc is not None and has_docs(seg) else seg.seg_id


def draw(seg: Segments, unit: str, rng: np.random.Generator) -> Segments:
    """One resample of `seg` by `unit` (see the module docstring), language pairs in order of first appearance."""
    if unit not in UNIT_LABELS:
        raise ValueError(f"unknown resampling unit {unit!r}")
    parts, copies = [], []
    for lp in dict.fromkeys(seg.lp.tolist()):
        positions = np.flatnonzero(seg.lp == lp)
        if unit == "segments":
            parts.append(positions[rng.integers(0, len(positions), size=len(positions))])
            continue
        if unit.startswith("systems+"):
            idx, copy = _draw_both(seg, positions, rng)
            parts.append(idx)
            copies.append(copy)
            continue
        field = {"sources": seg.seg_id, "documents": seg.doc, "systems": seg.system}[unit]
        assert field is not None  # the item level needs documents (level_reason)
        idx, copy = _draw_units(field[positions].tolist(), positions, rng)
        parts.append(idx)
        copies.append(copy)
    idx = np.concatenate(parts) if parts else np.zeros(0, dtype=int)
    out = seg.take(idx)
    if unit == "segments":
        return out
    copy = np.concatenate(copies)
    if unit == "sources":
        return replace(out, seg_id=_relabel(seg.seg_id, idx, copy))
    if unit == "documents":
        assert seg.doc is not None
        return replace(out, doc=_relabel(seg.doc, idx, copy))
    if unit == "systems":
        return replace(out, system=_relabel(seg.system, idx, copy))
    system_copy, input_copy = copy // (1 << 20), copy % (1 << 20)
    systems = _relabel(seg.system, idx, system_copy)
    if unit == "systems+documents":
        assert seg.doc is not None
        return replace(out, system=systems, doc=_relabel(seg.doc, idx, input_copy))
    return replace(out, system=systems, seg_id=_relabel(seg.seg_id, idx, input_copy))


def _draw_both(seg: Segments, positions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """boot-both within one lp: systems and inputs drawn with replacement, every segment of a drawn
    system on a drawn input kept; each segment's copy numbers packed as system * 2^20 + input."""
    systems = list(dict.fromkeys(seg.system[positions].tolist()))
    inputs = list(dict.fromkeys(_inputs(seg)[positions].tolist()))
    cell: dict[tuple[Any, Any], list[int]] = {}
    for pos, s, i in zip(
        positions.tolist(), seg.system[positions].tolist(), _inputs(seg)[positions].tolist(), strict=True
    ):
        cell.setdefault((s, i), []).append(pos)
    chosen_s = rng.integers(0, len(systems), size=len(systems))
    chosen_i = rng.integers(0, len(inputs), size=len(inputs))
    idx: list[int] = []
    copy: list[int] = []
    for ks, s in enumerate(chosen_s.tolist()):
        for ki, i in enumerate(chosen_i.tolist()):
            found = cell.get((systems[s], inputs[i]), [])
            idx += found
            copy += [ks * (1 << 20) + ki] * len(found)
    return np.asarray(idx, dtype=int), np.asarray(copy, dtype=int)


def unit_count(seg: Segments, unit: str) -> tuple[int, int]:
    """How many units a resample draws, summed over language pairs: (units, inputs), inputs being
    boot-both's documents or sources (0 for the other units). Unnamed systems or documents ("")
    are no units."""
    units = inputs = 0
    for lp in dict.fromkeys(seg.lp.tolist()):
        mask = seg.lp == lp
        if unit == "segments":
            units += int(mask.sum())
            continue
        field = {"sources": seg.seg_id, "documents": seg.doc}.get(unit, seg.system)
        assert field is not None  # the item level needs documents (level_reason)
        units += len({v for v in field[mask].tolist() if v != ""})
        if unit.startswith("systems+"):
            inputs += len({v for v in _inputs(seg)[mask].tolist() if v != ""})
    return units, inputs


def resample_distribution(
    seg: Segments, unit: str, statistic: Callable[[Segments], Any], n_resamples: int, seed: int
) -> np.ndarray:
    """`statistic` on `n_resamples` seeded resamples of `seg` by `unit` (one row per resample)."""
    rng = np.random.default_rng(seed)
    return np.asarray([statistic(draw(seg, unit, rng)) for _ in range(n_resamples)], dtype=float)
