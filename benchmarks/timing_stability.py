"""Timings you can compare, on this machine: three runs of the quickstart's MiniLM cell (BERTScore,
all-MiniLM-L6-v2, WMT16 first 100 segments per pair = 600 items, CPU, batch 64, 3 timed repeats),
each `nlgbench run --force` in a fresh process (`python -m nlgbench.cli`), and how far they agree.

Prints per run the median ms/segment, the CV over its repeats (flagged where over 5%, as results.csv's
`timing_unstable`) and the passes per repeat; then the spread of the three medians ((max - min) /
median) and the median CV. Target: median CV <= 3% and the three runs within 3% of each other.
Run on an idle machine, with the datasets mirror and the model in the local HF cache:

    HF_HUB_OFFLINE=1 NLGBENCH_DATA_MIRROR=... python benchmarks/timing_stability.py [--runs 3] [--threads N]
        [--max-segments 100]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SPEC = """name: timing-stability
datasets:
  - {{name: wmt16, max_segments: {segments}}}
devices: [cpu]
batch_size: 64
repeats: 3
threads: {threads}
metrics:
  - metric: bertscore
    options: {{idf: false}}
    encoders: [all-MiniLM-L6-v2]
"""


def one_run(folder: Path, threads: str, segments: int) -> dict[str, str]:
    """One `nlgbench run --force` of the cell in a fresh process; its results.csv row."""
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.format(threads=threads, segments=segments), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "run", str(spec), "--out", str(folder / "run"), "--force"],
        check=True,
        env=os.environ,
    )
    with (folder / "run" / "results.csv").open(encoding="utf-8", newline="") as fh:
        return next(csv.DictReader(fh))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-segments", type=int, default=100, help="per language pair (the quickstart's: 100)")
    parser.add_argument("--threads", default="null", help="torch threads (default null: all cores)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            folder = Path(tmp) / f"run{i + 1}"
            folder.mkdir()
            rows.append(one_run(folder, args.threads, args.max_segments))
    load = os.getloadavg()[0]
    print(
        f"quickstart MiniLM cell (wmt16[:{args.max_segments}]), {args.runs} runs "
        f"(load average at the end {load:.2f}, {os.cpu_count()} CPUs)"
    )
    print("run  ms/segment  CV      flagged  phases (ms/segment)")
    medians, cvs = [], []
    for i, row in enumerate(rows, start=1):
        ms, cv = float(row["ms_per_segment_median"]), float(row["ms_per_segment_cv"] or "nan")
        medians.append(ms)
        cvs.append(cv)
        flagged = "yes" if row.get("timing_unstable") == "yes" else "no"
        print(f"{i:>3}  {ms:10.3f}  {100 * cv:5.2f}%  {flagged:>7}  {row.get('phase_ms', '')}")
    spread = (max(medians) - min(medians)) / statistics.median(medians)
    print(f"spread of the medians (max - min) / median = {100 * spread:.2f}% (target <= 3%)")
    print(f"median CV = {100 * statistics.median(cvs):.2f}% (target <= 3%)")


if __name__ == "__main__":
    main()
