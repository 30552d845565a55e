"""`nlgbench list aligners`; a module of its own because the aligners' module loads torch and POT."""

from __future__ import annotations

import argparse

from nlgbench.cli.listing import print_table
from nlgbench.metrics.alignment import ALIGNERS


def cmd_list_aligners(args: argparse.Namespace) -> int:
    rows = [("name", "needs cost matrix", "description")]
    for name, a in sorted(ALIGNERS.items()):
        rows.append((name, "yes" if a.needs_cost else "no", a.description))
    print_table(rows, as_json=args.json)
    return 0
