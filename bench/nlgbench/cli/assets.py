"""`nlgbench models import`, `nlgbench datasets fetch` and `nlgbench datasets import`: put model weights
and catalogue data into the local caches, and turn a public human-judgment release into own-data JSONL."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nlgbench.data.catalogue import dataset_names, fetch
from nlgbench.data.importers.summeval import import_summeval
from nlgbench.data.importers.table import import_table
from nlgbench.data.importers.wmt_da import import_wmt_da
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import import_model
from nlgbench.foundations.errors import UserError, unknown_name


def cmd_models_import(args: argparse.Namespace) -> int:
    snap = import_model(Path(args.src), args.as_hub_id)
    print(f"imported {args.src} as {args.as_hub_id}: {snap}")
    return 0


def cmd_datasets_fetch(args: argparse.Namespace) -> int:
    if args.name not in dataset_names():
        raise unknown_name("dataset", args.name, dataset_names())
    folder = fetch(args.name, progress=print)
    n = len(load_dataset(args.name).items)
    print(f"{args.name}: {n} items in {folder}")
    return 0


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
