"""Significance at the level compared: Williams' test per group of the level with the
right n, the resampling unit of each level (relabelled copies, stratified by language pair, the
same draws for two cells), boot-both, and the permutation test."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from nlgbench.statistics.levels import Segments, quality, system_means
from nlgbench.statistics.resampling import draw, resampling_unit, unit_count
from nlgbench.statistics.significance import paired_permutation, williams_by_group, williams_test

pytestmark = pytest.mark.unit


def wmt_like(seed: int = 0, n_sources: int = 12) -> tuple[Segments, Segments]:
    """Two metrics' segments on two language pairs x 5 systems x n_sources sources."""
    rng = np.random.default_rng(seed)
    rows = [(lp, s, k) for lp in ("de-en", "zh-en") for s in ("A", "B", "C", "D", "E") for k in range(n_sources)]
    quality_of = {"A": 0.0, "B": 0.3, "C": 0.5, "D": 0.9, "E": 1.4}
    h = np.array([quality_of[s] + rng.normal() for _, s, _ in rows])
    lp = np.array([r[0] for r in rows])
    system = np.array([r[1] for r in rows], dtype=object)
    seg_id = np.array([str(r[2]) for r in rows], dtype=object)
    cand = Segments(h + rng.normal(size=len(h)), h, lp, system, seg_id)
    base = Segments(h + 0.5 * rng.normal(size=len(h)), h, lp, system, seg_id)
    return cand, base


def test_williams_at_the_segment_level_is_per_language_pair_over_its_segments() -> None:
    cand, base = wmt_like()
    groups = williams_by_group(cand, base, "segment")
    assert [g["group"] for g in groups] == ["de-en", "zh-en"]
    for g in groups:
        m = cand.lp == g["group"]
        r_c = stats.pearsonr(cand.score[m], cand.human[m])[0]
        r_b = stats.pearsonr(base.score[m], cand.human[m])[0]
        r_cb = stats.pearsonr(cand.score[m], base.score[m])[0]
        assert g["n"] == 60  # 5 systems x 12 sources of this pair
        assert (g["t"], g["p"]) == pytest.approx(williams_test(r_c, r_b, r_cb, 60), abs=1e-12)


def test_williams_at_the_system_level_is_over_system_means_with_n_systems() -> None:
    cand, base = wmt_like()
    groups = williams_by_group(cand, base, "system")
    (xc, h, lps), (xb, _, _) = system_means(cand), system_means(base)
    for g in groups:
        m = lps == g["group"]
        assert g["n"] == 5
        r_c, r_b, r_cb = (stats.pearsonr(a, b)[0] for a, b in ((xc[m], h[m]), (xb[m], h[m]), (xc[m], xb[m])))
        assert (g["t"], g["p"]) == pytest.approx(williams_test(r_c, r_b, r_cb, 5), abs=1e-12)
        # df = n - 3 = 2: the two-sided p of t with 2 degrees of freedom
        assert g["p"] == pytest.approx(2 * stats.t.sf(abs(g["t"]), 2), abs=1e-12)
    assert williams_by_group(cand, base, "global")[0]["n"] == 120
    doc = np.array(["d1"] * 60 + ["d2"] * 60, dtype=object)
    with_docs = Segments(cand.score, cand.human, cand.lp, cand.system, cand.seg_id, doc)
    assert williams_by_group(with_docs, with_docs, "item") == []


