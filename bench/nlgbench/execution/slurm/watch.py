"""Watching a run folder's Slurm tasks: collecting every finished task's cell into the store (the
parent, holding the lock; tasks never touch results.sqlite), the progress counts while it watches,
`nlgbench collect DIR` (the same from any shell) and `nlgbench status DIR` (reads only).

A task that Slurm ended without a result (TIMEOUT, OUT_OF_MEMORY, PREEMPTED, NODE_FAIL, CANCELLED ...)
is recorded as failed (`oom` for OUT_OF_MEMORY) with that state in its error line and in
`cells/<id>/slurm.json`; the next run resubmits it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, read_config
from nlgbench.core.result import CellResult
from nlgbench.execution.launcher_base import Sweep, summary
from nlgbench.execution.slurm.book import Book, Submission, Task, log_path, read_task_record, write_task_record
from nlgbench.execution.slurm.options import SlurmOptions
from nlgbench.execution.slurm.queue import EXPLAINED, PENDING_STATES, SlurmUnavailable, TaskState, query_states
from nlgbench.execution.slurm.submit import recover_unrecorded
from nlgbench.foundations.errors import UserError
from nlgbench.runs.folder import STORE_FILE, cell_dir, locked
from nlgbench.runs.resultfile import read_result
from nlgbench.runs.rundata import find_results
from nlgbench.runs.store import Store, has_store, open_store

RESULT_GRACE_S = 30.0  # a task Slurm ended this long ago without a visible result.json has none (NFS caches lookups)

# ----------------------------------------------------------------------------- collecting


def outcome_error(task: Task, state: TaskState | None, options_time: Any, worker_error: str | None) -> str:
    """The error line of a task that did not finish its cell, with Slurm's state first."""
    where = f"job {task.slurm_id}" + (f" on {state.node}" if state and state.node else "")
    if state is None:
        head = (
            f"Slurm job {task.slurm_id} ended without a result and Slurm no longer knows its state "
            "(no accounting on this cluster, or it was purged)"
        )
    elif state.state == "COMPLETED":
        head = f"Slurm COMPLETED ({where}) but the task wrote no result"
    else:
        limit = f" ({options_time} min)" if state.state == "TIMEOUT" and options_time else ""
        head = f"Slurm {state.state}: {where} {EXPLAINED.get(state.state, 'ended')}{limit}"
    return head + (f"; {worker_error}" if worker_error else "")


def written_result(folder: Path, cell_id: str) -> CellResult | None:
    """The result.json the task wrote for its cell; None when there is none, or it is unreadable or not the cell's."""
    if not (folder / RESULT_FILE).is_file():
        return None
    try:
        result = read_result(folder)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not ours or unreadable: treated as no result
    return result if result.cell_id == cell_id else None


def ready(result: CellResult | None, record: Mapping[str, Any], state: TaskState | None, now: float) -> bool:
    """Whether a task's cell can be collected now: finished, and the task done with its folder; else
    once Slurm says the task is over (and, when it ran, its result had time to show over NFS)."""
    if result is not None and result.ok and "ended_at" in record:
        return True
    if state is not None and state.live:
        return False
    # it ran: a result written on its node may not be visible here yet
    return not (
        result is None
        and state is not None
        and state.node
        and state.ended_at is not None
        and now - state.ended_at < RESULT_GRACE_S
    )


def failed_result(
    folder: Path, sub: Submission, task: Task, state: TaskState | None, result: CellResult | None
) -> CellResult:
    """The result of a task that did not finish its cell, with Slurm's state first in its error line
    (`oom` for OUT_OF_MEMORY), written to result.json."""
    _, label, cfg = read_config(folder)
    worker_error = result.error if result is not None else None
    if state is not None and state.state == "COMPLETED" and worker_error:
        error = worker_error  # the worker's own failure; Slurm has nothing to add
    else:
        error = outcome_error(task, state, sub.parameters.get("time"), worker_error)
    oom = (state is not None and state.state == "OUT_OF_MEMORY") or (result is not None and result.status == "oom")
    failed = CellResult.not_finished(task.cell_id, label, cfg, error, oom=oom)
    failed.write(folder)
    return failed


