"""`nlgbench import-scores` (precomputed scores as a cell) and `nlgbench repair` (the store rebuilt
from the cell folders; `--upgrade`: the folder written in this nlgbench's format): the commands that
change a run folder outside a sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nlgbench.foundations import fmt
from nlgbench.runs.csvfiles import MAIN_QUALITY, column_label, correlation_columns
from nlgbench.runs.folder import CSV_FILE
from nlgbench.runs.importscores import import_scores
from nlgbench.runs.repair import describe, repair


def cmd_import_scores(args: argparse.Namespace) -> int:
    direction = True if args.lower_is_better else False if args.higher_is_better else None  # None: the metric's
    result = import_scores(
        Path(args.file),
        args.dataset,
        args.metric,
        args.encoder,
        Path(args.out),
        max_segments=args.max_segments,
        lower_is_better=direction,
    )
    c = result.correlation or {}
    figures = correlation_columns(c)  # results.csv's, the default figure (pearson_global) first
    values = ", ".join(
        f"{column_label(k)} {fmt.number(figures[k] if figures[k] != '' else None, 4, missing=fmt.UNDEFINED)}"
        for k in MAIN_QUALITY
    )
    print(
        f"imported {result.n_segments} scores as cell {result.cell_id} ({result.label}): {values}"
        + (f" ({c['note']})" if c.get("note") else "")
        + f"; results: {Path(args.out) / CSV_FILE}"
    )
    for warning in result.warnings:  # also in result.json, results.csv and the report
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    print(describe(folder, repair(folder, upgrade=args.upgrade)))
    return 0
