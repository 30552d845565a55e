"""nlgbench BERTScore against the `bert_score` package on WMT16: time ratio and max |dF|.

Same model, layer, IDF setting, batch size and threads; both scorers are loaded once, then
timed alternately (order swapped every round) in this one process, so drift of the machine
hits both alike. Also splits each side's time into encoding and the rest (nlgbench: tokenize, encode, match and
other, the time outside those phases; its non-model share is tokenize + match + other).

    python benchmarks/bertscore_vs_reference.py [--model ID] [--layer N] [--batch-size B]
        [--threads T] [--max-segments N] [--rounds R] [--idf]

With `--dropin`, also `nlgbench.bert_score` as a bert_score user calls it: `score(...)` whole (model load
included, on its default backend: `auto`, whose one-time choice is made before timing) against
`bert_score.score(...)`, and `BERTScorer(..., backend=B).score` for each installed backend against
`bert_score.BERTScorer.score`, alternated round by round, each with its max |dF| against bert_score's F.

Needs the datasets mirror/cache (NLGBENCH_DATA_MIRROR) and the model in the local HF cache.
Target: ratio (nlgbench / bert_score) <= 0.74 with max |dF| <= 1e-5, and nlgbench's time outside the
model <= 0.06 ms/segment on full WMT16; the drop-in on its default backend: max |dF| <= 1e-5, never slower
than its torch path, and <= 0.55x bert_score's time (0.45x where the best backend takes half torch's time).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def timed_reference(scorer: Any, hyps: list[str], refs: list[str]) -> tuple[np.ndarray, float, float]:
    """bert_score's F1, total seconds, and the seconds spent inside its embedding function."""
    import bert_score.utils as bs_utils

    spent = [0.0]
    original: Callable[..., Any] = bs_utils.get_bert_embedding

    def counting(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    bs_utils.get_bert_embedding = counting
    try:
        start = time.perf_counter()
        _, _, f = scorer.score(hyps, refs)
        total = time.perf_counter() - start
    finally:
        bs_utils.get_bert_embedding = original
    return f.numpy(), total, spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--layer", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--max-segments", type=int, default=None, help="first N per language pair (default: all 3360)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idf", action="store_true")
    parser.add_argument(
        "--dropin",
        action="store_true",
        help="also time nlgbench.bert_score against bert_score as their users call them: score(...) whole (its "
        "default backend, auto) and BERTScorer(...).score per installed backend",
    )
    parser.add_argument("--only-dropin", action="store_true", help="with --dropin: skip the inner scorer's rounds")
    args = parser.parse_args()

    from bert_score import BERTScorer

    from nlgbench.data.loaders import load_dataset
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.measurement.protocol import with_other
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.bertscore import BertScoreScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    items = load_dataset("wmt16", max_segments=args.max_segments).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    ours = BertScoreScorer(EncoderRef(args.model), {"idf": args.idf, "layer": args.layer}, "cpu", args.batch_size)
    ours.prepare(items)
    theirs = BERTScorer(
        model_type=args.model,
        num_layers=args.layer,
        batch_size=args.batch_size,
        idf=args.idf,
        idf_sents=refs if args.idf else None,
        device="cpu",
        use_fast_tokenizer=True,
        nthreads=0,
    )
    print(
        f"WMT16: {len(items)} segments; model {args.model}, layer {args.layer}, idf {args.idf}, "
        f"batch {args.batch_size}, torch threads {torch.get_num_threads()}, rounds {args.rounds}"
    )

    if args.only_dropin:
        dropin_rows(args, hyps, refs, theirs)
        return
    # warm-up both (not timed)
    ours.score(items[: 2 * args.batch_size], PhaseTimer())
    theirs.score(hyps[: 2 * args.batch_size], refs[: 2 * args.batch_size])

    our_times, ref_times, our_phases, ref_encode = [], [], [], []
    max_diff = 0.0
    for r in range(args.rounds):
        order = ["ours", "ref"] if r % 2 == 0 else ["ref", "ours"]
        for who in order:
            if who == "ours":
                timer = PhaseTimer()
                start = time.perf_counter()
                f_ours = np.array(ours.score(items, timer).score)
                our_times.append(time.perf_counter() - start)
                our_phases.append(with_other(dict(timer.seconds), our_times[-1]))
            else:
                f_ref, total, enc = timed_reference(theirs, hyps, refs)
                ref_times.append(total)
                ref_encode.append(enc)
        max_diff = max(max_diff, float(np.abs(f_ours - f_ref).max()))
        print(f"round {r + 1}: nlgbench {our_times[-1]:.2f} s, bert_score {ref_times[-1]:.2f} s")

    n = len(items)
    ours_med, ref_med = statistics.median(our_times), statistics.median(ref_times)
    ph = {k: statistics.median(p.get(k, 0.0) for p in our_phases) for k in our_phases[0]}
    enc_ref = statistics.median(ref_encode)
    outside = statistics.median(p.get("tokenize", 0) + p.get("match", 0) + p.get("other", 0) for p in our_phases)
    print(
        f"nlgbench   median {ours_med:.2f} s = {ours_med / n * 1000:.2f} ms/segment "
        f"(tokenize {ph.get('tokenize', 0):.2f} s, encode {ph.get('encode', 0):.2f} s, "
        f"match {ph.get('match', 0):.2f} s, other {ph.get('other', 0):.2f} s)"
    )
    print(
        f"nlgbench outside the model: tokenize + match + other = {outside:.2f} s = "
        f"{outside / n * 1000:.3f} ms/segment (target <= 0.06)"
    )
    print(
        f"bert_score median {ref_med:.2f} s = {ref_med / n * 1000:.2f} ms/segment "
        f"(tokenize+encode {enc_ref:.2f} s, dedup/pad/match {ref_med - enc_ref:.2f} s)"
    )
    print(f"time ratio nlgbench / bert_score = {ours_med / ref_med:.3f} (target <= 0.74)")
    print(f"max |dF| = {max_diff:.2e} (target <= 1e-5)")
    if args.dropin:
        dropin_rows(args, hyps, refs, theirs)


