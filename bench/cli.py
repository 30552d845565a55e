"""The `nlgbench` command line. Bad input: one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from bench.errors import UserError


def _cmd_run(args: argparse.Namespace) -> int:
    from bench.runner import run_sweep
    from bench.spec import load_spec

    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else Path("reports") / spec.name
    if args.dry_run:
        from bench.encoders import resolve_source
        from bench.hfcache import local_snapshot

        cells = spec.cells()
        for cell in cells:
            print(f"{cell.cell_id}  {cell.label}")
        missing = sorted({resolve_source(name) for name in spec.model_names() if local_snapshot(resolve_source(name)) is None})
        print(f"{len(cells)} cells; models not in the local cache: {', '.join(missing) if missing else 'none'}")
        return 0
    results = run_sweep(spec, out, force=args.force)
    bad = [r for r in results if r["status"] != "ok"]
    print(f"{len(results) - len(bad)} ok, {len(bad)} not ok; results: {out / 'results.csv'}")
    return 1 if bad else 0


def _cmd_list(args: argparse.Namespace) -> int:
    if args.what == "encoders":
        from bench.encoders import registry
        from bench.hfcache import checkpoint_params, disk_bytes, local_snapshot

        rows = [("name", "hub_id", "family", "kind", "layers", "local", "params", "disk_mb")]
        for name, e in sorted(registry().items()):
            snap = local_snapshot(e.hub_id)
            params = f"{checkpoint_params(snap) / 1e6:.1f}M" if snap else "-"
            disk = f"{disk_bytes(snap) / 2**20:.1f}" if snap else "-"
            rows.append((name, e.hub_id, e.family, e.kind, str(e.layers or "-"), "yes" if snap else "no", params, disk))
        _table(rows)
    elif args.what == "metrics":
        from metrics import get_metric, metric_names

        rows = [("name", "needs", "better", "corpus_state", "encoders", "options", "description")]
        for name in metric_names():
            m = get_metric(name)
            opts = ", ".join(f"{k}={d!r}" for k, (_, d) in m.options.items())
            rows.append((name, "+".join(m.needs), "higher" if m.higher_is_better else "lower",
                         "yes" if m.corpus_state else "no", "|".join(m.encoder_kinds), opts, m.description))
        _table(rows)
    elif args.what == "datasets":
        from bench.data import load_catalogue

        rows = [("name", "format", "language pairs", "items", "description")]
        for name, d in sorted(load_catalogue()["datasets"].items()):
            rows.append((name, d["format"], " ".join(d["language_pairs"]), str(d.get("expected_items", "")), d.get("description", "")))
        _table(rows)
    elif args.what == "aligners":
        from metrics.alignment import ALIGNERS

        rows = [("name", "needs cost matrix", "description")]
        for name, a in sorted(ALIGNERS.items()):
            rows.append((name, "yes" if a.needs_cost else "no", a.description))
        _table(rows)
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())


def _cmd_models_import(args: argparse.Namespace) -> int:
    from bench.hfcache import import_model

    snap = import_model(Path(args.src), args.as_hub_id)
    print(f"imported {args.src} as {args.as_hub_id}: {snap}")
    return 0


def _cmd_datasets_fetch(args: argparse.Namespace) -> int:
    from bench.data import dataset_names, fetch, load_dataset
    from bench.errors import unknown_name

    if args.name not in dataset_names():
        raise unknown_name("dataset", args.name, dataset_names())
    folder = fetch(args.name, progress=print)
    n = len(load_dataset(args.name).items)
    print(f"{args.name}: {n} items in {folder}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nlgbench", description="Efficiency-quality benchmarks of NLG evaluation metrics.")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a sweep spec (resumes: finished cells are skipped)")
    run.add_argument("spec", help="sweep spec YAML")
    run.add_argument("--out", help="output folder (default reports/<spec name>)")
    run.add_argument("--force", action="store_true", help="rerun cells that are already finished")
    run.add_argument("--dry-run", action="store_true", help="list the cells and missing models, run nothing")
    run.set_defaults(func=_cmd_run)

    lst = sub.add_parser("list", help="list encoders, metrics, aligners or datasets")
    lst.add_argument("what", choices=["encoders", "metrics", "aligners", "datasets"])
    lst.set_defaults(func=_cmd_list)

    models = sub.add_parser("models", help="manage local model weights").add_subparsers(dest="models_cmd", required=True)
    imp = models.add_parser("import", help="place a local model folder into the Hugging Face cache")
    imp.add_argument("src", help="folder with config.json, weights and tokenizer files")
    imp.add_argument("--as", dest="as_hub_id", required=True, help="the Hub id to register it under")
    imp.set_defaults(func=_cmd_models_import)

    ds = sub.add_parser("datasets", help="manage datasets").add_subparsers(dest="datasets_cmd", required=True)
    fetch = ds.add_parser("fetch", help="download a catalogue dataset into the cache (sha256-checked)")
    fetch.add_argument("name")
    fetch.set_defaults(func=_cmd_datasets_fetch)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"nlgbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nlgbench: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
