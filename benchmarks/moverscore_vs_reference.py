"""nlgbench MoverScore against the published moverscore_v2 (PyPI moverscore==1.0.3) on WMT16.

Same model (last layer), idf dictionaries from references and hypotheses, batch size and
threads; timed alternately in one process. Prints the time ratio, max |d score| (over pairs
whose hypothesis tokens differ from the reference's: see tests/test_moverscore.py for why identical
pairs differ by ~3e-4 in the reference) and nlgbench's split into encode / distance /
transport. Target: ratio <= 0.5 at identical scores.

    python benchmarks/moverscore_vs_reference.py [--model ID] [--batch-size B] [--threads T]
        [--max-segments N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-segments", type=int, default=100, help="first N per language pair (default 100)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from moverscore_reference import load_moverscore_v2

    from nlgbench.data import load_dataset
    from nlgbench.encoders import EncoderRef
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.moverscore import MoverScoreScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    items = load_dataset("wmt16", max_segments=args.max_segments).items
    refs, hyps = [it.reference for it in items], [it.hypothesis for it in items]
    ms = load_moverscore_v2(args.model)
    idf_ref, idf_hyp = ms.get_idf_dict(refs, nthreads=1), ms.get_idf_dict(hyps, nthreads=1)
    ours = MoverScoreScorer(EncoderRef(args.model), {"idf": True}, "cpu", args.batch_size, "wmd")
    ours.prepare(items)
    print(f"WMT16: {len(items)} segments; model {args.model} (last layer), idf, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}, rounds {args.rounds}")
    ours.score(items[: 2 * args.batch_size], PhaseTimer())
    ms.word_mover_score(refs[:8], hyps[:8], idf_ref, idf_hyp, batch_size=args.batch_size, device="cpu")

    our_t, ref_t, phases = [], [], []
    same = np.array([ms.tokenizer.tokenize(h) == ms.tokenizer.tokenize(r) for h, r in zip(hyps, refs)])
    max_diff = 0.0
    for r in range(args.rounds):
        for who in (["ours", "ref"] if r % 2 == 0 else ["ref", "ours"]):
            start = time.perf_counter()
            if who == "ours":
                timer = PhaseTimer()
                s_ours = np.array(ours.score(items, timer).score)
                our_t.append(time.perf_counter() - start)
                phases.append(timer.seconds)
            else:
                s_ref = np.array(ms.word_mover_score(refs, hyps, idf_ref, idf_hyp, stop_words=[], n_gram=1,
                                                     remove_subwords=True, batch_size=args.batch_size, device="cpu"))
                ref_t.append(time.perf_counter() - start)
        max_diff = max(max_diff, float(np.abs(s_ours - s_ref)[~same].max()))
        print(f"round {r + 1}: nlgbench {our_t[-1]:.2f} s, moverscore_v2 {ref_t[-1]:.2f} s")
    n = len(items)
    o, t = statistics.median(our_t), statistics.median(ref_t)
    ph = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    print(f"nlgbench      median {o:.2f} s = {o / n * 1000:.2f} ms/segment ("
          + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items()) + ")")
    print(f"moverscore_v2 median {t:.2f} s = {t / n * 1000:.2f} ms/segment")
    print(f"time ratio nlgbench / moverscore_v2 = {o / t:.3f} (target <= 0.5)")
    print(f"max |d score| = {max_diff:.2e} over {(~same).sum()} pairs whose tokens differ "
          f"({same.sum()} pairs with identical tokens excluded)")


if __name__ == "__main__":
    main()
