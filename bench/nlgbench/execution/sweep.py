"""Run a sweep with the executor its spec or the command line asks for: locally, one worker
process per cell (`nlgbench.execution.local`), or as Slurm job array tasks (`nlgbench.execution.slurm`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from nlgbench.core.cell import CellResult
    from nlgbench.core.executor_options import ExecutorOptions
    from nlgbench.core.spec import SweepSpec


def run(spec: SweepSpec, out_dir: Path, *, force: bool = False, wait: bool = False, log: Callable[[str], None] = print,
        executor: ExecutorOptions | None = None, cancel_on_exit: bool = False) -> list[CellResult]:
    """Run every unfinished cell; `executor` (default: the spec's `executor:` block, else local): on
    Slurm the cells run as job array tasks (`cancel_on_exit`: Ctrl-C cancels the submitted jobs
    instead of leaving them running). A distilled student evaluated on its own training data is
    refused before any cell (the leakage guard; each cell checks again on the data it loads)."""
    from nlgbench.core.leakage import guard_spec

    guard_spec(spec)  # a distilled student evaluated on data it was trained on: refused at every entry point
    options = executor or spec.executor
    if options is not None and options.on_slurm:
        from nlgbench.execution.slurm import run_on_slurm

        return run_on_slurm(spec, out_dir, options, force=force, wait=wait, cancel_on_exit=cancel_on_exit, log=log)
    from nlgbench.execution.local import run_sweep

    return run_sweep(spec, out_dir, force=force, wait=wait, log=log)
