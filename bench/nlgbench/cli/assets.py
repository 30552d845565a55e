"""`nlgbench models import` and `nlgbench datasets fetch`: put model weights and catalogue data into
the local caches (`datasets import` is the importers' own command, `nlgbench.data.importers.command`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nlgbench.data.catalogue import dataset_names, fetch
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import import_model
from nlgbench.foundations.errors import unknown_name


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
