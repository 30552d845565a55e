"""`nlgbench compare DIR --candidate X --baseline Y`: is the candidate encoder's quality loss real,
and what does it buy? Per metric x dataset x device: the correlation difference with a 95%
paired-bootstrap interval over segments, Williams' test (Pearson) and the bootstrap test (any
method), speed-up and memory ratio with their spread over repeats, and hardware/library checks."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from typing import Any

import numpy as np

from nlgbench import fmt
from nlgbench.errors import UserError, unknown_name
from nlgbench.report import QualityOptions
from nlgbench.rundata import RunData
from nlgbench.stats import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, correlation, left_out_note, paired_bootstrap, quality,
                            too_small_lps, williams_test)
from nlgbench.tables import markdown


def _pair_ratios(base: list[float], cand: list[float]) -> list[float]:
    """Every baseline repeat time over every candidate repeat time (the spread of the speed-up)."""
    return [b / c for b, c in itertools.product(base, cand) if c > 0]


def compare(run: RunData, candidate: str, baseline: str, metric: str | None = None,
            options: QualityOptions = QualityOptions(), n_resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The comparison as plain data (what --json prints)."""
    options.check()
    df = run.cells
    encoders = sorted(set(df["encoder"]))
    for name in (candidate, baseline):
        if name not in encoders:
            raise unknown_name("encoder", name, encoders)
    if metric is not None and metric not in set(df["metric"]):
        raise unknown_name("metric", metric, sorted(set(df["metric"])))
    rows, warnings = [], []
    keys = df[["metric", "dataset", "device"]].drop_duplicates()
    for _, key in keys.iterrows():
        if metric is not None and key["metric"] != metric:
            continue
        sel = df[(df["metric"] == key["metric"]) & (df["dataset"] == key["dataset"]) & (df["device"] == key["device"])]
        cand, base = sel[sel["encoder"] == candidate], sel[sel["encoder"] == baseline]
        if cand.empty or base.empty:
            continue
        c, b = cand.iloc[0], base.iloc[0]
        cs, bs = run.segments(c["cell_id"]), run.segments(b["cell_id"])
        if len(cs) != len(bs) or not (np.array_equal(cs.lp, bs.lp) and np.array_equal(cs.seg_id, bs.seg_id)
                                      and np.array_equal(cs.human, bs.human)):
            warnings.append(f"{key['metric']} / {key['dataset']}: the two cells scored different segments; not compared")
            continue

        def stat(seg: Any) -> float:
            return quality(seg, options.method, options.level, options.threshold)

        boot = paired_bootstrap(cs, bs, stat, n_resamples=n_resamples, seed=seed)
        q_c, q_b = stat(cs), stat(bs)
        r_ch = correlation("pearson", cs.score, cs.human)
        r_bh = correlation("pearson", bs.score, bs.human)
        t, p_w = williams_test(r_ch, r_bh, correlation("pearson", cs.score, bs.score), len(cs))
        speed = _pair_ratios(list(b["ms_per_segment_repeats"]), list(c["ms_per_segment_repeats"]))
        mem = b["peak_rss_mb"] / c["peak_rss_mb"] if key["device"] == "cpu" else (
            b["cuda_peak_allocated_mb"] / c["cuda_peak_allocated_mb"])
        rows.append({
            "metric": key["metric"], "dataset": key["dataset"], "device": key["device"], "n": len(cs),
            "quality_candidate": q_c, "quality_baseline": q_b, "retained": q_c / q_b if q_b else math.nan,
            "delta": boot.delta, "delta_ci": [boot.ci_low, boot.ci_high], "p_bootstrap": boot.p_value,
            "pearson_pooled_candidate": r_ch, "pearson_pooled_baseline": r_bh, "williams_t": t, "p_williams": p_w,
            "speedup": statistics.median(speed) if speed else math.nan,
            "speedup_range": [min(speed), max(speed)] if speed else [math.nan, math.nan],
            "n_repeats": [len(b["ms_per_segment_repeats"]), len(c["ms_per_segment_repeats"])],
            "memory_ratio": float(mem), "lps_left_out": too_small_lps(cs, options.level),
        })
        if rows[-1]["lps_left_out"]:
            warnings.append(f"{key['metric']} / {key['dataset']}: {left_out_note(options.level, rows[-1]['lps_left_out'])}")
        for field, what in (("cpu_model", "CPU"), ("gpu", "GPU"), ("versions", "library versions"), ("threads", "threads")):
            if c[field] != b[field]:
                warnings.append(f"{key['metric']} / {key['dataset']}: {what} differ between the two cells "
                                f"(candidate {_show(c[field])}, baseline {_show(b[field])}); speed and memory ratios are not like for like")
    if not rows:
        raise UserError(f"no metric x dataset has finished cells of both {candidate!r} and {baseline!r}"
                        + (f" for metric {metric!r}" if metric else ""))
    return {"candidate": candidate, "baseline": baseline, "quality": options.label, "bootstrap_resamples": n_resamples,
            "seed": seed, "rows": rows, "warnings": list(dict.fromkeys(warnings))}


def _show(value: Any) -> str:
    if isinstance(value, str) and value.startswith("{"):
        return ", ".join(f"{k} {v}" for k, v in json.loads(value).items())
    return str(value) if value not in ("", None) else "none"


def render(result: dict[str, Any]) -> str:
    """The readable table `compare` prints, with a line saying how to read it."""
    header = ["metric", "dataset", "device", "n", "baseline", "candidate", "retained", "delta [95% CI]",
              "p (bootstrap)", "p (Williams, pooled r)", "speed-up [range]", "memory ratio"]
    rows = []
    for r in result["rows"]:
        lo, hi = r["delta_ci"]
        rows.append([r["metric"], r["dataset"], r["device"], str(r["n"]), fmt.number(r["quality_baseline"]),
                     fmt.number(r["quality_candidate"]), fmt.percent(r["retained"]),
                     f"{r['delta']:+.3f} [{lo:+.3f}, {hi:+.3f}]", fmt.p_value(r["p_bootstrap"], result["bootstrap_resamples"]),
                     fmt.p_value(r["p_williams"]),
                     fmt.times(r["speedup"]) + (f" [{r['speedup_range'][0]:.2f}, {r['speedup_range'][1]:.2f}]"
                                                 if math.isfinite(r["speedup"]) else ""),
                     fmt.times(r["memory_ratio"])])
    lines = [f"candidate {result['candidate']} vs baseline {result['baseline']}; quality = {result['quality']}; "
             f"paired bootstrap over segments, {result['bootstrap_resamples']} resamples, seed {result['seed']}",
             "", markdown(header, rows).rstrip(),
             "", "delta = candidate - baseline quality; speed-up = baseline / candidate time per segment (median over "
             "all repeat pairs, range min-max); memory ratio = baseline / candidate peak memory (one measurement per cell)."]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)
