"""The executor: each cell in a fresh worker process, results into the store, resumable.

Before any cell runs, every dataset of the spec is loaded and checked (so bad data is a
one-line error, not N failed cells). A finished (`ok`) cell is skipped unless forced; a
failed one is tried again. If the sweep is killed, the worker dies with it (Linux
parent-death signal) and nothing half-written is recorded.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import nlgbench
from nlgbench.registry import user_files_environment
from nlgbench.spec import Cell, SweepSpec
from nlgbench.store import Store
from nlgbench.worker import write_atomic


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def check_datasets(spec: SweepSpec) -> dict[str, int]:
    """Load every dataset of the spec once and check the fields its metrics read are non-blank."""
    from nlgbench.data import check_nonblank, load_dataset
    from nlgbench.metrics import get_metric

    fields = {"hypothesis"}
    for entry in spec.metrics:
        fields.update(get_metric(entry.metric).needs)
    sizes = {}
    for ref in spec.datasets:
        ds = load_dataset(ref.name, path=ref.path, max_segments=ref.max_segments)
        check_nonblank(ds, sorted(fields))
        sizes[ref.label] = len(ds.items)
    return sizes


def _fmt_s(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# The worker runs `nlgbench.worker` with the current folder off its import path (a user's
# `metrics/` or `bench/` folder can never shadow it) and checks it imported the parent's package.
_WORKER_BOOT = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import runpy, nlgbench; "
    "runpy.run_module('nlgbench.worker', run_name='__main__', alter_sys=True)"
)


def worker_command(cell_dir: Path) -> list[str]:
    """`python -c BOOT CELL_DIR PACKAGE_DIR`: the worker of this very installation."""
    return [sys.executable, "-c", _WORKER_BOOT, str(cell_dir), str(Path(nlgbench.__file__).resolve().parent)]


def execute(cell: Cell, cell_dir: Path) -> dict[str, Any]:
    """Run one cell in a fresh worker process (`worker_command`) and return its result."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("result.json", "scores.csv", "traceback.txt"):
        (cell_dir / stale).unlink(missing_ok=True)
    write_atomic(cell_dir / "config.json", json.dumps({"cell_id": cell.cell_id, "label": cell.label, "config": cell.config()}, indent=2))
    env = dict(os.environ, PYTHONUNBUFFERED="1", **user_files_environment())  # the user's registry files reach the worker
    if cell.threads:
        env["OMP_NUM_THREADS"] = str(cell.threads)
    proc = subprocess.Popen(worker_command(cell_dir), env=env, preexec_fn=_die_with_parent)
    try:
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    result_path = cell_dir / "result.json"
    if result_path.exists():
        return json.loads(result_path.read_text(encoding="utf-8"))
    killed = code < 0 and -code == signal.SIGKILL
    return {
        "cell_id": cell.cell_id, "label": cell.label, "config": cell.config(),
        "status": "oom" if killed else "failed",
        "error": "worker killed by SIGKILL (likely out of memory)" if killed else f"worker exited with code {code} and wrote no result",
    }


def run_sweep(
    spec: SweepSpec, out_dir: Path, *, force: bool = False, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Run every cell of the spec that is not finished yet; returns the results of this sweep's cells."""
    from nlgbench.measure import environment

    sizes = check_datasets(spec)
    cells = spec.cells()
    store = Store(out_dir)
    results: list[dict[str, Any]] = []
    try:
        run_id = store.start_run(spec.name, {"spec": asdict(spec)}, environment("cpu"))
        log(f"sweep {spec.name!r}: {len(cells)} cells -> {out_dir} ({', '.join(f'{k}: {v} items' for k, v in sizes.items())})")
        done_times: list[float] = []
        todo = [c for c in cells if force or store.status(c.cell_id) != "ok"]
        for seq, cell in enumerate(cells):
            prefix = f"[{seq + 1}/{len(cells)}] {cell.label}"
            if cell not in todo:
                log(f"{prefix}: done already (cell {cell.cell_id}), skipped")
                results.append(store.result(cell.cell_id))
                continue
            log(f"{prefix}: running (cell {cell.cell_id})")
            start = time.perf_counter()
            result = execute(cell, out_dir / "cells" / cell.cell_id)
            elapsed = time.perf_counter() - start
            store.record(run_id, seq, result, out_dir / "cells" / cell.cell_id / "scores.csv" if result["status"] == "ok" else None)
            store.write_csv()
            results.append(result)
            done_times.append(elapsed)
            remaining = len(todo) - len(done_times)
            eta = sum(done_times) / len(done_times) * remaining
            if result["status"] == "ok":
                summary = (f"ok in {_fmt_s(elapsed)}: {result['timing']['ms_per_segment_mean']:.2f} ms/segment, "
                           f"pearson {result['correlation']['pearson']:.4f}")
            else:
                summary = f"{result['status'].upper()}: {result['error']}"
            log(f"{prefix}: {summary}" + (f" — {remaining} left, ETA {_fmt_s(eta)}" if remaining else ""))
        store.write_csv()
        store.finish_run(run_id)
    finally:
        store.close()
    return results
