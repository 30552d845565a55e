"""Correlation levels (LEVELS), each with its grouping (GROUPING), applied to one cell's `Segments`:

  global   pooled over all segments (grouping none; alias `pooled`, the efficiency study's)
  segment  per language pair `lp`, then the mean over pairs (WMT style; alias `lp_mean`)
  item     per document `doc_id` within its lp, over the segments of that document (its systems'
           outputs), then the mean over documents: SummEval's "summary level" (alias `summary`)
  source   per source (lp, seg_id), over the translations of that source (one per system), then
           the mean over sources: WMT's item-grouped correlation (mt-metrics-eval's
           avg_by='item'; alias `item_grouped`), for MT data without document ids
  system   per lp, over the mean metric and human score of each system, then the mean over lps

A group (an lp's or a document's segments, or an lp's systems at system level) with fewer than
MIN_POINTS points, or with a constant side, gets NaN; means over groups leave NaN out, and results
count the groups left out for being too small. `quality_note` says in words why a correlation is
undefined ("human scores constant in de-en"). A whole level is unavailable (`level_reason`) without
document ids (item), without a source with several translations (source) or without system names
(system), and at system level when every system has one segment per language pair: its means would
be the segments, the segment level again.

Means (system means, means over groups) are `mean`, math.fsum / n: the sum is correctly rounded, so
it does not depend on the order of the values, and two systems with the same scores in another
order get the same mean, as Kendall's ties need. (Means of different numbers of
segments that are equal in decimals, [0.2, 0.2] and [0.1, 0.2, 0.3], can still differ in the last
bit: binary floats are not decimals.)"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nlgbench.statistics.correlation import (
    METHOD_LEVELS,
    METHODS,
    MIN_POINTS,
    NAN,
    SOURCE_METHODS,
    canonical_method,
    correlation_function,
    undefined_reason,
)
from nlgbench.statistics.grouped import GROUPED_METHODS, group_ids, grouped_correlations
from nlgbench.statistics.pairwise import calibrated_acc_eq, darr_kendall, soft_pairwise_accuracy, source_pairs

LEVELS = ("global", "segment", "item", "source", "system")
LEVEL_ALIASES = {"pooled": "global", "lp_mean": "segment"}  # older names, still accepted
LEVEL_SYNONYMS = {"summary": "item", "item_grouped": "source"}  # what SummEval and WMT's code call them
GROUPING = {"global": "none", "segment": "lp", "item": "doc_id", "source": "lp, seg_id", "system": "lp"}
NAMES_SHOWN = 10  # a note names at most this many groups, then says how many more


@dataclass(frozen=True)
class Segments:
    """One cell's segment scores in dataset order, signed so that higher always means better;
    `doc` is each segment's document id ("" = none), None when the data name no documents."""

    score: np.ndarray
    human: np.ndarray
    lp: np.ndarray
    system: np.ndarray
    seg_id: np.ndarray
    doc: np.ndarray | None = None

    def take(self, idx: np.ndarray) -> Segments:
        return Segments(
            self.score[idx],
            self.human[idx],
            self.lp[idx],
            self.system[idx],
            self.seg_id[idx],
            None if self.doc is None else self.doc[idx],
        )

    def __len__(self) -> int:
        return len(self.score)


# ----------------------------------------------------------------------------- means


def mean(values: Iterable[float]) -> float:
    """The mean as math.fsum / n: the sum correctly rounded, whatever the order of the values, so
    systems whose scores have equal sums over the same number of segments get identical means
    (Kendall's ties). Every mean of this module (system means, means over groups) is this one."""
    values = list(values)
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # the exact sum passes float's range: sum values scaled by an exact power of two
        scale = 2.0 ** -math.ceil(math.log2(len(values)) + 1)
        return math.fsum(v * scale for v in values) / len(values) / scale


