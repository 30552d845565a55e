"""The one entry of every sweep (CLI and API): run it with the launcher its spec or the command line
asks for: locally, one worker process per cell (`nlgbench.execution.local`), or as Slurm job array
tasks (`nlgbench.execution.slurm`). Both are `nlgbench.execution.launcher_base.Launcher`s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nlgbench.core.executor_options import ExecutorOptions
from nlgbench.core.result import CellResult
from nlgbench.execution.launcher_base import Launcher
from nlgbench.execution.local import LocalLauncher
from nlgbench.execution.slurm.launcher import SlurmLauncher
from nlgbench.execution.slurm.options import on_slurm

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec


def launcher(options: ExecutorOptions | None, *, cancel_on_exit: bool = False) -> Launcher:
    """The launcher of these executor options (None: local)."""
    if options is not None and on_slurm(options):
        return SlurmLauncher(options, cancel_on_exit=cancel_on_exit)
    return LocalLauncher()


def run(
    spec: SweepSpec,
    out_dir: Path,
    *,
    force: bool = False,
    wait: bool = False,
    log: Callable[[str], None] = print,
    executor: ExecutorOptions | None = None,
    cancel_on_exit: bool = False,
) -> list[CellResult]:
    """Run every unfinished cell; `executor` (default: the spec's `executor:` block, else local): on
    Slurm the cells run as job array tasks (`cancel_on_exit`: Ctrl-C cancels the submitted jobs
    instead of leaving them running). A distilled student evaluated on its own training data is
    refused before any cell (the leakage guard; each cell checks again on the data it loads)."""
    chosen = launcher(executor or spec.executor, cancel_on_exit=cancel_on_exit)
    return chosen.run(spec, out_dir, force=force, wait=wait, log=log)
