"""GPU benchmark: the quickstart and similarity cells on CUDA (and CPU for comparison), a batch-size
sweep, and nlgbench's BERTScore against the `bert_score` package on the GPU.

    python benchmarks/gpu.py [--out reports/gpu] [--device cuda] [--max-segments N]
        [--cpu-max-segments N] [--batch-sizes 16,32,64,128,256,512] [--repeats 3]
        [--parts quickstart,similarity,sweep,reference] [--similarity-max-segments N]
        [--without-mpnet] [--allow-cpu] [--summary-only]

Every cell runs as a sweep cell does (`nlgbench.run`: a fresh worker per cell, the measurement
protocol of docs/concepts/measurement.md: warm-up until stable on CUDA, wall clock and CUDA events, CV of the
repeats). Writes to OUT: one run folder per part (results.csv, cells/), `machine.json` (the
environment), `summary.csv` and `summary.md` (the table printed at the end), `batch_sweep.png`
(ms/segment and encode share against batch size) and `bert_score.json`.

The table answers the GPU questions: the share of a cell's time spent encoding (target >= 70%
for MiniLM BERTScore on a GPU), 3 layers against 6 (the cut should be measurably faster),
fp16/bf16 against fp32, CUDA against CPU, the coefficient of variation of the repeats (target
<= 3% on cells of >= 1000 segments), and BERTScore against bert_score (target <= 0.35x its time).

Needs the datasets (NLGBENCH_DATA_MIRROR or the cache) and the models in the local HF cache
(HF_HUB_OFFLINE=1 works). Without a CUDA device it says so and stops (exit 0), unless
`--allow-cpu` is given: then the same parts run on the CPU (a smoke test of this script; use a
small --max-segments).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
PARTS = ("quickstart", "similarity", "sweep", "reference")
# The GPU targets, checked in the summary.
TARGET_ENCODE_SHARE = 0.70
TARGET_CV = 0.03
TARGET_CV_MIN_SEGMENTS = 1000
TARGET_REFERENCE_RATIO = 0.35


# ----------------------------------------------------------------------------- specs


def dataset(max_segments: int | None) -> dict[str, Any]:
    return {"name": "wmt16", **({"max_segments": max_segments} if max_segments else {})}


def is_mpnet(encoder: Any) -> bool:
    """Whether a spec's encoder entry (a name or a mapping with `name`) is MPNet-base."""
    return (encoder.get("name") if isinstance(encoder, dict) else encoder) == MPNET


def quickstart_spec(device: str, max_segments: int | None, repeats: int, mpnet: bool = True) -> dict[str, Any]:
    """examples/quickstart.yaml's BERTScore encoders on `device`, plus MiniLM in fp16 and bf16
    (MPNet-base left out when `mpnet` is false)."""
    encoders: list[Any] = [
        *([MPNET] if mpnet else []),
        MINILM,
        {"name": MINILM, "num_layers": 3},
        {"name": MINILM, "dtype": "fp16"},
        {"name": MINILM, "dtype": "bf16"},
    ]
    return {
        "name": f"gpu-quickstart-{device.replace(':', '')}",
        "datasets": [dataset(max_segments)],
        "devices": [device],
        "batch_size": 64,
        "repeats": repeats,
        "metrics": [{"metric": "bertscore", "options": {"idf": False}, "encoders": encoders}],
    }


def similarity_spec(device: str, max_segments: int | None, repeats: int, mpnet: bool = True) -> dict[str, Any]:
    """examples/similarity.yaml's metrics and encoders on WMT16 on `device` (int8 is CPU-only: left
    out on CUDA; MPNet-base and its early exit left out when `mpnet` is false)."""
    import yaml

    raw = yaml.safe_load((REPO / "examples" / "similarity.yaml").read_text(encoding="utf-8"))
    metrics = []
    for entry in raw["metrics"]:
        encoders = [
            e
            for e in entry["encoders"]
            if not (device != "cpu" and isinstance(e, dict) and e.get("quantize")) and (mpnet or not is_mpnet(e))
        ]
        metrics.append({**entry, "encoders": encoders})
    return {
        "name": f"gpu-similarity-{device.replace(':', '')}",
        "datasets": [dataset(max_segments)],
        "devices": [device],
        "batch_size": 64,
        "repeats": repeats,
        "metrics": metrics,
    }


