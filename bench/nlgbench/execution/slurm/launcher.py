"""The Slurm launcher: `nlgbench run SPEC --out DIR --executor slurm` submits the cells that are not
finished as job arrays (`submit`) and watches them until every one is collected into the store
(`watch`). Finished (`ok`) cells are never resubmitted (unless `--force`), and neither are cells
whose task from an earlier submission is still pending or running: those are watched."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from nlgbench.core.executor_options import ExecutorOptions
from nlgbench.core.result import OK, CellResult
from nlgbench.execution.launcher_base import Launcher, Sweep
from nlgbench.execution.slurm.book import TASK_FILE, Book, require_submitit
from nlgbench.execution.slurm.options import slurm_options
from nlgbench.execution.slurm.queue import cancel, query_states
from nlgbench.execution.slurm.submit import recover_unrecorded, submit, thread_warnings
from nlgbench.execution.slurm.watch import collect, live_tasks, watch
from nlgbench.execution.workerprocess import prepare_cell
from nlgbench.runs.folder import cell_dir

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec


class SlurmLauncher(Launcher):
    """The sweep's unfinished cells as Slurm job array tasks, one cell per task, watched until all
    are collected. Ctrl-C stops watching and leaves the jobs running (`cancel_on_exit`: cancels
    them); `nlgbench collect DIR`, `nlgbench status DIR` or the same command pick them up later."""

    here: ClassVar[bool] = False  # the cells run on the cluster's nodes, whose devices are not this machine's

    where = " on Slurm"

    def __init__(self, executor: ExecutorOptions, *, cancel_on_exit: bool = False) -> None:
        require_submitit()  # the extra `slurm`: checked before the sweep starts
        self.executor = executor
        self.options = slurm_options(executor)
        self.cancel_on_exit = cancel_on_exit

    def run_record(self, spec: SweepSpec) -> dict[str, Any]:
        return {**super().run_record(spec), "executor": self.executor.record()}

    def launch(self, sweep: Sweep) -> list[CellResult]:
        for line in thread_warnings(sweep.spec, self.options):
            sweep.log(line)
        book = Book.read(sweep.folder)
        self.submit_unfinished(sweep, book)
        started = time.perf_counter()
        try:
            watch(sweep, book, self.options, started)
        except BaseException:
            self.stop(sweep, book)
            raise
        results = [sweep.store.result(c.cell_id) for c in sweep.cells]
        return [r for r in results if r is not None]

    def submit_unfinished(self, sweep: Sweep, book: Book) -> None:
        """Collect what earlier submissions left finished, then submit every cell neither finished
        nor still in Slurm."""
        recover_unrecorded(sweep.folder, book)
        states = query_states(book.uncollected_jobs())
        for task, result in collect(sweep.folder, sweep.store, sweep.run_id, book, states, sweep.log):
            sweep.log(
                f"collected {task.label} (cell {task.cell_id}, Slurm {task.slurm_id}) from an earlier "
                f"submission: {result.status}"
            )
        seq_of = {c.cell_id: i for i, c in enumerate(sweep.cells)}
        live = live_tasks(book, states, seq_of)
        todo = [
            c for c in sweep.cells if c.cell_id not in live and (sweep.force or sweep.store.status(c.cell_id) != OK)
        ]
        done = len(sweep.cells) - len(todo) - len(live)
        sweep.log(
            f"{done} finished already, {len(live)} still in Slurm from an earlier submission, {len(todo)} to submit"
        )
        for cell in todo:
            prepare_cell(cell, cell_dir(sweep.folder, cell.cell_id))
            (cell_dir(sweep.folder, cell.cell_id) / TASK_FILE).unlink(missing_ok=True)
        if todo:
            submit(sweep.folder, book, sweep.spec, self.options, [(seq_of[c.cell_id], c) for c in todo], sweep.log)

    def stop(self, sweep: Sweep, book: Book) -> None:
        """Watching ended early (Ctrl-C, an error): cancel the jobs (`cancel_on_exit`) or say they keep running."""
        jobs = book.uncollected_jobs()
        folder = sweep.folder
        if self.cancel_on_exit and jobs:
            cancel(jobs)
            sweep.log(
                f"cancelled Slurm job(s) {', '.join(jobs)} (--cancel-on-exit); the same command resubmits their cells"
            )
        elif jobs:
            sweep.log(
                f"Slurm job(s) {', '.join(jobs)} keep running: `nlgbench status {folder}` shows them, "
                f"`nlgbench collect {folder}` (or the same command) records their cells"
            )
