"""Seeded random correlation inputs, every group with at least 3 points (segments per language
pair, systems per language pair), shared by the golden-value test of nlgbench.statistics and the
script that wrote the golden values with the two engines it replaced (tests/stats_golden.json)."""

from __future__ import annotations

from typing import Any

import numpy as np

N_CASES = 12


def random_case(seed: int) -> dict[str, Any]:
    """One cell's inputs: 1-4 language pairs of 3-40 segments, 3-6 systems per pair in about half
    the cases (some segments without a system name), ties in every third case, a lower-is-better
    metric in every fourth."""
    rng = np.random.default_rng(seed)
    scores: list[float] = []
    baseline: list[float] = []  # a second metric on the same segments (paired tests)
    human: list[float] = []
    lps: list[str] = []
    systems: list[str] = []
    named = seed % 2 == 0
    for k in range(int(rng.integers(1, 5))):
        n_sys = int(rng.integers(3, 7))
        n = int(rng.integers(max(3, n_sys), 41))
        h = rng.normal(size=n)
        x = 0.6 * h + rng.normal(size=n)
        if seed % 3 == 0:
            x, h = np.round(x, 0), np.round(h, 1)  # ties on both sides
        scores += x.tolist()
        baseline += (0.3 * h + rng.normal(size=n)).tolist()
        human += h.tolist()
        lps += [f"l{k}-en"] * n
        names = [f"S{i % n_sys}" for i in range(n)]  # every system has at least one segment
        if named and n > n_sys:
            names[-1] = ""  # a segment without a system is left out of the system level
        systems += names if named else [""] * n
    return {
        "scores": scores,
        "baseline": baseline,
        "human": human,
        "lps": lps,
        "systems": systems,
        "higher_is_better": seed % 4 != 1,
    }