def sweep_spec(device: str, max_segments: int | None, repeats: int, batch_sizes: list[int]) -> dict[str, Any]:
    """BERTScore with MiniLM-L6 (6 and 3 layers) at each batch size."""
    return {
        "name": f"gpu-sweep-{device.replace(':', '')}",
        "datasets": [dataset(max_segments)],
        "devices": [device],
        "batch_size": batch_sizes,
        "repeats": repeats,
        "metrics": [
            {"metric": "bertscore", "options": {"idf": False}, "encoders": [MINILM, {"name": MINILM, "num_layers": 3}]}
        ],
    }


# ----------------------------------------------------------------------------- reading results


def read_rows(run: Path) -> list[dict[str, str]]:
    """results.csv's rows, with the current column names also for a file written under the old names."""
    from nlgbench.runs.migrate import current_names

    with (run / "results.csv").open(encoding="utf-8", newline="") as fh:
        return [current_names(row) for row in csv.DictReader(fh)]


def phases(row: dict[str, str]) -> dict[str, float]:
    """results.csv's phase_ms (`tokenize=0.1;encode=0.3;...`, ms per segment) as a dict."""
    out = {}
    for part in filter(None, row.get("phase_ms", "").split(";")):
        key, _, value = part.partition("=")
        out[key] = float(value)
    return out


def number(value: str) -> float | None:
    return float(value) if value not in ("", None) else None


