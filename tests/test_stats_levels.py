"""Correlation levels and methods of nlgbench.statistics,
checked against independent computations: groups formed by hand with plain Python loops, each
group's coefficient from SciPy (pearsonr, spearmanr, kendalltau variant b and c) or from a
hand-written pair count (WMT's Kendall-like), means over groups by hand, system means as exact
fractions; and tau-b, tau-c and Kendall-like on a tiny example counted pair by pair."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from nlgbench.foundations.errors import UserError
from nlgbench.reporting.quality import QualityOptions
from nlgbench.statistics.correlation import METHOD_LEVELS, METHODS, MIN_POINTS, PLAIN_METHODS, kendall_like
from nlgbench.statistics.levels import (
    GROUPING,
    LEVELS,
    Segments,
    canonical_level,
    figure_table,
    left_out_note,
    mean,
    quality,
    quality_note,
    too_small_groups,
)
from nlgbench.statistics.summary import correlate

pytestmark = pytest.mark.unit

# ----------------------------------------------------------------------------- the constructed data

LPS = ("aa-en", "bb-en")
DOCS = ("d0", "d1", "d2", "d3", "d4")
SYSTEMS = ("S0", "S1", "S2", "S3", "S4", "S5")


def constructed() -> list[dict[str, Any]]:
    """2 lps x 5 documents x 6 systems, Likert-like human scores (1-5, many ties) and a metric
    that follows them loosely, plus: aa-en/d3 has 2 systems only (too small at item level),
    bb-en/d4 has constant human scores (undefined at item level), one bb-en segment has no doc
    id (left out of the item level only), and a third lp cc-en of 2 segments by 2 systems (too
    small at segment, item and system level)."""
    rng = np.random.default_rng(14)
    rows = []
    for lp in LPS:
        for doc in DOCS:
            systems = SYSTEMS[:2] if (lp, doc) == ("aa-en", "d3") else SYSTEMS
            for system in systems:
                human = 3.0 if (lp, doc) == ("bb-en", "d4") else float(rng.integers(1, 6))
                rows.append(
                    {
                        "lp": lp,
                        "doc": doc,
                        "src": doc,  # one source per document: its systems translate it
                        "system": system,
                        "human": human,
                        "score": round(0.1 * human + float(rng.normal(scale=0.15)), 3),
                    }
                )
    rows[-3]["doc"] = ""  # a bb-en segment without a document
    rows += [
        {"lp": "cc-en", "doc": "c0", "src": "c0", "system": s, "human": h, "score": x}
        for s, h, x in (("S0", 2.0, 0.4), ("S1", 4.0, 0.3))
    ]
    return rows


def as_segments(rows: list[dict[str, Any]], docs: bool = True) -> Segments:
    return Segments(
        np.array([r["score"] for r in rows]),
        np.array([r["human"] for r in rows]),
        np.array([r["lp"] for r in rows], dtype=object),
        np.array([r["system"] for r in rows], dtype=object),
        np.array([r["src"] for r in rows], dtype=object),
        np.array([r["doc"] for r in rows], dtype=object) if docs else None,
    )


# ----------------------------------------------------------------------------- the hand computation


def hand_kendall_like(x: list[float], h: list[float], threshold: float = 0.0) -> float:
    """WMT DARR by a loop over pairs: only pairs whose human scores differ (by more than the
    threshold); the metric agreeing strictly is concordant, anything else (a tie) discordant."""
    conc = disc = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            if abs(h[i] - h[j]) <= threshold:
                continue
            if (x[i] - x[j]) * (h[i] - h[j]) > 0:
                conc += 1
            else:
                disc += 1
    return (conc - disc) / (conc + disc) if conc + disc else math.nan


SCIPY: dict[str, Callable[[list[float], list[float]], float]] = {
    "pearson": lambda x, h: stats.pearsonr(x, h)[0],
    "spearman": lambda x, h: stats.spearmanr(x, h)[0],
    "kendall": lambda x, h: stats.kendalltau(x, h, variant="b")[0],
    "kendall_c": lambda x, h: stats.kendalltau(x, h, variant="c")[0],
    "kendall_like_all_pairs": hand_kendall_like,
}


def hand_groups(rows: list[dict[str, Any]], level: str) -> list[tuple[list[float], list[float]]]:
    """The (metric, human) points of each group of a level, grouped with plain loops."""
    groups: dict[Any, tuple[list[float], list[float]]] = {}
    if level == "global":
        groups["all"] = ([r["score"] for r in rows], [r["human"] for r in rows])
    elif level == "segment":
        for r in rows:
            groups.setdefault(r["lp"], ([], []))
            groups[r["lp"]][0].append(r["score"])
            groups[r["lp"]][1].append(r["human"])
    elif level == "item":
        for r in rows:
            if r["doc"]:
                groups.setdefault((r["lp"], r["doc"]), ([], []))
                groups[r["lp"], r["doc"]][0].append(r["score"])
                groups[r["lp"], r["doc"]][1].append(r["human"])
    elif level == "source":  # per (lp, seg_id), the segment without a document included
        for r in rows:
            groups.setdefault((r["lp"], r["src"]), ([], []))
            groups[r["lp"], r["src"]][0].append(r["score"])
            groups[r["lp"], r["src"]][1].append(r["human"])
    else:  # system: exact means per (lp, system), then one group per lp
        sums: dict[tuple[str, str], list[Fraction]] = {}
        counts: dict[tuple[str, str], int] = {}
        for r in rows:
            key = (r["lp"], r["system"])
            sums.setdefault(key, [Fraction(0), Fraction(0)])
            sums[key][0] += Fraction(r["score"])
            sums[key][1] += Fraction(r["human"])
            counts[key] = counts.get(key, 0) + 1
        for (lp, _), (sx, sh) in sums.items():
            groups.setdefault(lp, ([], []))
            groups[lp][0].append(float(sx / counts[lp, _]))
            groups[lp][1].append(float(sh / counts[lp, _]))
    return list(groups.values())


def hand_figure(rows: list[dict[str, Any]], level: str, method: str) -> dict[str, Any]:
    values = []
    for x, h in hand_groups(rows, level):
        if len(x) < MIN_POINTS or len(set(x)) == 1 or len(set(h)) == 1:
            values.append(math.nan)  # too small or a constant side: no correlation
        else:
            values.append(float(SCIPY[method](x, h)))
    used = [v for v in values if not math.isnan(v)]
    sizes = [len(x) for x, _ in hand_groups(rows, level)]
    return {
        "value": sum(used) / len(used) if used else math.nan,
        "n": sum(sizes),
        "n_groups": len(sizes),
        "n_groups_too_small": sum(s < MIN_POINTS for s in sizes),
        "n_groups_used": len(used),
    }


# ----------------------------------------------------------------------------- levels x methods


def test_the_constructed_data_has_what_the_tests_need() -> None:
    rows = constructed()
    item_groups = hand_groups(rows, "item")
    assert len(item_groups) == 11 and sum(len(x) < MIN_POINTS for x, _ in item_groups) == 2  # aa-en/d3, cc-en/c0
    assert sum(len(set(h)) == 1 and len(h) >= MIN_POINTS for _, h in item_groups) == 1  # bb-en/d4
    humans = [r["human"] for r in rows]
    assert len(set(humans)) <= 5 and len(humans) - len(set(humans)) > 50  # Likert-like: ties dominate
    assert all(len(x) == 6 for x, _ in hand_groups(rows, "system")[:2])  # 6 systems in aa-en and bb-en
    # the kendall variants differ here, so the test tells them apart
    fig = {m: hand_figure(rows, "segment", m)["value"] for m in PLAIN_METHODS}
    assert len({round(v, 6) for v in fig.values()}) == len(PLAIN_METHODS)


@pytest.mark.parametrize("level", LEVELS)
def test_every_figure_equals_the_hand_computation(level: str) -> None:
    rows = constructed()
    seg = as_segments(rows)
    table = {(f["level"], f["method"]): f for f in figure_table(seg)}
    assert set(table) == {(lv, m) for lv in LEVELS for m in METHODS if lv in METHOD_LEVELS[m]}
    for method in PLAIN_METHODS:
        want, got = hand_figure(rows, level, method), table[level, method]
        assert got["grouping"] == GROUPING[level]
        assert got["value"] == pytest.approx(want["value"], abs=1e-12), (level, method)
        assert quality(seg, method, level) == pytest.approx(want["value"], abs=1e-12), (level, method)
        assert {k: got[k] for k in ("n", "n_groups", "n_groups_too_small", "n_groups_used")} == {
            k: want[k] for k in ("n", "n_groups", "n_groups_too_small", "n_groups_used")
        }, (level, method)


def test_counts_per_level_by_hand() -> None:
    """Group and point counts written out: 58 segments (aa-en 4 x 6 + 2, bb-en 5 x 6, cc-en 2)."""
    table = {(f["level"], f["method"]): f for f in figure_table(as_segments(constructed()))}
    got = {
        lv: (
            table[lv, "pearson"]["n"],
            table[lv, "pearson"]["n_groups"],
            table[lv, "pearson"]["n_groups_too_small"],
            table[lv, "pearson"]["n_groups_used"],
        )
        for lv in LEVELS
    }
    assert got == {
        "global": (58, 1, 0, 1),
        "segment": (58, 3, 1, 2),  # cc-en: 2 segments
        "item": (57, 11, 2, 8),  # one segment without doc; aa-en/d3 and cc-en/c0 too small, bb-en/d4 constant
        "source": (58, 11, 2, 8),  # one source per document, the segment without a doc id included
        "system": (14, 3, 1, 2),
    }  # 6 + 6 + 2 systems; cc-en: 2 systems


def test_correlate_sections_equal_the_hand_computation() -> None:
    rows = constructed()
    c = correlate(
        [r["score"] for r in rows],
        [r["human"] for r in rows],
        [r["lp"] for r in rows],
        [r["system"] for r in rows],
        docs=[r["doc"] for r in rows],
    )
    want = {(lv, m): hand_figure(rows, lv, m)["value"] for lv in LEVELS for m in PLAIN_METHODS}
    for m in ("pearson", "kendall", "spearman"):
        assert c[m] == pytest.approx(want["segment", m], abs=1e-12)
        assert c[f"{m}_pooled"] == pytest.approx(want["global", m], abs=1e-12)
        assert c["system"][m] == pytest.approx(want["system", m], abs=1e-12)
        assert c["item"][m] == pytest.approx(want["item", m], abs=1e-12)
    assert c["source"] is None  # no seg_ids given: every segment its own source
    assert (c["item"]["n_docs"], c["item"]["n_docs_too_small"]) == (11, 2)
    assert (c["system"]["n_lps"], c["system"]["n_lps_too_small"]) == (3, 1)
    assert (c["n_lps"], c["n_lps_too_small"], c["n"]) == (3, 1, 58)
    assert [(f["level"], f["method"]) for f in c["figures"]] == [
        (lv, m) for lv in LEVELS for m in METHODS if lv in METHOD_LEVELS[m] and lv != "source"
    ]
    with_sources = correlate(
        [r["score"] for r in rows],
        [r["human"] for r in rows],
        [r["lp"] for r in rows],
        [r["system"] for r in rows],
        docs=[r["doc"] for r in rows],
        seg_ids=[r["src"] for r in rows],
    )
    for m in ("pearson", "kendall", "spearman"):
        assert with_sources["source"][m] == pytest.approx(want["source", m], abs=1e-12)
    assert (with_sources["source"]["n_sources"], with_sources["source"]["n_sources_too_small"]) == (11, 2)
    assert "item level: fewer than 3 segments in aa-en/d3, cc-en/c0; human scores constant in bb-en/d4" in c["note"]
    # a lower-is-better metric is negated first, at every level
    neg = correlate(
        [-r["score"] for r in rows],
        [r["human"] for r in rows],
        [r["lp"] for r in rows],
        [r["system"] for r in rows],
        docs=[r["doc"] for r in rows],
        higher_is_better=False,
    )
    assert neg["item"]["kendall"] == pytest.approx(want["item", "kendall"], abs=1e-12)
    assert neg["system"]["spearman"] == pytest.approx(want["system", "spearman"], abs=1e-12)


def test_left_out_groups_are_named_per_level() -> None:
    seg = as_segments(constructed())
    assert too_small_groups(seg, "global") == []
    assert too_small_groups(seg, "segment") == ["cc-en"]
    assert too_small_groups(seg, "item") == ["aa-en/d3", "cc-en/c0"]
    assert too_small_groups(seg, "system") == ["cc-en"]
    assert left_out_note("item", ["aa-en/d3", "cc-en/c0"]) == (
        "2 document(s) with fewer than 3 segments have no correlation and are left out of the item level: "
        "aa-en/d3, cc-en/c0"
    )
    assert quality_note(seg, "kendall", "item") == (
        "fewer than 3 segments in aa-en/d3, cc-en/c0; human scores constant in bb-en/d4"
    )


# ----------------------------------------------------------------------------- the methods on a tiny example


# x = [1, 2, 2, 3, 0], h = [1, 2, 1, 2, 1]; the 10 pairs (i, j):
#   (0,1) C  (0,2) tied in h  (0,3) C  (0,4) tied in h  (1,2) tied in x
#   (1,3) tied in h  (1,4) C  (2,3) C  (2,4) tied in h  (3,4) C
# C = 5, D = 0, pairs tied in x only T_x = 1, in h only T_h = 4, n0 = 10.
# tau-b = (C - D) / sqrt((n0 - T_x)(n0 - T_h)) = 5 / sqrt(9 * 6) = 0.6804
# tau-c = 2 (C - D) / (n^2 (m - 1) / m), m = min(4 distinct x, 2 distinct h) = 2: 10 / 12.5 = 0.8
# Kendall-like: the 6 pairs with different h; (1,2) is a metric tie, so discordant: (5 - 1) / 6
TINY_X, TINY_H = np.array([1.0, 2.0, 2.0, 3.0, 0.0]), np.array([1.0, 2.0, 1.0, 2.0, 1.0])


def test_tau_b_tau_c_and_kendall_like_on_a_hand_count() -> None:
    tiny = Segments(TINY_X, TINY_H, np.array(["xx"] * 5, dtype=object), np.array([""] * 5, dtype=object), np.arange(5))
    assert quality(tiny, "kendall") == pytest.approx(5 / math.sqrt(54), abs=1e-15)
    assert quality(tiny, "kendall_c") == pytest.approx(0.8, abs=1e-15)
    assert quality(tiny, "kendall_like") == pytest.approx(4 / 6, abs=1e-15)
    # the same from SciPy and the loop
    assert stats.kendalltau(TINY_X, TINY_H, variant="b")[0] == pytest.approx(5 / math.sqrt(54), abs=1e-15)
    assert stats.kendalltau(TINY_X, TINY_H, variant="c")[0] == pytest.approx(0.8, abs=1e-15)
    assert hand_kendall_like(TINY_X.tolist(), TINY_H.tolist()) == pytest.approx(4 / 6, abs=1e-15)
    # a threshold of 1 keeps no pair (|dh| is 0 or 1): undefined; a negative one is refused
    assert math.isnan(kendall_like(TINY_X, TINY_H, threshold=1.0))
    with pytest.raises(ValueError, match="threshold"):
        kendall_like(TINY_X, TINY_H, threshold=-1.0)


def test_kendall_like_follows_wmt_darr_on_random_ties() -> None:
    """Human ties never count, a metric tie is discordant, and a threshold drops close pairs:
    the vectorised, blocked count equals the loop on tie-heavy data of several sizes."""
    rng = np.random.default_rng(19)
    for n in (3, 7, 40, 150):
        x, h = rng.integers(0, 6, size=n).astype(float), rng.integers(1, 6, size=n).astype(float)
        for threshold in (0.0, 1.0, 2.5):
            assert kendall_like(x, h, threshold) == pytest.approx(
                hand_kendall_like(x.tolist(), h.tolist(), threshold), abs=1e-15, nan_ok=True
            )


# ----------------------------------------------------------------------------- exact system means


def test_equal_system_means_tie_exactly() -> None:
    """Systems A, B, C, D of one lp, 3 segments each:
        human A [0.1, 0.2, 0.3], B [0.3, 0.2, 0.1] (both mean 0.2), C [0.1] * 3, D [0.3] * 3
        metric A 2, B 1, C 0, D 3 (every segment)
    Pairs of systems: A-B tied in humans, not in the metric; the other 5 concordant. Hand count:
    C = 5, D = 0, T_h = 1, n0 = 6: tau-b = 5 / sqrt(6 * 5) = 0.9129. A float `sum` gives A's human
    mean 0.20000000000000004 and B's 0.19999999999999998: A-B becomes a concordant pair and
    tau-b 6 / 6 = 1.0, the wrong figure the issue reports."""
    humans = {"A": [0.1, 0.2, 0.3], "B": [0.3, 0.2, 0.1], "C": [0.1] * 3, "D": [0.3] * 3}
    metric = {"A": 2.0, "B": 1.0, "C": 0.0, "D": 3.0}
    systems = [s for s in humans for _ in range(3)]
    h = [v for s in humans for v in humans[s]]
    x = [metric[s] for s in systems]
    want = 5 / math.sqrt(30)

    naive = {s: sum(v) / len(v) for s, v in humans.items()}  # what a plain sum gives
    assert naive["A"] == 0.20000000000000004 and naive["B"] == 0.19999999999999998
    assert stats.kendalltau([metric[s] for s in humans], list(naive.values()))[0] == pytest.approx(1.0)

    seg = Segments(
        np.array(x), np.array(h), np.array(["xx"] * 12, dtype=object), np.array(systems, dtype=object), np.arange(12)
    )
    assert quality(seg, "kendall", "system") == pytest.approx(want, abs=1e-15)
    c = correlate(x, h, ["xx"] * 12, systems)
    assert c["system"]["kendall"] == pytest.approx(want, abs=1e-15)
    assert {(f["level"], f["method"]): f["value"] for f in c["figures"]}["system", "kendall"] == pytest.approx(
        want, abs=1e-15
    )
    # the order of the segments does not matter
    order = np.random.default_rng(0).permutation(12)
    assert quality(seg.take(order), "kendall", "system") == pytest.approx(want, abs=1e-15)


# ----------------------------------------------------------------------------- undefined levels


def test_system_level_is_undefined_with_one_segment_per_system() -> None:
    """Each system scored once per lp, so its 'means' are the segments themselves."""
    rows = [r for r in constructed() if r["doc"] == "d0"]  # one document: every system once per lp
    scores, human, lps, systems = ([r[k] for r in rows] for k in ("score", "human", "lp", "system"))
    c = correlate(scores, human, lps, systems)
    assert c["system"] is None
    assert c["note"] == (
        "system level: every system has one segment per language pair, so the system level would "
        "equal the segment level"
    )
    assert {f["level"] for f in c["figures"]} == {"global", "segment"}
    seg = Segments(
        np.array(scores),
        np.array(human),
        np.array(lps, dtype=object),
        np.array(systems, dtype=object),
        np.arange(len(rows)),
    )
    assert math.isnan(quality(seg, "pearson", "system")) and too_small_groups(seg, "system") == []
    assert quality_note(seg, "pearson", "system").startswith("every system has one segment per language pair")
    assert c["pearson"] == pytest.approx(hand_figure(rows, "segment", "pearson")["value"], abs=1e-12)


def test_item_level_is_refused_without_document_ids() -> None:
    rows = constructed()
    seg = as_segments(rows, docs=False)
    with pytest.raises(UserError, match="item-level correlation needs datasets with document ids"):
        QualityOptions("pearson", "item").check_segments([seg])
    QualityOptions("pearson", "item").check_segments([seg, as_segments(rows)])  # one cell with documents suffices
    assert (
        math.isnan(quality(seg, "pearson", "item"))
        and quality_note(seg, "pearson", "item") == "no document ids (doc_id)"
    )
    c = correlate(
        [r["score"] for r in rows], [r["human"] for r in rows], [r["lp"] for r in rows], [r["system"] for r in rows]
    )
    assert c["item"] is None and "item" not in {f["level"] for f in c["figures"]}
    assert "item" not in {f["level"] for f in figure_table(seg)}
    # doc ids all empty: the same as none
    empty = correlate(
        [r["score"] for r in rows],
        [r["human"] for r in rows],
        [r["lp"] for r in rows],
        [r["system"] for r in rows],
        docs=[""] * len(rows),
    )
    assert empty["item"] is None


# ----------------------------------------------------------------------------- names


def test_old_level_names_are_aliases() -> None:
    seg = as_segments(constructed())
    assert canonical_level("pooled") == "global" and canonical_level("lp_mean") == "segment"
    assert [canonical_level(lv) for lv in LEVELS] == list(LEVELS)
    for method in PLAIN_METHODS:
        assert quality(seg, method, "pooled") == quality(seg, method, "global")
        assert quality(seg, method, "lp_mean") == quality(seg, method, "segment")
    assert figure_table(seg, levels=["pooled", "lp_mean"], methods=["pearson"]) == figure_table(
        seg, levels=["global", "segment"], methods=["pearson"]
    )
    assert too_small_groups(seg, "lp_mean") == too_small_groups(seg, "segment")
    assert canonical_level("summary") == "item" and canonical_level("item_grouped") == "source"
    with pytest.raises(ValueError, match=r"unknown correlation level 'lp'.*global, segment, item, source, system"):
        quality(seg, "pearson", "lp")
    for name in ("pooled", "lp_mean", *LEVELS):
        QualityOptions("kendall_c", name).check()
    with pytest.raises(UserError, match="unknown correlation level 'document'"):
        QualityOptions("pearson", "document").check()
    with pytest.raises(UserError, match="unknown correlation method 'tau'"):
        QualityOptions("tau", "global").check()


def test_quality_options_labels_and_threshold() -> None:
    assert (
        QualityOptions("kendall", "lp_mean").label
        == QualityOptions("kendall", "segment").label
        == "kendall (segment, by lp)"
    )
    assert QualityOptions("pearson", "pooled").label == "pearson (global)"
    assert QualityOptions("kendall_c", "item").label == "kendall-c (item, by doc_id)"
    assert QualityOptions("spearman", "system").label == "spearman (system, by lp)"
    for bad in (-25.0, math.nan):
        with pytest.raises(UserError, match="threshold must be a number >= 0"):
            QualityOptions("kendall_like", "global", threshold=bad).check()


# ----------------------------------------------------------------------------- mechanics


def test_kendall_like_blocks_equal_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """kendall_like compares PAIR_BLOCK pairs at a time: blocks of 1 row, uneven splits and one
    block give the loop's count."""
    import nlgbench.statistics.correlation as nlg_stats

    rng = np.random.default_rng(4)
    x, h = np.round(rng.normal(size=41), 1), np.round(rng.normal(size=41) * 2) / 2  # ties on both sides
    want = {t: hand_kendall_like(x.tolist(), h.tolist(), t) for t in (0.0, 0.75)}
    for block in (1, 7 * 41, 40 * 41, 41 * 41, 1 << 22):
        monkeypatch.setattr(nlg_stats, "PAIR_BLOCK", block)
        for t, w in want.items():
            assert kendall_like(x, h, t) == pytest.approx(w, abs=1e-15), (block, t)


