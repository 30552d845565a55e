"""Tests for a cell's correlations (nlgbench.statistics.summary.correlate, what result.json and results.csv hold):
values recomputed with scipy, hand-made system level, NaN, the 3-point minimum, bootstrap and
input errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from nlgbench.statistics.correlation import MIN_POINTS
from nlgbench.statistics.summary import correlate

pytestmark = pytest.mark.unit


def _sample(seed: int = 1) -> tuple[list[float], list[float], list[str]]:
    """Two language pairs of correlated random scores (40 and 25 segments)."""
    rng = np.random.default_rng(seed)
    human = rng.normal(size=65)
    scores = human + rng.normal(scale=0.8, size=65)
    lps = ["de-en"] * 40 + ["fi-en"] * 25
    return scores.tolist(), human.tolist(), lps


def test_segment_level_matches_scipy() -> None:
    """Per-lp, mean-over-lps and pooled values equal scipy's, with the right n."""
    scores, human, lps = _sample()
    res = correlate(scores, human, lps)
    s, h = np.asarray(scores), np.asarray(human)
    expected = {}
    for lp, sl in (("de-en", slice(0, 40)), ("fi-en", slice(40, 65))):
        expected[lp] = (stats.pearsonr(s[sl], h[sl])[0], stats.kendalltau(s[sl], h[sl])[0])
        assert res["per_lp"][lp]["pearson"] == pytest.approx(expected[lp][0])
        assert res["per_lp"][lp]["kendall"] == pytest.approx(expected[lp][1])
    assert res["per_lp"]["de-en"]["n"] == 40
    assert res["per_lp"]["fi-en"]["n"] == 25
    assert res["pearson"] == pytest.approx((expected["de-en"][0] + expected["fi-en"][0]) / 2)
    assert res["kendall"] == pytest.approx((expected["de-en"][1] + expected["fi-en"][1]) / 2)
    assert res["pearson_pooled"] == pytest.approx(stats.pearsonr(s, h)[0])
    assert res["kendall_pooled"] == pytest.approx(stats.kendalltau(s, h)[0])
    assert res["n"] == 65 and res["n_lps"] == 2
    assert res["system"] is None and res["bootstrap"] is None and res["sign"] == 1


def test_plain_floats_and_json() -> None:
    """Every number is a plain Python float/int so the dict serialises as JSON."""
    scores, human, lps = _sample()
    res = correlate(scores, human, lps, bootstrap=20)
    assert type(res["pearson"]) is float and type(res["kendall_pooled"]) is float
    assert type(res["n"]) is int and type(res["per_lp"]["de-en"]["n"]) is int
    assert all(type(v) is float for v in res["bootstrap"]["pearson_pooled_ci"])
    json.dumps(res)


def test_ties_use_tau_b() -> None:
    """Kendall is tau-b, which handles ties in either variable."""
    scores = [1.0, 1.0, 2.0, 3.0, 3.0, 4.0]
    human = [1.0, 2.0, 2.0, 2.0, 5.0, 5.0]
    res = correlate(scores, human, ["x"] * 6)
    assert res["kendall_pooled"] == pytest.approx(stats.kendalltau(scores, human, variant="b")[0])


def test_lower_is_better_flips_sign() -> None:
    """A distance metric is negated: the correlations flip sign and sign is -1."""
    scores, human, lps = _sample()
    up = correlate(scores, human, lps)
    down = correlate(scores, human, lps, higher_is_better=False)
    assert down["sign"] == -1
    for key in ("pearson", "kendall", "pearson_pooled", "kendall_pooled"):
        assert down[key] == pytest.approx(-up[key])
    distances = [-v for v in scores]
    assert correlate(distances, human, lps, higher_is_better=False)["pearson"] == pytest.approx(up["pearson"])


def test_system_level_by_hand() -> None:
    """Three systems in one lp: correlate per-system means, computed here by hand."""
    systems = ["A", "A", "B", "B", "C", "C"]
    scores = [0.1, 0.3, 0.5, 0.7, 0.2, 0.2]  # means A=0.2, B=0.6, C=0.2
    human = [1.0, 3.0, 4.0, 6.0, 2.0, 4.0]  # means A=2.0, B=5.0, C=3.0
    res = correlate(scores, human, ["de-en"] * 6, systems)
    sys_x = np.array([0.2, 0.6, 0.2])
    sys_h = np.array([2.0, 5.0, 3.0])
    # Pearson by hand: deviations x (-2/15, 4/15, -2/15), h (-4/3, 5/3, -1/3).
    dx = sys_x - sys_x.mean()
    dh = sys_h - sys_h.mean()
    r = float((dx * dh).sum() / math.sqrt((dx**2).sum() * (dh**2).sum()))
    assert r == pytest.approx(0.9449111825230679)
    # tau-b by hand: pairs (A,B) concordant, (B,C) concordant, (A,C) tied in x only.
    # n0 = 3, n1 (ties in x) = 1, n2 = 0: tau = (2 - 0) / sqrt(2 * 3) = 0.8165.
    tau = 2 / math.sqrt(2 * 3)
    lp = res["system"]["per_lp"]["de-en"]
    assert lp["n_systems"] == 3
    assert lp["pearson"] == pytest.approx(r)
    assert lp["kendall"] == pytest.approx(tau)
    assert res["system"]["pearson"] == pytest.approx(r)
    assert res["system"]["kendall"] == pytest.approx(tau)


