"""Print Markdown tables of a run folder: one row per metric x encoder across datasets, then every cell.

python scripts/results_table.py reports/similarity [--quality pearson_global]

The rows are results.csv's (`RunData.results_csv`, read as text, an older run folder's in today's
columns: nlgbench.runs.migrate); correlations are labelled with their level as report and compare label
them (`column_label`).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from nlgbench.core.labels import metric_label
from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.markup import markdown
from nlgbench.runs.csvfiles import MAIN_QUALITY, QUALITY_COLUMNS, column_label
from nlgbench.runs.rundata import RunData

CELL_COLUMNS = [
    ("metric", "metric"),
    ("metric_options", "options"),
    ("aligner", "aligner"),
    ("encoder", "encoder"),
    ("dataset", "dataset"),
    ("n_segments", "n"),
    ("ms_per_segment_median", "ms/seg"),
    ("peak_rss_mib", "peak RSS MiB"),
    ("params", "params (M)"),
    ("weight_mib", "weights MiB"),
    ("mean_exit_layer", "mean exit layer"),
    *((column, column_label(column)) for column in MAIN_QUALITY),
    ("status", "status"),
]
DIGITS = {  # results.csv column -> decimals shown
    **dict.fromkeys(QUALITY_COLUMNS, 3),
    "ms_per_segment_median": 1,
    "peak_rss_mib": 1,
    "weight_mib": 1,
    "mean_exit_layer": 2,
}


def cell_text(key: str, value: str) -> str:
    """One results.csv value as the tables show it: parameters in millions, numbers rounded
    (`DIGITS`), a blank as '-'."""
    if value == "":
        return fmt.UNKNOWN
    if key == "params":
        return fmt.number(int(value) / 1e6, 1)
    if key in DIGITS:
        return fmt.number(float(value), DIGITS[key])
    return value


def cells_table(rows: list[dict[str, str]]) -> str:
    """Every cell with its time, memory, size, exit layer and correlations."""
    return markdown([h for _, h in CELL_COLUMNS], [[cell_text(k, r.get(k, "")) for k, _ in CELL_COLUMNS] for r in rows])


def by_dataset_table(rows: list[dict[str, str]], quality: str = QUALITY_COLUMNS[0]) -> str:
    """One row per metric x aligner x encoder; per dataset its ms/segment and `quality` correlation
    (a results.csv correlation column; default the first, report's default figure)."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))

    def metric(r: dict[str, str]) -> str:
        return metric_label(r["metric"], r["aligner"], r.get("metric_options", ""))

    keys = list(dict.fromkeys((metric(r), r["encoder"]) for r in rows))
    index = {(metric(r), r["encoder"], r["dataset"]): r for r in rows}
    header = ["metric", "encoder", "params (M)", "weights MiB"]
    for ds in datasets:
        header += [f"{ds} ms/seg", f"{ds} {column_label(quality)}"]
    header.append("mean exit layer")
    out = []
    for label, encoder in keys:
        cells = [index.get((label, encoder, ds)) for ds in datasets]
        ok = [c for c in cells if c and c["status"] == "ok"]
        first = ok[0] if ok else {}
        line = [
            label,
            encoder,
            cell_text("params", first.get("params", "")),
            cell_text("weight_mib", first.get("weight_mib", "")),
        ]
        for c in cells:
            if c is None or c["status"] != "ok":
                line += [fmt.UNKNOWN, c["status"] if c else fmt.UNKNOWN]
            else:
                line += [cell_text("ms_per_segment_median", c["ms_per_segment_median"]), cell_text(quality, c[quality])]
        exits = [float(c["mean_exit_layer"]) for c in ok if c.get("mean_exit_layer")]
        line.append(fmt.number(sum(exits) / len(exits), 2) if exits else fmt.UNKNOWN)
        out.append(line)
    return markdown(header, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--quality",
        default=QUALITY_COLUMNS[0],
        choices=QUALITY_COLUMNS,
        help=f"the results.csv correlation column shown per dataset (default {QUALITY_COLUMNS[0]}, report's default)",
    )
    args = parser.parse_args()
    try:
        rows = list(csv.DictReader(io.StringIO(RunData.results_csv(args.folder), newline="")))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(by_dataset_table(rows, args.quality))
    print(cells_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