def finite_mean(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (the mean over groups, WMT style)."""
    finite = [v for v in values if math.isfinite(v)]
    return mean(finite) if finite else NAN


def _index(keys: Sequence[Any]) -> dict[Any, list[int]]:
    """Positions of each key, keys in order of first appearance."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


def _system_index(seg: Segments) -> dict[tuple[str, str], list[int]]:
    """Segment positions per (lp, system) with a system name, in order of first appearance."""
    keys = [(lp, s) if s != "" else None for lp, s in zip(seg.lp.tolist(), seg.system.tolist(), strict=True)]
    return {k: idx for k, idx in _index(keys).items() if k is not None}


def system_means(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean metric and human score per (lp, system) with a system name: (x, h, lp of each system),
    systems in order of first appearance. Segments without a system name are left out."""
    index = _system_index(seg)
    x = np.array([mean(seg.score[idx].tolist()) for idx in index.values()], dtype=float)
    h = np.array([mean(seg.human[idx].tolist()) for idx in index.values()], dtype=float)
    return x, h, np.array([lp for lp, _ in index], dtype=object)


# ----------------------------------------------------------------------------- levels


def canonical_level(name: str) -> str:
    """The level's name in LEVELS: `pooled` and `lp_mean` read as `global` and `segment`, `summary` as `item`
    and `item_grouped` as `source`."""
    if name in LEVELS:
        return name
    if name in LEVEL_ALIASES or name in LEVEL_SYNONYMS:
        return {**LEVEL_ALIASES, **LEVEL_SYNONYMS}[name]
    aliases = ", ".join(f"{old} = {new}" for old, new in {**LEVEL_ALIASES, **LEVEL_SYNONYMS}.items())
    raise ValueError(f"unknown correlation level {name!r} (valid: {', '.join(LEVELS)}; aliases: {aliases})")


def has_systems(seg: Segments) -> bool:
    """Whether any segment names its system (the `system` level needs them)."""
    return any(s != "" for s in seg.system.tolist())


def has_docs(seg: Segments) -> bool:
    """Whether any segment names its document (the `item` level needs them)."""
    return seg.doc is not None and any(d != "" for d in seg.doc.tolist())


def level_reason(seg: Segments, level: str) -> str | None:
    """Why `level` is unavailable for these segments as a whole, None when it is available:
    the item level needs document ids, the system level system names, and it is undefined when
    every system has exactly one segment per language pair (its "means" would be single segments
    and the figure the segment level's)."""
    level = canonical_level(level)
    if level == "item" and not has_docs(seg):
        return "no document ids (doc_id)"
    if level == "source" and not several_per_source(seg):
        return "every source has one translation (no systems to correlate per source)"
    if level == "system":
        if not has_systems(seg):
            return "no system names"
        if all(len(idx) == 1 for idx in _system_index(seg).values()):
            return "every system has one segment per language pair, so the system level would equal the segment level"
    return None


def several_per_source(seg: Segments) -> bool:
    """Whether any source (lp, seg_id) has more than one translation (the `source` level needs them)."""
    keys = _source_keys(seg)
    return len(set(keys)) < len(keys)


def available_levels(seg: Segments) -> tuple[str, ...]:
    """The levels defined for these segments (global and segment always)."""
    return tuple(level for level in LEVELS if level_reason(seg, level) is None)


@dataclass(frozen=True)
class Points:
    """One group of a level: its name, the points correlated (`x` metric, `h` human: segments, or
    system means at system level) and the group's segments (what source- and system-pair methods
    and the system means use)."""

    name: str
    x: np.ndarray
    h: np.ndarray
    segments: Segments


def level_points(seg: Segments, level: str) -> list[Points]:
    """The groups a level correlates, in order of first appearance: all segments (`global`, one
    group named ""), an lp's segments (`segment`), a document's segments (`item`; named by its doc
    id, `lp/doc` when the data have several lps; segments without a doc id left out) or an lp's
    systems' mean scores (`system`; every lp listed, one without named systems with no points).
    No groups for an unavailable level."""
    level = canonical_level(level)
    if level_reason(seg, level) is not None:
        return []
    if level == "global":
        return [Points("", seg.score, seg.human, seg)]
    if level == "segment":
        return [
            Points(lp, seg.score[idx], seg.human[idx], seg.take(np.asarray(idx)))
            for lp, idx in _index(seg.lp.tolist()).items()
        ]
    if level == "item":
        keys = _group_keys(seg, level)
        assert keys is not None  # level_reason checked that there are doc ids
        groups = {k: idx for k, idx in _index(keys).items() if k is not None}
        several_lps = len({lp for lp, _ in groups}) > 1
        return [
            Points(f"{lp}/{doc}" if several_lps else doc, seg.score[idx], seg.human[idx], seg.take(np.asarray(idx)))
            for (lp, doc), idx in groups.items()
        ]
    if level == "source":
        groups = _index(_source_keys(seg))
        several_lps = len({lp for lp, _ in groups}) > 1
        return [
            Points(
                f"{lp}/{sid}" if several_lps else str(sid), seg.score[idx], seg.human[idx], seg.take(np.asarray(idx))
            )
            for (lp, sid), idx in groups.items()
        ]
    x, h, lps = system_means(seg)
    by_lp = _index(lps.tolist())
    by_lp_segments = _index(seg.lp.tolist())
    return [
        Points(lp, x[by_lp.get(lp, [])], h[by_lp.get(lp, [])], seg.take(np.asarray(by_lp_segments[lp])))
        for lp in by_lp_segments
    ]


def source_keys(seg: Segments) -> np.ndarray:
    """Each segment's source: its language pair and seg_id (translations of one source share it)."""
    return np.array([f"{lp}\x1f{sid}" for lp, sid in zip(seg.lp.tolist(), seg.seg_id.tolist(), strict=True)])


Statistic = Callable[[Points], float]  # one group's figure


def method_reason(method: str, level: str) -> str | None:
    """Why `method` has no figure at `level` (e.g. acc_eq at system level), None where it has."""
    method, level = canonical_method(method), canonical_level(level)
    if level in METHOD_LEVELS[method]:
        return None
    if method in SOURCE_METHODS:
        return f"{method} pairs translations of one source: global and segment levels only"
    return f"{method} pairs systems: system level only"


def group_statistic(method: str, threshold: float = 0.0) -> Statistic:
    """The figure of `method` for one group: a correlation of (x, h), or for the source methods
    (darr_kendall with `threshold`, acc_eq with tie calibration) and soft pairwise accuracy a
    function of the group's segments; NaN where the pairs it needs are missing."""
    method = canonical_method(method)
    if method == "darr_kendall":
        return lambda p: darr_kendall(p.segments.score, p.segments.human, source_keys(p.segments), threshold)
    if method == "acc_eq":
        return lambda p: calibrated_acc_eq(p.segments.score, p.segments.human, source_keys(p.segments))[0]
    if method == "soft_pairwise_accuracy":
        return _soft_pairwise_accuracy
    corr = correlation_function(method, threshold)
    return lambda p: corr(p.x, p.h)


def _soft_pairwise_accuracy(p: Points) -> float:
    """SPA of one language pair's systems (at least MIN_POINTS of them, as every system-level figure)."""
    if len(p.x) < MIN_POINTS:
        return NAN
    s = p.segments
    return soft_pairwise_accuracy(s.score, s.human, s.system, source_keys(s))


def pair_reason(method: str, p: Points, threshold: float = 0.0) -> str | None:
    """Why a pairwise method's figure of group `p` is undefined when its pairs are missing; None
    when the usual reasons (too few points, a constant side) apply instead."""
    method = canonical_method(method)
    if method in SOURCE_METHODS:
        i, _ = source_pairs(source_keys(p.segments))
        if i.size == 0:
            return "every source has one translation (no pairs of translations of one source)"
        if method == "darr_kendall":
            return f"no pair of translations of one source differs by more than {threshold:g} in human score"
    if method == "soft_pairwise_accuracy" and len(p.x) >= MIN_POINTS:
        return "the systems did not each score the same sources once (a paired permutation test needs them)"
    return None


@dataclass(frozen=True)
class Group:
    """One group of a level (a language pair, or a document at item level): its figure and its
    number of points (segments, or systems at system level)."""

    name: str
    value: float
    n: int

    @property
    def lp(self) -> str:  # the name of the group at the segment and system levels
        return self.name

    @property
    def too_small(self) -> bool:
        return self.n < MIN_POINTS


def level_groups(seg: Segments, level: str, statistic: Statistic) -> list[Group]:
    """The groups of a level (see level_points) with their figures; the level's figure is their finite mean."""
    return [Group(p.name, statistic(p), len(p.x)) for p in level_points(seg, level)]


def quality(seg: Segments, method: str = "pearson", level: str = "global", threshold: float = 0.0) -> float:
    """Correlation with humans at a level (see the module docstring): the finite mean over the
    level's groups, the one group's value at the global level; NaN for an unavailable level or a
    method without figures at that level (`method_reason`)."""
    level, method = canonical_level(level), canonical_method(method)
    if method_reason(method, level) is not None:
        return NAN
    keys = _group_keys(seg, level) if method in GROUPED_METHODS else None
    if keys is not None:  # many small groups: all at once (nlgbench.statistics.grouped), the same figures
        ids, n_groups = group_ids(keys)
        return finite_mean(grouped_correlations(method, seg.score, seg.human, ids, n_groups).tolist())
    return finite_mean([g.value for g in level_groups(seg, level, group_statistic(method, threshold))])


def _source_keys(seg: Segments) -> list[tuple[str, Any]]:
    """Each segment's source: (lp, seg_id)."""
    return list(zip(seg.lp.tolist(), seg.seg_id.tolist(), strict=True))


def _group_keys(seg: Segments, level: str) -> list[Any] | None:
    """Each segment's group at the source and item levels, as level_points groups them (None: in
    no group); None at the other levels."""
    if level == "source":
        return _source_keys(seg)
    if level == "item" and seg.doc is not None:
        return [(lp, d) if d != "" else None for lp, d in zip(seg.lp.tolist(), seg.doc.tolist(), strict=True)]
    return None


def _names(names: Sequence[str]) -> str:
    """Names for a note: at most NAMES_SHOWN, then how many more."""
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def quality_note(seg: Segments, method: str = "pearson", level: str = "global", threshold: float = 0.0) -> str:
    """Why `quality(seg, method, level)`, or a group of its mean, is undefined, e.g.
    'human scores constant in de-en, fr-en'; '' when every figure it involves is defined."""
    level, method = canonical_level(level), canonical_method(method)
    reason = level_reason(seg, level) or method_reason(method, level)
    if reason is not None:
        return reason
    unit = point_unit(level)

    def why(p: Points) -> str:
        return undefined_reason(p.x, p.h, unit) or pair_reason(method, p, threshold) or f"{method} undefined"

    return undefined_groups_note(seg, level, group_statistic(method, threshold), why)


def point_unit(level: str) -> str:
    """What a group of `level` is made of, in words: systems, translations (of one source) or segments."""
    return {"system": "systems", "source": "translations"}.get(canonical_level(level), "segments")


def undefined_groups_note(seg: Segments, level: str, statistic: Statistic, why: Callable[[Points], str]) -> str:
    """The groups of `level` whose `statistic` is not finite, by reason (`why`), e.g. 'human scores
    constant in de-en, fr-en'; the reasons alone at the global level; '' when every figure is defined."""
    groups_by_reason: dict[str, list[str]] = {}
    for p in level_points(seg, level):
        if not math.isfinite(statistic(p)):
            groups_by_reason.setdefault(why(p), []).append(p.name)
    if canonical_level(level) == "global":
        return "; ".join(groups_by_reason)
    return "; ".join(f"{reason} in {_names(names)}" for reason, names in groups_by_reason.items())


def too_small_groups(seg: Segments, level: str) -> list[str]:
    """The groups left out of a level's mean for having fewer than MIN_POINTS segments (segment,
    item) or systems (system); none at the global level or for an unavailable level."""
    level = canonical_level(level)
    if level == "global":
        return []
    return [p.name for p in level_points(seg, level) if len(p.x) < MIN_POINTS]


def groups_left_out(
    seg: Segments, method: str, level: str, threshold: float = 0.0, statistic: Statistic | None = None
) -> tuple[int, int]:
    """(groups without a figure, groups) of a grouped level: fewer than MIN_POINTS points, a constant
    side, or no pairs a pairwise method needs (or, given, where `statistic` is not finite: another
    convention's figure); (0, 0) at the global level, for an unavailable level or a method without
    figures there."""
    level = canonical_level(level)
    if level == "global" or level_reason(seg, level) is not None or method_reason(method, level) is not None:
        return 0, 0
    groups = level_groups(seg, level, statistic or group_statistic(method, threshold))
    return sum(not math.isfinite(g.value) for g in groups), len(groups)


LEFT_OUT_WHY = f"fewer than {MIN_POINTS} points, a constant side or no pairs"  # why a group has no figure


def left_out_count(level: str, candidate: tuple[int, int], baseline: tuple[int, int], why: str = LEFT_OUT_WHY) -> str:
    """compare's line for `groups_left_out` of both sides, e.g. '12 of 650 sources left out (...)',
    each side's count where they differ, `why` in brackets; '' when no group is left out."""
    if candidate[0] == baseline[0] == 0:
        return ""
    groups = {"item": "documents", "source": "sources"}.get(canonical_level(level), "language pairs")
    count = f"{candidate[0]}" if candidate[0] == baseline[0] else f"candidate {candidate[0]}, baseline {baseline[0]}"
    return f"{count} of {candidate[1]} {groups} left out (no figure: {why})"


def left_out_note(level: str, names: Sequence[str]) -> str:
    """The line report and compare print for the groups `too_small_groups` names."""
    level = canonical_level(level)
    groups = {"item": "document(s)", "source": "source(s)"}.get(level, "language pair(s)")
    unit = point_unit(level)
    return (
        f"{len(names)} {groups} with fewer than {MIN_POINTS} {unit} have no correlation and are left out "
        f"of the {level} level: {_names(list(names))}"
    )


def figure_table(
    seg: Segments, levels: Sequence[str] | None = None, methods: Sequence[str] = METHODS, threshold: float = 0.0
) -> list[dict[str, Any]]:
    """Every figure as a long table, one dict per level x method defined at that level
    (METHOD_LEVELS): `level`, `grouping`, `method`, `value` (NaN where undefined), `n` (points of
    all its groups: segments, or systems at system level), `n_groups`, `n_groups_too_small` (fewer
    than MIN_POINTS points), `n_groups_used` (groups with a defined figure, those averaged), `note`
    (why a figure is undefined, '' otherwise) and, for acc_eq, `epsilon` (the calibrated tie
    threshold: one number at the global level, `lp=epsilon; ...` per group otherwise).
    `levels` None: the available ones."""
    chosen = available_levels(seg) if levels is None else tuple(canonical_level(level) for level in levels)
    rows = []
    for level in chosen:
        points = level_points(seg, level)
        for method in (canonical_method(m) for m in methods):
            if method_reason(method, level) is not None:
                continue
            if method == "acc_eq":  # the value and its calibrated epsilon from one calibration per group
                calibrated = [
                    calibrated_acc_eq(p.segments.score, p.segments.human, source_keys(p.segments)) for p in points
                ]
                values = [value for value, _ in calibrated]
            else:
                values = [group_statistic(method, threshold)(p) for p in points]
            row: dict[str, Any] = {
                "level": level,
                "grouping": GROUPING[level],
                "method": method,
                "value": finite_mean(values),
                "n": sum(len(p.x) for p in points),
                "n_groups": len(points),
                "n_groups_too_small": sum(len(p.x) < MIN_POINTS for p in points),
                "n_groups_used": sum(math.isfinite(v) for v in values),
                "note": "" if all(math.isfinite(v) for v in values) else quality_note(seg, method, level, threshold),
            }
            if method == "acc_eq":
                epsilons = [(p.name, eps) for p, (_, eps) in zip(points, calibrated, strict=True)]
                row["epsilon"] = epsilons[0][1] if level == "global" else "; ".join(f"{k}={v:.6g}" for k, v in epsilons)
            rows.append(row)
    return rows