def collect(
    folder: Path,
    store: Store,
    run_id: str,
    book: Book,
    states: Mapping[str, TaskState],
    log: Callable[[str], None] = print,
    now: float | None = None,
) -> list[tuple[Task, CellResult]]:
    """Merge every finished task's cell into the store (the caller holds the run folder's lock):
    a finished result as soon as its task has ended; a failed one, or none, once Slurm says the task
    is over (`failed_result`). The verdict goes into result.json and slurm.json too, so cells/ and
    the store agree. Returns what was merged."""
    now = time.time() if now is None else now
    merged = []
    for cell_id, (sub, task) in book.latest().items():
        if task.collected_at is not None or task.slurm_id is None:
            continue
        where = cell_dir(folder, cell_id)
        record = read_task_record(where)
        state = states.get(task.slurm_id)
        result = written_result(where, cell_id)
        if not ready(result, record, state, now):
            continue
        if result is None or not result.ok:
            result = failed_result(where, sub, task, state, result)
        store.record(run_id, task.seq, result, where / SCORES_FILE if result.ok else None)
        task.collected_at = now
        # None: merged before Slurm's last word
        task.state = state.state if state is not None and not state.live else None
        task.node = (state.node if state else None) or record.get("node")
        write_task_record(
            where,
            {
                **record,
                "slurm_id": task.slurm_id,
                "submitted_at": sub.submitted_at,
                "state": task.state,
                "node": task.node,
                "collected_at": now,
                "status": result.status,
            },
        )
        merged.append((task, result))
    if merged:
        book.write(folder)
        store.write_csv()
    return merged


# ----------------------------------------------------------------------------- progress


@dataclass
class Counts:
    """Cells of a set by where they are: pending, running, done (ok), failed (not ok), and not
    submitted (never, or their task vanished uncollected), with the job ids involved."""

    pending: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    unsubmitted: int = 0
    jobs: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"{self.pending} pending", f"{self.running} running", f"{self.done} done", f"{self.failed} failed"]
        if self.unsubmitted:
            parts.append(f"{self.unsubmitted} not submitted")
        return ", ".join(parts) + (
            f" (Slurm job{'s' if len(self.jobs) > 1 else ''} {', '.join(self.jobs)})" if self.jobs else ""
        )


def count(cell_ids: Iterable[str], book: Book, states: Mapping[str, TaskState], stored: Mapping[str, str]) -> Counts:
    latest = book.latest()
    out = Counts()
    jobs: set[str] = set()
    for cell_id in cell_ids:
        entry = latest.get(cell_id)
        sub, task = entry if entry else (None, None)
        state = states.get(task.slurm_id) if task and task.slurm_id else None
        if task is not None and task.collected_at is None and sub is not None and sub.job_id:
            jobs.add(sub.job_id)
            if state is not None and state.state in PENDING_STATES:
                out.pending += 1
            else:
                out.running += 1  # running, or ended and about to be collected
        elif stored.get(cell_id) == "ok":
            out.done += 1
        elif cell_id in stored:
            out.failed += 1
        else:
            out.unsubmitted += 1
    out.jobs = sorted(jobs, key=lambda j: (len(j), j))
    return out


