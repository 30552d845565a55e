"""Sweeps on a Slurm cluster through submitit: one job array task per pending cell.

`nlgbench run SPEC --out DIR --executor slurm` submits the cells that are not finished as a job
array (submitit writes the sbatch script and pickles the task; one array per device kind, CUDA
cells asking for GPUs, CPU cells for none). Each task runs the same isolated worker as a local
sweep (`runner.run_worker`) and writes only its own `DIR/cells/<id>/` (config.json is written by
the parent before submitting; result.json, scores.csv and slurm.json by the task, each atomically).
Tasks never touch `results.sqlite`: SQLite's locking is unreliable over NFS, where a cluster's run
folder lives. The parent, holding the run folder's lock, watches the tasks and merges every
finished cell into the store (`collect`); `nlgbench collect DIR` does the same from any shell, and
`nlgbench status DIR` only reads.

What Slurm says about a task comes from squeue (jobs it still knows: pending, running, and finished
ones for MinJobAge) and, for older ones, sacct where the cluster keeps accounting. A task that
Slurm ended without a result (TIMEOUT, OUT_OF_MEMORY, PREEMPTED, NODE_FAIL, CANCELLED ...) is
recorded as failed (`oom` for OUT_OF_MEMORY) with that state in its error line and in
`cells/<id>/slurm.json`; the next run resubmits it. Finished (`ok`) cells are never resubmitted
(unless `--force`), and neither are cells whose task is still pending or running.

`DIR/slurm/submissions.json` records every submission (job id, sbatch parameters, which cell each
task runs, when it was submitted and collected); `DIR/slurm/submitit/` holds submitit's scripts,
pickles and the tasks' logs (`<job>_<task>_0_log.err`).
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, TRACEBACK_FILE, CellConfig, CellResult, read_config
from nlgbench.foundations.files import write_atomic
from nlgbench.foundations.errors import UserError, closest

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec
    from nlgbench.runs.store import Store

from nlgbench.core.executor_options import (  # noqa: F401  ExecutorOptions, parse_executor, with_cli: re-exported
    ExecutorOptions,
    parse_executor,
    script_safe,
    with_cli,
)

# ----------------------------------------------------------------------------- files of a run folder

SLURM_DIR = "slurm"  # DIR/slurm/
BOOK_FILE = "submissions.json"  # DIR/slurm/submissions.json: written by the parent only (holding the lock)
SUBMITIT_DIR = "submitit"  # DIR/slurm/submitit/: submitit's sbatch scripts, pickles and the tasks' logs
TASK_FILE = "slurm.json"  # DIR/cells/<id>/slurm.json: the task's record (job ids, node, times), then Slurm's verdict
RESULT_GRACE_S = 30.0  # a task Slurm ended this long ago without a visible result.json has none (NFS caches lookups)


def submitit_folder(folder: Path) -> Path:
    return folder.resolve() / SLURM_DIR / SUBMITIT_DIR


def log_path(folder: Path, slurm_id: str) -> Path:
    """The task's stderr (where the worker's progress and tracebacks go), as submitit names it."""
    from submitit.core.utils import JobPaths

    return JobPaths(submitit_folder(folder), job_id=slurm_id, task_id=0).stderr


@dataclass
class Task:
    """One job array task: the cell it runs, its place in the sweep, and once collected, Slurm's
    final state and node."""

    index: int
    cell_id: str
    label: str
    seq: int
    slurm_id: str | None = None  # `JOB_INDEX`, or `JOB` for a submission of one cell (a plain job)
    collected_at: float | None = None
    state: str | None = None
    node: str | None = None


@dataclass
class Submission:
    """One sbatch call: a job array (or one job) of cells of one device kind."""

    uid: str
    job_name: str
    group: str  # cpu or cuda
    submitted_at: float
    parameters: dict[str, Any]
    tasks: list[Task]
    job_id: str | None = None  # None between the pre-record and sbatch's answer

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Submission:
        return cls(**{**raw, "tasks": [Task(**t) for t in raw["tasks"]]})


@dataclass
class Book:
    """DIR/slurm/submissions.json: every submission of the run folder, oldest first."""

    submissions: list[Submission] = field(default_factory=list)

    @classmethod
    def read(cls, folder: Path) -> Book:
        path = folder / SLURM_DIR / BOOK_FILE
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls([Submission.from_dict(s) for s in raw["submissions"]])
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path} is not a submissions record nlgbench can read ({exc}); move it aside to "
                            "start the Slurm bookkeeping afresh (finished cells are kept in the store)") from None

    def write(self, folder: Path) -> None:
        from nlgbench.runs.folder import own_folder

        write_atomic(own_folder(folder / SLURM_DIR) / BOOK_FILE,
                     json.dumps({"submissions": [asdict(s) for s in self.submissions]}, indent=1))

    def latest(self) -> dict[str, tuple[Submission, Task]]:
        """Each cell's last task (a resubmitted cell's older tasks are history)."""
        out: dict[str, tuple[Submission, Task]] = {}
        for sub in self.submissions:
            for task in sub.tasks:
                out[task.cell_id] = (sub, task)
        return out


def read_task_record(cell_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((cell_dir / TASK_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


# ----------------------------------------------------------------------------- what Slurm says

# States after which a job does nothing more (squeue's and sacct's long names). Everything else
# Slurm reports (PENDING, CONFIGURING, RUNNING, COMPLETING, SUSPENDED, REQUEUED, ...) is still live.
TERMINAL = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL",
            "DEADLINE", "REVOKED"}
PENDING_STATES = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD"}
EXPLAINED = {
    "TIMEOUT": "reached its time limit",
    "OUT_OF_MEMORY": "ran out of the memory it asked for",
    "PREEMPTED": "was preempted",
    "NODE_FAIL": "lost its node",
    "BOOT_FAIL": "its node failed to boot",
    "CANCELLED": "was cancelled (scancel, or an administrator)",
    "DEADLINE": "missed its deadline",
    "FAILED": "failed (its batch script exited non-zero)",
    "REVOKED": "was revoked",
}


@dataclass(frozen=True)
class TaskState:
    """Slurm's word on one task: its state (first word: `CANCELLED by 0` is CANCELLED), node(s),
    pending reason and end time (epoch seconds, for finished tasks)."""

    state: str
    node: str | None = None
    reason: str | None = None
    ended_at: float | None = None

    @property
    def live(self) -> bool:
        return self.state not in TERMINAL


class SlurmUnavailable(UserError):
    """squeue could not be asked (no Slurm here, or slurmctld not answering)."""


def _slurm_command(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise SlurmUnavailable(f"{args[0]} not found: Slurm's commands are not on PATH on this machine") from None
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"{args[0]} did not answer within 120 s (slurmctld busy or down?)") from None


def _end_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def query_states(job_ids: Iterable[str]) -> dict[str, TaskState]:
    """Slurm's state of every task of these jobs, by task id (`12_3`, or `12` for a plain job):
    squeue for the jobs slurmctld still knows, sacct (where accounting is kept) for older ones;
    tasks neither knows are missing from the answer."""
    ids = sorted(set(job_ids), key=lambda j: (len(j), j))
    out: dict[str, TaskState] = {}
    if not ids:
        return out
    proc = _slurm_command(["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%N|%r|%e",
                           "--jobs", ",".join(ids)])
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise SlurmUnavailable(f"squeue failed: {' '.join(proc.stderr.split()) or f'exit code {proc.returncode}'}")
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5:
            task_id, state, node, reason, end = parts
            state = state.split()[0] if state.strip() else "UNKNOWN"
            out[task_id] = TaskState(state, node or None, None if reason in ("", "None") else reason,
                                     _end_time(end) if state in TERMINAL else None)
    known = {t.split("_")[0] for t in out}
    older = [j for j in ids if j not in known]
    if older:
        acct = _slurm_command(["sacct", "--noheader", "--allocations", "--parsable2",
                               "--format=JobID,State,NodeList,End", "--jobs", ",".join(older)])
        if acct.returncode == 0:  # else: no accounting on this cluster (sacct says so); squeue was all there is
            for line in acct.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 4 and parts[1]:
                    state = parts[1].split()[0]
                    out.setdefault(parts[0], TaskState(state, parts[2] or None, None,
                                                       _end_time(parts[3]) if state in TERMINAL else None))
    return out


def find_job(job_name: str) -> str | None:
    """The job id of a submission whose sbatch answer was never recorded (the parent died in
    between), found by its unique job name; None when Slurm knows no such job."""
    proc = _slurm_command(["squeue", "--noheader", "--states=all", "--format=%F", "--name", job_name])
    ids = sorted({line.strip() for line in proc.stdout.splitlines() if line.strip()})
    return ids[0] if proc.returncode == 0 and ids else None


# ----------------------------------------------------------------------------- the task (on a node)


def slurm_environment() -> dict[str, Any]:
    """Where this process runs under Slurm: node, job id, array job and task ids (None outside Slurm)."""
    env = os.environ
    return {
        "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
        "slurm_partition": env.get("SLURM_JOB_PARTITION"),
        "slurm_cpus_per_task": env.get("SLURM_CPUS_PER_TASK"),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
    }


def run_task(cell_dir: str, threads: int | None, extra_env: dict[str, str]) -> str:
    """One job array task, run by submitit on a node: the cell's worker in a fresh process, exactly
    as a local sweep runs it (`runner.run_worker`). Writes only the cell's folder: slurm.json when
    it starts and ends, result.json when the worker died without one (why it died). A finished
    result's environment gains the node and Slurm ids where the worker did not record them.
    Returns the cell's status."""
    from nlgbench.execution.local import run_worker

    folder = Path(cell_dir)
    for stale in (RESULT_FILE, SCORES_FILE, TRACEBACK_FILE):  # a requeued task starts clean
        (folder / stale).unlink(missing_ok=True)
    where = slurm_environment()
    record: dict[str, Any] = {**read_task_record(folder), **where, "started_at": time.time()}
    for key in ("ended_at", "worker_s", "status", "state", "collected_at"):
        record.pop(key, None)
    write_atomic(folder / TASK_FILE, json.dumps(record, indent=1))
    start = time.perf_counter()
    result = run_worker(folder, threads, extra_env)
    worker_s = time.perf_counter() - start
    if not (folder / RESULT_FILE).exists():
        result.write(folder)  # the worker died: its cause (signal, exit code) is the cell's result
    elif result.ok:
        env = dict(result.environment or {})
        missing = {k: v for k, v in where.items() if k in ("node", "slurm_job_id", "slurm_array_task_id") and k not in env}
        if missing:
            result = replace(result, environment={**env, **missing})
            result.write(folder)
    record.update(ended_at=time.time(), worker_s=worker_s, status=result.status)
    write_atomic(folder / TASK_FILE, json.dumps(record, indent=1))
    return result.status


