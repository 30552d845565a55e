"""A cell's memory whatever its neighbours: the same BERTScore all-MiniLM-L6-v2 cell measured alone and
in a sweep with an OpenVINO MiniLM, an ONNX Runtime MiniLM and an all-mpnet-base-v2 cell, each sweep
with plain workers (NLGBENCH_FORKSERVER=0) and with the fork server.

Prints one row per sweep x worker: the MiniLM cell's baseline RSS (after its imports: what it
imported), peak RSS, its sampled peak USS and its model memory (RSS growth: peak over the baseline),
in MiB; then the largest spread of each
figure, in % of the smallest value. The MiniLM cell runs last in the sweep with neighbours. Each sweep
runs through the CLI in a fresh process and a fresh run folder (the ONNX exports are cached in
NLGBENCH_CACHE after the first). Run with HF_HUB_OFFLINE=1, the models cached and the WMT16 data
reachable (NLGBENCH_DATA_MIRROR), on an otherwise idle machine:

    python benchmarks/cell_memory.py [--segments 20] [--repeats 2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MINILM = "all-MiniLM-L6-v2"
NEIGHBOURS = [
    "all-mpnet-base-v2",
    {"name": MINILM, "backend": "openvino"},
    {"name": MINILM, "backend": "onnxruntime"},
]
SWEEPS = {"alone": [MINILM], "with OpenVINO, ONNX Runtime and MPNet cells": [*NEIGHBOURS, MINILM]}
WORKERS = {"plain (NLGBENCH_FORKSERVER=0)": "0", "fork server": "1"}


def spec(encoders: list[object], segments: int, repeats: int) -> dict[str, object]:
    """A BERTScore sweep of `encoders` on the first `segments` WMT16 segments per language pair, on CPU."""
    return {
        "name": "cell-memory",
        "datasets": [{"name": "wmt16", "max_segments": segments}],
        "devices": ["cpu"],
        "batch_size": 64,
        "repeats": repeats,
        "metrics": [{"metric": "bertscore", "options": {"idf": False}, "encoders": encoders}],
    }


def minilm_memory(folder: Path, encoders: list[object], segments: int, repeats: int, forkserver: str) -> dict:
    """Run the sweep in `folder` and return the plain MiniLM cell's result.json memory section."""
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps(spec(encoders, segments, repeats)), encoding="utf-8")
    env = {**os.environ, "NLGBENCH_FORKSERVER": forkserver, "NLGBENCH_PROGRESS": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "run", str(folder / "spec.json"), "--out", str(folder / "run")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"the sweep failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    for result in (folder / "run" / "cells").glob("*/result.json"):
        raw = json.loads(result.read_text(encoding="utf-8"))
        encoder = raw["config"]["encoder"]
        if encoder == MINILM or encoder == {"name": MINILM}:
            return raw["memory"]
    sys.exit(f"no plain {MINILM} cell in {folder / 'run'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=20, help="WMT16 segments per language pair (default 20)")
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats per cell (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each sweep x worker; the median is shown")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.segments} segments per pair, {args.repeats} repeats")
    rows: list[tuple[str, str, float, float, float | None, float]] = []
    with tempfile.TemporaryDirectory(prefix="cell-memory-") as tmp:
        for sweep, encoders in SWEEPS.items():
            for worker, setting in WORKERS.items():
                runs = []
                for round_ in range(args.rounds):
                    start = time.perf_counter()
                    name = f"{len(rows)}-{round_}"
                    runs.append(minilm_memory(Path(tmp, name), encoders, args.segments, args.repeats, setting))
                    print(f"  {sweep} / {worker}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
                uss = [r["peak_uss_mb"] for r in runs if r.get("peak_uss_mb") is not None]
                rows.append(
                    (
                        sweep,
                        worker,
                        statistics.median(r["baseline_rss_mb"] for r in runs),
                        statistics.median(r["peak_rss_mb"] for r in runs),
                        statistics.median(uss) if uss else None,
                        statistics.median(r["rss_growth_mb"] for r in runs),
                    )
                )
    print()
    print(
        "| the cell's sweep | worker | baseline RSS MiB | peak RSS MiB | peak USS MiB | model memory (RSS growth) MiB |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for sweep, worker, base, rss, uss, growth in rows:
        shown = "n/a" if uss is None else f"{uss:.1f}"
        print(f"| {sweep} | {worker} | {base:.1f} | {rss:.1f} | {shown} | {growth:.1f} |")
    print()
    for what, column in (("baseline RSS", 2), ("peak RSS", 3), ("model memory", 5)):
        values = [float(row[column]) for row in rows if row[column] is not None]
        print(f"{what}: spread {(max(values) - min(values)) / min(values) * 100:.1f}% of the smallest")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
