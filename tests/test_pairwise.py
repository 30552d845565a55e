"""The pairwise statistics of nlgbench.statistics.pairwise on hand-counted examples:
pairwise accuracy and its tie rule, DARR Kendall grouped by source with its threshold, acc_eq with and
without tie calibration, soft pairwise accuracy with p-values by enumeration; and how the levels apply them."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from nlgbench.statistics.levels import Segments, figure_table, method_reason, quality, quality_note
from nlgbench.statistics.pairwise import (
    acc_eq,
    calibrated_acc_eq,
    darr_kendall,
    pairwise_accuracy,
    pairwise_p_values,
    sign_patterns,
    soft_pairwise_accuracy,
    source_pairs,
)

pytestmark = pytest.mark.unit


def test_pairwise_accuracy_counts_pairs_with_the_sign_rule() -> None:
    # pairs: (0,1) + +, (0,2) + +, (0,3) + -, (1,2) - -, (1,3) - -, (2,3) metric tie vs human - : 4 of 6 agree
    assert pairwise_accuracy(np.array([3.0, 1, 2, 2]), np.array([4.0, 1, 3, 5])) == pytest.approx(4 / 6, abs=0)
    # a pair tied on both sides agrees; tied on one side only, it does not
    assert pairwise_accuracy(np.array([1.0, 1, 2]), np.array([5.0, 5, 6])) == 1.0
    assert pairwise_accuracy(np.array([1.0, 2, 3]), np.array([5.0, 5, 6])) == pytest.approx(2 / 3, abs=0)
    assert math.isnan(pairwise_accuracy(np.array([1.0]), np.array([2.0])))


# three sources, interleaved: s1 has translations a, b, c; s2 has d, e; s3 has f alone
SOURCE = np.array(["s1", "s2", "s1", "s3", "s2", "s1"])
X = np.array([0.9, 0.2, 0.5, 0.3, 0.4, 0.5])  # a, d, b, f, e, c
H = np.array([80.0, 10, 40, 20, 50, 70])


def test_source_pairs_are_the_translations_of_one_source() -> None:
    i, j = source_pairs(SOURCE)
    assert sorted(tuple(sorted(p)) for p in zip(i.tolist(), j.tolist(), strict=True)) == [
        (0, 2),
        (0, 5),
        (1, 4),
        (2, 5),
    ]


def test_darr_kendall_counts_only_pairs_of_one_source_beyond_the_threshold() -> None:
    # threshold 25: s1 (a,b) dh 40 concordant; (a,c) dh 10 not counted; (b,c) dh -30 with a metric tie:
    # discordant; s2 (d,e) dh -40, dx -0.2 concordant; pairs across sources never count -> (2 - 1) / 3
    assert darr_kendall(X, H, SOURCE, threshold=25) == pytest.approx(1 / 3, abs=1e-15)
    # threshold 0 adds (a,c): dh 10, dx 0.4 concordant -> (3 - 1) / 4
    assert darr_kendall(X, H, SOURCE, threshold=0) == pytest.approx(0.5, abs=1e-15)
    assert math.isnan(darr_kendall(X, H, np.array(["a", "b", "c", "d", "e", "f"]), threshold=0))


def test_acc_eq_with_and_without_tie_calibration() -> None:
    h = H.copy()
    h[[1, 4]] = 50.0  # s2's two translations tie for the humans; their metric scores differ by 0.2
    # epsilon 0: s1 (a,b) agree, (a,c) agree, (b,c) metric tie but human order: disagree -> 2/3;
    # s2 human tie, metric order: disagree -> 0; s3 has no pair; mean over sources (2/3 + 0) / 2
    assert acc_eq(X, h, SOURCE, 0.0) == pytest.approx(1 / 3, abs=1e-15)
    # epsilon 0.2: s2 now ties on both sides -> 1; s1 unchanged (|dx| 0.4 > 0.2) -> (2/3 + 1) / 2
    assert acc_eq(X, h, SOURCE, 0.2) == pytest.approx(5 / 6, abs=1e-15)
    # epsilon 0.4: s1's (a,b), (a,c) become metric ties against human orders -> (0 + 1) / 2
    assert acc_eq(X, h, SOURCE, 0.4) == pytest.approx(0.5, abs=1e-15)
    # calibration tries 0, 0.2, 0.4 (the within-source gaps) and keeps the best, 0.2
    value, epsilon = calibrated_acc_eq(X, h, SOURCE)
    assert (value, epsilon) == (pytest.approx(5 / 6, abs=1e-15), pytest.approx(0.2, abs=1e-12))


def test_calibration_finds_the_maximum_of_a_brute_force_scan() -> None:
    rng = np.random.default_rng(3)
    source = np.repeat(np.arange(30), 4)
    x = np.round(rng.normal(size=120), 1)  # rounded: many metric ties
    h = rng.integers(0, 4, size=120).astype(float)  # few levels: many human ties
    value, epsilon = calibrated_acc_eq(x, h, source)
    i, j = source_pairs(source)
    gaps = np.unique(np.concatenate([[0.0], np.abs(x[i] - x[j])]))
    scan = [acc_eq(x, h, source, float(e)) for e in gaps]
    assert value == pytest.approx(max(scan), abs=1e-12)
    assert epsilon == pytest.approx(float(gaps[int(np.argmax(scan))]), abs=0)  # the smallest best one
    assert all(acc_eq(x, h, source, float(e)) <= value + 1e-12 for e in np.linspace(0, 3, 61))


def enumerated_p(diff: list[int]) -> Fraction:
    """P(sum of s_k d_k >= sum of d_k) over all 2^n sign patterns s, exactly."""
    patterns = list(itertools.product((1, -1), repeat=len(diff)))
    hits = sum(sum(s * d for s, d in zip(signs, diff, strict=True)) >= sum(diff) for signs in patterns)
    return Fraction(hits, len(patterns))


def test_soft_pairwise_accuracy_on_three_systems_by_enumeration() -> None:
    human = {"A": [3, 4, 5], "B": [2, 2, 2], "C": [1, 3, 2]}
    metric = {"A": [3, 3, 3], "B": [1, 2, 4], "C": [0, 1, 1]}
    # by hand: human A-B = (1,2,3): only +++ reaches 6 -> 1/8; A-C = (2,1,3) -> 1/8; B-C = (1,-1,0) -> 6/8;
    # metric A-B = (2,1,-1): +++, ++-, +-+ reach 2 -> 3/8; A-C = (3,2,2) -> 1/8; B-C = (1,1,3) -> 1/8
    hand_h = {("A", "B"): Fraction(1, 8), ("A", "C"): Fraction(1, 8), ("B", "C"): Fraction(6, 8)}
    hand_m = {("A", "B"): Fraction(3, 8), ("A", "C"): Fraction(1, 8), ("B", "C"): Fraction(1, 8)}
    for (a, b), p in hand_h.items():
        assert enumerated_p([u - v for u, v in zip(human[a], human[b], strict=True)]) == p
    for (a, b), p in hand_m.items():
        assert enumerated_p([u - v for u, v in zip(metric[a], metric[b], strict=True)]) == p
    patterns = sign_patterns(3)
    assert len(patterns) == 8  # enumerated, not sampled
    p_h = pairwise_p_values(np.array([human[s] for s in "ABC"], dtype=float), patterns)
    assert [p_h[0, 1], p_h[0, 2], p_h[1, 2]] == [1 / 8, 1 / 8, 6 / 8]
    # SPA = 1 - mean(|1/8 - 3/8|, |1/8 - 1/8|, |6/8 - 1/8|) = 1 - (7/8) / 3 = 17/24
    order = [(s, k) for k in range(3) for s in "CAB"]  # segments interleaved, systems in another order
    x = np.array([metric[s][k] for s, k in order], dtype=float)
    h = np.array([human[s][k] for s, k in order], dtype=float)
    system = np.array([s for s, _ in order])
    source = np.array([f"src{k}" for _, k in order])
    assert soft_pairwise_accuracy(x, h, system, source) == pytest.approx(17 / 24, abs=1e-15)
    # a system missing one source: no paired test, no figure
    assert math.isnan(soft_pairwise_accuracy(x[:-1], h[:-1], system[:-1], source[:-1]))


def segments(x: np.ndarray, h: np.ndarray, system: np.ndarray, source: np.ndarray, lp: str = "zh-en") -> Segments:
    return Segments(x, h, np.array([lp] * len(x)), system, source.astype(object))


def test_levels_apply_each_method_where_its_pairs_exist() -> None:
    seg = segments(X, H, np.array(["m1", "m1", "m2", "m1", "m2", "m3"]), SOURCE)
    assert quality(seg, "darr_kendall", "segment", threshold=25) == pytest.approx(1 / 3, abs=1e-15)
    assert math.isnan(quality(seg, "acc_eq", "system"))
    assert (
        method_reason("acc_eq", "system") == "acc_eq pairs translations of one source: global and segment levels only"
    )
    assert method_reason("pairwise_accuracy", "global") == "pairwise_accuracy pairs systems: system level only"
    one_each = segments(X, H, np.array([""] * 6), np.array(["1", "2", "3", "4", "5", "6"]))
    assert math.isnan(quality(one_each, "darr_kendall", "segment"))
    assert quality_note(one_each, "acc_eq", "segment") == (
        "every source has one translation (no pairs of translations of one source) in zh-en"
    )
    rows = {(r["level"], r["method"]): r for r in figure_table(one_each)}
    assert ("segment", "acc_eq") in rows and math.isnan(rows["segment", "acc_eq"]["value"])
    assert rows["segment", "acc_eq"]["note"].startswith("every source has one translation")
    assert ("global", "pairwise_accuracy") not in rows  # a method has rows only at its levels
