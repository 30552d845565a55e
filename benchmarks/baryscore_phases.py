"""BaryScore's time against BERTScore's for the same encoder, and its split into encode / barycentre / transport.

Same model, data, batch size and threads for both; both scorers are loaded once, then timed
alternately (order swapped every round) in this one process, so drift of the machine hits both
alike. Prints per-phase milliseconds per segment (median over rounds) of wall time and of
process CPU time (robust to a busy machine), the time outside the encoder (tokenize, barycentre,
transport, other) and its share of each metric's total, the ratio BaryScore / BERTScore per round
with its median and spread (wall and CPU), and, with --pot, the barycentre phase against the
published code's calls (POT's `free_support_barycenter` per text) on the same states.
Target: BaryScore total <= 2x BERTScore on CPU.

    python benchmarks/baryscore_phases.py [--model ID] [--dataset wmt16] [--max-segments N]
        [--batch-size B] [--threads T] [--rounds R] [--sinkhorn-regs 0.1 ...] [--pot]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np
import torch

from cpu_phases import CpuPhaseTimer, phase_line, with_rest


def spread(values: list[float]) -> str:
    """'median (min..max, n=N)'."""
    return f"{statistics.median(values):.3f} ({min(values):.3f}..{max(values):.3f}, n={len(values)})"


def measure(
    model: str,
    dataset: str,
    max_segments: int | None,
    batch_size: int,
    rounds: int,
    sinkhorn_regs: list[float],
    pot: bool = False,
) -> dict[str, Any]:
    """Timings of BaryScore (idf, last 5 layers) and BERTScore (last layer, no idf) on the same items, alternated."""
    from nlgbench.data.loaders import load_dataset
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.metrics.baryscore import BaryScoreScorer
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.bertscore import BertScoreScorer

    items = load_dataset(dataset, max_segments=max_segments).items
    bary = BaryScoreScorer(EncoderRef(model), {"idf": True, "sinkhorn_regs": sinkhorn_regs}, "cpu", batch_size)
    bert = BertScoreScorer(EncoderRef(model), {"idf": False}, "cpu", batch_size)
    bary.prepare(items)
    bert.prepare(items)
    warm = items[: 2 * batch_size]
    bary.score(warm, PhaseTimer())
    bert.score(warm, PhaseTimer())

    phases: dict[str, list[float]] = {}
    totals: dict[str, list[float]] = {"baryscore": [], "bertscore": []}
    cpu_totals: dict[str, list[float]] = {"baryscore": [], "bertscore": []}
    rounds_wall: dict[str, list[dict[str, float]]] = {"baryscore": [], "bertscore": []}
    rounds_cpu: dict[str, list[dict[str, float]]] = {"baryscore": [], "bertscore": []}
    load = [os.getloadavg()[0]]
    for r in range(rounds):
        for name in ["baryscore", "bertscore"] if r % 2 == 0 else ["bertscore", "baryscore"]:
            timer = CpuPhaseTimer()
            start, start_cpu = time.perf_counter(), time.process_time()
            (bary if name == "baryscore" else bert).score(items, timer)
            totals[name].append(time.perf_counter() - start)
            cpu_totals[name].append(time.process_time() - start_cpu)
            rounds_wall[name].append(with_rest(timer.seconds, totals[name][-1]))
            rounds_cpu[name].append(with_rest(timer.cpu_seconds, cpu_totals[name][-1]))
            if name == "baryscore":
                for phase, seconds in timer.seconds.items():
                    phases.setdefault(phase, []).append(seconds)
        load.append(os.getloadavg()[0])
        print(
            f"  round {r + 1}: baryscore {totals['baryscore'][-1]:.2f} s, bertscore {totals['bertscore'][-1]:.2f} s, "
            f"ratio {totals['baryscore'][-1] / totals['bertscore'][-1]:.2f}",
            flush=True,
        )
    out: dict[str, Any] = {
        "n": len(items),
        "layers": bary.layers,
        "totals": totals,
        "cpu_totals": cpu_totals,
        "phases": phases,
        "rounds_wall": rounds_wall,
        "rounds_cpu": rounds_cpu,
        "load": load,
    }
    if pot:
        out["pot"] = pot_barycentres(bary, items, batch_size, rounds)
    return out


def pot_barycentres(scorer: Any, items: list[Any], batch_size: int, rounds: int) -> dict[str, list[float]]:
    """Seconds for the barycentres of all distinct (text, side): nlgbench's batched ones vs POT per text."""
    import ot

    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.embedding import embed_texts

    texts = list(
        dict.fromkeys([(it.reference, "reference") for it in items] + [(it.hypothesis, "hypothesis") for it in items])
    )
    emb = embed_texts(scorer.encoder, [t for t, _ in texts], scorer.layers, batch_size, PhaseTimer())
    todo = {key: emb[key[0]] for key in texts}
    measures = [scorer.measure(*emb[text], side) for text, side in texts]
    seconds: dict[str, list[float]] = {"nlgbench": [], "pot": []}
    for r in range(rounds):
        for who in ["nlgbench", "pot"] if r % 2 == 0 else ["pot", "nlgbench"]:
            start = time.perf_counter()
            if who == "nlgbench":
                scorer.barycentres(todo, torch.get_num_threads())
            else:
                for layers, w in measures:
                    x = layers.numpy()
                    ot.lp.free_support_barycenter(
                        list(x),
                        [w] * len(x),
                        np.zeros(x.shape[1:]),
                        b=np.full(x.shape[1], 1.0 / x.shape[1]),
                        numItermax=1000,
                    )
            seconds[who].append(time.perf_counter() - start)
        print(
            f"  barycentres round {r + 1}: nlgbench {seconds['nlgbench'][-1]:.2f} s, "
            f"POT per text {seconds['pot'][-1]:.2f} s",
            flush=True,
        )
    return seconds


