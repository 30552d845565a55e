"""Correlation of metric scores with human judgments: segment level (per language pair,
their mean, and pooled), system level where systems are named, and bootstrap CIs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

NAN = float("nan")


def _is_constant(x: np.ndarray) -> bool:
    """True when all values are equal (a correlation with it is undefined)."""
    return bool(np.all(x == x[0]))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r as a plain float; NaN for fewer than 2 points or a constant side."""
    if len(x) < 2 or _is_constant(x) or _is_constant(y):
        return NAN
    return float(stats.pearsonr(x, y)[0])


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b as a plain float; NaN for fewer than 2 points or a constant side."""
    if len(x) < 2 or _is_constant(x) or _is_constant(y):
        return NAN
    return float(stats.kendalltau(x, y, variant="b")[0])


def _mean_ignoring_nan(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (WMT-style mean over lps)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return NAN
    return float(sum(finite) / len(finite))


def _check_finite(name: str, values: np.ndarray) -> None:
    """Raise ValueError naming how many values are non-finite and the first index."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(
            f"{bad.size} non-finite {name} value(s) (NaN or inf), first at index {int(bad[0])}"
        )


def _groups(keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Indices of each key, keys in order of first appearance."""
    index: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        index.setdefault(key, []).append(i)
    return {key: np.asarray(idx, dtype=np.int64) for key, idx in index.items()}


def _system_level(
    x: np.ndarray, h: np.ndarray, lps: list[str], systems: list[str]
) -> dict[str, Any]:
    """Per lp: mean metric score and mean human score per system, then Pearson/Kendall.

    Segments with an empty system name are left out of the system level."""
    per_lp: dict[str, dict[str, Any]] = {}
    for lp, idx in _groups(lps).items():
        named = [i for i in idx if systems[i] != ""]
        by_system = _groups([systems[i] for i in named])
        named_arr = np.asarray(named, dtype=np.int64)
        sys_x = np.asarray([x[named_arr[j]].mean() for j in by_system.values()], dtype=float)
        sys_h = np.asarray([h[named_arr[j]].mean() for j in by_system.values()], dtype=float)
        per_lp[lp] = {
            "pearson": _pearson(sys_x, sys_h),
            "kendall": _kendall(sys_x, sys_h),
            "n_systems": len(by_system),
        }
    return {
        "pearson": _mean_ignoring_nan([r["pearson"] for r in per_lp.values()]),
        "kendall": _mean_ignoring_nan([r["kendall"] for r in per_lp.values()]),
        "per_lp": per_lp,
    }


def _percentile_ci(values: list[float]) -> list[float]:
    """95% percentile interval of the finite bootstrap values; [NaN, NaN] if none."""
    finite = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return [NAN, NAN]
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return [float(lo), float(hi)]


def _bootstrap(x: np.ndarray, h: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    """95% CIs for the pooled Pearson and Kendall by resampling segments with replacement."""
    rng = np.random.default_rng(seed)
    n = len(x)
    pearsons: list[float] = []
    kendalls: list[float] = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        pearsons.append(_pearson(x[idx], h[idx]))
        kendalls.append(_kendall(x[idx], h[idx]))
    return {
        "n_resamples": n_resamples,
        "seed": seed,
        "pearson_pooled_ci": _percentile_ci(pearsons),
        "kendall_pooled_ci": _percentile_ci(kendalls),
    }


def correlate(
    scores: Sequence[float],
    human: Sequence[float],
    lps: Sequence[str],
    systems: Sequence[str] | None = None,
    *,
    higher_is_better: bool = True,
    bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """Correlate metric scores with human judgments (segment, pooled, system level).

    Lower-is-better metrics are negated first so positive always means agreement; the
    result is JSON-serialisable with plain floats (NaN where a correlation is undefined).
    `n_lps` counts all language pairs; the means over lps skip NaN entries.
    """
    n = len(scores)
    if len(human) != n or len(lps) != n:
        raise ValueError(
            f"length mismatch: {n} scores, {len(human)} human judgments, {len(lps)} language pairs"
        )
    if systems is not None and len(systems) != n:
        raise ValueError(f"length mismatch: {n} scores but {len(systems)} system names")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 resamples, got {bootstrap}")

    raw = np.asarray(scores, dtype=float).reshape(-1)
    h = np.asarray(human, dtype=float).reshape(-1)
    _check_finite("metric score", raw)
    _check_finite("human judgment", h)
    sign = 1 if higher_is_better else -1
    x = raw * sign
    lp_list = [str(lp) for lp in lps]

    per_lp: dict[str, dict[str, Any]] = {}
    for lp, idx in _groups(lp_list).items():
        per_lp[lp] = {
            "pearson": _pearson(x[idx], h[idx]),
            "kendall": _kendall(x[idx], h[idx]),
            "n": int(idx.size),
        }

    system_names = None if systems is None else ["" if s is None else str(s) for s in systems]
    if system_names is not None and all(s == "" for s in system_names):
        system_names = None

    return {
        "pearson": _mean_ignoring_nan([r["pearson"] for r in per_lp.values()]),
        "kendall": _mean_ignoring_nan([r["kendall"] for r in per_lp.values()]),
        "n_lps": len(per_lp),
        "pearson_pooled": _pearson(x, h),
        "kendall_pooled": _kendall(x, h),
        "n": int(n),
        "per_lp": per_lp,
        "system": None if system_names is None else _system_level(x, h, lp_list, system_names),
        "bootstrap": _bootstrap(x, h, bootstrap, seed) if bootstrap > 0 and n > 0 else None,
        "sign": sign,
    }


def flat_row(result: dict[str, Any]) -> dict[str, float]:
    """The correlation columns of a results.csv row, taken from a `correlate` result."""
    return {
        "pearson": result["pearson"],
        "kendall": result["kendall"],
        "pearson_pooled": result["pearson_pooled"],
        "kendall_pooled": result["kendall_pooled"],
        "n": result["n"],
    }
