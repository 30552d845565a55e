"""What every launcher shares, in the manner of optimum-benchmark's `launchers/base.py`: `Launcher`,
the sweep around the cells (leakage guard, datasets checked, run folder locked, store opened, run
recorded), and the one way a cell runs: its folder prepared, then a fresh worker process
(`nlgbench.execution.worker`). The local launcher (`nlgbench.execution.local`) and the Slurm one
(`nlgbench.execution.slurm.launcher`) are its peers; `nlgbench.execution.sweep.run` picks one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, TRACEBACK_FILE, CellConfig, read_config, write_config
from nlgbench.core.datawarnings import blank_text_warnings
from nlgbench.core.result import CellResult
from nlgbench.data.model import Dataset, item_name
from nlgbench.execution.forkserver import WORKER_MODULE, ForkServer, boot, die_with
from nlgbench.execution.leakage import guard_spec
from nlgbench.execution.progress import PROGRESS_ENV, live
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.fmt import duration
from nlgbench.foundations.package import PACKAGE_DIR
from nlgbench.foundations.registry import user_files_environment
from nlgbench.measurement.devices import check_device
from nlgbench.measurement.trackers import oom_kills
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import no_reference_policy
from nlgbench.runs.folder import locked, own_folder
from nlgbench.runs.store import Store, open_store
from nlgbench.runs.views import column_label, correlation_columns

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec

# ----------------------------------------------------------------------------- the sweep around the cells


@dataclass
class Sweep:
    """One sweep being run, as a launcher's `launch` gets it: the spec (datasets checked) and its
    cells, items per dataset, the run folder with its open store and this run's record."""

    spec: SweepSpec
    cells: list[CellConfig]
    sizes: dict[str, int]
    folder: Path
    store: Store
    run_id: str
    force: bool
    log: Callable[[str], None]
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note_environment(self, result: CellResult) -> None:
        """The run's environment record holds, per device its finished cells ran on, the environment
        their worker measured (CPU, GPU name, threads, versions): the first one seen is kept."""
        device = result.config.device
        if result.environment is not None and device not in self.environments:
            self.environments[device] = result.environment
            self.store.set_run_environment(self.run_id, self.environments)


class Launcher(ABC):
    """How a sweep's cells get run. `run` is the same for every launcher: a distilled student
    evaluated on its own training data is refused (the leakage guard; each cell checks again on the
    data it loads), every dataset is loaded and checked before any cell (`check_datasets`), the run
    folder is locked for the sweep (`wait`: wait for another process holding it) and the run is
    recorded in its store. `launch` runs the cells that are not finished (`force`: all of them) and
    returns the results of the sweep's cells."""

    where: ClassVar[str] = ""  # in the sweep's first line, after its name: " on Slurm"
    here: ClassVar[bool] = True  # cells run on this machine: its devices are checked before any cell

    def run(
        self,
        spec: SweepSpec,
        out_dir: Path,
        *,
        force: bool = False,
        wait: bool = False,
        log: Callable[[str], None] = print,
    ) -> list[CellResult]:
        guard_spec(spec)  # a distilled student evaluated on data it was trained on: refused at every entry point
        if self.here:
            check_devices(spec)
        spec, sizes = check_datasets(spec)
        cells = spec.cells()
        with locked(out_dir, wait=wait, log=log), open_store(out_dir) as store:
            run_id = store.start_run(spec.name, self.run_record(spec), {})
            sweep = Sweep(spec, cells, sizes, out_dir, store, run_id, force, log)
            log(
                f"sweep {spec.name!r}{self.where}: {len(cells)} cells -> {out_dir} "
                f"({', '.join(f'{k}: {v} items' for k, v in sizes.items())})"
            )
            results = self.launch(sweep)
            store.write_csv()
            store.finish_run(run_id)
        return results

    def run_record(self, spec: SweepSpec) -> dict[str, Any]:
        """What the store keeps of this run's request (its `spec_json`)."""
        return {"spec": asdict(spec)}

    @abstractmethod
    def launch(self, sweep: Sweep) -> list[CellResult]:
        """Run the sweep's unfinished cells, record each in `sweep.store`; the results of its cells."""


def check_devices(spec: SweepSpec) -> None:
    """Every device of the spec exists on this machine (a local sweep, or its --dry-run): one line,
    before any cell, instead of cells that all fail (`cuda` on a CPU-only machine). Slurm sweeps are
    not checked here: their cells run on other nodes."""
    for device in dict.fromkeys(spec.devices):
        try:
            check_device(device)
        except UserError as exc:
            raise UserError(f"spec devices: {exc} (on a cluster: --executor slurm)") from None


