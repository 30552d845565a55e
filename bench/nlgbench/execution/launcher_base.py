"""What every launcher shares, in the manner of optimum-benchmark's `launchers/base.py`: `Launcher`,
the sweep around the cells (leakage guard, the pre-flight checks of `nlgbench.execution.preflight`,
run folder locked, store opened, run recorded) and the progress line's verdict on a cell. Each cell
runs in a fresh worker process (`nlgbench.execution.workerprocess`). The local launcher
(`nlgbench.execution.local`) and the Slurm one (`nlgbench.execution.slurm.launcher`) are its peers;
`nlgbench.execution.sweep.run` picks one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nlgbench.core.cell import CellConfig
from nlgbench.core.result import CellResult
from nlgbench.execution.leakage import guard_spec
from nlgbench.execution.preflight import check_datasets, check_devices
from nlgbench.foundations.fmt import duration
from nlgbench.runs.csvfiles import column_label, correlation_columns
from nlgbench.runs.folder import locked
from nlgbench.runs.store import Store, open_store

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
        """What the store keeps of this run's request (its `spec_json`): the spec, its executor block as one
        flat mapping (`ExecutorOptions.record`)."""
        record = asdict(spec)
        record["executor"] = None if spec.executor is None else spec.executor.record()
        return {"spec": record}

    @abstractmethod
    def launch(self, sweep: Sweep) -> list[CellResult]:
        """Run the sweep's unfinished cells, record each in `sweep.store`; the results of its cells."""


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
