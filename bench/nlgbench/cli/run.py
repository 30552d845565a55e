"""`nlgbench run` (a sweep, or its cells with --dry-run), `status` and `collect` (a run folder's cells on Slurm)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nlgbench.core.executor_options import ExecutorOptions, with_kind
from nlgbench.core.spec import SweepSpec, load_spec
from nlgbench.execution.leakage import guard_spec
from nlgbench.execution.preflight import check_datasets, check_devices
from nlgbench.execution.slurm.book import require_submitit
from nlgbench.execution.slurm.options import on_slurm, slurm_options, with_flags
from nlgbench.execution.slurm.submit import dry_run_text
from nlgbench.execution.slurm.watch import collect_folder, status_data, status_text
from nlgbench.execution.sweep import run as run_sweep
from nlgbench.foundations.errors import UserError
from nlgbench.runs.folder import CSV_FILE


def cmd_run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else Path("reports") / spec.name
    executor = with_flags(
        with_kind(spec.executor, args.executor),
        partition=args.partition,
        gpus_per_cell=args.gpus_per_cell,
        cpus_per_cell=args.cpus_per_cell,
        mem=args.mem,
        time=args.time,
        max_parallel=args.max_parallel,
        slurm_args=args.slurm_arg,
        poll_seconds=args.poll_seconds,
    )
    if args.cancel_on_exit and not on_slurm(executor):
        raise UserError("--cancel-on-exit is for --executor slurm (a local sweep's workers always stop with it)")
    if on_slurm(executor):
        require_submitit()  # the extra `slurm`, for a run and its dry run alike
    if args.dry_run:
        return _dry_run(spec, out, executor)
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print  # --json: stdout is the JSON alone
    results = run_sweep(
        spec, out, force=args.force, wait=args.wait, executor=executor, cancel_on_exit=args.cancel_on_exit, log=log
    )
    bad = [r for r in results if not r.ok]
    if args.json:
        cells = [{"cell_id": r.cell_id, "label": r.label, "status": r.status, "error": r.error} for r in results]
        summary = {"out": str(out), "ok": len(results) - len(bad), "not_ok": len(bad), "cells": cells}
        print(json.dumps(summary, indent=1))
        return 1 if bad else 0
    print(
        f"{len(results) - len(bad)} ok, {len(bad)} not ok; results: {out / CSV_FILE}"
        + ("; run the same command again to resubmit the cells that are not ok" if bad and on_slurm(executor) else "")
    )
    return 1 if bad else 0


def _dry_run(spec: SweepSpec, out: Path, executor: ExecutorOptions) -> int:
    """The cells and the models missing from the local cache, after `run`'s checks; nothing runs."""
    guard_spec(spec)  # as `run` does (nlgbench.execution.sweep.run): no student evaluated on its training data
    if not on_slurm(executor):
        check_devices(spec)  # a local sweep's devices must exist here, as `run` checks
    # `run`'s checks before any cell, on the user's own data files (catalogue data is not downloaded here)
    spec, _ = check_datasets(spec, catalogue=False)
    cells = spec.cells()
    for cell in cells:
        print(f"{cell.cell_id}  {cell.label}")
    missing = sorted({model.source for model in spec.models.values() if model.snapshot is None})
    print(f"{len(cells)} cells; models not in the local cache: {', '.join(missing) if missing else 'none'}")
    if on_slurm(executor):
        print(dry_run_text(spec, out, slurm_options(executor)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(status_data(Path(args.dir)), indent=1))
    else:
        print(status_text(Path(args.dir)))
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    print(collect_folder(Path(args.dir)))
    return 0
