"""Rewrite the committed report folders' results.csv and correlations.csv from their published cells
(report/cells.jsonl), after a change of the view writer's columns (tests/test_results_columns.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from nlgbench.runs.csvfiles import write_views
from nlgbench.runs.rundata import find_results

if __name__ == "__main__":
    for name in sys.argv[1:] or ["reports/example", "reports/similarity"]:
        folder = Path(name)
        results, source = find_results(folder)
        write_views(folder, results)
        print(f"{folder}: {len(results)} cells from {source}")
