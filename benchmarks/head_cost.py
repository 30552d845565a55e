"""A feature-head student's cost against plain BERTScore with the same encoder cut, interleaved.

The two scorers are timed in alternating order (A B B A ...) in one process, so a busy machine slows
both alike and the ratio stays readable where a sweep's separate cells drift apart. Each timed pass
scores every item from the texts (tokenising, the encoder, greedy matching; the head adds one more
layer's matching, pooling and its linear map), as a sweep's repeat does. Prints per scorer the
median wall and process-CPU ms/segment and the median of the per-round ratios head / plain.

    python benchmarks/head_cost.py --head DIR --layers K [--model NAME] [--max-segments N]
        [--rounds R] [--threads T]

Target (the human-label students' acceptance): head / plain <= 1.10 in wall time.
Needs the datasets mirror/cache (NLGBENCH_DATA_MIRROR) and the model in the local HF cache.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and process-CPU seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head", required=True, help="the feature-head student's folder")
    parser.add_argument("--layers", type=int, required=True, help="the student's encoder cut (its num_layers)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="the student's base encoder (registered name)")
    parser.add_argument("--dataset", default="wmt16")
    parser.add_argument("--max-segments", type=int, default=None, help="first N per language pair (default: all)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, each timing both scorers once")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from nlgbench import Scorer
    from nlgbench.data.loaders import load_dataset

    items = load_dataset(args.dataset, max_segments=args.max_segments).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    plain = Scorer("bertscore", encoder={"name": args.model, "num_layers": args.layers}, device="cpu")
    head = Scorer("frugalscore", encoder=args.head, device="cpu")
    runs = {"plain": lambda: plain.score(hyps, refs), "head": lambda: head.score(hyps, refs)}
    for run in runs.values():  # loads the model, builds the workspace; untimed
        run()
    wall: dict[str, list[float]] = {"plain": [], "head": []}
    cpu: dict[str, list[float]] = {"plain": [], "head": []}
    for r in range(args.rounds):
        for name in ("plain", "head") if r % 2 == 0 else ("head", "plain"):
            w, c = timed(runs[name])
            wall[name].append(w)
            cpu[name].append(c)
    n = len(items)
    print(f"{args.dataset}: {n} items; {args.model} cut to {args.layers} layers; {args.threads} torch threads;")
    print(f"{platform.processor() or platform.machine()}; torch {torch.__version__}; {args.rounds} interleaved rounds")
    for name in ("plain", "head"):
        print(
            f"{name:>5}: wall {1000 * statistics.median(wall[name]) / n:.3f} ms/segment "
            f"(passes {', '.join(f'{1000 * w / n:.2f}' for w in wall[name])}), "
            f"CPU {1000 * statistics.median(cpu[name]) / n:.3f} ms/segment"
        )
    wall_ratio = statistics.median(h / p for h, p in zip(wall["head"], wall["plain"], strict=True))
    cpu_ratio = statistics.median(h / p for h, p in zip(cpu["head"], cpu["plain"], strict=True))
    print(f"head / plain: wall {wall_ratio:.3f}x, CPU {cpu_ratio:.3f}x (median of per-round ratios; target <= 1.10)")


if __name__ == "__main__":
    main()
