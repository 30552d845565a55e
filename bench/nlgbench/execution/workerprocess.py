"""One cell in a fresh worker process, as every launcher starts it: the cell's folder prepared,
the worker (`nlgbench.execution.worker`) started by name or forked from the fork server, and, when it
died without a result, why (a signal, an exit code, the kernel's out-of-memory killer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, TRACEBACK_FILE, CellConfig, read_config, write_config
from nlgbench.core.result import CellResult
from nlgbench.execution.forkserver import WORKER_MODULE, ForkServer, boot, die_with
from nlgbench.execution.progress import PROGRESS_ENV, live
from nlgbench.foundations.package import PACKAGE_DIR
from nlgbench.measurement.trackers import oom_kills
from nlgbench.runs.folder import own_folder
from nlgbench.runs.resultfile import read_result

# The worker runs `nlgbench.execution.worker` (started by name: runpy; `forkserver.boot`) with the current
# folder off its import path (a user's `metrics/` or `bench/` folder can never shadow it) and checks it
# imported the parent's package. SIGINT keeps its default action: Ctrl-C ends the worker quietly (no
# traceback); the parent says why. A local sweep forks its workers from a fork server instead
# (`nlgbench.execution.forkserver`), which keeps all of this.


def worker_command(cell_dir: Path, started: float | None = None) -> list[str]:
    """`python -c BOOT CELL_DIR PACKAGE_DIR [STARTED]`: the worker of this very installation;
    STARTED is the launcher's `time.time()` when it started the cell, the origin of `startup_s`."""
    command = [sys.executable, "-c", boot(WORKER_MODULE), str(cell_dir), str(PACKAGE_DIR)]
    return command if started is None else [*command, repr(started)]


def worker_environment(threads: int | None) -> dict[str, str]:
    """A worker's environment: this process's, unbuffered output, NLGBENCH_PROGRESS (the worker's bar
    and phase lines: on a terminal only) and OMP_NUM_THREADS for `threads`. The user's registry files
    travel in the cell's config (`CellConfig.registry_files`), not here."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault(PROGRESS_ENV, "1" if live() else "0")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def death_cause(code: int, oom_killed: bool, server: bool = False) -> tuple[str, bool]:
    """(error line, status is oom) for a worker that ended with `code` and wrote no result.
    A negative code is the signal that killed it; `oom_killed` is the kernel's word that it
    killed a process for memory meanwhile (the cgroup's OOM-kill count rose). `server`: the code
    is the cell's fork server's, which ended first and took the worker with it (`ForkServer.run`)."""
    if code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown signal"
        oom = sig == signal.SIGKILL and oom_killed
        if server:
            killer = "the kernel's out-of-memory killer, " if oom else ""
            return f"the cell's fork server died (killed by {killer}signal {sig}, {name}) and its worker with it", oom
        if oom:
            return f"worker killed by the kernel's out-of-memory killer (signal {sig}, {name})", True
        return f"worker killed by signal {sig} ({name})", False
    if server:
        return f"the cell's fork server exited with code {code} before the cell's worker wrote a result", False
    return f"worker exited with code {code} and wrote no result", False


def prepare_cell(cell: CellConfig, cell_dir: Path) -> None:
    """The cell's folder, ready for a worker: stale result files removed (never through a symbolic
    link: `own_folder` refuses a linked folder), config.json written."""
    own_folder(cell_dir)
    for stale in (RESULT_FILE, SCORES_FILE, TRACEBACK_FILE):
        (cell_dir / stale).unlink(missing_ok=True)
    write_config(cell_dir, cell.cell_id, cell.label, cell)


def run_worker(
    cell_dir: Path,
    threads: int | None,
    *,
    server: ForkServer | None = None,
    started: float | None = None,
) -> CellResult:
    """Run the cell prepared in `cell_dir` in a fresh worker process and return its result: the
    worker's result.json, or, when it died without one, why (not written here). The process is a
    child forked from `server` (`nlgbench.execution.forkserver`), else a plain `worker_command`.
    `started`: the origin of the cell's `startup_s` (default: now; a Slurm task passes its own start).
    If this process is killed, the worker dies with it (Linux parent-death signal)."""
    env = worker_environment(threads)
    started = time.time() if started is None else started
    kills_before = oom_kills()
    server_died = False
    if server is not None:
        code, server_died = server.run(cell_dir, env, started)
    else:
        proc = subprocess.Popen(worker_command(cell_dir, started), env=env, preexec_fn=die_with(os.getpid()))
        try:
            code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if (cell_dir / RESULT_FILE).exists():
        return read_result(cell_dir)
    kills_after = oom_kills()
    oom_killed = kills_before is not None and kills_after is not None and kills_after > kills_before
    error, oom = death_cause(code, oom_killed, server=server_died)
    cell_id, label, config = read_config(cell_dir)
    return CellResult.not_finished(cell_id, label, config, error, oom=oom)
