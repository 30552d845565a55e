"""Run one cell in this (fresh) process, following the measurement protocol of DESIGN.md.

Invoked by the runner as `python -m nlgbench.worker CELL_DIR`; reads `CELL_DIR/config.json`,
writes `CELL_DIR/result.json` and `CELL_DIR/scores.csv` (both atomically). Phases: data,
load, prepare (corpus state), warm-up (not counted), then R timed repeats over the whole
dataset. Exit code 0 when the cell is ok, 1 when it failed (the result says why).
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from nlgbench.measure import cuda_peaks_mb, cuda_reset, environment, peak_rss_mb, rss_mb, synchroniser


def _log(msg: str) -> None:
    print(f"    {msg}", file=sys.stderr, flush=True)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _json_safe(value: Any) -> Any:
    """NaN/inf become None so result.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def warmup_items(n_items: int, batch_size: int) -> int:
    """How many items the warm-up pass scores: enough for a couple of full batches."""
    return min(n_items, max(2 * batch_size, 16))


def run_cell(cell_dir: Path) -> dict[str, Any]:
    """Measure one cell; returns the result dict (also written to result.json)."""
    import torch
    import transformers  # noqa: F401  (library import is not part of the measured load time)

    from nlgbench.correlation import correlate
    from nlgbench.data import load_dataset
    from nlgbench.encoders import EncoderRef
    from nlgbench.metrics import get_metric
    from nlgbench.metrics.base import PhaseTimer

    spec = json.loads((cell_dir / "config.json").read_text(encoding="utf-8"))
    cfg = spec["config"]
    device = cfg["device"]
    threads = cfg["threads"] or os.cpu_count() or 1
    torch.set_num_threads(threads)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available on this machine")

    baseline_rss = rss_mb()
    info = get_metric(cfg["metric"])
    t0 = time.perf_counter()
    ds = cfg["dataset"]
    dataset = load_dataset(ds["name"], path=ds["path"], max_segments=ds["max_segments"])
    items = dataset.items
    data_s = time.perf_counter() - t0
    _log(f"data: {len(items)} items from {dataset.name} ({data_s:.1f} s)")

    sync = synchroniser(device)
    cuda_reset(device)
    t0 = time.perf_counter()
    extra = {"aligner": cfg["aligner"]} if info.accepts_aligners else {}
    scorer = info.make(EncoderRef(**cfg["encoder"]), cfg["options"], device, cfg["batch_size"], **extra)
    sync()
    load_s = time.perf_counter() - t0
    _log(f"load: {load_s:.1f} s")

    t0 = time.perf_counter()
    scorer.prepare(items)
    sync()
    prepare_s = time.perf_counter() - t0

    timer = PhaseTimer(sync=sync)
    t0 = time.perf_counter()
    n_warm = warmup_items(len(items), cfg["batch_size"])
    for _ in range(cfg["warmup"]):
        scorer.score(items[:n_warm], timer)
    warmup_s = time.perf_counter() - t0
    _log(f"prepare {prepare_s:.1f} s, warm-up {warmup_s:.1f} s ({cfg['warmup']} x {n_warm} items)")

    repeat_s: list[float] = []
    phases: list[dict[str, float]] = []
    first = None
    max_diff = 0.0
    for r in range(cfg["repeats"]):
        timer.reset()
        sync()
        t0 = time.perf_counter()
        scores = scorer.score(items, timer)
        sync()
        repeat_s.append(time.perf_counter() - t0)
        phases.append(dict(timer.seconds))
        if first is None:
            first = scores
        else:
            diffs = [abs(a - b) for a, b in zip(first.score, scores.score)]
            max_diff = max([max_diff, *diffs]) if diffs else max_diff
        _log(f"repeat {r + 1}/{cfg['repeats']}: {repeat_s[-1]:.2f} s")
    assert first is not None
    cuda_alloc, cuda_reserved = cuda_peaks_mb(device)
    peak = peak_rss_mb()

    n = len(items)
    per_seg = [t / n * 1000 for t in repeat_s]
    corr = correlate(
        first.score, [it.human for it in items], [it.lp for it in items],
        [it.system for it in items], higher_is_better=info.higher_is_better, bootstrap=1000, seed=0,
    )
    described = scorer.describe()
    write_scores(cell_dir / "scores.csv", items, first)
    return {
        "cell_id": spec["cell_id"],
        "label": spec["label"],
        "status": "ok",
        "error": None,
        "config": cfg,
        "metric": {"name": info.name, "higher_is_better": info.higher_is_better, "primary": first.primary},
        "scorer": described,
        "n_segments": n,
        "dataset": {"name": dataset.name, "files": dataset.files, "has_systems": dataset.has_systems},
        "timing": {
            "data_s": data_s,
            "load_s": load_s,
            "prepare_s": prepare_s,
            "warmup_s": warmup_s,
            "warmup_items": n_warm,
            "repeat_s": repeat_s,
            "ms_per_segment": per_seg,
            "ms_per_segment_mean": statistics.fmean(per_seg),
            "ms_per_segment_median": statistics.median(per_seg),
            "ms_per_segment_std": statistics.stdev(per_seg) if len(per_seg) > 1 else 0.0,
            "phases_s": phases,
            "phase_ms_per_segment_mean": {
                k: statistics.fmean(p.get(k, 0.0) for p in phases) / n * 1000 for k in phases[0]
            },
        },
        "memory": {
            "baseline_rss_mb": baseline_rss,
            "peak_rss_mb": peak,
            "rss_growth_mb": peak - baseline_rss,
            "cuda_peak_allocated_mb": cuda_alloc,
            "cuda_peak_reserved_mb": cuda_reserved,
        },
        "params": described["params"],
        "disk_bytes": described["disk_bytes"],
        "repeat_agreement": {"max_abs_diff": max_diff, "agree": max_diff <= 1e-6},
        "correlation": corr,
        "environment": environment(device),
    }


def write_scores(path: Path, items: list[Any], scores: Any) -> None:
    """scores.csv: one row per item in dataset order; `score` is the primary output."""
    extra = [c for c in scores.columns]
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "system", "score", "human", *extra])
        for i, it in enumerate(items):
            w.writerow([it.lp, it.seg_id, it.system, repr(scores.score[i]), repr(it.human), *(repr(scores.columns[c][i]) for c in extra)])
    os.replace(tmp, path)


def failure(cell_dir: Path, exc: BaseException) -> dict[str, Any]:
    """The result of a cell that raised: status failed (or oom), one-line error, traceback saved."""
    spec = json.loads((cell_dir / "config.json").read_text(encoding="utf-8"))
    oom = isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
    (cell_dir / "traceback.txt").write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    message = " ".join(str(exc).split()) or type(exc).__name__
    return {
        "cell_id": spec["cell_id"],
        "label": spec["label"],
        "status": "oom" if oom else "failed",
        "error": f"{type(exc).__name__}: {message}"[:500],
        "config": spec["config"],
    }


def main() -> int:
    cell_dir = Path(sys.argv[1])
    import nlgbench

    here = Path(nlgbench.__file__).resolve().parent
    if len(sys.argv) > 2 and here != Path(sys.argv[2]):
        print(f"worker imported nlgbench from {here}, not the parent's {sys.argv[2]}", file=sys.stderr)
        return 3
    try:
        result = run_cell(cell_dir)
    except BaseException as exc:  # recorded, never lost: the sweep goes on
        if isinstance(exc, KeyboardInterrupt):
            raise
        result = failure(cell_dir, exc)
    write_atomic(cell_dir / "result.json", json.dumps(_json_safe(result), indent=2))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
