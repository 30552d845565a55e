"""The command ``nlgbench datasets import FORMAT SRC --out FILE.jsonl``: its arguments and its run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nlgbench.data.importers.summeval import ANNOTATORS, import_summeval
from nlgbench.data.importers.table import TABLE_FIELDS, import_table
from nlgbench.data.importers.wmt_da import import_wmt_da
from nlgbench.foundations.errors import UserError

FORMATS = ("summeval", "wmt-da", "table")


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``nlgbench datasets import FORMAT SRC --out FILE.jsonl``."""
    p.add_argument(
        "format",
        choices=FORMATS,
        help="summeval: model_annotations.aligned.paired.jsonl; "
        "wmt-da: a DAseg-wmtNN folder; table: a .csv, .tsv or .parquet file",
    )
    p.add_argument("src", help="the downloaded file or folder")
    p.add_argument("--out", required=True, help="the JSONL file to write (replaced atomically)")
    p.add_argument(
        "--annotators",
        choices=sorted(ANNOTATORS),
        help="summeval: whose scores to average per dimension (default expert: 3 per summary)",
    )
    p.add_argument(
        "--lp",
        action="append",
        metavar="LP",
        help="wmt-da: only these language pairs (repeatable or comma-separated); "
        "table: the language pair (or domain label) of every row",
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help=f"table: the column of an item field ({', '.join(TABLE_FIELDS)}); references=COL1,COL2,...",
    )
    p.add_argument(
        "--human",
        action="append",
        default=[],
        metavar="DIM=COLUMN",
        help="table: a human dimension and its column (repeatable); empty cells are missing values",
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Run ``datasets import``: write the JSONL file and print a summary line to stderr."""
    fmt = args.format
    _only_for(fmt, "summeval", "--annotators", args.annotators is not None)
    _only_for(fmt, "table", "--column", bool(args.column))
    _only_for(fmt, "table", "--human", bool(args.human))
    lps = [lp.strip() for value in (args.lp or []) for lp in value.split(",") if lp.strip()]
    if args.lp and not lps:
        raise UserError("--lp is empty")
    if fmt == "summeval":
        if lps:
            raise UserError("--lp applies to wmt-da and table, not summeval (its items are English: lp 'en')")
        summary = import_summeval(args.src, args.out, annotators=args.annotators or "expert")
    elif fmt == "wmt-da":
        summary = import_wmt_da(args.src, args.out, lps=lps or None)
    else:
        if len(lps) > 1:
            raise UserError(f"table: --lp is one constant language pair, got {', '.join(lps)}")
        summary = import_table(
            args.src,
            args.out,
            columns=_pairs(args.column, "--column"),
            human=_pairs(args.human, "--human") or None,
            lp=lps[0] if lps else None,
        )
    print(summary.line(fmt), file=sys.stderr)
    return 0


def _only_for(fmt: str, allowed: str, option: str, given: bool) -> None:
    if given and fmt != allowed:
        raise UserError(f"{option} applies to {allowed} only, not {fmt}")


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; a repeated NAME or a value without '=' is an error."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        name, rest = name.strip(), rest.strip()
        if not sep or not name or not rest:
            raise UserError(f"{option} {value!r}: expected NAME=COLUMN")
        if name in out:
            raise UserError(f"{option} {name} given twice")
        out[name] = rest
    return out
