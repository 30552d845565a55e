"""The executor: each cell in a fresh worker process, results into the store, resumable.
(On a Slurm cluster the same worker runs in job array tasks: `nlgbench.execution.slurm`.)

Before any cell runs, every dataset of the spec is loaded and checked (so bad data is a
one-line error, not N failed cells). A finished (`ok`) cell is skipped unless forced; a
failed one is tried again. The sweep holds the run folder's lock (`nlgbench.runs.folder`), so a
second sweep on the same folder cannot run its cells at the same time. On a terminal a cell
shows a live bar and the sweep an ETA from a cost model (`nlgbench.execution.eta`); elsewhere the sweep
prints one line per cell. If the sweep is killed,
the worker dies with it (Linux parent-death signal) and nothing half-written is recorded. A
worker that dies is recorded with what killed it (signal or exit code); `oom` only on evidence.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from nlgbench.foundations.package import PACKAGE_DIR
from nlgbench.core.cell import OK, RESULT_FILE, SCORES_FILE, TRACEBACK_FILE, CellConfig, CellResult, read_config, write_config
from nlgbench.foundations.errors import UserError
from nlgbench.execution.eta import CostModel
from nlgbench.measurement.protocol import oom_kills
from nlgbench.execution.progress import PROGRESS_ENV, live
from nlgbench.foundations.registry import user_files_environment
from nlgbench.runs.repair import open_store
from nlgbench.runs.folder import locked, own_folder
from nlgbench.core.spec import SweepSpec



def die_with(parent_pid: int) -> Callable[[], None]:
    """For Popen's preexec_fn: the child gets SIGKILL when its parent dies (Linux prctl
    PR_SET_PDEATHSIG), and exits at once if the parent died before the prctl took effect."""
    def arm() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        except OSError:
            return
        if os.getppid() != parent_pid:
            os._exit(1)
    return arm


def death_cause(code: int, oom_killed: bool) -> tuple[str, bool]:
    """(error line, status is oom) for a worker that ended with `code` and wrote no result.
    A negative code is the signal that killed it; `oom_killed` is the kernel's word that it
    killed a process for memory meanwhile (the cgroup's OOM-kill count rose)."""
    if code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown signal"
        if sig == signal.SIGKILL and oom_killed:
            return f"worker killed by the kernel's out-of-memory killer (signal {sig}, {name})", True
        return f"worker killed by signal {sig} ({name})", False
    return f"worker exited with code {code} and wrote no result", False


def check_datasets(spec: SweepSpec, *, catalogue: bool = True) -> tuple[SweepSpec, dict[str, int]]:
    """Load every dataset of the spec once (`catalogue=False`: own data files only, as --dry-run) and
    check the fields its metrics read are non-blank, and that a one-reference metric without a
    reference_policy meets no item with several references (refused here, before any model loads,
    not inside its cells). Returns the spec to run, in which a `sample` that draws every item is
    dropped (its cells are the whole dataset's, labelled so, not `[~n]`), and items per dataset."""
    from nlgbench.data.dataset import check_nonblank, load_dataset
    from nlgbench.metrics import get_metric
    from nlgbench.metrics.base import no_reference_policy

    fields = {"hypothesis"}
    for entry in spec.metrics:
        fields.update(get_metric(entry.metric).needs)
    sizes, refs = {}, []
    for ref in spec.datasets:
        if not catalogue and ref.path is None:
            refs.append(ref)
            continue
        ds = load_dataset(ref.name, path=ref.path, max_segments=ref.max_segments, human=ref.human, sample=ref.sample, columns=ref.columns)
        check_nonblank(ds, sorted(fields))
        most = max((len(it.references) for it in ds.items), default=1)
        for entry in spec.metrics if most > 1 else []:
            if get_metric(entry.metric).needs_reference_policy(entry.options):
                raise UserError(f"dataset {ref.label}: {no_reference_policy(entry.metric, most)}")
        for warning in ds.warnings:  # e.g. a head subset of a file sorted by human score
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        if ref.sample is not None and ds.drawn_whole:
            whole = replace(ref, sample=None)
            print(f"warning: {ref.label} draws every item of the dataset: its cells are {whole.label}'s",
                  file=sys.stderr, flush=True)
            ref = whole
        refs.append(ref)
        sizes[ref.label] = len(ds.items)
    return replace(spec, datasets=refs), sizes


def _fmt_s(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# The worker runs `nlgbench.execution.worker` with the current folder off its import path (a user's
# `metrics/` or `bench/` folder can never shadow it) and checks it imported the parent's package.
# SIGINT keeps its default action: Ctrl-C ends the worker quietly (no traceback); the parent says why.
_WORKER_BOOT = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import runpy, nlgbench; "
    "runpy.run_module('nlgbench.execution.worker', run_name='__main__', alter_sys=True)"
)


def worker_command(cell_dir: Path) -> list[str]:
    """`python -c BOOT CELL_DIR PACKAGE_DIR`: the worker of this very installation."""
    return [sys.executable, "-c", _WORKER_BOOT, str(cell_dir), str(PACKAGE_DIR)]


def prepare_cell(cell: CellConfig, cell_dir: Path) -> None:
    """The cell's folder, ready for a worker: stale result files removed (never through a symbolic
    link: `own_folder` refuses a linked folder), config.json written."""
    own_folder(cell_dir)
    for stale in (RESULT_FILE, SCORES_FILE, TRACEBACK_FILE):
        (cell_dir / stale).unlink(missing_ok=True)
    write_config(cell_dir, cell.cell_id, cell.label, cell)


def run_worker(cell_dir: Path, threads: int | None, extra_env: dict[str, str] | None = None) -> CellResult:
    """Run the cell prepared in `cell_dir` in a fresh worker process (`worker_command`) and return
    its result: the worker's result.json, or, when it died without one, why (not written here).
    `extra_env`: the user's registry files (`user_files_environment`) as the caller saw them."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(user_files_environment() if extra_env is None else extra_env))
    env.setdefault(PROGRESS_ENV, "1" if live() else "0")  # the worker's bar and phase lines: on a terminal only
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    kills_before = oom_kills()
    proc = subprocess.Popen(worker_command(cell_dir), env=env, preexec_fn=die_with(os.getpid()))
    try:
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if (cell_dir / RESULT_FILE).exists():
        return CellResult.read(cell_dir)
    kills_after = oom_kills()
    oom_killed = kills_before is not None and kills_after is not None and kills_after > kills_before
    error, oom = death_cause(code, oom_killed)
    cell_id, label, config = read_config(cell_dir)
    return CellResult.not_finished(cell_id, label, config, error, oom=oom)


def execute(cell: CellConfig, cell_dir: Path) -> CellResult:
    """Run one cell in a fresh worker process (`worker_command`) and return its result."""
    prepare_cell(cell, cell_dir)
    return run_worker(cell_dir, cell.threads)


def summary(result: CellResult, elapsed: float) -> str:
    """The progress line's verdict on a cell. Both Pearson figures are named: `global` (pooled over
    all segments: what report and compare show by default) and `segment` (per lp, then the mean)."""
    if not result.ok or result.timing is None or result.correlation is None:
        return f"{result.status.upper()}: {result.error}"
    c, note = result.correlation, result.correlation.get("note")

    def show(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    return (f"ok in {_fmt_s(elapsed)}: {result.timing.ms_per_segment_mean:.2f} ms/segment, "
            f"pearson global {show(c.get('pearson_pooled'))} / segment {show(c['pearson'])}" + (f" ({note})" if note else ""))


def truncation_warning(result: CellResult) -> str | None:
    """The sweep's warning line when a cell's model cut segments longer than its maximum length."""
    n = (result.scorer or {}).get("truncated_segments") or 0
    if not n:
        return None
    return (f"warning: {n} of {result.n_segments} segments were longer than the model's maximum length and were cut "
            "(counted per cell: results.csv truncated_segments); warned once per sweep")


def run_sweep(
    spec: SweepSpec, out_dir: Path, *, force: bool = False, wait: bool = False, log: Callable[[str], None] = print,
) -> list[CellResult]:
    """Run every cell of the spec that is not finished yet; returns the results of this sweep's cells.

    The run folder is locked for the sweep (`wait`: wait for another process holding it). The
    run's environment record holds, per device its finished cells ran on, the environment
    their worker measured (CPU, GPU name, threads, versions). Local execution; `nlgbench.execution.sweep.run`
    chooses between this and the Slurm executor."""
    spec, sizes = check_datasets(spec)
    cells = spec.cells()
    results: list[CellResult] = []
    environments: dict[str, dict[str, Any]] = {}
    with locked(out_dir, wait=wait, log=log), open_store(out_dir) as store:
        run_id = store.start_run(spec.name, {"spec": asdict(spec)}, environments)

        def note_environment(result: CellResult) -> None:
            device = result.config.device
            if result.environment is not None and device not in environments:
                environments[device] = result.environment
                store.set_run_environment(run_id, environments)

        log(f"sweep {spec.name!r}: {len(cells)} cells -> {out_dir} ({', '.join(f'{k}: {v} items' for k, v in sizes.items())})")
        warned = False
        todo = [c for c in cells if force or store.status(c.cell_id) != OK]
        costs = CostModel.of(todo, sizes)
        pending = [c.cell_id for c in todo]
        on_terminal = live()
        for seq, cell in enumerate(cells):
            prefix = f"[{seq + 1}/{len(cells)}] {cell.label}"
            cell_dir = out_dir / "cells" / cell.cell_id
            if cell not in todo:
                log(f"{prefix}: done already (cell {cell.cell_id}), skipped")
                stored = store.result(cell.cell_id)
                assert stored is not None  # its status was read from the store
                note_environment(stored)
                results.append(stored)
                continue
            if on_terminal:  # elsewhere one line per cell, when it ends
                eta = costs.eta(pending)
                log(f"{prefix}: running (cell {cell.cell_id})" + (f" — sweep ETA {_fmt_s(eta)}" if eta is not None else ""))
            start = time.perf_counter()
            result = execute(cell, cell_dir)
            elapsed = time.perf_counter() - start
            pending.remove(cell.cell_id)
            costs.finished(cell.cell_id, elapsed)
            store.record(run_id, seq, result, cell_dir / SCORES_FILE if result.ok else None)
            store.write_csv()
            note_environment(result)
            results.append(result)
            eta = costs.eta(pending)
            log(f"{prefix}: {summary(result, elapsed)} (cell {cell.cell_id})"
                + (f" — {len(pending)} left, ETA {_fmt_s(eta)}" if pending and eta is not None else ""))
            warning = None if warned else truncation_warning(result)
            if warning:
                log(warning)
                warned = True
        store.write_csv()
        store.finish_run(run_id)
    return results