def summary_row(part: str, row: dict[str, str]) -> dict[str, Any]:
    """One line of the summary table from a results.csv row."""
    ph = phases(row)
    mean = number(row.get("ms_per_segment_mean", ""))
    encode_share = ph["encode"] / mean if mean and "encode" in ph else None
    return {
        "part": part,
        "metric": row["metric"] + (f" ({row['aligner']})" if row.get("aligner") not in ("", "none", None) else ""),
        "encoder": row["encoder"],
        "device": row["device"],
        "batch_size": row["batch_size"],
        "status": row["status"],
        "n_segments": row.get("n_segments", ""),
        "ms_per_segment_median": number(row.get("ms_per_segment_median", "")),
        "cv": number(row.get("ms_per_segment_cv", "")),
        "timing_unstable": row.get("timing_unstable", "") == "yes",  # CV over 5%: blank column in older runs
        "warmup_passes": row.get("warmup_passes", ""),
        "encode_share": encode_share,
        "tokenize_ms": ph.get("tokenize"),
        "encode_ms": ph.get("encode"),
        "tokenize_overlapped_ms": ph.get("tokenize_overlapped"),
        "cuda_peak_allocated_mib": number(row.get("cuda_peak_allocated_mib", "")),
        "pearson_global": number(row.get("pearson_global", "")),
        "startup_s": number(row.get("startup_s", "")),  # worker start until loading began
        "load_s": number(row.get("load_s", "")),
        "energy_j_per_segment": number(row.get("energy_j_per_segment", "")),  # NVML on CUDA, RAPL on CPU
        "energy_counter": row.get("energy_counter", ""),
        "error": row.get("error", ""),
    }


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def energy_cell(row: dict[str, Any]) -> str:
    """Millijoules per segment where a counter measured them, else what results.csv says (n/a, or -)."""
    value = row.get("energy_j_per_segment")
    if isinstance(value, float):
        return f"{value * 1000:.2f}"
    return row.get("energy_counter") or "-"


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of the summary rows."""
    head = [
        "part",
        "metric",
        "encoder",
        "device",
        "bs",
        "n",
        "ms/seg",
        "CV",
        "warm",
        "encode %",
        "tok ms",
        "tok hidden ms",
        "CUDA MiB",
        "start-up s",
        "load s",
        "mJ/seg",
        "pearson (global)",
        "status",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        share = f"{100 * r['encode_share']:.0f}" if r["encode_share"] is not None else "-"
        cv = f"{100 * r['cv']:.1f}%" if r["cv"] is not None else "-"
        cv += " (unstable)" if r.get("timing_unstable") else ""
        lines.append(
            "| "
            + " | ".join(
                [
                    r["part"],
                    r["metric"],
                    r["encoder"],
                    r["device"],
                    str(r["batch_size"]),
                    str(r["n_segments"]),
                    fmt(r["ms_per_segment_median"]),
                    cv,
                    str(r["warmup_passes"]),
                    share,
                    fmt(r["tokenize_ms"]),
                    fmt(r["tokenize_overlapped_ms"]),
                    fmt(r["cuda_peak_allocated_mib"], 0),
                    fmt(r.get("startup_s"), 2),
                    fmt(r.get("load_s"), 2),
                    energy_cell(r),
                    fmt(r["pearson_global"]),
                    r["status"] if r["status"] == "ok" else f"{r['status']}: {r['error'][:60]}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def ratio(rows: list[dict[str, Any]], part: str, device: str, a: str, b: str) -> float | None:
    """ms/segment of encoder `a` over encoder `b` (BERTScore, batch 64) in `part` on `device`."""

    def median_of(encoder: str) -> float | None:
        found = [
            r["ms_per_segment_median"]
            for r in rows
            if r["part"] == part
            and r["device"] == device
            and r["encoder"] == encoder
            and r["metric"] == "bertscore"
            and str(r["batch_size"]) == "64"
            and r["ms_per_segment_median"]
        ]
        return found[0] if found else None

    x, y = median_of(a), median_of(b)
    return x / y if x and y else None


# ----------------------------------------------------------------------------- bert_score on the device


def reference_comparison(device: str, max_segments: int | None, rounds: int, batch_size: int = 64) -> dict[str, Any]:
    """nlgbench's BERTScore against bert_score on `device`: same model, layer and batch size, both
    loaded once in this process, warmed up over the whole data until stable, then timed
    alternately (order swapped every round; the device synchronised at the end of each pass)."""
    import numpy as np
    import torch
    from bert_score import BERTScorer

    from nlgbench.data.loaders import load_dataset
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.measurement.devices import Device
    from nlgbench.measurement.protocol import WARMUP_MAX_PASSES, is_stable, warm_up
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.bertscore import BertScoreScorer

    sync = Device(device).synchronise
    items = load_dataset("wmt16", max_segments=max_segments).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    ours = BertScoreScorer(EncoderRef(MINILM), {"idf": False, "layer": None}, device, batch_size)
    ours.prepare(items)
    theirs = BERTScorer(
        model_type="sentence-transformers/all-MiniLM-L6-v2",
        num_layers=6,
        batch_size=batch_size,
        idf=False,
        device=device,
        use_fast_tokenizer=True,
        nthreads=0,
    )

    def timed(run: Callable[[], Any]) -> tuple[Any, float]:
        sync()
        start = time.perf_counter()
        out = run()
        sync()
        return out, time.perf_counter() - start

    def ours_pass() -> Any:
        return np.array(ours.score(items, PhaseTimer(sync=sync)).score)

    def theirs_pass() -> Any:
        return theirs.score(hyps, refs)[2].cpu().numpy()

    warm = {
        "nlgbench": warm_up(lambda: timed(ours_pass)[1], 1, device != "cpu"),
        "bert_score": warm_up(lambda: timed(theirs_pass)[1], 1, device != "cpu"),
    }
    times: dict[str, list[float]] = {"nlgbench": [], "bert_score": []}
    max_diff = 0.0
    for r in range(rounds):
        order = [("nlgbench", ours_pass), ("bert_score", theirs_pass)]
        results = {}
        for who, run in order if r % 2 == 0 else order[::-1]:
            results[who], seconds = timed(run)
            times[who].append(seconds)
        max_diff = max(max_diff, float(np.abs(results["nlgbench"] - results["bert_score"]).max()))
    ours_med, theirs_med = statistics.median(times["nlgbench"]), statistics.median(times["bert_score"])
    return {
        "device": device,
        "n_segments": len(items),
        "batch_size": batch_size,
        "rounds": rounds,
        "warmup_passes_s": warm,
        "warmup_stable": {k: is_stable(v) if device != "cpu" else None for k, v in warm.items()},
        "warmup_cap": WARMUP_MAX_PASSES,
        "seconds": times,
        "ratio": ours_med / theirs_med,
        "ms_per_segment": {"nlgbench": ours_med / len(items) * 1000, "bert_score": theirs_med / len(items) * 1000},
        "max_abs_diff_f1": max_diff,
        "torch": torch.__version__,
    }


# ----------------------------------------------------------------------------- plot


def plot_sweep(rows: list[dict[str, Any]], path: Path) -> bool:
    """ms/segment and encode share against batch size, one line per encoder and device."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = [r for r in rows if r["part"] == "sweep" and r["ms_per_segment_median"]]
    if not sweep:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key in dict.fromkeys((r["encoder"], r["device"]) for r in sweep):
        line = sorted((int(r["batch_size"]), r) for r in sweep if (r["encoder"], r["device"]) == key)
        sizes = [b for b, _ in line]
        left.plot(sizes, [r["ms_per_segment_median"] for _, r in line], marker="o", label=f"{key[0]} ({key[1]})")
        right.plot(sizes, [100 * (r["encode_share"] or 0) for _, r in line], marker="o", label=f"{key[0]} ({key[1]})")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({int(r["batch_size"]) for r in sweep}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("batch size")
        ax.grid(alpha=0.3)
    left.set_ylabel("ms / segment (median of repeats)")
    right.set_ylabel("encode share of the cell time (%)")
    right.axhline(100 * TARGET_ENCODE_SHARE, color="grey", linestyle="--", linewidth=1)
    left.legend(fontsize=8)
    fig.suptitle("BERTScore, WMT16: batch-size sweep")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------- main


def run_part(name: str, spec: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    import nlgbench

    folder = out / spec["name"]
    print(f"\n== {name}: {folder}", flush=True)
    nlgbench.run(spec, folder)
    return [summary_row(name, row) for row in read_rows(folder)]


def recorded_parts(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The summary rows of every part folder already in `out` (`gpu-<part>-<device>/results.csv`, in
    PARTS order) and the recorded bert_score comparison: a summary of runs made in several calls."""
    rows: list[dict[str, Any]] = []
    for part in PARTS:
        for folder in sorted(out.glob(f"gpu-{part}-*")):
            if (folder / "results.csv").is_file():
                rows += [summary_row(part, row) for row in read_rows(folder)]
    reference = out / "bert_score.json"
    return rows, json.loads(reference.read_text(encoding="utf-8")) if reference.is_file() else None


def checks(rows: list[dict[str, Any]], device: str, reference: dict[str, Any] | None) -> list[str]:
    """The GPU targets against what was measured (lines to print)."""
    lines = []
    minilm = [r for r in rows if r["part"] == "quickstart" and r["device"] == device and r["encoder"] == MINILM]
    if minilm and minilm[0]["encode_share"] is not None:
        share = minilm[0]["encode_share"]
        lines.append(
            f"encode share, MiniLM-L6 BERTScore on {device}: {share:.0%} "
            f"(target >= {TARGET_ENCODE_SHARE:.0%}: {'met' if share >= TARGET_ENCODE_SHARE else 'NOT met'})"
        )
    cut = ratio(rows, "quickstart", device, f"{MINILM}[num_layers=3]", MINILM)
    if cut is not None:
        lines.append(f"3 layers / 6 layers time on {device}: {cut:.2f} (target < 1: {'met' if cut < 1 else 'NOT met'})")
    for dtype in ("fp16", "bf16"):
        half = ratio(rows, "quickstart", device, f"{MINILM}[dtype={dtype}]", MINILM)
        if half is not None:
            lines.append(f"{dtype} / fp32 time on {device}: {half:.2f}")
    big = [
        r
        for r in rows
        if r["device"] == device
        and r["cv"] is not None
        and r["n_segments"]
        and int(r["n_segments"]) >= TARGET_CV_MIN_SEGMENTS
    ]
    if big:
        worst = max(r["cv"] for r in big)
        lines.append(
            f"largest CV over {len(big)} {device} cells of >= {TARGET_CV_MIN_SEGMENTS} segments: {worst:.1%} "
            f"(target <= {TARGET_CV:.0%}: {'met' if worst <= TARGET_CV else 'NOT met'})"
        )
    if reference is not None:
        lines.append(
            f"nlgbench / bert_score time on {reference['device']}: {reference['ratio']:.2f} "
            f"(target <= {TARGET_REFERENCE_RATIO}: "
            f"{'met' if reference['ratio'] <= TARGET_REFERENCE_RATIO else 'NOT met'}), "
            f"max |dF| {reference['max_abs_diff_f1']:.1e}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "gpu")
    parser.add_argument("--device", default="cuda", help="the CUDA device (default cuda)")
    parser.add_argument(
        "--max-segments",
        type=int,
        default=None,
        help="first N segments per WMT16 language pair on the device (default: all 3360)",
    )
    parser.add_argument(
        "--cpu-max-segments",
        type=int,
        default=100,
        help="first N per language pair for the CPU comparison cells (default 100; 0: no CPU cells)",
    )
    parser.add_argument(
        "--similarity-max-segments",
        type=int,
        default=None,
        help="first N per language pair for the similarity part on the device (default: --max-segments)",
    )
    parser.add_argument(
        "--without-mpnet",
        action="store_true",
        help="leave out the MPNet-base cells (when its 440 MB of weights are not at hand on the GPU machine)",
    )
    parser.add_argument("--batch-sizes", default="16,32,64,128,256,512")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of the bert_score comparison")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="without CUDA, run the parts on the CPU instead of stopping (a smoke test)",
    )
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="measure nothing: write the summary, checks and plot of every part folder already in --out",
    )
    args = parser.parse_args(argv)
    if args.summary_only:
        recorded, measured = recorded_parts(args.out)
        machine = json.loads((args.out / "machine.json").read_text(encoding="utf-8"))
        return summarise(args.out, recorded, measured, args.device, machine)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)} (valid: {', '.join(PARTS)})")

    import torch

    device = args.device
    if not torch.cuda.is_available():
        print(
            f"no CUDA device: torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no GPU on this machine."
        )
        if not args.allow_cpu:
            print("Nothing measured. Run this on a machine with a CUDA GPU, or pass --allow-cpu for a CPU smoke test.")
            return 0
        device = "cpu"
        print("--allow-cpu: running the parts on the CPU (no GPU figures).")

    from nlgbench.measurement.devices import Device
    from nlgbench.measurement.environment import environment

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = environment(Device(device))
    (out / "machine.json").write_text(json.dumps(env, indent=2), encoding="utf-8")
    print(
        f"machine: {env.get('gpu') or env['cpu_model']} (driver {env.get('gpu_driver')}), torch {env['torch']}, "
        f"transformers {env['transformers']}, node {env['node']}"
    )

    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    mpnet = not args.without_mpnet
    if not mpnet:
        print(f"--without-mpnet: the {MPNET} cells are left out")
    rows: list[dict[str, Any]] = []
    if "quickstart" in parts:
        rows += run_part("quickstart", quickstart_spec(device, args.max_segments, args.repeats, mpnet), out)
        if device != "cpu" and args.cpu_max_segments:
            cpu_spec = quickstart_spec("cpu", args.cpu_max_segments, args.repeats, mpnet)
            encoders = cpu_spec["metrics"][0]["encoders"]
            cpu_spec["metrics"][0]["encoders"] = [e for e in encoders if not (isinstance(e, dict) and "dtype" in e)]
            rows += run_part("quickstart", cpu_spec, out)  # fp32 only on the CPU
    if "similarity" in parts:
        similar = args.similarity_max_segments or args.max_segments
        rows += run_part("similarity", similarity_spec(device, similar, args.repeats, mpnet), out)
        if device != "cpu" and args.cpu_max_segments:
            rows += run_part("similarity", similarity_spec("cpu", args.cpu_max_segments, args.repeats, mpnet), out)
    if "sweep" in parts:
        rows += run_part("sweep", sweep_spec(device, args.max_segments, args.repeats, sizes), out)
    reference = None
    if "reference" in parts:
        print(f"\n== reference: nlgbench vs bert_score on {device}", flush=True)
        try:
            reference = reference_comparison(device, args.max_segments, args.rounds)
            (out / "bert_score.json").write_text(json.dumps(reference, indent=2), encoding="utf-8")
        except ImportError as exc:
            print(f"skipped: {exc}")

    return summarise(out, rows, reference, device, env)


def summarise(
    out: Path, rows: list[dict[str, Any]], reference: dict[str, Any] | None, device: str, env: dict[str, Any]
) -> int:
    """Write summary.csv, summary.md and batch_sweep.png of these rows, and print the table and checks."""
    if rows:
        with (out / "summary.csv").open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    text = table(rows) if rows else "(no cells run)"
    found = checks(rows, device, reference)
    (out / "summary.md").write_text(
        f"# GPU benchmark\n\nMachine: {env.get('gpu') or env['cpu_model']}, driver {env.get('gpu_driver')}, "
        f"torch {env['torch']}, transformers {env['transformers']}, nlgbench {env['nlgbench']} "
        f"({env['git_commit']}).\n\n{text}\n\n" + "".join(f"- {line}\n" for line in found),
        encoding="utf-8",
    )
    print("\n" + text + "\n")
    for line in found:
        print(line)
    if plot_sweep(rows, out / "batch_sweep.png"):
        print(f"plot: {out / 'batch_sweep.png'}")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