def report(result: dict[str, Any]) -> float:
    """Prints the figures; returns the median of the per-round ratios BaryScore / BERTScore."""
    n = result["n"]
    ms = {phase: statistics.median(v) / n * 1000 for phase, v in result["phases"].items()}
    bary_ms = statistics.median(result["totals"]["baryscore"]) / n * 1000
    bert_ms = statistics.median(result["totals"]["bertscore"]) / n * 1000
    ratios = [a / b for a, b in zip(result["totals"]["baryscore"], result["totals"]["bertscore"], strict=True)]
    print(f"BaryScore ms/segment (median over {len(ratios)} rounds, {n} segments, layers {result['layers']}):")
    for phase in ("tokenize", "encode", "barycentre", "transport"):
        print(f"  {phase:<10} {ms.get(phase, 0.0):8.2f}")
    print(f"  {'total':<10} {bary_ms:8.2f}")
    print(
        f"barycentre / encode = {ms['barycentre'] / ms['encode']:.3f}; "
        f"transport / encode = {ms['transport'] / ms['encode']:.3f}"
    )
    print(f"BERTScore (same model, last layer, no idf): {bert_ms:.2f} ms/segment")
    print(f"BaryScore / BERTScore per round: median {spread(ratios)} (target <= 2)")
    for name in ("baryscore", "bertscore"):
        print(phase_line(f"{name} wall", result["rounds_wall"][name], n))
    for name in ("baryscore", "bertscore"):
        print(phase_line(f"{name} process CPU (encode includes tokenize)", result["rounds_cpu"][name], n))
    cpu = result["cpu_totals"]
    cpu_ratios = [a / b for a, b in zip(cpu["baryscore"], cpu["bertscore"], strict=True)]
    print(
        f"process CPU ms/segment: BaryScore {statistics.median(cpu['baryscore']) / n * 1000:.2f}, "
        f"BERTScore {statistics.median(cpu['bertscore']) / n * 1000:.2f}; "
        f"ratio per round: median {spread(cpu_ratios)}"
    )
    if "pot" in result:
        pot = [a / b for a, b in zip(result["pot"]["nlgbench"], result["pot"]["pot"], strict=True)]
        print(f"barycentres nlgbench / POT per text: median {spread(pot)}")
    print(f"load average (1 min) during the rounds: {', '.join(f'{x:.1f}' for x in result['load'])}")
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--dataset", default="wmt16")
    parser.add_argument("--max-segments", type=int, default=50, help="first N per language pair (default 50)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sinkhorn-regs", type=float, nargs="*", default=[])
    parser.add_argument("--pot", action="store_true", help="also time the barycentres against POT per text")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"{args.dataset} (first {args.max_segments} per pair); model {args.model}; batch {args.batch_size}; "
        f"torch threads {torch.get_num_threads()}; sinkhorn {args.sinkhorn_regs or 'none'}; rounds {args.rounds}"
    )
    report(
        measure(args.model, args.dataset, args.max_segments, args.batch_size, args.rounds, args.sinkhorn_regs, args.pot)
    )


if __name__ == "__main__":
    main()