def test_means_are_one_order_free_function() -> None:
    from nlgbench.statistics.levels import finite_mean, mean

    values = [0.1] * 10 + [1e16, -1e16]
    assert mean(values) == mean(values[::-1]) == pytest.approx(1 / 12, abs=1e-17)
    assert sum(values) / 12 != mean(values)  # a plain sum loses the 0.1s
    assert finite_mean([1.0, math.nan, 2.0]) == 1.5 and math.isnan(finite_mean([math.nan]))


def test_take_carries_document_ids() -> None:
    seg = as_segments(constructed())
    idx = np.array([5, 0])
    assert seg.take(idx).doc.tolist() == [seg.doc[5], seg.doc[0]]
    assert as_segments(constructed(), docs=False).take(idx).doc is None


def test_mean_of_values_whose_sum_passes_the_float_range() -> None:
    """Means near float's limit are computed (scaled by an exact power of two), not an OverflowError."""
    assert mean([1e308, 1e308, 1e308]) == 1e308
    assert mean([1e308, -1e308, 1e308, 1e308]) == 5e307
    assert mean([1.7976931348623157e308] * 5) == pytest.approx(1.7976931348623157e308, rel=1e-15)
    assert mean([0.1, 0.2, 0.3]) == math.fsum([0.1, 0.2, 0.3]) / 3  # within range: fsum / n as ever