def live_tasks(book: Book, states: Mapping[str, TaskState], cell_ids: Iterable[str] | None = None) -> dict[str, Task]:
    """Uncollected latest tasks Slurm still runs or queues, by cell id."""
    wanted = set(cell_ids) if cell_ids is not None else None
    out = {}
    for cell_id, (_, task) in book.latest().items():
        if wanted is not None and cell_id not in wanted:
            continue
        state = states.get(task.slurm_id or "")
        if task.collected_at is None and state is not None and state.live:
            out[cell_id] = task
    return out


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def watch(sweep: Sweep, book: Book, options: SlurmOptions, started: float) -> None:
    """Poll Slurm every `options.poll_seconds` and collect, until no task of the sweep's cells is
    left uncollected; a progress line whenever the counts change, one line per collected cell."""
    cell_ids = [c.cell_id for c in sweep.cells]
    wanted = set(cell_ids)
    order = {cell_id: i for i, cell_id in enumerate(cell_ids)}
    last = ""
    warned = False
    while True:
        try:
            states = query_states(book.uncollected_jobs())
        except SlurmUnavailable as exc:  # slurmctld restarting, say: the tasks go on; ask again later
            if not warned:
                sweep.log(f"warning: {exc}; asking again every {options.poll_seconds:g} s")
                warned = True
            time.sleep(options.poll_seconds)
            continue
        warned = False
        for task, result in collect(sweep.folder, sweep.store, sweep.run_id, book, states, sweep.log):
            if task.cell_id not in wanted:
                continue
            took = float(read_task_record(cell_dir(sweep.folder, task.cell_id)).get("worker_s") or 0.0)
            sweep.note_environment(result)
            sweep.log(
                f"[{order[task.cell_id] + 1}/{len(cell_ids)}] {task.label} (Slurm {task.slurm_id}"
                + (f" on {task.node}" if task.node else "")
                + f"): {summary(result, took)}"
            )
        stored = {r.cell_id: r.status for r in sweep.store.results() if r.cell_id in wanted}
        line = count(cell_ids, book, states, stored).line()
        if line != last:
            sweep.log(f"[slurm {_clock(time.perf_counter() - started)}] {line}")
            last = line
        if not any(
            task.collected_at is None and task.slurm_id is not None
            for cell_id, (_, task) in book.latest().items()
            if cell_id in wanted
        ):
            return
        time.sleep(options.poll_seconds)


# ----------------------------------------------------------------------------- collect and status commands


def collect_folder(folder: Path, log: Callable[[str], None] = print) -> str:
    """`nlgbench collect DIR`: merge every task that has ended into the store (holding the lock)."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    book = Book.read(folder)
    if not book.submissions:
        return f"{folder}: no Slurm submissions to collect"
    with locked(folder, log=log), open_store(folder) as store:
        book = Book.read(folder)  # as the lock holder sees it
        recover_unrecorded(folder, book)
        states = query_states(book.uncollected_jobs())
        run_id = store.start_run("collect", {"collect": str(folder)}, {})
        merged = collect(folder, store, run_id, book, states, log)
        store.finish_run(run_id)
        store.write_csv()
        cells = list(book.latest())
        stored = {r.cell_id: r.status for r in store.results()}
        counts = count(cells, book, states, stored)
    n_ok = sum(r.ok for _, r in merged)
    return (
        f"collected {len(merged)} cell(s) ({n_ok} ok, {len(merged) - n_ok} not ok) into {folder / STORE_FILE}; "
        f"cells submitted to Slurm: {counts.line()}"
    )


@dataclass(frozen=True)
class Figures:
    """Means (they add up) over a run folder's finished Slurm cells (cells/<id>/slurm.json), in seconds:
    submit -> recorded in the store, of which the worker's run, the wait for a free slot (the task
    started after a sibling task ended), and the rest: Slurm starting the task, Python and
    submitit starting, the task's end and the parent noticing it (at most one poll interval)."""

    n: int
    submit_to_result: float
    worker: float
    waiting: float
    overhead: float

    def line(self) -> str:
        return (
            f"per cell (mean of {self.n}): submit -> result recorded {self.submit_to_result:.1f} s = worker "
            f"{self.worker:.1f} s + waiting for a free slot {self.waiting:.1f} s + scheduler overhead "
            f"{self.overhead:.1f} s"
        )


def figures(folder: Path, book: Book) -> Figures | None:
    records = [(sub, read_task_record(cell_dir(folder, cell_id))) for cell_id, (sub, _) in book.latest().items()]
    done = [
        (sub, r)
        for sub, r in records
        if r.get("status") == "ok"
        and all(isinstance(r.get(k), float) for k in ("started_at", "ended_at", "worker_s", "collected_at"))
    ]
    ends = sorted(r["ended_at"] for _, r in done)
    rows = []
    for sub, r in done:
        # the slot this task got was freed by the last sibling that ended between its submission and its start
        freed = max([sub.submitted_at, *(e for e in ends if sub.submitted_at <= e <= r["started_at"])])
        total = r["collected_at"] - sub.submitted_at
        waiting = freed - sub.submitted_at
        rows.append((total, r["worker_s"], waiting, total - r["worker_s"] - waiting))
    if not rows:
        return None
    return Figures(len(rows), *(statistics.fmean(row[i] for row in rows) for i in range(4)))


