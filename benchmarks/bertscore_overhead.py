"""nlgbench BERTScore's work outside the model on WMT16, in process CPU seconds (robust to a busy machine).

The model's call is replaced by a slice of a stored random tensor of its output's shape, so only the work
around it runs: tokenising, padding, packing, normalising and matching, every pass from the texts, as a
timed repeat does. Phases are read from the scorer's own `PhaseTimer`, with `time.perf_counter`
replaced by `time.process_time` in this process (CPU seconds of every thread: the tokenizer's Rust
threads included). One torch thread by default: with more, idle OpenMP threads spin and their CPU
seconds say nothing. Prints the median and the least of each phase over the passes.

    python benchmarks/bertscore_overhead.py [--model ID] [--layer N] [--batch-size B]
        [--max-segments N] [--rounds R] [--threads T] [--idf]

Needs the datasets mirror/cache (NLGBENCH_DATA_MIRROR) and the model's tokenizer in the local HF cache.
Target (on an idle machine, wall time, `benchmarks/bertscore_vs_reference.py`): 0.06 ms/segment.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--layer", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-segments", type=int, default=None, help="first N per language pair (default: all 3360)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--idf", action="store_true")
    args = parser.parse_args()

    from nlgbench.data.loaders import load_dataset
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.measurement.protocol import with_other
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.bertscore import BertScoreScorer

    torch.set_num_threads(args.threads)
    time.perf_counter = time.process_time  # every phase in CPU seconds of this process
    items = load_dataset("wmt16", max_segments=args.max_segments).items
    scorer = BertScoreScorer(EncoderRef(args.model), {"idf": args.idf, "layer": args.layer}, "cpu", args.batch_size)
    scorer.prepare(items)
    width = scorer.encoder.model.config.hidden_size
    stored = torch.randn(args.batch_size, scorer.encoder.max_length, width, generator=torch.Generator().manual_seed(0))

    def stored_states(batch: Sequence[Sequence[int]], layers: Sequence[int], padded: Any = None) -> Any:
        ids, mask = padded if padded is not None else scorer.encoder.pad(batch)
        return [stored[: ids.shape[0], : ids.shape[1]].contiguous()], mask  # a fresh tensor, as a model returns

    scorer.encoder.hidden_states = stored_states  # type: ignore[method-assign]
    scorer.score(items, PhaseTimer())  # warm-up: the packing buffer grows once
    passes = []
    for _ in range(args.rounds):
        timer = PhaseTimer()
        start = time.perf_counter()
        scorer.score(items, timer)
        phases = with_other(dict(timer.seconds), time.perf_counter() - start)
        phases.pop("encode", None)  # the stored tensor's copy, not the model
        passes.append(phases)
    n = len(items)
    print(
        f"WMT16: {n} segments; model {args.model} (its call replaced), layer {args.layer}, idf {args.idf}, "
        f"batch {args.batch_size}, torch threads {args.threads}, {args.rounds} passes; process CPU seconds"
    )
    for label, pick in (("median", statistics.median), ("least", min)):
        phases = {k: pick(p.get(k, 0.0) for p in passes) for k in ("tokenize", "match", "other")}
        outside = pick(sum(p.get(k, 0.0) for k in ("tokenize", "match", "other")) for p in passes)
        parts = ", ".join(f"{k} {v:.3f} s" for k, v in phases.items())
        print(f"{label:6s} {parts}; outside the model {outside:.3f} s = {outside / n * 1000:.3f} ms/segment")


if __name__ == "__main__":
    main()
