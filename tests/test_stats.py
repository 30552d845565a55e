"""Statistics of report/compare, checked against published worked examples, SciPy, closed forms
and independent hand-written implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from nlgbench.statistics.bootstrap import bootstrap_ci
from nlgbench.statistics.correlation import correlation, kendall_like, undefined_reason
from nlgbench.statistics.levels import Segments, quality, quality_note, system_means, too_small_groups
from nlgbench.statistics.significance import paired_bootstrap, williams_test
from nlgbench.statistics.summary import correlate

pytestmark = pytest.mark.unit


def segments(score, human, lp=None, system=None) -> Segments:
    n = len(score)
    return Segments(
        np.asarray(score, float),
        np.asarray(human, float),
        np.asarray(lp if lp is not None else ["xx-en"] * n),
        np.asarray(system if system is not None else [""] * n),
        np.arange(n),
    )


def test_williams_matches_steigers_worked_example() -> None:
    # Steiger (1980), Psychological Bulletin 87(2), the example psych::r.test documents: n = 103,
    # r12 = .5, r13 = .4, r23 = .1 gives Williams' t = 0.89 with df = 100, two-tailed p = 0.37.
    t, p = williams_test(0.5, 0.4, 0.1, 103)
    assert round(t, 2) == 0.89
    assert round(p, 2) == 0.37
    t2, p2 = williams_test(0.4, 0.5, 0.1, 103)  # antisymmetric in the two correlations
    assert t2 == pytest.approx(-t) and p2 == pytest.approx(p)
    assert williams_test(0.5, 0.5, 0.3, 50)[0] == 0.0


def test_williams_on_equal_or_affinely_related_scores() -> None:
    # Scores compared with themselves (or a positive affine map of themselves): r23 = 1 and
    # r12 = r13, where the formula is 0 * sqrt(x / 0) and rounding made |R| < 0 (math domain
    # error) or the denominator 0. No difference was observed: t = 0, p = 1, never an exception.
    rng = np.random.default_rng(0)
    for i in range(400):
        n = int(rng.integers(4, 40))
        x, h = rng.normal(size=n), rng.normal(size=n)
        y = x if i % 2 else x * rng.uniform(0.1, 10) + rng.normal()
        t, p = williams_test(
            correlation("pearson", x, h), correlation("pearson", y, h), correlation("pearson", x, y), n
        )
        assert (t, p) == (0.0, 1.0)
    assert williams_test(0.3, 0.3, 1.0 + 2e-16, 20) == (0.0, 1.0)  # r23 rounded above 1
    assert all(math.isnan(v) for v in williams_test(math.nan, 0.3, 0.5, 20))  # an undefined correlation
    assert all(math.isnan(v) for v in williams_test(0.5, 0.4, 0.1, 3))  # no degrees of freedom


def test_undefined_correlations_say_why() -> None:
    h = np.array([1.0, 2.0, 3.0, 4.0])
    assert undefined_reason(np.array([1.0, 2.0]), h[:2]) == "fewer than 3 segments"
    assert undefined_reason(np.array([1.0, 3.0, 2.0, 5.0]), np.full(4, 2.0)) == "human scores constant"
    assert undefined_reason(np.full(4, 0.5), h, "systems") == "metric scores constant"
    assert undefined_reason(np.full(4, 0.5), np.full(4, 2.0)) == "human and metric scores constant"
    assert undefined_reason(np.array([1.0, 3.0, 2.0, 5.0]), h) is None
    seg = segments([0.1, 0.4, 0.3, 0.2, 0.5, 0.9, 0.7], [3, 3, 3, 3, 1, 2, 3], lp=["de-en"] * 4 + ["fr-en"] * 3)
    assert quality_note(seg, "pearson", "lp_mean") == "human scores constant in de-en"
    assert quality_note(seg, "kendall", "pooled") == ""
    assert quality_note(segments([0.1, 0.2], [1, 2]), "spearman", "pooled") == "fewer than 3 segments"
    # kendall_like is undefined when no pair's human scores differ by more than the threshold
    assert (
        quality_note(seg.take(np.arange(4, 7)), "kendall_like", "pooled", threshold=5)
        == "kendall_like_all_pairs undefined"
    )
    c = correlate(seg.score, seg.human, seg.lp.tolist())
    assert c["note"] == "human scores constant in de-en" and math.isfinite(c["pearson"])
    assert correlate([0.1, 0.3, 0.2], [1, 2, 3], ["x"] * 3)["note"] is None
    c = correlate([0.5] * 4, [1, 2, 3, 4], ["a", "a", "b", "b"], ["s1", "s2", "s1", "s1"])
    assert c["note"] == (
        "fewer than 3 segments in a, b; pooled: metric scores constant; system level: fewer than 3 systems in a, b"
    )
    # every system once per language pair: the system level would repeat the segment level
    c = correlate([0.5] * 4, [1, 2, 3, 4], ["a", "a", "b", "b"], ["s1", "s2", "s1", "s2"])
    assert c["system"] is None and c["note"] == (
        "fewer than 3 segments in a, b; pooled: metric scores constant; system level: every system has one segment "
        "per language pair, so the system level would equal the segment level"
    )


def test_williams_test_holds_its_size_under_the_null() -> None:
    # Independent of the formula: with two metrics equally correlated with the humans in the
    # population, p < 0.05 must happen about 5% of the time.
    rng = np.random.default_rng(1)
    n, trials, rejected = 100, 3000, 0
    cov = np.array([[1, 0.5, 0.5], [0.5, 1, 0.4], [0.5, 0.4, 1]])
    for _ in range(trials):
        h, a, b = rng.multivariate_normal(np.zeros(3), cov, size=n).T
        r = np.corrcoef([h, a, b])
        rejected += williams_test(r[0, 1], r[0, 2], r[1, 2], n)[1] < 0.05
    assert 0.035 < rejected / trials < 0.065  # binomial sd 0.004


def test_kendall_like_on_hand_counted_pairs() -> None:
    h = np.array([1.0, 3.0, 2.0, 4.0])
    # pairs (i<j): 5 concordant, 1 discordant (items 2 and 3 swapped)
    assert kendall_like(np.array([1.0, 2.0, 3.0, 4.0]), h) == pytest.approx((5 - 1) / 6)
    # a metric tie counts as discordant (WMT DARR): pairs 1-2 tied -> 4 concordant, 2 discordant
    assert kendall_like(np.array([1.0, 1.0, 3.0, 4.0]), h) == pytest.approx((4 - 2) / 6)
    # threshold 1.5 keeps only pairs 1-2, 1-4, 3-4 (|dh| = 2, 3, 2), all concordant
    assert kendall_like(np.array([1.0, 2.0, 3.0, 4.0]), h, threshold=1.5) == 1.0
    # no ties anywhere: equals Kendall's tau (SciPy)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=40), rng.normal(size=40)
    assert kendall_like(x, y) == pytest.approx(stats.kendalltau(x, y)[0], abs=1e-12)


def test_correlation_methods_and_levels_agree_with_scipy() -> None:
    rng = np.random.default_rng(1)
    h = rng.normal(size=30)
    x = h + rng.normal(size=30)
    lp = np.array(["a"] * 10 + ["b"] * 20)
    seg = segments(x, h, lp)
    assert quality(seg, "pearson", "pooled") == pytest.approx(stats.pearsonr(x, h)[0])
    assert quality(seg, "spearman", "pooled") == pytest.approx(stats.spearmanr(x, h)[0])
    assert quality(seg, "kendall", "pooled") == pytest.approx(stats.kendalltau(x, h)[0])
    want = np.mean([stats.kendalltau(x[lp == k], h[lp == k])[0] for k in ("a", "b")])
    assert quality(seg, "kendall", "lp_mean") == pytest.approx(want)
    assert math.isnan(correlation("pearson", np.ones(5), h[:5]))


def test_system_level_means_per_system() -> None:
    score = [1.0, 3.0, 2.0, 6.0, 5.0, 5.0]
    human = [0.0, 2.0, 1.0, 1.0, 4.0, 8.0]
    system = ["A", "A", "B", "B", "C", "C"]
    x, h, lps = system_means(segments(score, human, system=system))
    assert x.tolist() == [2.0, 4.0, 5.0] and h.tolist() == [1.0, 1.0, 6.0] and set(lps) == {"xx-en"}
    assert quality(segments(score, human, system=system), "pearson", "system") == pytest.approx(
        stats.pearsonr([2.0, 4.0, 5.0], [1.0, 1.0, 6.0])[0]
    )


def test_bootstrap_interval_matches_fishers_closed_form() -> None:
    # For bivariate normal data the percentile bootstrap of Pearson's r approaches Fisher's
    # z interval tanh(atanh(r) +- 1.96 / sqrt(n - 3)).
    rng = np.random.default_rng(3)
    n = 1500
    h, e = rng.normal(size=(2, n))
    x = 0.6 * h + 0.8 * e
    seg = segments(x, h)
    lo, hi = bootstrap_ci(seg, lambda s: quality(s, "pearson", "pooled"), n_resamples=2000, seed=0)
    r = stats.pearsonr(x, h)[0]
    z = math.atanh(r)
    assert lo == pytest.approx(math.tanh(z - 1.96 / math.sqrt(n - 3)), abs=0.01)
    assert hi == pytest.approx(math.tanh(z + 1.96 / math.sqrt(n - 3)), abs=0.01)


def test_paired_bootstrap_agrees_with_a_hand_written_resampler() -> None:
    rng = np.random.default_rng(5)
    n = 400
    h = rng.normal(size=n)
    a = h + rng.normal(scale=1.0, size=n)
    b = h + rng.normal(scale=1.3, size=n)
    sa, sb = segments(a, h), segments(b, h)

    def pearson(s: Segments) -> float:
        return quality(s, "pearson", "pooled")

    got = paired_bootstrap(sa, sb, pearson, n_resamples=2000, seed=11)
    # a second implementation, with its own random stream
    own = np.random.default_rng(99)
    deltas = []
    for _ in range(4000):
        idx = own.integers(0, n, n)
        deltas.append(np.corrcoef(a[idx], h[idx])[0, 1] - np.corrcoef(b[idx], h[idx])[0, 1])
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    assert got.delta == pytest.approx(stats.pearsonr(a, h)[0] - stats.pearsonr(b, h)[0], abs=1e-12)
    assert got.ci_low == pytest.approx(lo, abs=0.015) and got.ci_high == pytest.approx(hi, abs=0.015)
    p_own = 2 * min(np.mean(np.array(deltas) <= 0), np.mean(np.array(deltas) >= 0))
    assert got.p_value == pytest.approx(p_own, abs=0.02)
    # fixed seed: the same numbers again
    assert paired_bootstrap(sa, sb, pearson, n_resamples=2000, seed=11) == got
    # a metric against itself: no difference, p = 1
    same = paired_bootstrap(sa, sa, pearson, n_resamples=200, seed=0)
    assert same.delta == 0 and same.ci_low == 0 and same.ci_high == 0 and same.p_value == 1.0


def test_unknown_method_or_level_is_named_whatever_the_size() -> None:
    seg = segments([1.0, 2.0], [2.0, 1.0])  # too small to correlate: the name is still checked
    with pytest.raises(ValueError, match="unknown correlation method 'pearsn'"):
        quality(seg, "pearsn", "pooled")
    with pytest.raises(ValueError, match="unknown correlation level 'lp'"):
        quality(seg, "pearson", "lp")


def test_too_small_lps_per_level() -> None:
    seg = segments(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [1.0, 3.0, 2.0, 4.0, 6.0, 5.0],
        lp=["a"] * 4 + ["b"] * 2,
        system=["A", "B", "C", "A", "A", "B"],
    )
    assert too_small_groups(seg, "pooled") == []
    assert too_small_groups(seg, "lp_mean") == ["b"]
    assert too_small_groups(seg, "system") == ["b"]  # b has 2 systems, a has 3
    assert quality(seg, "pearson", "lp_mean") == pytest.approx(stats.pearsonr([1, 2, 3, 4], [1, 3, 2, 4])[0])
