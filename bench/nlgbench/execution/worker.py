"""Run one cell in this (fresh) process, following the measurement protocol of docs/architecture.md.

Started by a launcher (`nlgbench.execution.workerprocess.worker_command`) with CELL_DIR, or forked from a fork
server (`nlgbench.execution.forkserver`) that has imported this module already; reads `CELL_DIR/config.json`
(nlgbench.core.cell), writes `CELL_DIR/result.json` and `CELL_DIR/scores.csv` (both atomically).
Start-up is the worker's (`startup_s`: from the launcher starting the cell's process until this worker
is ready to load: imports done, config read, threads set, the metric's warm-up hook run; model and data
load excluded); every later phase is the protocol's (`nlgbench.measurement.protocol.measure_cell`:
data, load, prepare, the memory pass, warm-up and R timed repeats), which this worker hands its
callables (load the dataset, guard it, build the scorer from its `Recipe`) and from which it gets one `CellMeasurement`.
The cell's per-batch token budget (`batch_tokens`) is in force where it has one. The budget and the live bar
reach the scorer in the cell's `CellContext` (given to the metric's build), and the worker reads back
from it what the models recorded there: the texts cut to a model's maximum length, the export seconds. On a terminal
(`progress.live`) it prints its phase lines and a live bar of each pass; elsewhere nothing. Exit code 0 when the cell
is ok, 1 when it failed (the result says why). Ctrl-C ends it quietly, without a traceback: its
SIGINT is left at the default action (`forkserver.boot`) and the parent prints one line.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Sequence, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from nlgbench.core.cell import SCORES_FILE, TRACEBACK_FILE, CellConfig, read_config, use_registry_files
from nlgbench.core.recipe import Recipe
from nlgbench.core.result import CellResult, MetricRecord, RepeatAgreement
from nlgbench.core.scores import write_scores
from nlgbench.execution.leakage import guard_cell
from nlgbench.execution.measured import measured_result, memory_of_tracker, timing_of_protocol
from nlgbench.execution.preload import cell_models, cell_modules, import_modules
from nlgbench.execution.progress import CellProgress, live
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.files import write_atomic
from nlgbench.foundations.package import PACKAGE_DIR
from nlgbench.measurement.devices import Device
from nlgbench.measurement.environment import environment
from nlgbench.measurement.protocol import measure_cell
from nlgbench.metrics import get_metric

if TYPE_CHECKING:
    from nlgbench.data.items import Item
    from nlgbench.metrics.base import MetricInfo, Scorer

# What torch's CPU allocator says when an allocation fails (a RuntimeError, not a MemoryError).
CPU_ALLOCATION_FAILED = "can't allocate memory"


def _log(msg: str, bar: CellProgress | None = None) -> None:
    """A phase line of the cell, on a terminal only (`progress.live`: elsewhere one line per cell);
    with a `bar`, through it (its open bar closed first, so the line is never glued onto it)."""
    if not live(sys.stderr):
        return
    if bar is not None:
        bar.line(f"    {msg}")
    else:
        print(f"    {msg}", file=sys.stderr, flush=True)


def truncated_segments(items: Sequence[Item], fields: Sequence[str], cut: Set[str]) -> int:
    """Items with a text in one of `fields` (those the metric reads) among `cut`, the (stripped) texts
    the cell's encoders cut to their model's maximum length (`CellContext.truncated`)."""

    def texts(it: Item, field: str) -> Sequence[str]:
        return it.references if field == "reference" else (getattr(it, field),)

    return sum(1 for it in items if any(text.strip() in cut for field in fields for text in texts(it, field)))


@dataclass
class StartedCell:
    """A cell whose worker is ready to load: its config, device (read once), metric and models, and its
    start-up seconds."""

    cell_id: str
    label: str
    config: CellConfig
    device: Device
    info: MetricInfo
    models: list[str]
    startup_s: float


def start_cell(cell_dir: Path, started: float | None = None) -> StartedCell:
    """Start-up: config read, the cell's libraries imported (`preload.cell_modules`: what a fresh process
    running this cell alone imports, torch only where it runs a model; library imports are not part of
    the measured load time), torch's threads set where it is imported, and the metric's warm-up hook
    run (`MetricInfo.warm_up`: BaryScore's compiled kernels), before the memory baseline.
    `started`: the launcher's `time.time()` when it started this cell's process (default: this
    process's creation), the origin of `startup_s`."""
    cell_id, label, cfg = read_config(cell_dir)
    use_registry_files(cfg.registry_files)  # the sweep's own encoder and catalogue files, before any name is resolved
    device = Device(cfg.device)
    info = get_metric(cfg.metric)  # the metric's module imported: part of start-up, not of loading
    models = cell_models(cfg)
    import_modules(cell_modules(cfg))  # those its fork server imported for every cell cost nothing
    torch = device.torch()
    if torch is not None:
        torch.set_num_threads(cfg.threads or os.cpu_count() or 1)
    info.warm_up()  # in this process, never in a fork server (which runs no torch op)
    startup_s = time.time() - (psutil.Process().create_time() if started is None else started)
    _log(f"start-up: {startup_s:.1f} s")
    return StartedCell(cell_id, label, cfg, device, info, models, startup_s)


def cell_result(cell_dir: Path, cell: StartedCell) -> CellResult:
    """The cell measured by the protocol (`measure_cell`: data, load, prepare, memory pass, warm-up,
    repeats); writes scores.csv and returns the result."""
    cfg, info, recipe = cell.config, cell.info, Recipe.of_cell(cell.config)
    # The cell's context: its token budget and live bar, and the records its models write (cut texts, export time).
    with CellProgress(live(sys.stderr)) as bar:
        context = CellContext(batch_tokens=cfg.batch_tokens, progress=bar)

        def load_scorer() -> tuple[Scorer, float | None]:
            """The scorer, and the seconds of a backend's export (its own phase, not part of load_s)."""
            return recipe.build(cfg.device, cfg.batch_size, context), context.export_seconds

        measured = measure_cell(
            cell.device,
            cfg.dataset.load,
            # not timed: a distilled student on its own training data fails here
            lambda dataset: guard_cell(cell.models, dataset),
            load_scorer,
            warmup=cfg.warmup,
            repeats=cfg.repeats,
            batch_size=cfg.batch_size,
            log=lambda line: _log(line, bar),
            on_stage=bar.stage,
        )

    dataset, scorer, run = measured.dataset, measured.scorer, measured.run
    items = dataset.items
    written = write_scores(cell_dir / SCORES_FILE, items, run.scores.score, run.scores.columns)
    return measured_result(
        cell.cell_id,
        cell.label,
        cfg,
        metric=MetricRecord(name=info.name, higher_is_better=info.higher_is_better, primary=run.scores.primary),
        scorer={
            **scorer.describe(),
            "signature": recipe.signature(scorer.describe()),
            # unknown (None) for a plugin metric built without the context: its encoders recorded elsewhere
            "truncated_segments": truncated_segments(items, ("hypothesis", *info.needs), context.truncated)
            if info.takes_context
            else None,
            "leakage_guard": measured.checked,
        },
        dataset=dataset,
        timing=replace(
            timing_of_protocol(measured.data_s, measured.load_s, measured.prepare_s, run, len(items)),
            startup_s=cell.startup_s,
            export_s=measured.export_s,
        ),
        memory=memory_of_tracker(measured.memory, measured.memory_pass_s),
        agreement=RepeatAgreement(max_abs_diff=run.max_abs_diff, agree=run.agree),
        environment=environment(cell.device),
        scores=run.scores.score,
        scores_csv=written,
    )


def failure(cell_dir: Path, exc: BaseException, startup_s: float | None = None) -> CellResult:
    """The result of a cell that raised: status failed, or oom when the error says memory ran out
    (MemoryError, torch's OutOfMemoryError, torch's CPU allocator failing); traceback saved.
    `startup_s`: its start-up where the worker got that far (None where start-up itself failed)."""
    cell_id, label, cfg = read_config(cell_dir)
    oom = (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or (isinstance(exc, RuntimeError) and CPU_ALLOCATION_FAILED in str(exc))
    )
    write_atomic(cell_dir / TRACEBACK_FILE, "".join(traceback.format_exception(exc)))
    message = " ".join(str(exc).split()) or type(exc).__name__
    return CellResult.not_finished(
        cell_id, label, cfg, f"{type(exc).__name__}: {message}", oom=oom, startup_s=startup_s
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The worker: `argv` (default: the command line's) is CELL_DIR [PACKAGE_DIR [STARTED]]
    (`workerprocess.worker_command`); exit code 3 when this process imported another nlgbench than PACKAGE_DIR."""
    args = list(sys.argv[1:] if argv is None else argv)
    cell_dir = Path(args[0])
    here = PACKAGE_DIR  # the package this worker was imported from
    if len(args) > 1 and here != Path(args[1]):
        print(f"worker imported nlgbench from {here}, not the parent's {args[1]}", file=sys.stderr)
        return 3
    cell: StartedCell | None = None
    try:
        cell = start_cell(cell_dir, float(args[2]) if len(args) > 2 else None)
        result = cell_result(cell_dir, cell)
    except BaseException as exc:  # recorded, never lost: the sweep goes on
        result = failure(cell_dir, exc, cell.startup_s if cell is not None else None)
    result.write(cell_dir)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