def test_system_level_mean_over_lps_and_empty_names() -> None:
    """Mean over lps of system-level values; lps with < 3 systems give NaN and are skipped."""
    systems = ["A", "B", "C", "A", "B", "C", "A", "A"]
    scores = [1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 0.5, 0.7]
    human = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 0.1, 0.2]
    lps = ["a"] * 3 + ["b"] * 3 + ["c"] * 2
    res = correlate(scores, human, lps, systems)
    per = res["system"]["per_lp"]
    assert per["a"]["pearson"] == pytest.approx(1.0)
    assert per["b"]["pearson"] == pytest.approx(-1.0)
    assert per["c"]["n_systems"] == 1 and math.isnan(per["c"]["pearson"])
    assert res["system"]["pearson"] == pytest.approx(0.0)
    assert correlate(scores, human, lps, [""] * 8)["system"] is None


def test_constant_lp_gives_nan_and_mean_skips_it() -> None:
    """A constant lp has NaN correlations; the mean over lps uses the other lp only."""
    scores = [1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0]
    human = [1.0, 3.0, 2.0, 5.0, 1.0, 2.0, 3.0]
    lps = ["ok"] * 4 + ["flat"] * 3
    res = correlate(scores, human, lps)
    assert math.isnan(res["per_lp"]["flat"]["pearson"])
    assert math.isnan(res["per_lp"]["flat"]["kendall"])
    assert res["per_lp"]["flat"]["n"] == 3
    assert res["pearson"] == pytest.approx(stats.pearsonr(scores[:4], human[:4])[0])
    assert res["kendall"] == pytest.approx(stats.kendalltau(scores[:4], human[:4])[0])
    assert res["n_lps"] == 2


def test_all_nan_and_single_point() -> None:
    """Fewer than 3 points everywhere: every correlation and mean is NaN."""
    for scores, human in (([1.0], [2.0]), ([1.0, 2.0], [2.0, 1.0])):
        res = correlate(scores, human, ["x"] * len(scores))
        for key in ("pearson", "kendall", "pearson_pooled", "kendall_pooled"):
            assert math.isnan(res[key])
        assert res["n"] == len(scores) and res["n_lps"] == 1 and res["n_lps_too_small"] == 1


def test_groups_below_three_points_are_left_out_and_counted() -> None:
    """A 2-segment lp (whose Pearson would be -1 whatever the metric) and a 1-segment lp are NaN,
    left out of the mean over lps and counted; pooled uses every segment. The same at system level
    for an lp with 2 systems."""
    assert MIN_POINTS == 3
    scores = [1.0, 2.0, 3.0, 4.0, 5.0, 0.3, 0.1, 7.0]
    human = [1.0, 3.0, 2.0, 5.0, 4.0, 0.2, 0.9, 1.0]
    lps = ["ok"] * 5 + ["two"] * 2 + ["one"]
    systems = ["A", "B", "C", "A", "B", "A", "B", "A"]
    res = correlate(scores, human, lps, systems)
    assert math.isnan(res["per_lp"]["two"]["pearson"]) and math.isnan(res["per_lp"]["one"]["kendall"])
    assert res["per_lp"]["two"]["n"] == 2 and res["per_lp"]["one"]["n"] == 1
    assert res["pearson"] == pytest.approx(stats.pearsonr(scores[:5], human[:5])[0])
    assert res["kendall"] == pytest.approx(stats.kendalltau(scores[:5], human[:5])[0])
    assert res["n_lps"] == 3 and res["n_lps_too_small"] == 2 and res["min_points"] == 3
    assert res["pearson_pooled"] == pytest.approx(stats.pearsonr(scores, human)[0])
    system = res["system"]
    assert system["per_lp"]["ok"]["n_systems"] == 3 and system["per_lp"]["two"]["n_systems"] == 2
    assert math.isnan(system["per_lp"]["two"]["pearson"]) and system["n_lps_too_small"] == 2
    means_x, means_h = [2.5, 3.5, 3.0], [3.0, 3.5, 2.0]  # A, B, C of lp "ok"
    assert system["pearson"] == pytest.approx(stats.pearsonr(means_x, means_h)[0])


def test_bootstrap_reproducible_and_contains_estimate() -> None:
    """Same seed gives the same CIs; the CI contains the pooled point estimate."""
    scores, human, lps = _sample()
    a = correlate(scores, human, lps, bootstrap=200, seed=7)
    b = correlate(scores, human, lps, bootstrap=200, seed=7)
    c = correlate(scores, human, lps, bootstrap=200, seed=8)
    assert a["bootstrap"] == b["bootstrap"]
    assert a["bootstrap"]["pearson_pooled_ci"] != c["bootstrap"]["pearson_pooled_ci"]
    assert a["bootstrap"]["n_resamples"] == 200 and a["bootstrap"]["seed"] == 7
    lo, hi = a["bootstrap"]["pearson_pooled_ci"]
    assert lo < a["pearson_pooled"] < hi
    lo, hi = a["bootstrap"]["kendall_pooled_ci"]
    assert lo < a["kendall_pooled"] < hi


def test_value_errors() -> None:
    """Mismatched lengths and non-finite values raise with count and first index."""
    with pytest.raises(ValueError, match="length mismatch"):
        correlate([1.0, 2.0], [1.0], ["x", "x"])
    with pytest.raises(ValueError, match="length mismatch"):
        correlate([1.0, 2.0], [1.0, 2.0], ["x"])
    with pytest.raises(ValueError, match="system"):
        correlate([1.0, 2.0], [1.0, 2.0], ["x", "x"], ["A"])
    with pytest.raises(ValueError, match=r"2 non-finite metric score.*index 1"):
        correlate([1.0, float("nan"), 3.0, float("inf")], [1.0] * 4, ["x"] * 4)
    with pytest.raises(ValueError, match=r"1 non-finite human.*index 0"):
        correlate([1.0, 2.0], [float("nan"), 1.0], ["x", "x"])
    with pytest.raises(ValueError, match="bootstrap"):
        correlate([1.0, 2.0], [1.0, 2.0], ["x", "x"], bootstrap=-1)
