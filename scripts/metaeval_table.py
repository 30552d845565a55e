"""The results table of docs/results/meta-evaluation.md: `nlgbench compare` of two encoders in a run folder
at every level and pairwise method, as Markdown rows.

    python scripts/metaeval_table.py RUN_DIR --candidate all-MiniLM-L6-v2 --baseline all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from nlgbench.foundations import fmt
from nlgbench.reporting.compare import compare, units_text
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.rundata import RunData

CASES = [  # (method, level, resample, test)
    ("pearson", "global", "auto", "bootstrap"),
    ("pearson", "segment", "auto", "bootstrap"),
    ("darr_kendall", "segment", "auto", "bootstrap"),
    ("acc_eq", "segment", "auto", "bootstrap"),
    ("acc_eq", "segment", "auto", "permutation"),
    ("pearson", "system", "auto", "bootstrap"),
    ("kendall", "system", "auto", "bootstrap"),
    ("pairwise_accuracy", "system", "auto", "bootstrap"),
    ("pairwise_accuracy", "system", "both", "bootstrap"),
    ("soft_pairwise_accuracy", "system", "auto", "bootstrap"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--baseline", required=True)
    args = parser.parse_args()
    run = RunData.open(args.run)
    print("| dataset | level | method | baseline | candidate | delta [95% CI] | p [test: units] | Williams |")
    print("|---|---|---|---|---|---|---|---|")
    for method, level, resample, test in CASES:
        options = QualityOptions(method=method, level=level, resample=resample, test=test)
        result = compare(run, args.candidate, args.baseline, options=options)
        for r in result["rows"]:
            na = fmt.UNDEFINED
            lo, hi = r["delta_ci"]
            delta = fmt.signed(r["delta"], missing=na)
            if math.isfinite(r["delta"]):
                delta += f" [{fmt.signed(lo)}, {fmt.signed(hi)}]"
            kind = "permutation" if test == "permutation" else "bootstrap"
            units = units_text(r)
            p = f"{fmt.p_value(r['p_value'], 1000, missing=na)} [{kind}: {units}]"
            if r["williams_test"].startswith("n/a"):
                williams = "n/a"
            elif len(r["williams_by_group"]) > 1:
                williams = "; ".join(
                    f"{g['group']} {fmt.p_value(g['p'], missing=na)} [{g['n']}]" for g in r["williams_by_group"]
                )
            else:
                williams = f"{fmt.p_value(r['p_williams'], missing=na)} [{r['williams_n']}]"
            print(
                f"| {r['dataset']} | {level} | {method}{' (boot-both)' if resample == 'both' else ''} | "
                f"{fmt.number(r['quality_baseline'], missing=na)} | {fmt.number(r['quality_candidate'], missing=na)} | "
                f"{delta} | {p} | {williams} |"
            )
        for w in result["warnings"]:
            print(f"<!-- {method}/{level}: {w} -->")


if __name__ == "__main__":
    main()