def job_lines(folder: Path, book: Book, states: Mapping[str, TaskState], stored: Mapping[str, CellResult]) -> list[str]:
    """`status`'s line per submission (its tasks by state), then per task not collected (with node or
    pending reason) and per failed cell (with its error and log)."""
    lines = []
    for sub in book.submissions:
        tally: dict[str, int] = {}
        for task in sub.tasks:
            st = states.get(task.slurm_id or "")
            name = st.state if st else (task.state or ("collected" if task.collected_at else "unknown to Slurm"))
            tally[name] = tally.get(name, 0) + 1
        lines.append(
            f"  job {sub.job_id or '(not recorded)'} ({sub.group}, {len(sub.tasks)} task(s), submitted "
            f"{datetime.fromtimestamp(sub.submitted_at).strftime('%Y-%m-%d %H:%M:%S')}): "
            + ", ".join(f"{v} {k}" for k, v in sorted(tally.items()))
        )
    for cell_id, (_, task) in book.latest().items():
        st = states.get(task.slurm_id or "")
        if task.collected_at is None:
            where = (st.node if st and st.node else (st.reason if st and st.reason else "")) if st else ""
            lines.append(
                f"  {task.slurm_id}  {st.state if st else 'unknown'}  {where}  {task.label} (cell {cell_id})"
                + ("" if st else "  (ended? `nlgbench collect` records it)")
            )
        elif cell_id in stored and not stored[cell_id].ok:
            lines.append(
                f"  {task.slurm_id}  {stored[cell_id].status.upper()}  {task.label} (cell {cell_id}): "
                f"{stored[cell_id].error}; log: {log_path(folder, task.slurm_id or '')}"
            )
    return lines


def recorded_cells(folder: Path) -> tuple[dict[str, CellResult], str | None]:
    """The run folder's recorded cells and where they were read: the store, else what report and
    compare read (the cell folders, else the published report/ data); ({}, None) when there are none."""
    if has_store(folder):
        with Store(folder) as store:
            return {r.cell_id: r for r in store.results()}, STORE_FILE
    try:
        results, source = find_results(folder)
    except UserError:
        return {}, None
    return {r.cell_id: r for r in results}, source.name


def status_data(folder: Path) -> dict[str, Any]:
    """`nlgbench status DIR --json`: where the cells were read, their counts, each recorded cell
    (id, label, status, error) and the number of Slurm submissions."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    stored, source = recorded_cells(folder)
    ok = sum(r.ok for r in stored.values())
    return {
        "folder": str(folder),
        "source": source,
        "recorded": len(stored),
        "ok": ok,
        "not_ok": len(stored) - ok,
        "cells": [
            {"cell_id": r.cell_id, "label": r.label, "status": r.status, "error": r.error} for r in stored.values()
        ],
        "slurm_submissions": len(Book.read(folder).submissions),
    }


def status_text(folder: Path) -> str:
    """`nlgbench status DIR`: the cells submitted to Slurm by where they are, every job, the tasks
    not finished (with node or pending reason) and the failed ones; reads only (no lock)."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    stored, source = recorded_cells(folder)
    where = f" (read from {source}; no results.sqlite)" if source not in (None, STORE_FILE) else ""
    book = Book.read(folder)
    n_ok = sum(r.ok for r in stored.values())
    head = f"{folder}: {len(stored)} cell(s) recorded ({n_ok} ok, {len(stored) - n_ok} not ok){where}"
    if not book.submissions:
        return head + "; no Slurm submissions"
    unreachable = None
    try:
        states = query_states([s.job_id for s in book.submissions if s.job_id])
    except SlurmUnavailable as exc:  # say what the files say, and that Slurm was not asked
        states, unreachable = (
            {},
            (f"Slurm not reachable ({exc}): uncollected tasks are shown as running, their states unknown"),
        )
    counts = count(list(book.latest()), book, states, {k: r.status for k, r in stored.items()})
    lines = [head, f"cells submitted to Slurm: {counts.line()}", *([unreachable] if unreachable else [])]
    lines += job_lines(folder, book, states, stored)
    fig = figures(folder, book)
    if fig is not None:
        lines.append(fig.line())
    return "\n".join(lines)
