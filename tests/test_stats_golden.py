"""nlgbench.statistics reproduces the two engines it replaced (the worker's nlgbench.correlation and the
report's nlgbench.statistics.stats, commit 7052c2b) on seeded random data where every group has at least
3 points: tests/stats_golden.json holds their outputs on tests/stats_cases.py's inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlgbench.statistics.bootstrap import bootstrap_ci, bootstrap_distribution
from nlgbench.statistics.correlation import correlation
from nlgbench.statistics.levels import LEVEL_ALIASES, Segments, quality
from nlgbench.statistics.significance import ZERO_DELTA, paired_bootstrap, williams_test
from nlgbench.statistics.summary import correlate
from stats_cases import N_CASES, random_case

pytestmark = pytest.mark.unit

GOLDEN = json.loads((Path(__file__).parent / "stats_golden.json").read_text(encoding="utf-8"))["cases"]
# The old engines' methods and levels, under the names the golden file uses (later renamed
# pooled -> global and lp_mean -> segment, kept as aliases; kendall_c and the item level are new).
OLD_METHODS = ("pearson", "kendall", "spearman", "kendall_like")
OLD_LEVELS = ("pooled", "lp_mean", "system")
# Keys added since: counts, notes, Spearman, the item level and the long table,
# the source level (None without seg_ids)
NEW_KEYS = {
    "n_lps",
    "n_lps_too_small",
    "min_points",
    "note",
    "spearman",
    "spearman_pooled",
    "item",
    "figures",
    "source",
}


def same(got: Any, want: Any, path: str = "") -> None:
    """Equal structure, equal ints and strings, floats equal to 1e-12 (NaN where NaN)."""
    if isinstance(want, dict):
        extra = set(got) - set(want)
        assert extra <= NEW_KEYS, f"{path}: unexpected keys {extra}"
        for key in want:
            same(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-12, abs=1e-12), (
            f"{path}: {got} != {want}"
        )
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def test_the_golden_file_covers_every_case() -> None:
    assert [c["seed"] for c in GOLDEN] == list(range(N_CASES))
    assert any(c["correlate"]["system"] is not None for c in GOLDEN)  # system level exercised
    assert any(c["correlate"]["sign"] == -1 for c in GOLDEN)  # a lower-is-better metric too


@pytest.mark.parametrize("seed", range(N_CASES))
def test_cell_correlations_equal_the_old_worker_engine(seed: int) -> None:
    case, golden = random_case(seed), GOLDEN[seed]
    got = correlate(
        case["scores"],
        case["human"],
        case["lps"],
        case["systems"],
        higher_is_better=case["higher_is_better"],
        bootstrap=200,
        seed=seed,
    )
    # The pooled intervals resample segments stratified by language pair (each lp keeps its
    # size), no longer all segments at once; the old engine's intervals are not compared, the new ones
    # are recomputed below by an independent stratified loop.
    same(
        {k: v for k, v in got.items() if k != "bootstrap"},
        {k: v for k, v in golden["correlate"].items() if k != "bootstrap"},
    )
    assert got["n_lps_too_small"] == 0  # every group of these cases has >= 3 points
    sign = 1.0 if case["higher_is_better"] else -1.0
    x, h, lps = sign * np.asarray(case["scores"], float), np.asarray(case["human"], float), np.asarray(case["lps"])
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(200):
        idx = np.concatenate(
            [
                pos[rng.integers(0, len(pos), len(pos))]
                for pos in (np.flatnonzero(lps == lp) for lp in dict.fromkeys(case["lps"]))
            ]
        )
        draws.append(correlation("pearson", x[idx], h[idx]))
    assert got["bootstrap"]["pearson_pooled_ci"] == pytest.approx(list(np.percentile(draws, [2.5, 97.5])), abs=1e-12)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_levels_tests_and_intervals_equal_the_old_report_engine(seed: int) -> None:
    case, golden = random_case(seed), GOLDEN[seed]
    sign = 1.0 if case["higher_is_better"] else -1.0

    def seg(scores: list[float]) -> Segments:
        return Segments(
            sign * np.asarray(scores, float),
            np.asarray(case["human"], float),
            np.asarray(case["lps"]),
            np.asarray(case["systems"]),
            np.arange(len(scores)),
        )

    cand, base = seg(case["scores"]), seg(case["baseline"])
    got = {f"{m}/{lv}": quality(cand, m, lv) for m in OLD_METHODS for lv in OLD_LEVELS}
    got.update({f"kendall_like@0.5/{lv}": quality(cand, "kendall_like", lv, 0.5) for lv in OLD_LEVELS})
    same(got, golden["quality"], "quality")
    renamed = {f"{m}/{old}": quality(cand, m, new) for m in OLD_METHODS for old, new in LEVEL_ALIASES.items()}
    same(renamed, {k: golden["quality"][k] for k in renamed}, "quality under the new level names")
    same(
        list(bootstrap_ci(cand, lambda s: quality(s, "pearson", "pooled"), n_resamples=200, seed=seed)),
        golden["bootstrap_ci"],
        "bootstrap_ci",
    )
    for key, want in golden["paired"].items():
        method, level = key.split("/")

        def stat(s: Segments, method: str = method, level: str = level) -> float:
            return quality(s, method, level)

        b = paired_bootstrap(cand, base, stat, n_resamples=200, seed=seed)
        same([b.delta, b.ci_low, b.ci_high], want[:3], key)
        # A resample whose difference is 0 up to rounding (rank statistics of a few systems tie
        # exactly) counts on both sides now; before, the order of a sum decided its side.
        deltas = bootstrap_distribution(len(cand), lambda idx: stat(cand.take(idx)) - stat(base.take(idx)), 200, seed)
        zeros = int(np.sum(np.abs(deltas) <= ZERO_DELTA))
        assert math.isnan(b.p_value) == math.isnan(want[3])
        assert math.isnan(want[3]) or abs(b.p_value - want[3]) <= 2 * zeros / 200 + 1e-12, key
        if key == "pearson/pooled":
            assert zeros == 0 and b.p_value == pytest.approx(want[3], abs=1e-12)
    r1, r2 = correlation("pearson", cand.score, cand.human), correlation("pearson", base.score, cand.human)
    same(list(williams_test(r1, r2, correlation("pearson", cand.score, base.score), len(cand))), golden["williams"])
