"""The transport metrics' CPU targets in one run: BaryScore / BERTScore (<= 2) and MoverScore / moverscore_v2 (<= 0.33).

Runs benchmarks/baryscore_phases.py and benchmarks/moverscore_vs_reference.py one after the
other in this process (same threads), each alternating its two implementations for R rounds,
then prints the machine, the versions and both ratios as median (min..max) over the rounds.

    python benchmarks/transport_metrics.py [--model ID] [--threads T] [--rounds R]
        [--bary-segments N] [--mover-segments N] [--pot]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baryscore_phases  # noqa: E402
import moverscore_vs_reference  # noqa: E402


def machine() -> str:
    """CPU model (lscpu's 'Model name'), logical CPUs, torch threads and library versions."""
    import numpy
    import ot
    import transformers

    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} logical CPUs, torch threads {torch.get_num_threads()}; "
        f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"POT {ot.__version__}, numpy {numpy.__version__}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bary-segments", type=int, default=50, help="WMT16, first N per pair for BaryScore")
    parser.add_argument("--mover-segments", type=int, default=100, help="WMT16, first N per pair for MoverScore")
    parser.add_argument("--pot", action="store_true", help="also time BaryScore's barycentres against POT per text")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    print(f"\nBaryScore vs BERTScore: WMT16 first {args.bary_segments} per pair, {args.model}, batch {args.batch_size}")
    bary = baryscore_phases.report(
        baryscore_phases.measure(args.model, "wmt16", args.bary_segments, args.batch_size, args.rounds, [], args.pot)
    )
    print(
        f"\nMoverScore vs moverscore_v2: WMT16 first {args.mover_segments} per pair, {args.model}, "
        f"batch {args.batch_size}"
    )
    mover = moverscore_vs_reference.report(
        moverscore_vs_reference.measure(args.model, args.mover_segments, args.batch_size, args.rounds)
    )
    print(
        f"\nsummary: BaryScore / BERTScore {bary:.2f} (target <= 2); "
        f"MoverScore / moverscore_v2 {mover:.3f} (target <= 0.33); medians of {args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