def test_each_level_resamples_its_unit() -> None:
    cand, _ = wmt_like()
    assert resampling_unit(cand, "global", "pearson") == "sources"  # 5 translations per source
    assert resampling_unit(cand, "global", "pearson", "segments") == "segments"
    assert resampling_unit(cand, "segment", "acc_eq") == "sources"
    assert resampling_unit(cand, "system", "pearson") == "systems"
    assert resampling_unit(cand, "system", "pearson", "both") == "systems+sources"
    rng = np.random.default_rng(5)
    # systems: per lp, 5 systems drawn with replacement, each copy a system of its own with all 12 segments
    out = draw(cand, "systems", rng)
    for lp in ("de-en", "zh-en"):
        names = out.system[out.lp == lp]
        counts = Counter(names.tolist())
        assert len(counts) == 5 and set(counts.values()) == {12}
        assert all("#" in n for n in counts)
    assert len(system_means(out)[0]) == 10  # copies are not merged
    # segments: each lp keeps its size (stratified)
    out = draw(cand, "segments", rng)
    assert Counter(out.lp.tolist()) == {"de-en": 60, "zh-en": 60}
    # sources: whole sources (all 5 translations) drawn
    out = draw(cand, "sources", rng)
    assert set(Counter(zip(out.lp.tolist(), out.seg_id.tolist(), strict=True)).values()) == {5}
    assert unit_count(cand, "sources") == (24, 0) and unit_count(cand, "systems") == (10, 0)
    assert unit_count(cand, "systems+sources") == (10, 24)
    unnamed = Segments(cand.score, cand.human, cand.lp, np.array([""] * len(cand), dtype=object), cand.seg_id)
    assert unit_count(unnamed, "systems") == (0, 0)
    # boot-both: 5 systems x 12 sources drawn per lp, one segment each
    out = draw(cand, "systems+sources", rng)
    keys = set(zip(out.system.tolist(), out.seg_id.tolist(), out.lp.tolist(), strict=True))
    assert len(out) == 120 and len(keys) == 120


def test_two_cells_of_the_same_segments_get_the_same_draws() -> None:
    cand, base = wmt_like()
    a = draw(cand, "systems", np.random.default_rng(9))
    b = draw(base, "systems", np.random.default_rng(9))
    assert np.array_equal(a.human, b.human) and np.array_equal(a.system, b.system)
    assert quality(a, "pearson", "system") != quality(b, "pearson", "system")


def test_permutation_test_by_hand_and_on_a_real_difference() -> None:
    cand, base = wmt_like()

    def stat(s: Segments) -> float:
        return quality(s, "pearson", "global")

    res = paired_permutation(cand, base, stat, n_permutations=200, seed=1)
    assert res.delta == pytest.approx(stat(cand) - stat(base), abs=1e-15)
    assert res.p_value < 0.05  # the candidate's noise is twice the baseline's
    same = paired_permutation(cand, cand, stat, n_permutations=50, seed=1)
    assert same.delta == 0 and same.p_value == 1.0  # every permutation reaches |0| >= 0
    # by hand: swapping every segment gives -delta; with seed 1 the test counts those reaching |delta|
    rng = np.random.default_rng(1)
    zc = (cand.score - cand.score.mean()) / cand.score.std()
    zb = (base.score - base.score.mean()) / base.score.std()
    hits = 0
    for _ in range(200):
        swap = rng.random(len(zc)) < 0.5
        d = (
            stats.pearsonr(np.where(swap, zb, zc), cand.human)[0]
            - stats.pearsonr(np.where(swap, zc, zb), cand.human)[0]
        )
        hits += abs(d) >= abs(res.delta) - 1e-12
    assert res.p_value == pytest.approx((1 + hits) / 201, abs=1e-15)
    assert not math.isnan(res.p_value)


def test_the_api_correlates_at_any_level_and_compares_with_the_level_tests() -> None:
    import nlgbench
    from nlgbench.foundations.errors import UserError

    source = ["s1", "s2", "s1", "s3", "s2", "s1"]
    x, h = [0.9, 0.2, 0.5, 0.3, 0.4, 0.5], [80.0, 10, 40, 20, 50, 70]
    # the hand-counted DARR example of test_pairwise: (2 - 1) / 3 over pairs of one source
    got = nlgbench.correlation(x, h, method="darr_kendall", level="segment", seg_ids=source, threshold=25)
    assert got == pytest.approx(1 / 3, abs=1e-15)
    assert math.isnan(nlgbench.correlation(x, h, method="acc_eq", level="segment"))  # no seg_ids: one each
    with pytest.raises(UserError, match="pairs systems: system level only"):
        nlgbench.correlation(x, h, method="pairwise_accuracy", level="segment")
    result = nlgbench.compare(
        "reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2", level="segment", resamples=100
    )
    (row,) = result["rows"]
    assert row["resampling"] == "segments, stratified by language pair" and row["n_units"] == 600
    assert [g["n"] for g in row["williams_by_group"]] == [100] * 6 and row["p_williams"] is None
