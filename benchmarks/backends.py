"""Inference backends against torch: BERTScore and MoverScore on WMT16 (first 100 segments per
language pair), each encoder x backend x precision, in alternating rounds in one process.

    python benchmarks/backends.py [--models all-MiniLM-L6-v2,all-mpnet-base-v2]
        [--metrics bertscore,moverscore] [--variants torch,torch-int8,...] [--rounds 3]
        [--max-segments 100] [--threads N] [--out reports/backends]

Every variant's scorer is loaded once (exports made before the rounds, their seconds printed
apart), warmed up on the first 64 items, then each round times one whole pass of every variant
in turn, so a slow spell of a shared machine falls on all of them. Per variant: the median
ms/segment over the rounds, its ratio to torch fp32 (the median of the per-round ratios, with
their range), and the largest |score difference| from torch fp32 over all segments. Writes
OUT/benchmark.csv, OUT/benchmark.md (the table printed at the end) and OUT/machine.json.
Needs the dataset (NLGBENCH_DATA_MIRROR or the cache), the models in the HF cache
(HF_HUB_OFFLINE=1 works) and the extras `onnx` and `openvino`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "torch": {},
    "torch-int8": {"quantize": "int8"},
    "torch-bf16": {"dtype": "bf16"},
    "onnxruntime": {"backend": "onnxruntime"},
    "onnxruntime-int8": {"backend": "onnxruntime", "quantize": "int8"},
    "openvino": {"backend": "openvino"},
    "openvino-int8": {"backend": "openvino", "quantize": "int8"},
    "openvino-bf16": {"backend": "openvino", "dtype": "bf16"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    parser.add_argument("--metrics", default="bertscore,moverscore")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-segments", type=int, default=100, help="per language pair")
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--out", type=Path, default=Path("reports/backends"))
    args = parser.parse_args()

    import torch

    import nlgbench
    from nlgbench.data.loaders import load_dataset
    from nlgbench.encoders import backends
    from nlgbench.measurement.devices import Device
    from nlgbench.measurement.environment import environment

    torch.set_num_threads(args.threads or os.cpu_count() or 1)  # before loading: ORT and OpenVINO take it too
    items = load_dataset("wmt16", max_segments=args.max_segments).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    names = args.variants.split(",")
    rows = []
    for metric in args.metrics.split(","):
        for model in args.models.split(","):
            scorers = {}
            for name in names:
                start = time.perf_counter()
                scorers[name] = nlgbench.Scorer(metric, encoder={"name": model, **VARIANTS[name]}, device="cpu")
                load_s = time.perf_counter() - start
                export_s = scorers[name].context.export_seconds or 0.0
                scorers[name].score(hyps[:64], refs[:64])  # warm-up
                print(f"{metric} {model} {name}: loaded in {load_s - export_s:.1f} s (+ export {export_s:.1f} s)")
            seconds: dict[str, list[float]] = {n: [] for n in names}
            scores: dict[str, list[float]] = {}
            for r in range(args.rounds):
                for name in names:
                    start = time.perf_counter()
                    scores[name] = scorers[name].score(hyps, refs)
                    seconds[name].append(time.perf_counter() - start)
                print(f"  round {r + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.1f} s" for n in names), flush=True)
            base = seconds["torch"] if "torch" in seconds else None
            for name in names:
                ratios = [s / b for s, b in zip(seconds[name], base, strict=True)] if base else []
                diff = max(abs(a - b) for a, b in zip(scores[name], scores["torch"], strict=True)) if base else None
                rows.append(
                    {
                        "metric": metric,
                        "model": model,
                        "variant": name,
                        "segments": len(items),
                        "ms_per_segment": statistics.median(seconds[name]) / len(items) * 1000,
                        "ratio_to_torch_fp32": statistics.median(ratios) if ratios else None,
                        "ratio_min": min(ratios) if ratios else None,
                        "ratio_max": max(ratios) if ratios else None,
                        "max_abs_score_diff": diff,
                        "rounds": args.rounds,
                    }
                )
            del scorers
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "benchmark.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    env = environment(Device("cpu"))
    keep = ("cpu_model", "cpu_cores_logical", "torch_threads", "python", "torch", "transformers", "nlgbench")
    machine = {k: env.get(k) for k in keep}
    machine.update({lib: backends.backend_version(lib) for lib in ("onnxruntime", "openvino")})
    (args.out / "machine.json").write_text(json.dumps(machine, indent=2) + "\n", encoding="utf-8")
    table = markdown(rows)
    (args.out / "benchmark.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table: ms/segment, the ratio to torch fp32 with its range over rounds, max |d score|."""
    lines = [
        "| metric | model | variant | ms/segment | x torch fp32 (range over rounds) | max abs d score |",
        "|---|---|---|---:|---|---:|",
    ]
    for r in rows:
        ratio = (
            f"{r['ratio_to_torch_fp32']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"
            if r["ratio_to_torch_fp32"] is not None
            else ""
        )
        diff = f"{r['max_abs_score_diff']:.1e}" if r["max_abs_score_diff"] is not None else ""
        cells = [r["metric"], r["model"], r["variant"], f"{r['ms_per_segment']:.2f}", ratio, diff]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