# ----------------------------------------------------------------------------- submitting


def group_of(cell: CellConfig) -> str:
    return "cuda" if cell.device.startswith("cuda") else "cpu"


def sbatch_parameters(options: ExecutorOptions, group: str, threads: int | None, job_name: str) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters for one array of `group` cells. The task runs in the
    batch step itself (`use_srun=False`: no job step to launch, and no srun that drops the job's
    --cpus-per-task, as Slurm 22.05's does); --mem is passed to sbatch as written."""
    params: dict[str, Any] = {"job_name": job_name, "time": options.time, "use_srun": False}
    if options.partition:
        params["partition"] = options.partition
    cpus = options.cpus_per_cell or threads
    if cpus:
        params["cpus_per_task"] = cpus
    if group == "cuda":
        gpus = 1 if options.gpus_per_cell is None else options.gpus_per_cell
        if gpus:
            params["gpus_per_node"] = gpus
    if options.max_parallel:
        params["array_parallelism"] = options.max_parallel
    extra = dict(options.slurm_args)
    if options.mem:
        extra["mem"] = options.mem
    if extra:
        params["additional_parameters"] = extra
    return params


def submit_command(folder: Path) -> str:
    """The batch script's command line, as submitit writes it: this Python runs submitit's task runner."""
    import shlex
    import sys

    for what, text in (("the run folder", str(submitit_folder(folder))), ("the Python executable", sys.executable)):
        script_safe(text, what)
    return " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(submitit_folder(folder)))])


def sbatch_script(folder: Path, params: Mapping[str, Any], n_tasks: int) -> str:
    """The sbatch script submitit writes for an array of `n_tasks` tasks with these parameters
    (its own function, as `SlurmExecutor` uses it), checked line by line (`check_script`)."""
    from submitit.slurm.slurm import _make_sbatch_string

    command = submit_command(folder)
    script = _make_sbatch_string(command=command, folder=submitit_folder(folder),
                                 map_count=n_tasks if n_tasks > 1 else None, **params)
    check_script(script, params, folder)
    return script


# sbatch options submitit's script sets besides the parameters nlgbench passes
SUBMITIT_DIRECTIVES = {"array", "output", "error", "open-mode", "signal", "nodes", "wckey"}
# the script's lines other than its #SBATCH directives and its command line
SCRIPT_LINES = {"#!/bin/bash", "", "# Parameters", "# command", "export SUBMITIT_EXECUTOR=slurm"}


def expected_directives(params: Mapping[str, Any]) -> dict[str, str | bool]:
    """sbatch option -> value (True: a bare flag) for every parameter nlgbench passes to submitit."""
    out: dict[str, str | bool] = {}
    for key, value in params.items():
        if key == "additional_parameters":
            out.update({k.replace("_", "-"): v if v is True else str(v) for k, v in value.items()})
        elif key not in ("use_srun", "array_parallelism"):
            out[key.replace("_", "-")] = value if value is True else str(value)
    return out


def check_script(script: str, params: Mapping[str, Any], folder: Path) -> None:
    """Refuse (one line) a batch script that holds anything but the lines nlgbench meant: the fixed
    lines, one `#SBATCH --option[=value]` line per option, each exactly one argument to sbatch (as
    its directive parser splits it: quotes, whitespace, `#`) with the value nlgbench passed, every
    option passed present once, and the one command line. A value that slipped past the spec's
    checks can then never add a line of shell or a second option, nor hide the options after it."""
    import shlex

    def refuse(why: str) -> UserError:
        return UserError(f"the sbatch script nlgbench assembled is not what it meant ({why}); nothing was submitted")

    bad = next((c for c in script if c != "\n" and not c.isprintable()), None)
    if bad is not None:
        raise refuse(f"it holds the control character {bad!r}")
    expected = expected_directives(params)
    seen: dict[str, str | bool] = {}
    commands = 0
    for line in script.split("\n"):
        if line in SCRIPT_LINES:
            continue
        if line == submit_command(folder):
            commands += 1
            continue
        if not line.startswith("#SBATCH "):
            raise refuse(f"unexpected line {line!r}")
        try:
            words = shlex.split(line[len("#SBATCH "):], comments=True)  # an unquoted # starts a comment, as for Slurm
        except ValueError:
            raise refuse(f"unbalanced quotes in {line!r}") from None
        option = re.fullmatch(r"--([a-z][a-z0-9-]*)(?:=(.*))?", words[0], re.DOTALL) if len(words) == 1 else None
        if option is None or "\\" in line:  # Slurm reads a backslash as an escape even inside quotes
            raise refuse(f"{line!r} is not one sbatch option")
        key, value = option.group(1), (True if option.group(2) is None else option.group(2))
        if key in seen or (key not in expected and key not in SUBMITIT_DIRECTIVES):
            raise refuse(f"{line!r} sets --{key} " + ("again" if key in seen else "which nlgbench did not ask for"))
        if key in expected and expected[key] != value:
            raise refuse(f"{line!r} does not give --{key} the value {expected[key]!r}")
        seen[key] = value
    missing = sorted(set(expected) - set(seen))
    if missing or commands != 1:
        raise refuse(f"--{missing[0]} is missing" if missing else f"{commands} command lines instead of 1")


def thread_warnings(spec: SweepSpec, options: ExecutorOptions) -> list[str]:
    """Lines that say when a task's CPUs and its worker's threads disagree (timings not like for like)."""
    cpus = options.cpus_per_cell or spec.threads
    if spec.threads is None:
        return [f"warning: threads: null in the spec: each worker uses every core of its node (os.cpu_count()) while "
                f"Slurm gives its task {cpus or 'the default number of'} CPU(s); set threads: N in the spec "
                "(tasks then ask for N CPUs) for timings that do not depend on the node"]
    if options.cpus_per_cell is not None and options.cpus_per_cell < spec.threads:
        return [f"warning: --cpus-per-cell {options.cpus_per_cell} is less than the spec's threads: {spec.threads}; "
                "workers will share CPUs"]
    return []


def submit(folder: Path, book: Book, spec: SweepSpec, options: ExecutorOptions, cells: Sequence[tuple[int, CellConfig]],
           log: Callable[[str], None]) -> list[Submission]:
    """Submit `cells` ((seq, config) pairs, their folders already prepared) as one job array per
    device kind. Each submission is recorded before sbatch runs (with a unique job name, so a parent
    that dies before recording sbatch's answer leaves a job that can be found again) and again
    with its job id."""
    import submitit
    from submitit.core.utils import FailedJobError

    from nlgbench.foundations.registry import user_files_environment

    try:
        executor = submitit.SlurmExecutor(folder=submitit_folder(folder), max_num_timeout=0)
    except RuntimeError:
        raise UserError("Slurm's srun/sbatch are not on PATH on this machine: run on the cluster's login node (or "
                        "start a single-node cluster: scripts/slurm-single-node.sh start)") from None
    extra_env = user_files_environment()
    out = []
    for group in ("cpu", "cuda"):
        chosen = [(seq, c) for seq, c in cells if group_of(c) == group]
        if not chosen:
            continue
        uid = uuid.uuid4().hex[:12]
        params = sbatch_parameters(options, group, spec.threads, f"nlgbench-{uid}")
        sbatch_script(folder, params, len(chosen))  # checked before anything is recorded or submitted
        tasks = [Task(index=i, cell_id=c.cell_id, label=c.label, seq=seq) for i, (seq, c) in enumerate(chosen)]
        sub = Submission(uid=uid, job_name=params["job_name"], group=group, submitted_at=time.time(), parameters=params,
                         tasks=tasks)
        book.submissions.append(sub)
        book.write(folder)
        executor.update_parameters(**params)
        try:
            with executor.batch():
                jobs = [executor.submit(run_task, str(folder.resolve() / "cells" / c.cell_id), c.threads, extra_env)
                        for _, c in chosen]
        except (FailedJobError, OSError) as exc:
            book.submissions.remove(sub)
            book.write(folder)
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise UserError(f"sbatch refused the {group} cells' job array: {message}") from None
        sub.job_id = jobs[0].job_id.split("_")[0]
        for task, job in zip(tasks, jobs):
            task.slurm_id = job.job_id
        book.write(folder)
        log(f"submitted Slurm job {sub.job_id}: {len(tasks)} {group} cell(s), one per task"
            + (f", at most {options.max_parallel} at once" if options.max_parallel and len(tasks) > 1 else "")
            + f"; logs in {submitit_folder(folder)}")
        out.append(sub)
    return out


def recover_unrecorded(folder: Path, book: Book) -> None:
    """Submissions recorded before sbatch whose job id never was: found by job name, else dropped."""
    changed = False
    for sub in list(book.submissions):
        if sub.job_id is not None:
            continue
        changed = True
        job_id = find_job(sub.job_name)
        if job_id is None:
            book.submissions.remove(sub)
            continue
        sub.job_id = job_id
        for task in sub.tasks:
            task.slurm_id = job_id if len(sub.tasks) == 1 else f"{job_id}_{task.index}"
    if changed:
        book.write(folder)


# ----------------------------------------------------------------------------- collecting


def outcome_error(task: Task, state: TaskState | None, options_time: Any, worker_error: str | None) -> str:
    """The error line of a task that did not finish its cell, with Slurm's state first."""
    where = f"job {task.slurm_id}" + (f" on {state.node}" if state and state.node else "")
    if state is None:
        head = (f"Slurm job {task.slurm_id} ended without a result and Slurm no longer knows its state "
                "(no accounting on this cluster, or it was purged)")
    elif state.state == "COMPLETED":
        head = f"Slurm COMPLETED ({where}) but the task wrote no result"
    else:
        limit = f" ({options_time} min)" if state.state == "TIMEOUT" and options_time else ""
        head = f"Slurm {state.state}: {where} {EXPLAINED.get(state.state, 'ended')}{limit}"
    return head + (f"; {worker_error}" if worker_error else "")


def collect(folder: Path, store: Store, run_id: str, book: Book, states: Mapping[str, TaskState],
            log: Callable[[str], None] = print, now: float | None = None) -> list[tuple[Task, CellResult]]:
    """Merge every finished task's cell into the store (the caller holds the run folder's lock):
    a finished result as soon as its task has ended; a failed one, or none, once Slurm says the task
    is over, with Slurm's state first in its error line (`oom` for OUT_OF_MEMORY). The verdict goes
    into result.json and slurm.json too, so cells/ and the store agree. Returns what was merged."""
    now = time.time() if now is None else now
    merged = []
    for cell_id, (sub, task) in book.latest().items():
        if task.collected_at is not None or task.slurm_id is None:
            continue
        cell_dir = folder / "cells" / cell_id
        record = read_task_record(cell_dir)
        state = states.get(task.slurm_id)
        live = state is not None and state.live
        result = None
        if (cell_dir / RESULT_FILE).is_file():
            try:
                result = CellResult.read(cell_dir)
            except (OSError, ValueError, KeyError, TypeError):
                result = None  # not ours or unreadable: treated as no result
        if result is not None and result.cell_id != cell_id:
            result = None
        if result is not None and result.ok and "ended_at" in record:
            pass  # finished and the task is done with the folder
        elif live:
            continue
        elif (result is None and state is not None and state.node and state.ended_at is not None
              and now - state.ended_at < RESULT_GRACE_S):
            continue  # it ran: a result written on its node may not be visible here yet
        if result is None or not result.ok:
            _, label, cfg = read_config(cell_dir)
            worker_error = result.error if result is not None else None
            if state is not None and state.state == "COMPLETED" and worker_error:
                error = worker_error  # the worker's own failure; Slurm has nothing to add
            else:
                error = outcome_error(task, state, sub.parameters.get("time"), worker_error)
            oom = (state is not None and state.state == "OUT_OF_MEMORY") or (result is not None and result.status == "oom")
            result = CellResult.not_finished(cell_id, label, cfg, error, oom=oom)
            result.write(cell_dir)
        store.record(run_id, task.seq, result, cell_dir / SCORES_FILE if result.ok else None)
        task.collected_at = now
        task.state = state.state if state is not None and not state.live else None  # None: merged before Slurm's last word
        task.node = (state.node if state else None) or record.get("node")
        write_atomic(cell_dir / TASK_FILE, json.dumps({
            **record, "slurm_id": task.slurm_id, "submitted_at": sub.submitted_at, "state": task.state,
            "node": task.node, "collected_at": now, "status": result.status}, indent=1))
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
        return ", ".join(parts) + (f" (Slurm job{'s' if len(self.jobs) > 1 else ''} {', '.join(self.jobs)})"
                                   if self.jobs else "")


def count(cell_ids: Iterable[str], book: Book, states: Mapping[str, TaskState],
          stored: Mapping[str, str]) -> Counts:
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


def uncollected_jobs(book: Book) -> list[str]:
    return sorted({sub.job_id for sub, task in book.latest().values() if task.collected_at is None and sub.job_id},
                  key=lambda j: (len(j), j))


def cancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        _slurm_command(["scancel", *job_ids])


# ----------------------------------------------------------------------------- the sweep


def run_on_slurm(spec: SweepSpec, out_dir: Path, options: ExecutorOptions, *, force: bool = False, wait: bool = False,
                 cancel_on_exit: bool = False, log: Callable[[str], None] = print) -> list[CellResult]:
    """Run the sweep's unfinished cells as Slurm job array tasks and watch them until all are
    collected. Cells whose task from an earlier submission is still queued or running are watched,
    not resubmitted. Ctrl-C stops watching and leaves the jobs running (`cancel_on_exit`: cancels
    them); `nlgbench collect DIR`, `nlgbench status DIR` or the same command pick them up later."""
    from nlgbench.core.cell import OK
    from nlgbench.runs.repair import open_store
    from nlgbench.runs.folder import locked
    from nlgbench.execution.local import check_datasets, prepare_cell, summary

    spec, sizes = check_datasets(spec)
    cells = spec.cells()
    seq_of = {c.cell_id: i for i, c in enumerate(cells)}
    ids = list(seq_of)
    environments: dict[str, dict[str, Any]] = {}
    with locked(out_dir, wait=wait, log=log), open_store(out_dir) as store:
        run_id = store.start_run(spec.name, {"spec": asdict(spec), "executor": asdict(options)}, environments)
        log(f"sweep {spec.name!r} on Slurm: {len(cells)} cells -> {out_dir} "
            f"({', '.join(f'{k}: {v} items' for k, v in sizes.items())})")
        for line in thread_warnings(spec, options):
            log(line)
        book = Book.read(out_dir)
        recover_unrecorded(out_dir, book)
        states = query_states(uncollected_jobs(book))
        for task, result in collect(out_dir, store, run_id, book, states, log):
            log(f"collected {task.label} (cell {task.cell_id}, Slurm {task.slurm_id}) from an earlier submission: "
                f"{result.status}")
        live = live_tasks(book, states, ids)
        todo = [c for c in cells if c.cell_id not in live and (force or store.status(c.cell_id) != OK)]
        done = len(cells) - len(todo) - len(live)
        log(f"{done} finished already, {len(live)} still in Slurm from an earlier submission, {len(todo)} to submit")
        for cell in todo:
            prepare_cell(cell, out_dir / "cells" / cell.cell_id)
            (out_dir / "cells" / cell.cell_id / TASK_FILE).unlink(missing_ok=True)
        if todo:
            submit(out_dir, book, spec, options, [(seq_of[c.cell_id], c) for c in todo], log)
        started = time.perf_counter()
        try:
            watch(out_dir, store, run_id, book, ids, options, environments, log, summary, started)
        except BaseException:
            jobs = uncollected_jobs(book)
            if cancel_on_exit and jobs:
                cancel(jobs)
                log(f"cancelled Slurm job(s) {', '.join(jobs)} (--cancel-on-exit); the same command resubmits their cells")
            elif jobs:
                log(f"Slurm job(s) {', '.join(jobs)} keep running: `nlgbench status {out_dir}` shows them, "
                    f"`nlgbench collect {out_dir}` (or the same command) records their cells")
            raise
        store.write_csv()
        store.finish_run(run_id)
        results = [store.result(c.cell_id) for c in cells]
    return [r for r in results if r is not None]


def watch(folder: Path, store: Store, run_id: str, book: Book, cell_ids: Sequence[str], options: ExecutorOptions,
          environments: dict[str, dict[str, Any]], log: Callable[[str], None],
          summary: Callable[[CellResult, float], str], started: float) -> None:
    """Poll Slurm every `options.poll_seconds` and collect, until no task of `cell_ids` is left
    uncollected; a progress line whenever the counts change, one line per collected cell."""
    wanted = set(cell_ids)
    order = {cell_id: i for i, cell_id in enumerate(cell_ids)}
    last = ""
    warned = False
    while True:
        try:
            states = query_states(uncollected_jobs(book))
        except SlurmUnavailable as exc:  # slurmctld restarting, say: the tasks go on; ask again later
            if not warned:
                log(f"warning: {exc}; asking again every {options.poll_seconds:g} s")
                warned = True
            time.sleep(options.poll_seconds)
            continue
        warned = False
        for task, result in collect(folder, store, run_id, book, states, log):
            if task.cell_id not in wanted:
                continue
            record = read_task_record(folder / "cells" / task.cell_id)
            took = float(record.get("worker_s") or 0.0)
            device = result.config.device
            if result.environment is not None and device not in environments:
                environments[device] = result.environment
                store.set_run_environment(run_id, environments)
            log(f"[{order[task.cell_id] + 1}/{len(cell_ids)}] {task.label} (Slurm {task.slurm_id}"
                + (f" on {task.node}" if task.node else "") + f"): {summary(result, took)}")
        stored = {r.cell_id: r.status for r in store.results() if r.cell_id in wanted}
        counts = count(cell_ids, book, states, stored)
        line = counts.line()
        if line != last:
            log(f"[slurm {_clock(time.perf_counter() - started)}] {line}")
            last = line
        if not any(task.collected_at is None and task.slurm_id is not None
                   for cell_id, (_, task) in book.latest().items() if cell_id in wanted):
            return
        time.sleep(options.poll_seconds)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


# ----------------------------------------------------------------------------- collect, status, dry run


def collect_folder(folder: Path, log: Callable[[str], None] = print) -> str:
    """`nlgbench collect DIR`: merge every task that has ended into the store (holding the lock)."""
    from nlgbench.runs.repair import open_store
    from nlgbench.runs.folder import locked

    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    book = Book.read(folder)
    if not book.submissions:
        return f"{folder}: no Slurm submissions to collect"
    with locked(folder, log=log), open_store(folder) as store:
        book = Book.read(folder)  # as the lock holder sees it
        recover_unrecorded(folder, book)
        states = query_states(uncollected_jobs(book))
        run_id = store.start_run("collect", {"collect": str(folder)}, {})
        merged = collect(folder, store, run_id, book, states, log)
        store.finish_run(run_id)
        store.write_csv()
        cells = list(book.latest())
        stored = {r.cell_id: r.status for r in store.results()}
        counts = count(cells, book, states, stored)
    n_ok = sum(r.ok for _, r in merged)
    return (f"collected {len(merged)} cell(s) ({n_ok} ok, {len(merged) - n_ok} not ok) into {folder / 'results.sqlite'}; "
            f"cells submitted to Slurm: {counts.line()}")


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
        return (f"per cell (mean of {self.n}): submit -> result recorded {self.submit_to_result:.1f} s = worker "
                f"{self.worker:.1f} s + waiting for a free slot {self.waiting:.1f} s + scheduler overhead "
                f"{self.overhead:.1f} s")


def figures(folder: Path, book: Book) -> Figures | None:
    records = [(sub, read_task_record(folder / "cells" / cell_id)) for cell_id, (sub, _) in book.latest().items()]
    done = [(sub, r) for sub, r in records
            if r.get("status") == "ok" and all(isinstance(r.get(k), float) for k in ("started_at", "ended_at", "worker_s", "collected_at"))]
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


def status_text(folder: Path) -> str:
    """`nlgbench status DIR`: the cells submitted to Slurm by where they are, every job, the tasks
    not finished (with node or pending reason) and the failed ones; reads only (no lock)."""
    from nlgbench.runs.store import Store, has_store

    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    stored: dict[str, CellResult] = {}
    if has_store(folder):
        with Store(folder) as store:
            stored = {r.cell_id: r for r in store.results()}
    book = Book.read(folder)
    n_ok = sum(r.ok for r in stored.values())
    head = f"{folder}: {len(stored)} cell(s) recorded ({n_ok} ok, {len(stored) - n_ok} not ok)"
    if not book.submissions:
        return head + "; no Slurm submissions"
    unreachable = None
    try:
        states = query_states([s.job_id for s in book.submissions if s.job_id])
    except SlurmUnavailable as exc:  # say what the files say, and that Slurm was not asked
        states, unreachable = {}, f"Slurm not reachable ({exc}): uncollected tasks are shown as running, their states unknown"
    latest = book.latest()
    counts = count(list(latest), book, states, {k: r.status for k, r in stored.items()})
    lines = [head, f"cells submitted to Slurm: {counts.line()}", *([unreachable] if unreachable else [])]
    for sub in book.submissions:
        tally: dict[str, int] = {}
        for task in sub.tasks:
            st = states.get(task.slurm_id or "")
            name = st.state if st else (task.state or ("collected" if task.collected_at else "unknown to Slurm"))
            tally[name] = tally.get(name, 0) + 1
        lines.append(f"  job {sub.job_id or '(not recorded)'} ({sub.group}, {len(sub.tasks)} task(s), submitted "
                     f"{datetime.fromtimestamp(sub.submitted_at).strftime('%Y-%m-%d %H:%M:%S')}): "
                     + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    for cell_id, (sub, task) in latest.items():
        st = states.get(task.slurm_id or "")
        if task.collected_at is None:
            where = (st.node if st and st.node else (st.reason if st and st.reason else "")) if st else ""
            lines.append(f"  {task.slurm_id}  {st.state if st else 'unknown'}  {where}  {task.label} (cell {cell_id})"
                         + ("" if st else "  (ended? `nlgbench collect` records it)"))
        elif cell_id in stored and not stored[cell_id].ok:
            lines.append(f"  {task.slurm_id}  {stored[cell_id].status.upper()}  {task.label} (cell {cell_id}): "
                         f"{stored[cell_id].error}; log: {log_path(folder, task.slurm_id or '')}")
    fig = figures(folder, book)
    if fig is not None:
        lines.append(fig.line())
    return "\n".join(lines)


def dry_run_text(spec: SweepSpec, out_dir: Path, options: ExecutorOptions) -> str:
    """What `run --executor slurm` would submit: per device kind the array's size, one cell per
    task, and submitit's sbatch script; cells the run folder already holds finished are left out."""
    from nlgbench.core.cell import OK
    from nlgbench.runs.store import Store, has_store

    cells = spec.cells()
    finished: set[str] = set()
    if has_store(out_dir):
        with Store(out_dir) as store:
            finished = {r.cell_id for r in store.results() if r.status == OK}
    todo = [c for c in cells if c.cell_id not in finished]
    lines = [f"slurm: would submit {len(todo)} of {len(cells)} cells ({len(cells) - len(todo)} finished already), "
             "one cell per job array task; nothing is submitted (--dry-run)"]
    lines += thread_warnings(spec, options)
    for group in ("cpu", "cuda"):
        chosen = [c for c in todo if group_of(c) == group]
        if not chosen:
            continue
        params = sbatch_parameters(options, group, spec.threads, "nlgbench-<id>")
        throttle = min(len(chosen), options.max_parallel or len(chosen))
        lines.append(f"--- {group} cells: 1 job array of {len(chosen)} task(s), 1 cell per task, at most "
                     f"{throttle if options.max_parallel else 'all (no --max-parallel)'} at once; sbatch script:")
        lines.append(sbatch_script(out_dir, params, len(chosen)).rstrip())
    return "\n".join(lines)