def dropin_rows(args: argparse.Namespace, hyps: list[str], refs: list[str], theirs: Any) -> None:
    """`nlgbench.bert_score` as its users call it, against bert_score the same way: `score(...)` whole (model
    load included, its default backend: auto) and `BERTScorer(...).score` on each backend, alternated."""
    import bert_score

    import nlgbench.bert_score as dropin
    from nlgbench.encoders.registry import installed_backends

    same = {"model_type": args.model, "num_layers": args.layer, "batch_size": args.batch_size, "idf": args.idf}
    same |= {"device": "cpu", "nthreads": 0}
    dropin.score(hyps[:8], refs[:8], **same)  # the first use on this machine: the choice (and exports), untimed
    corpus = refs if args.idf else None  # a BERTScorer's idf comes from idf_sents, as bert_score's
    scorers = {
        f"nlgbench.bert_score.BERTScorer(backend={b})": dropin.BERTScorer(**same, idf_sents=corpus, backend=b)
        for b in installed_backends()
    }
    chosen = dropin.BERTScorer(**same, idf_sents=corpus)._scorer._scorer.describe().get("backend_choice", {})
    print(f"backend auto chose {chosen.get('chosen')} (calibration seconds: {chosen.get('seconds')})")
    runs: dict[str, Callable[[], Any]] = {
        "bert_score.score": lambda: bert_score.score(hyps, refs, **same, use_fast_tokenizer=True)[2],
        "nlgbench.bert_score.score (default backend)": lambda: dropin.score(hyps, refs, **same)[2],
        "bert_score.BERTScorer.score": lambda: theirs.score(hyps, refs)[2],
        **{name: (lambda s=s: s.score(hyps, refs)[2]) for name, s in scorers.items()},
    }
    reference = theirs.score(hyps, refs)[2].numpy()  # bert_score's F, which every call is compared with
    worst: dict[str, float] = {}
    for name, function in runs.items():  # warm-up (untimed), and each call's max |dF|
        worst[name] = float(np.abs(function().numpy() - reference).max())
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # each round starts with the next call
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
        print(f"drop-in round {r + 1}: " + ", ".join(f"{name} {times[name][-1]:.2f} s" for name in names))
    loaded = statistics.median(times["bert_score.BERTScorer.score"])
    whole = statistics.median(times["bert_score.score"])
    print(f"{'call':52} {'median s':>9} {'x bert_score':>13} {'max |dF|':>9}")
    for name, values in times.items():
        against = loaded if "BERTScorer" in name else whole
        median = statistics.median(values)
        print(f"{name:52} {median:9.2f} {median / against:13.3f} {worst[name]:9.1e}")
    print("(x bert_score: score(...) calls against bert_score.score, BERTScorer ones against BERTScorer.score)")


if __name__ == "__main__":
    main()
