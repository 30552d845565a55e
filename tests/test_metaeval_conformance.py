"""Conformance with the WMT Metrics task's code (Google's mt-metrics-eval) and Deutsch et al.'s
resampling: each small example is counted by hand in its comment, with the figure the reference
function gives; nlgbench's default where it differs, and `convention="mt-metrics-eval"` where it
reproduces the reference. Also the default resampling unit (whole sources where a source has
several translations), the source level, and what a permutation test names as permuted."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import nlgbench
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare, render
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.levels import Segments, left_out_count, level_points, quality, quality_note
from nlgbench.statistics.pairwise import calibrated_acc_eq, soft_pairwise_accuracy, source_pairs
from nlgbench.statistics.reference import convention_quality
from nlgbench.statistics.resampling import draw, resample_distribution, resampling_unit
from nlgbench.statistics.significance import williams_by_group
from nlgbench.statistics.summary import correlate

pytestmark = pytest.mark.unit

REF = "mt-metrics-eval"


def segments(
    x: list[float], h: list[float], src: list[str], lp: list[str] | None = None, system: list[str] | None = None
) -> Segments:
    n = len(x)
    return Segments(
        np.asarray(x, dtype=float),
        np.asarray(h, dtype=float),
        np.array(lp or ["aa-en"] * n, dtype=object),
        np.array(system or [""] * n, dtype=object),
        np.array(src, dtype=object),
    )


# ----------------------------------------------------------------------------- darr_kendall: > vs >=


def test_darr_kendall_counts_pairs_at_the_threshold_only_under_the_reference_convention() -> None:
    # Source s1, two translations: h = 50 and 25, the metric agrees. |dh| = 25 (s2 has one
    # translation, no pair). nlgbench: |dh| > 25 counts no pair: n/a.
    # mt_metrics_eval.stats.KendallLike(thresh=25) counts |dh| >= 25: 1 concordant, 0 discordant: 1.0.
    seg = segments([0.2, 0.1, 0.5], [50, 25, 40], ["s1", "s1", "s2"])
    assert math.isnan(quality(seg, "darr_kendall", "segment", 25))
    assert "differs by more than 25" in quality_note(seg, "darr_kendall", "segment", 25)
    assert convention_quality(seg, "darr_kendall", "segment", 25, REF) == 1.0
    # Threshold 0 with a human tie: h = 10, 10, 5, x = 0.3, 0.2, 0.1 (one source).
    # nlgbench: pairs with |dh| > 0: (1,3) and (2,3), both concordant: 2 / 2 = 1.0.
    # KendallLike(thresh=0): all 3 pairs count, the tie (diff == 0) as discordant: (2 - 1) / 3.
    seg = segments([0.3, 0.2, 0.1], [10, 10, 5], ["s1"] * 3)
    assert quality(seg, "darr_kendall", "segment", 0) == 1.0
    assert convention_quality(seg, "darr_kendall", "segment", 0, REF) == pytest.approx(1 / 3, abs=1e-15)
    # kendall_like_all_pairs follows the same rule (the reference has one KendallLike)
    assert quality(seg, "kendall_like_all_pairs", "global", 0) == 1.0
    assert convention_quality(seg, "kendall_like_all_pairs", "global", 0, REF) == pytest.approx(1 / 3, abs=1e-15)


# ----------------------------------------------------------------------------- pairwise accuracy over lps


def test_pairwise_accuracy_pooled_over_language_pairs_is_wmts() -> None:
    # lp A: 3 systems ranked alike by metric and humans: 3 of 3 pairs agree.
    # lp B: 5 systems, humans 1..5, metric 5, 4, 1, 2, 3: the agreeing pairs are (S3,S4), (S3,S5),
    # (S4,S5): 3 of 10. nlgbench (mean over lps): (3/3 + 3/10) / 2 = 0.65. WMT pools every system
    # pair of every lp (mt_metrics_eval tasks' pairwise accuracy over lps, its Agreement summed):
    # (3 + 3) / (3 + 10) = 6/13 = 0.4615.
    rows = [("A", f"S{k}", float(k), float(k)) for k in (1, 2, 3)]
    rows += [("B", f"S{k}", float(k), m) for k, m in zip((1, 2, 3, 4, 5), (5.0, 4.0, 1.0, 2.0, 3.0), strict=True)]
    rows = [r for r in rows for _ in range(2)]  # two segments per system, equal scores: means are the values
    seg = Segments(
        np.array([r[3] for r in rows]),
        np.array([r[2] for r in rows]),
        np.array([r[0] for r in rows], dtype=object),
        np.array([r[1] for r in rows], dtype=object),
        np.array([str(i % 2) for i in range(len(rows))], dtype=object),
    )
    assert quality(seg, "pairwise_accuracy", "system") == pytest.approx(0.65, abs=1e-15)
    assert convention_quality(seg, "pairwise_accuracy", "system", 0, REF) == pytest.approx(6 / 13, abs=1e-15)
    assert QualityOptions("pairwise_accuracy", "system", convention=REF).value(seg) == pytest.approx(6 / 13)
    assert QualityOptions("pairwise_accuracy", "system", convention=REF).label == (
        "pairwise-accuracy (system, by lp, mt-metrics-eval convention)"
    )


# ----------------------------------------------------------------------------- tau-like at item level


def test_kendall_like_at_item_level_weighted_by_pairs_under_the_reference_convention() -> None:
    # Threshold 1. Document 1: h = 0, 2, 4 and x = 1, 2, 3: 3 counted pairs, all concordant (tau 1).
    # Document 2: h = 0, 0.5, 2 and x = 3, 2, 1: (1,2) differs by 0.5 < 1, not counted; (1,3) and (2,3)
    # discordant (tau -1). nlgbench (mean of documents): (1 + -1) / 2 = 0.0. The reference
    # (AverageCorrelation(KendallLike, 'item', macro=False): weighted by counted pairs):
    # (3 - 2) / (3 + 2) = 0.2.
    seg = Segments(
        np.array([1.0, 2, 3, 3, 2, 1]),
        np.array([0.0, 2, 4, 0, 0.5, 2]),
        np.array(["aa-en"] * 6, dtype=object),
        np.array(["A", "B", "C"] * 2, dtype=object),
        np.arange(6),
        np.array(["d1"] * 3 + ["d2"] * 3, dtype=object),
    )
    assert quality(seg, "kendall_like_all_pairs", "item", 1) == 0.0
    assert convention_quality(seg, "kendall_like_all_pairs", "item", 1, REF) == pytest.approx(0.2, abs=1e-15)


def test_the_tau_likes_count_a_group_with_a_constant_side_as_the_reference_does() -> None:
    # Threshold 0, one lp, source level (WMT's item grouping), systems A, B, C:
    #   source 1: human 1, 1, 1, metric 1, 2, 3   source 2: human 1, 2, 3, metric 1, 2, 3
    # mt_metrics_eval.stats.Correlation(3, gold, metric).KendallLike(average_by='item', thresh=0):
    # source 1's 3 pairs all count (|diff| >= 0) and, the human scores tied, are Discordant: tau -1
    # over 3 pairs; source 2's 3 pairs are Concordant: tau 1 over 3; weighted by pairs (macro=False):
    # (3 * -1 + 3 * 1) / 6 = 0.0. nlgbench's default leaves source 1 out (human constant): 1.0.
    # DARR Kendall of the same data under the convention (one lp, pairs within each source): 0.0 too.
    h = [1.0, 1, 1, 1, 2, 3]
    seg = segments([1.0, 2, 3, 1, 2, 3], h, ["s1"] * 3 + ["s2"] * 3, system=["A", "B", "C"] * 2)
    assert quality(seg, "kendall_like_all_pairs", "source", 0) == 1.0
    assert convention_quality(seg, "kendall_like_all_pairs", "source", 0, REF) == 0.0
    assert convention_quality(seg, "darr_kendall", "segment", 0, REF) == 0.0
    # The same with the metric constant instead: source 1 human 1, 2, 3, metric 5, 5, 5. KendallLike:
    # every pair differs in human score and ties in the metric, Discordant: again (3 * -1 + 3) / 6 = 0.0.
    flat = segments([5.0, 5, 5, 1, 2, 3], [1.0, 2, 3] * 2, ["s1"] * 3 + ["s2"] * 3, system=["A", "B", "C"] * 2)
    assert quality(flat, "kendall_like_all_pairs", "source", 0) == 1.0
    assert convention_quality(flat, "kendall_like_all_pairs", "source", 0, REF) == 0.0
    # Threshold 1: source 1's human ties differ by 0 < 1, no pair counts (KendallLike's num_pairs 0:
    # weight 0): source 2 alone, 1.0 under both conventions.
    assert convention_quality(seg, "kendall_like_all_pairs", "source", 1, REF) == 1.0


# ----------------------------------------------------------------------------- acc_eq's epsilon


def test_acc_eq_calibration_picks_the_smallest_epsilon_of_the_exact_maximum() -> None:
    # Two sources. Source 1: x = 3, 3, 1, h = 2, 2, 1: a tied pair (|dx| 0) and two concordant pairs
    # (|dx| 2). Source 2: x = 0, 1, 0, h = 1, 1, 0: a human tie with |dx| 1, a pair the metric ties
    # (dx 0, dh 1) and a concordant pair with |dx| 1.
    # epsilon 0: source 1 3/3, source 2 1/3 -> 2/3. epsilon 1: source 1 3/3, source 2 1/3 (the human
    # tie now agrees, the concordant pair of |dx| 1 becomes a metric tie) -> 2/3. epsilon 2: 1/3.
    # Both 0 and 1 maximise it; the smallest is 0 (mt_metrics_eval.tau_optimization gives epsilon 0.0;
    # float cumulative sums made the old arg-max pick 1.0).
    x = np.array([3.0, 3, 1, 0, 1, 0])
    h = np.array([2.0, 2, 1, 1, 1, 0])
    src = np.array(["a", "a", "a", "b", "b", "b"])
    value, epsilon = calibrated_acc_eq(x, h, src)
    assert (value, epsilon) == (pytest.approx(2 / 3, abs=1e-15), 0.0)


# ----------------------------------------------------------------------------- soft pairwise accuracy


def reference_spa(metric: np.ndarray, human: np.ndarray, n_permutations: int = 1000, seed: int = 4) -> float:
    """mt_metrics_eval.pce (compute_pairwise_p_values, compute_one_minus_pce) written out as a loop:
    patterns from default_rng(4), float32 uniform draws rounded to 0/1, mapped to -1/+1, one pattern
    matrix for both sides; p(i > j) = share of patterns whose signed sum difference >= the observed."""
    rng = np.random.default_rng(seed)
    signs = np.rint(rng.random(size=(n_permutations, metric.shape[1]), dtype=np.float32)) * 2 - 1
    diffs = []
    for i in range(len(metric)):
        for j in range(i + 1, len(metric)):
            ps = []
            for scores in (human, metric):
                a, b = scores[i].astype(np.float32), scores[j].astype(np.float32)
                observed = a.sum() - b.sum()
                null = signs.astype(np.float32) @ a - signs.astype(np.float32) @ b
                ps.append(np.count_nonzero(null >= observed) / n_permutations)
            diffs.append(abs(ps[0] - ps[1]))
    return 1 - sum(diffs) / len(diffs)


def test_soft_pairwise_accuracy_reproduces_the_references_sampling_as_an_option() -> None:
    # 4 systems x 6 sources, integer scores (exact in float32). nlgbench enumerates all 2^6 sign
    # patterns (exact); reference=True samples 1000 patterns with seed 4 as mt-metrics-eval does.
    rng = np.random.default_rng(3)
    human = rng.integers(0, 10, size=(4, 6)).astype(float)
    metric = human + rng.integers(-3, 4, size=(4, 6))
    systems = np.repeat(np.array(["S1", "S2", "S3", "S4"], dtype=object), 6)
    sources = np.tile(np.array([f"u{k}" for k in range(6)], dtype=object), 4)
    got = soft_pairwise_accuracy(metric.reshape(-1), human.reshape(-1), systems, sources, reference=True)
    assert got == pytest.approx(reference_spa(metric, human), abs=1e-12)
    exact = soft_pairwise_accuracy(metric.reshape(-1), human.reshape(-1), systems, sources)
    assert exact != got  # the exact enumeration is a different (better) figure


# ----------------------------------------------------------------------------- default resampling


def repeated_sources(seed: int = 0, n_sources: int = 40) -> Segments:
    """5 systems translating the same sources, human and metric scores sharing a strong source effect."""
    rng = np.random.default_rng(seed)
    source_effect = rng.normal(scale=2.0, size=n_sources)
    rows = [(s, k) for s in range(5) for k in range(n_sources)]
    h = np.array([source_effect[k] + 0.3 * s + rng.normal() for s, k in rows])
    x = np.array([source_effect[k] + rng.normal(scale=1.5) for _, k in rows])
    return Segments(
        x,
        h,
        np.array(["zh-en"] * len(rows), dtype=object),
        np.array([f"S{s}" for s, _ in rows], dtype=object),
        np.array([str(k) for _, k in rows], dtype=object),
    )


def test_global_and_segment_levels_resample_whole_sources_where_a_source_has_several_translations() -> None:
    seg = repeated_sources()
    for level in ("global", "segment"):
        assert resampling_unit(seg, level, "pearson") == "sources"
        assert resampling_unit(seg, level, "pearson", "segments") == "segments"
        assert resampling_unit(seg, level, "pearson", "both") == "systems+sources"
    assert resampling_unit(seg, "source", "pearson") == "sources"
    # every draw keeps a source's 5 translations together (copies relabelled apart)
    out = draw(seg, "sources", np.random.default_rng(1))
    assert set(Counter(out.seg_id.tolist()).values()) == {5} and len(out) == len(seg)
    # one translation per source (WMT15/16 DA): segments, the draw of before
    single = segments(seg.score[:40].tolist(), seg.human[:40].tolist(), [str(k) for k in range(40)])
    assert resampling_unit(single, "global", "pearson") == "segments"
    assert resampling_unit(single, "global", "pearson", "both") == "sources"  # no system names: inputs only


def test_the_pooled_interval_in_result_json_resamples_sources_and_says_so() -> None:
    seg = repeated_sources()
    c = correlate(seg.score, seg.human, seg.lp, seg.system, seg_ids=seg.seg_id, bootstrap=300, seed=0)
    assert c["bootstrap"]["resampled"] == "sources (all translations of a source), stratified by language pair"
    pearson = lambda s: stats.pearsonr(s.score, s.human)[0]  # noqa: E731
    by_source = np.percentile(resample_distribution(seg, "sources", pearson, 300, 0), (2.5, 97.5))
    by_segment = np.percentile(resample_distribution(seg, "segments", pearson, 300, 0), (2.5, 97.5))
    assert c["bootstrap"]["pearson_pooled_ci"] == pytest.approx(list(by_source), abs=1e-12)
    # translations of one source share its effect: drawing them one by one understates the spread
    assert by_source[1] - by_source[0] > 1.3 * (by_segment[1] - by_segment[0])
    single = correlate(seg.score[:40], seg.human[:40], seg.lp[:40], bootstrap=300, seed=0)
    assert single["bootstrap"]["resampled"] == "segments, stratified by language pair"


def test_resample_choices_a_level_does_not_offer_are_refused() -> None:
    from nlgbench.foundations.errors import UserError

    with pytest.raises(UserError, match="--resample segments at --level segment: pairs of translations"):
        QualityOptions("acc_eq", "segment", resample="segments").check()
    with pytest.raises(UserError, match="--resample sources at --level system"):
        QualityOptions("pearson", "system", resample="sources").check()
    with pytest.raises(UserError, match="--resample sources at --level item"):
        QualityOptions("pearson", "item", resample="sources").check()
    with pytest.raises(UserError, match="unknown convention 'wmt'"):
        QualityOptions(convention="wmt").check()
    with pytest.raises(UserError, match="--resample both draws systems and inputs: these cells name no systems"):
        nlgbench.compare("reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2", resample="both", resamples=100)


# ----------------------------------------------------------------------------- the source level


def test_the_source_level_correlates_each_source_over_its_systems() -> None:
    # Source u1: 3 systems, h = 1, 2, 3 and x = 0.1, 0.3, 0.2: Pearson by hand
    # r = sum(dx dh) / sqrt(sum dx^2 sum dh^2) = (0.1 * 1 + 0 + 0) / sqrt(0.02 * 2) = 0.5.
    # Source u2: 3 systems, h = 3, 1, 2 and x = 0.3, 0.1, 0.2: r = 1. Source u3: 2 systems (too small).
    # Source level (mt_metrics_eval Correlation.Pearson(average_by='item')): (0.5 + 1) / 2 = 0.75.
    x = [0.1, 0.3, 0.2, 0.3, 0.1, 0.2, 0.5, 0.4]
    h = [1.0, 2, 3, 3, 1, 2, 1, 2]
    src = ["u1"] * 3 + ["u2"] * 3 + ["u3"] * 2
    seg = segments(x, h, src, system=["A", "B", "C"] * 2 + ["A", "B"])
    assert [p.name for p in level_points(seg, "source")] == ["u1", "u2", "u3"]
    assert quality(seg, "pearson", "source") == pytest.approx(0.75, abs=1e-12)
    assert quality(seg, "pearson", "item_grouped") == quality(seg, "pearson", "source")
    assert williams_by_group(seg, seg, "source") == []  # a mean of per-source correlations
    figures = {f["method"]: f for f in correlate(x, h, ["aa-en"] * 8, seg_ids=src)["figures"] if f["level"] == "source"}
    assert (figures["pearson"]["n_groups"], figures["pearson"]["n_groups_too_small"]) == (3, 1)
    assert "darr_kendall" not in figures  # source-pair methods stay at the global and segment levels
    # one translation per source: no source level
    single = correlate([0.1, 0.2, 0.3], [1.0, 3, 2], ["aa-en"] * 3, seg_ids=["u1", "u2", "u3"])
    assert single["source"] is None and all(f["level"] != "source" for f in single["figures"])
    assert nlgbench.correlation(x, h, level="source", seg_ids=src) == pytest.approx(0.75, abs=1e-12)


# ----------------------------------------------------------------------------- the permutation label


def test_the_permutation_test_names_the_segment_scores_it_swapped() -> None:
    result = nlgbench.compare(
        "reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2", level="segment", test="permutation", resamples=100
    )
    (row,) = result["rows"]
    assert row["permuted"] == "600 segment scores swapped"  # 6 lps x 100 segments, each swapped or not
    assert "[permutation: 600 segment scores swapped]" in render(result)
    assert 0 < row["p_permutation_candidate_better"] <= 1
    assert row["p_williams_observed_direction"] is None  # several lps: per group below
    assert all(g["p_observed_direction"] == pytest.approx(g["p"] / 2) for g in row["williams_by_group"])


def test_the_one_sided_p_values_are_named_by_what_they_test() -> None:
    """Williams' one-sided p is half the two-sided one whichever way the difference goes (the
    reference's WilliamsTest default): `p_williams_observed_direction`, the same for either order of
    the encoders. The permutation's is the p of "the candidate correlates better" (the reference's
    PermutationSigDiff): `p_permutation_candidate_better`, large where the candidate is the worse
    encoder, small when the two are swapped. No key says only "one_sided"."""
    minilm, mpnet = "all-MiniLM-L6-v2", "all-mpnet-base-v2"
    worse, better = (
        nlgbench.compare("reports/example", a, b, test="permutation", resamples=200)["rows"][0]
        for a, b in ((minilm, mpnet), (mpnet, minilm))
    )
    assert worse["delta"] < 0 < better["delta"]
    for row in (worse, better):
        assert row["p_williams_observed_direction"] == pytest.approx(row["p_williams"] / 2)
        assert not [key for key in row if key.endswith("one_sided")]
    assert worse["p_williams_observed_direction"] == pytest.approx(better["p_williams_observed_direction"])
    assert worse["p_permutation_candidate_better"] > 0.5 > better["p_permutation_candidate_better"]


# ----------------------------------------------------------------------------- acc_eq's permutation of pairs


def test_acc_eq_permutation_of_pairs_keeps_each_metrics_epsilon_fixed() -> None:
    # WMT23/24's test (mt_metrics_eval.stats.PairwisePermutationSigDiff, tasks.Task(perm_test='pairs')):
    # epsilons calibrated once on the real scores, then each pair's two verdicts swapped with p 1/2.
    # One lp, sources s1-s3, systems A, B, C; pairs (A,B), (A,C), (B,C) of each source.
    #   s1 h 3,2,1  cand .9,.5,.1 (3 concordant)        base .1,.5,.9 (3 discordant at any epsilon < .4)
    #   s2 h 1,1,2  cand .3,.3,.8 (tie at 0; 2 conc.)   base .5,.4,.9 (A,B tie for eps >= .1; 2 conc.)
    #   s3 h 2,1,1  cand .6,.2,.25 (2 conc.; B,C a tie for eps >= .05)   base .7,.3,.3 (2 conc.; B,C tie)
    # candidate: eps 0 gives (3/3 + 3/3 + 2/3) / 3 = 8/9, eps .05 gives 1: epsilon .05, acc_eq 1.
    # baseline: eps 0 gives (0 + 2/3 + 1) / 3 = 5/9, eps .1 gives 2/3: epsilon .1, acc_eq 2/3.
    # delta 1/3. The verdicts differ only on s1's 3 pairs (candidate right, baseline wrong), each
    # weighing 1/9: delta* = (+-1 +-1 +-1) / 9 is >= 1/3 exactly when none of them is swapped
    # (probability 1/8) and |delta*| >= 1/3 when all three are swapped alike (1/4).
    h = [3.0, 2, 1, 1, 1, 2, 2, 1, 1]
    src = ["s1"] * 3 + ["s2"] * 3 + ["s3"] * 3
    system = ["A", "B", "C"] * 3
    cand = segments([0.9, 0.5, 0.1, 0.3, 0.3, 0.8, 0.6, 0.2, 0.25], h, src, system=system)
    base = segments([0.1, 0.5, 0.9, 0.5, 0.4, 0.9, 0.7, 0.3, 0.3], h, src, system=system)
    assert calibrated_acc_eq(cand.score, cand.human, np.array(src)) == (1.0, pytest.approx(0.05, abs=1e-15))
    assert calibrated_acc_eq(base.score, base.human, np.array(src)) == (
        pytest.approx(2 / 3, abs=1e-15),
        pytest.approx(0.1, abs=1e-15),
    )
    options = QualityOptions(method="acc_eq", level="segment", test="permutation", perm_test="pairs")
    options.check()
    perm = options.permutation(cand, base, 1000, 0)
    assert perm.delta == pytest.approx(1 / 3, abs=1e-15) and perm.n_swapped == 9
    # the draws: rng.random((1000, 9)) < 0.5 is a swap, pairs in source_pairs order (s1's first)
    i, j = source_pairs(np.array(src))
    s1 = [k for k in range(9) if src[i[k]] == "s1"]
    swapped = np.random.default_rng(0).random((1000, 9))[:, s1] < 0.5
    none_swapped = int(np.count_nonzero(~swapped.any(axis=1)))
    alike = none_swapped + int(np.count_nonzero(swapped.all(axis=1)))
    assert perm.p_candidate_better == none_swapped / 1000 and abs(perm.p_candidate_better - 1 / 8) < 0.03
    assert perm.p_value == (1 + alike) / 1001 and abs(perm.p_value - 1 / 4) < 0.04
    assert options.permuted(perm) == "9 pairs of translations swapped, epsilons fixed"
    assert options.test_label == "paired permutation of translation pairs (WMT23/24, epsilons fixed)"
    scores = QualityOptions(method="acc_eq", level="segment", test="permutation")
    assert scores.permuted(scores.permutation(cand, base, 10, 0)) == (
        "9 segment scores swapped, epsilons re-calibrated per draw"
    )
    with pytest.raises(UserError, match="needs --correlation acc_eq and --test permutation"):
        QualityOptions(method="pearson", test="permutation", perm_test="pairs").check()


# ----------------------------------------------------------------------------- groups left out, counted


def test_compare_counts_the_groups_left_out_of_the_level(tmp_path: Path) -> None:
    # Source level, systems A, B, C (B only for u3):
    #   u1 h 1,2,3   cand .1,.3,.2   base .2,.1,.3   both have a correlation
    #   u2 h 2,2,2   (human constant: no figure for either)
    #   u3 h 1,2     (2 translations, fewer than 3: no figure for either)
    #   u4 h 1,3,2   cand .5,.5,.5 (constant: no figure)   base .1,.3,.2
    # candidate: u2, u3, u4 left out (3 of 4); baseline: u2, u3 (2 of 4).
    from nlgbench.runs.importscores import import_scores

    keys = [("u1", s) for s in "ABC"] + [("u2", s) for s in "ABC"] + [("u3", s) for s in "AB"]
    keys += [("u4", s) for s in "ABC"]
    human = [1, 2, 3, 2, 2, 2, 1, 2, 1, 3, 2]
    cand = [0.1, 0.3, 0.2, 0.4, 0.5, 0.6, 0.1, 0.2, 0.5, 0.5, 0.5]
    base = [0.2, 0.1, 0.3, 0.6, 0.5, 0.4, 0.2, 0.1, 0.1, 0.3, 0.2]
    rows = [
        {"lp": "aa-en", "seg_id": u, "system": s, "reference": f"r {u}", "hypothesis": f"h {u} {s}", "human": h}
        for (u, s), h in zip(keys, human, strict=True)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for encoder, scores in (("cand", cand), ("base", base)):
        csv = tmp_path / f"{encoder}.csv"
        lines = [f"aa-en,{u},{s},{x!r}" for (u, s), x in zip(keys, scores, strict=True)]
        csv.write_text("lp,seg_id,system,score\n" + "\n".join(lines) + "\n", encoding="utf-8")
        import_scores(csv, str(data), "mine", encoder, tmp_path / "run")
    assert nlgbench.compare(tmp_path / "run", "cand", "base", level="source", resamples=10)["rows"][0]["n_groups"] == 4
    run = RunData.open(tmp_path / "run")
    result = compare(run, "cand", "base", options=QualityOptions(level="source"), n_resamples=10)
    (row,) = result["rows"]
    assert (row["n_groups"], row["n_groups_left_out_candidate"], row["n_groups_left_out_baseline"]) == (4, 3, 2)
    line = "candidate 3, baseline 2 of 4 sources left out (no figure: fewer than 3 points, a constant side or no pairs)"
    assert row["groups_left_out"] == line
    assert f"left out, mine / data: {line}" in render(result).splitlines()
    assert left_out_count("source", (2, 4), (2, 4)).startswith("2 of 4 sources left out")
    assert left_out_count("segment", (0, 6), (0, 6)) == ""
    everything = compare(run, "cand", "base", n_resamples=10)  # global level: one group
    assert everything["rows"][0]["groups_left_out"] == "" and "left out," not in render(everything)


def test_compare_counts_and_words_what_is_left_out_by_the_convention_in_force(tmp_path: Path) -> None:
    # One lp, systems A, B, C translating sources u1 and u2:
    #   u1 h 50, 25, 40   cand .3, .1, .2   base .1, .3, .2   (pairs differ by 25, 10 and 15)
    #   u2 h 10, 10, 10   cand .4, .5, .6   base .6, .5, .4   (human constant)
    # darr_kendall, threshold 25, segment level: nlgbench counts pairs differing by MORE than 25: none,
    # n/a; KendallLike(thresh=25) counts (A, B) of u1, |diff| = 25: candidate 1.0, baseline -1.0, and
    # no language pair is left out. At threshold 30 no pair counts under either rule.
    # kendall_like_all_pairs, threshold 0, source level: nlgbench leaves u2 out (a constant side);
    # the reference counts its 3 pairs (human ties: Discordant).
    from nlgbench.runs.importscores import import_scores

    keys = [(u, s) for u in ("u1", "u2") for s in "ABC"]
    human = [50, 25, 40, 10, 10, 10]
    scores = {"cand": [0.3, 0.1, 0.2, 0.4, 0.5, 0.6], "base": [0.1, 0.3, 0.2, 0.6, 0.5, 0.4]}
    rows = [
        {"lp": "aa-en", "seg_id": u, "system": s, "reference": f"r {u}", "hypothesis": f"h {u} {s}", "human": h}
        for (u, s), h in zip(keys, human, strict=True)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for encoder, x in scores.items():
        csv = tmp_path / f"{encoder}.csv"
        lines = [f"aa-en,{u},{s},{v!r}" for (u, s), v in zip(keys, x, strict=True)]
        csv.write_text("lp,seg_id,system,score\n" + "\n".join(lines) + "\n", encoding="utf-8")
        import_scores(csv, str(data), "mine", encoder, tmp_path / "run")
    run = RunData.open(tmp_path / "run")

    def one_row(**options: object) -> tuple[dict[str, object], str]:
        result = compare(run, "cand", "base", options=QualityOptions(**options), n_resamples=10)  # type: ignore[arg-type]
        return result["rows"][0], render(result)

    darr = {"method": "darr_kendall", "level": "segment", "threshold": 25}
    row, text = one_row(**darr)
    assert math.isnan(row["quality_candidate"]) and row["n_groups_left_out_candidate"] == 1
    assert "no pair of translations of one source differs by more than 25 in human score" in text
    row, text = one_row(**darr, convention=REF)
    assert (row["quality_candidate"], row["quality_baseline"]) == (1.0, -1.0)
    assert (row["n_groups_left_out_candidate"], row["n_groups_left_out_baseline"], row["groups_left_out"]) == (0, 0, "")
    assert "left out" not in text and "quality n/a" not in text
    row, text = one_row(**{**darr, "threshold": 30}, convention=REF)
    assert row["groups_left_out"] == (
        "1 of 1 language pairs left out (no figure: fewer than 3 points or no pair counted)"
    )
    assert "candidate and baseline quality n/a: no pair of translations of one source differs by at least 30" in text
    assert "more than" not in text
    tau = {"method": "kendall_like_all_pairs", "level": "source"}
    row, _ = one_row(**tau)
    assert (row["n_groups"], row["n_groups_left_out_candidate"], row["quality_candidate"]) == (2, 1, 1.0)
    row, text = one_row(**tau, convention=REF)
    # pooled: u1's 3 pairs concordant for the candidate, u2's 3 discordant: (3 - 3) / 6
    assert (row["n_groups"], row["n_groups_left_out_candidate"], row["quality_candidate"]) == (2, 0, 0.0)
    assert "left out" not in text


def test_a_small_group_is_named_as_left_out_only_where_it_has_no_figure() -> None:
    # Language pair bb-en has 2 segments, two translations of one source (h 2, 1; x .2, .1): too few
    # for Pearson (no figure, left out), but DARR Kendall pairs them (1 concordant pair: 1.0), so it
    # is in that mean and not named as left out, under either convention.
    seg = segments(
        [0.1, 0.2, 0.3, 0.2, 0.1], [1.0, 3, 2, 2, 1], ["u1", "u2", "u3", "v1", "v1"], lp=["aa-en"] * 3 + ["bb-en"] * 2
    )
    assert QualityOptions(level="segment").too_small(seg) == ["bb-en"]
    for convention in ("nlgbench", REF):
        darr = QualityOptions("darr_kendall", "segment", convention=convention)
        assert darr.too_small(seg) == [] and darr.value(seg) == 1.0