def check_datasets(spec: SweepSpec, *, catalogue: bool = True) -> tuple[SweepSpec, dict[str, int]]:
    """Load every dataset of the spec once (`catalogue=False`: own files and hf datasets only, as --dry-run) and
    check that no metric meets a blank text where it defines no value for one (`MetricInfo.blank_rule`;
    those it scores are warned about here and recorded with each cell), and that a one-reference metric
    without a reference_policy meets no item with several references (refused here, before any model
    loads, not inside its cells). Returns the spec to run, in which a `sample` that draws every item is
    dropped (its cells are the whole dataset's, labelled so, not `[~n]`), and items per dataset."""
    sizes, refs = {}, []
    for ref in spec.datasets:
        if not catalogue and ref.name is not None:  # an hf dataset loads: its content hash is in the cell id
            refs.append(ref)
            continue
        ds = ref.load()
        blank_warnings = check_blank_texts(spec, ds, ref.label)
        most = max((len(it.references) for it in ds.items), default=1)
        for entry in spec.metrics if most > 1 else []:
            if get_metric(entry.metric).needs_reference_policy(entry.options):
                raise UserError(f"dataset {ref.label}: {no_reference_policy(entry.metric, most)}")
        for warning in [*ds.warnings, *blank_warnings]:  # e.g. a head subset of a file sorted by human score
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        if ref.sample is not None and ds.drawn_whole:
            whole = replace(ref, sample=None)
            print(
                f"warning: {ref.label} draws every item of the dataset: its cells are {whole.label}'s",
                file=sys.stderr,
                flush=True,
            )
            ref = whole
        refs.append(ref)
        sizes[ref.label] = len(ds.items)
    return replace(spec, datasets=refs), sizes


def check_blank_texts(spec: SweepSpec, ds: Dataset, label: str) -> list[str]:
    """Refuse (one line naming the dataset, the metric and the item) a blank text where one of the
    spec's metrics defines no value for it (`MetricInfo.blank_rule`); the warnings on those it scores,
    prefixed with the metric's name, each once."""
    out: list[str] = []
    for entry in spec.metrics:
        rule = get_metric(entry.metric).blank_rule(entry.options)
        refused = rule.refusal(entry.metric, ds.items, lambda _, i: f"item {item_name(ds.items[i])}")
        if refused is not None:
            raise UserError(f"dataset {label}: {refused}")
        out += [f"{entry.metric}: {warning}" for warning in blank_text_warnings(ds, rule)]
    return list(dict.fromkeys(out))


PROGRESS_QUALITY = ("pearson_global", "pearson_segment")  # results.csv's columns the progress line shows


def summary(result: CellResult, elapsed: float) -> str:
    """The progress line's verdict on a cell: results.csv's first correlation (Pearson, global: pooled
    over all segments, what report and compare show by default), then Pearson at the segment level
    (per lp, then the mean), each labelled with its level as report and compare label it."""
    if not result.ok or result.timing is None or result.correlation is None:
        return f"{result.status.upper()}: {result.error}"
    figures, note = correlation_columns(result.correlation), result.correlation.get("note")
    shown = ", ".join(
        f"{column_label(k)} {'n/a' if figures[k] == '' else f'{figures[k]:.4f}'}" for k in PROGRESS_QUALITY
    )
    return f"ok in {duration(elapsed)}: {result.timing.ms_per_segment_mean:.2f} ms/segment, {shown}" + (
        f" ({note})" if note else ""
    )


# ----------------------------------------------------------------------------- one cell in a worker process

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


def worker_environment(threads: int | None, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """A worker's environment: this process's, unbuffered output, the user's registry files
    (`extra_env`, default `user_files_environment()` as this process sees them), NLGBENCH_PROGRESS
    (the worker's bar and phase lines: on a terminal only) and OMP_NUM_THREADS for `threads`."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(user_files_environment() if extra_env is None else extra_env))
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
    extra_env: dict[str, str] | None = None,
    *,
    server: ForkServer | None = None,
    started: float | None = None,
) -> CellResult:
    """Run the cell prepared in `cell_dir` in a fresh worker process and return its result: the
    worker's result.json, or, when it died without one, why (not written here). The process is a
    child forked from `server` (`nlgbench.execution.forkserver`), else a plain `worker_command`.
    `extra_env`: the user's registry files (`user_files_environment`) as the caller saw them.
    `started`: the origin of the cell's `startup_s` (default: now; a Slurm task passes its own start).
    If this process is killed, the worker dies with it (Linux parent-death signal)."""
    env = worker_environment(threads, extra_env)
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
        return CellResult.read(cell_dir)
    kills_after = oom_kills()
    oom_killed = kills_before is not None and kills_after is not None and kills_after > kills_before
    error, oom = death_cause(code, oom_killed, server=server_died)
    cell_id, label, config = read_config(cell_dir)
    return CellResult.not_finished(cell_id, label, config, error, oom=oom)
