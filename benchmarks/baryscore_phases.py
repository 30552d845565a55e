"""BaryScore's time per segment split into encode / barycentre / transport, against BERTScore.

Same model, data, batch size and threads for both; rounds alternate in one process. Prints
per-phase milliseconds per segment (median over rounds), transport and barycentre time
relative to encoding, and BaryScore's total time relative to BERTScore's (the public
BaryScore implementation is reported to be ~25x slower than BERTScore).

    python benchmarks/baryscore_phases.py [--model ID] [--dataset wmt16] [--max-segments N]
        [--batch-size B] [--threads T] [--rounds R] [--sinkhorn-regs 0.1 ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--dataset", default="wmt16")
    parser.add_argument("--max-segments", type=int, default=50, help="first N per language pair (default 50)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sinkhorn-regs", type=float, nargs="*", default=[])
    args = parser.parse_args()

    from nlgbench.data import load_dataset
    from nlgbench.encoders import EncoderRef
    from nlgbench.metrics.baryscore import BaryScoreScorer
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.bertscore import BertScoreScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    items = load_dataset(args.dataset, max_segments=args.max_segments).items
    n = len(items)
    bary = BaryScoreScorer(EncoderRef(args.model), {"idf": True, "sinkhorn_regs": args.sinkhorn_regs}, "cpu", args.batch_size)
    bert = BertScoreScorer(EncoderRef(args.model), {"idf": False}, "cpu", args.batch_size)
    bary.prepare(items)
    bert.prepare(items)
    print(f"{args.dataset}: {n} segments; model {args.model}; BaryScore layers {bary.layers}, idf, "
          f"sinkhorn {args.sinkhorn_regs or 'none'}; batch {args.batch_size}; torch threads {torch.get_num_threads()}; "
          f"rounds {args.rounds}")
    warm = items[: 2 * args.batch_size]
    bary.score(warm, PhaseTimer())
    bert.score(warm, PhaseTimer())

    phases: dict[str, list[float]] = {}
    totals: dict[str, list[float]] = {"baryscore": [], "bertscore": []}
    for r in range(args.rounds):
        for name in (["baryscore", "bertscore"] if r % 2 == 0 else ["bertscore", "baryscore"]):
            timer = PhaseTimer()
            start = time.perf_counter()
            (bary if name == "baryscore" else bert).score(items, timer)
            totals[name].append(time.perf_counter() - start)
            if name == "baryscore":
                for phase, seconds in timer.seconds.items():
                    phases.setdefault(phase, []).append(seconds)
            print(f"round {r + 1} {name}: {totals[name][-1]:.2f} s", flush=True)

    ms = {phase: statistics.median(v) / n * 1000 for phase, v in phases.items()}
    bary_ms = statistics.median(totals["baryscore"]) / n * 1000
    bert_ms = statistics.median(totals["bertscore"]) / n * 1000
    print("\nBaryScore ms/segment (median over rounds):")
    for phase in ("tokenize", "encode", "barycentre", "transport"):
        print(f"  {phase:<10} {ms.get(phase, 0.0):8.2f}")
    print(f"  {'total':<10} {bary_ms:8.2f}")
    print(f"transport / encode  = {ms['transport'] / ms['encode']:.3f}")
    print(f"barycentre / encode = {ms['barycentre'] / ms['encode']:.3f}")
    print(f"BERTScore (same model, last layer, no idf): {bert_ms:.2f} ms/segment; "
          f"BaryScore / BERTScore = {bary_ms / bert_ms:.2f}")


if __name__ == "__main__":
    main()
