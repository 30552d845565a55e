"""The local launcher: the sweep's cells one after another, each in a fresh worker process on this
machine (`nlgbench.execution.launcher_base`), results into the store, resumable. The workers are forked from
one fork server per sweep that has done their imports (`nlgbench.execution.forkserver`; on Linux,
unless NLGBENCH_FORKSERVER=0). (On a Slurm cluster the same worker runs in job array tasks:
`nlgbench.execution.slurm`.)

A finished (`ok`) cell is skipped unless forced; a failed one is tried again. On a terminal a cell
shows a live bar and the sweep an ETA from a cost model (`nlgbench.execution.eta`); elsewhere the
sweep prints one line per cell. If the sweep is killed, the worker dies with it (Linux parent-death
signal) and nothing half-written is recorded. A worker that dies is recorded with what killed it
(signal or exit code); `oom` only on evidence.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from nlgbench.core.cell import SCORES_FILE, CellConfig
from nlgbench.core.datawarnings import truncation_text
from nlgbench.core.result import OK, CellResult
from nlgbench.execution import forkserver
from nlgbench.execution.eta import CostModel, time_split
from nlgbench.execution.forkserver import ForkServer
from nlgbench.execution.launcher_base import Launcher, Sweep, summary
from nlgbench.execution.preload import forked_cells, shared_metrics, shared_modules
from nlgbench.execution.progress import live
from nlgbench.execution.workerprocess import prepare_cell, run_worker, worker_environment
from nlgbench.foundations.fmt import duration
from nlgbench.runs.folder import cell_dir


def execute(cell: CellConfig, cell_dir: Path, server: ForkServer | None = None) -> CellResult:
    """Run one cell in a fresh worker process (forked from `server`, else `worker_command`) and return
    its result."""
    prepare_cell(cell, cell_dir)
    return run_worker(cell_dir, cell.threads, server=server)


def truncation_warning(result: CellResult) -> str | None:
    """The sweep's warning line when a cell's model cut segments longer than its maximum length (also
    one of the cell's data warnings, `nlgbench.core.datawarnings`)."""
    n = (result.scorer or {}).get("truncated_segments") or 0
    if not n:
        return None
    return (
        f"warning: {truncation_text(n, result.n_segments)} "
        "(counted per cell: results.csv truncated_segments); warned once per sweep"
    )


@dataclass
class Progress:
    """The local sweep's progress: the cells still to run and the cost model behind its ETA."""

    costs: CostModel
    pending: list[str]
    on_terminal: bool = field(default_factory=live)
    warned: bool = False  # the truncation warning is given once per sweep

    def eta(self) -> str:
        """The sweep's ETA in words; `~` and `(first guess)` before any cell has finished."""
        if not self.pending:
            return ""
        seconds = duration(self.costs.eta(self.pending))
        return f"~{seconds} (first guess)" if self.costs.guessed else seconds

    def stamp(self, line: str) -> str:
        """A sweep line as logged: with the local time in front where it goes to a log, not a terminal."""
        return line if self.on_terminal else f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"


class LocalLauncher(Launcher):
    """Each unfinished cell in turn, in a fresh worker process on this machine (`execute`), forked
    from the sweep's fork server where `forkserver.enabled()`."""

    def launch(self, sweep: Sweep) -> list[CellResult]:
        todo = [c for c in sweep.cells if sweep.force or sweep.store.status(c.cell_id) != OK]
        # model cells fork from a server holding what every model cell imports (torch among it), each
        # child its own rest (`preload.cell_modules`); a model-free cell starts a plain worker, which
        # imports no torch, so neither kind counts the other's libraries in its memory
        forked = forked_cells(todo)
        server_wanted = forked and forkserver.enabled()
        server_cm = ForkServer(shared_modules(forked), shared_metrics(forked)) if server_wanted else nullcontext()
        with server_cm as server:
            if server is not None:  # its imports run while the sweep works out its ETA
                server.start(worker_environment(forked[0].threads))
            progress = Progress(CostModel.of(todo, sweep.sizes), [c.cell_id for c in todo])
            results: list[CellResult] = []
            for seq, cell in enumerate(sweep.cells):
                prefix = f"[{seq + 1}/{len(sweep.cells)}] {cell.label}"
                if cell in todo:
                    results.append(run_one(sweep, seq, cell, prefix, progress, server if cell in forked else None))
                else:
                    results.append(skip(sweep, cell, progress.stamp(prefix)))
        return results


def skip(sweep: Sweep, cell: CellConfig, prefix: str) -> CellResult:
    """A cell finished already: its stored result."""
    sweep.log(f"{prefix}: done already (cell {cell.cell_id}), skipped")
    stored = sweep.store.result(cell.cell_id)
    assert stored is not None  # its status was read from the store
    sweep.note_environment(stored)
    return stored


def run_one(
    sweep: Sweep, seq: int, cell: CellConfig, prefix: str, progress: Progress, server: ForkServer | None = None
) -> CellResult:
    """Run one cell (`execute`), record it (store and results.csv) and say how it went."""
    if progress.on_terminal:  # elsewhere one line per cell, when it ends
        eta = progress.eta()
        sweep.log(f"{prefix}: running (cell {cell.cell_id})" + (f" — sweep ETA {eta}" if eta else ""))
    folder = cell_dir(sweep.folder, cell.cell_id)
    start = time.perf_counter()
    result = execute(cell, folder, server)
    elapsed = time.perf_counter() - start
    progress.pending.remove(cell.cell_id)
    progress.costs.finished(cell.cell_id, elapsed, *time_split(result))
    sweep.store.record(sweep.run_id, seq, result, folder / SCORES_FILE if result.ok else None)
    sweep.store.write_csv()
    sweep.note_environment(result)
    eta = progress.eta()
    sweep.log(
        progress.stamp(
            f"{prefix}: {summary(result, elapsed)} (cell {cell.cell_id})"
            + (f" — {len(progress.pending)} left, ETA {eta}" if progress.pending and eta else "")
        )
    )
    warning = None if progress.warned else truncation_warning(result)
    if warning:
        sweep.log(warning)
        progress.warned = True
    return result
