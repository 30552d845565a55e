"""The results table of docs/results/meta-evaluation.md: `nlgbench compare` of two encoders in a run folder
at every level and pairwise method (with the resampling units and the mt-metrics-eval convention where they
change a figure), as Markdown rows.

    python scripts/metaeval_table.py RUN_DIR --candidate all-MiniLM-L6-v2 --baseline all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare, test_text
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.summary import correlate

CASES = [  # (method, level, resample, test, convention); test "permutation-pairs": --perm-test pairs
    ("pearson", "global", "auto", "bootstrap", "nlgbench"),
    ("pearson", "global", "segments", "bootstrap", "nlgbench"),
    ("pearson", "global", "both", "bootstrap", "nlgbench"),
    ("pearson", "segment", "auto", "bootstrap", "nlgbench"),
    ("pearson", "source", "auto", "bootstrap", "nlgbench"),
    ("kendall", "source", "auto", "bootstrap", "nlgbench"),
    ("darr_kendall", "segment", "auto", "bootstrap", "nlgbench"),
    ("darr_kendall", "segment", "auto", "bootstrap", "mt-metrics-eval"),
    ("acc_eq", "segment", "auto", "bootstrap", "nlgbench"),
    ("acc_eq", "segment", "auto", "permutation", "nlgbench"),
    ("acc_eq", "segment", "auto", "permutation-pairs", "nlgbench"),
    ("pearson", "system", "auto", "bootstrap", "nlgbench"),
    ("pearson", "system", "auto", "permutation", "nlgbench"),
    ("kendall", "system", "auto", "bootstrap", "nlgbench"),
    ("pairwise_accuracy", "system", "auto", "bootstrap", "nlgbench"),
    ("pairwise_accuracy", "system", "both", "bootstrap", "nlgbench"),
    ("pairwise_accuracy", "system", "auto", "bootstrap", "mt-metrics-eval"),
    ("soft_pairwise_accuracy", "system", "auto", "bootstrap", "nlgbench"),
    ("soft_pairwise_accuracy", "system", "auto", "bootstrap", "mt-metrics-eval"),
]


def case_label(method: str, resample: str, convention: str, test: str = "bootstrap") -> str:
    """The method column: the method, and the options that differ from the defaults."""
    options = [f"`--resample {resample}`"] if resample != "auto" else []
    options += ["`--perm-test pairs`"] if test == "permutation-pairs" else []
    options += [f"`--convention {convention}`"] if convention != "nlgbench" else []
    return ", ".join([method, *options])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--only", help="only the rows whose 'method column/level' starts with this text")
    parser.add_argument(
        "--pooled", action="store_true", help="then each cell's pooled Pearson with its interval (result.json's)"
    )
    args = parser.parse_args()
    run = RunData.open(args.run)
    print(
        "| dataset | level | method | baseline | candidate | delta [95% CI] | p [test: units] "
        "| Williams p, two-sided / observed direction (p / 2) [n] |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method, level, resample, test, convention in CASES:
        perm_test = "pairs" if test == "permutation-pairs" else "scores"
        options = QualityOptions(
            method=method,
            level=level,
            resample=resample,
            test=test.removesuffix("-pairs"),
            convention=convention,
            perm_test=perm_test,
        )
        label = case_label(method, resample, convention, test)
        if args.only and not f"{label}/{level}".startswith(args.only):
            continue
        try:
            result = compare(run, args.candidate, args.baseline, options=options)
        except UserError as e:
            print(f"<!-- {label}/{level}: {e} -->")
            continue
        for r in result["rows"]:
            na = fmt.UNDEFINED
            lo, hi = r["delta_ci"]
            delta = fmt.signed(r["delta"], missing=na)
            if math.isfinite(r["delta"]) and test == "bootstrap":
                delta += f" [{fmt.signed(lo)}, {fmt.signed(hi)}]"
            p = f"{fmt.p_value(r['p_value'], 1000, missing=na)} [{test_text(r)}]"
            if r["williams_test"].startswith("n/a"):
                williams = "n/a"
            elif len(r["williams_by_group"]) > 1:
                williams = "; ".join(
                    f"{g['group']} {fmt.p_value(g['p'], missing=na)}, "
                    f"{fmt.p_value(g['p_observed_direction'], missing=na)} [{g['n']}]"
                    for g in r["williams_by_group"]
                )
            else:
                williams = (
                    f"{fmt.p_value(r['p_williams'], missing=na)}, "
                    f"{fmt.p_value(r['p_williams_observed_direction'], missing=na)} [{r['williams_n']}]"
                )
            print(
                f"| {r['dataset']} | {level} | {label} | "
                f"{fmt.number(r['quality_baseline'], missing=na)} | {fmt.number(r['quality_candidate'], missing=na)} | "
                f"{delta} | {p} | {williams} |"
            )
        for w in result["warnings"]:
            print(f"<!-- {label}/{level}: {w} -->")

    if args.pooled:
        pooled_table(run)


def pooled_table(run: RunData) -> None:
    """Each cell's pooled Pearson and its 95% interval as today's code writes them into result.json
    and results.csv (1000 resamples, seed 0, the global level's unit), from the cell's scores."""
    print("\n| dataset | encoder | pooled Pearson [95% CI] | resampled |\n|---|---|---|---|")
    for _, cell in run.cells.iterrows():
        seg = run.segments(cell["cell_id"])
        docs = None if seg.doc is None else seg.doc.tolist()
        figures = correlate(
            seg.score.tolist(),
            seg.human.tolist(),
            seg.lp.tolist(),
            seg.system.tolist(),
            docs,
            seg_ids=seg.seg_id.tolist(),
            bootstrap=1000,
            seed=0,
        )
        lo, hi = figures["bootstrap"]["pearson_pooled_ci"]
        print(
            f"| {cell['dataset']} | {cell['encoder']} | {fmt.number(figures['pearson_pooled'])} "
            f"[{fmt.number(lo)}, {fmt.number(hi)}] | {figures['bootstrap']['resampled']} |"
        )


if __name__ == "__main__":
    main()
