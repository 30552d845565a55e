"""Print Markdown tables of a run folder: one row per metric x encoder across datasets, then every cell.

python scripts/results_table.py reports/similarity [--quality pearson_global]
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from nlgbench.foundations.errors import UserError
from nlgbench.reporting.tables import by_dataset_table, cells_table
from nlgbench.runs.csvfiles import QUALITY_COLUMNS
from nlgbench.runs.rundata import RunData


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
