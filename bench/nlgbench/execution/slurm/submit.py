"""Submitting cells to Slurm: one job array per device kind (CUDA cells asking for GPUs, CPU cells for
none), one cell per task. submitit writes the sbatch script (checked here line by line before
anything is submitted) and pickles the task (`nlgbench.execution.slurm.task.run_task`); its files
and the tasks' logs go to `DIR/slurm/submitit/`. Also what `run --executor slurm --dry-run` prints."""

from __future__ import annotations

import re
import shlex
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.core.cell import CellConfig
from nlgbench.core.result import OK
from nlgbench.execution.slurm.book import Book, Submission, Task
from nlgbench.execution.slurm.options import SlurmOptions, script_safe
from nlgbench.execution.slurm.queue import find_job
from nlgbench.execution.slurm.task import run_task
from nlgbench.foundations.devicenames import CPU, CUDA, device_kind
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.names import unprintable
from nlgbench.runs.folder import cell_dir, submitit_dir
from nlgbench.runs.store import Store, has_store

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec

# sbatch options submitit's script sets besides the parameters nlgbench passes
SUBMITIT_DIRECTIVES = {"array", "output", "error", "open-mode", "signal", "nodes", "wckey"}
# the script's lines other than its #SBATCH directives and its command line
SCRIPT_LINES = {"#!/bin/bash", "", "# Parameters", "# command", "export SUBMITIT_EXECUTOR=slurm"}
GROUPS = (CPU, CUDA)


def group_of(cell: CellConfig) -> str:
    return device_kind(cell.device)


def sbatch_parameters(options: SlurmOptions, group: str, threads: int | None, job_name: str) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters for one array of `group` cells. The task runs in the
    batch step itself (`use_srun=False`: no job step to launch, and no srun that drops the job's
    --cpus-per-task, as Slurm 22.05's does); --mem is passed to sbatch as written."""
    params: dict[str, Any] = {"job_name": job_name, "time": options.time, "use_srun": False}
    if options.partition:
        params["partition"] = options.partition
    cpus = options.cpus_per_cell or threads
    if cpus:
        params["cpus_per_task"] = cpus
    if group == CUDA:
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
    for what, text in (("the run folder", str(submitit_dir(folder))), ("the Python executable", sys.executable)):
        script_safe(text, what)
    return " ".join(
        [shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(submitit_dir(folder)))]
    )


def sbatch_script(folder: Path, params: Mapping[str, Any], n_tasks: int) -> str:
    """The sbatch script submitit writes for an array of `n_tasks` tasks with these parameters
    (its own function, as `SlurmExecutor` uses it), checked line by line (`check_script`)."""
    from submitit.slurm.slurm import _make_sbatch_string

    command = submit_command(folder)
    script = _make_sbatch_string(
        command=command, folder=submitit_dir(folder), map_count=n_tasks if n_tasks > 1 else None, **params
    )
    check_script(script, params, folder)
    return script


def expected_directives(params: Mapping[str, Any]) -> dict[str, str | bool]:
    """sbatch option -> value (True: a bare flag) for every parameter nlgbench passes to submitit."""
    out: dict[str, str | bool] = {}
    for key, value in params.items():
        if key == "additional_parameters":
            out.update({k.replace("_", "-"): v if v is True else str(v) for k, v in value.items()})
        elif key not in ("use_srun", "array_parallelism"):
            out[key.replace("_", "-")] = value if value is True else str(value)
    return out


def _refused(why: str) -> UserError:
    return UserError(f"the sbatch script nlgbench assembled is not what it meant ({why}); nothing was submitted")


def directive(line: str) -> tuple[str, str | bool]:
    """(option, value; True for a bare flag) of one `#SBATCH --option[=value]` line that is exactly
    one argument to sbatch (as its directive parser splits it: quotes, whitespace, `#`); refused else."""
    try:
        words = shlex.split(line[len("#SBATCH ") :], comments=True)  # an unquoted # starts a comment, as for Slurm
    except ValueError:
        raise _refused(f"unbalanced quotes in {line!r}") from None
    option = re.fullmatch(r"--([a-z][a-z0-9-]*)(?:=(.*))?", words[0], re.DOTALL) if len(words) == 1 else None
    if option is None or "\\" in line:  # Slurm reads a backslash as an escape even inside quotes
        raise _refused(f"{line!r} is not one sbatch option")
    return option.group(1), (True if option.group(2) is None else option.group(2))


def check_script(script: str, params: Mapping[str, Any], folder: Path) -> None:
    """Refuse (one line) a batch script that holds anything but the lines nlgbench meant: the fixed
    lines, one `#SBATCH --option[=value]` line per option (`directive`) with the value nlgbench
    passed, every option passed present once, and the one command line. A value that slipped past
    the spec's checks can then never add a line of shell or a second option, nor hide the options after it."""
    bad = next((c for c in script if c != "\n" and not c.isprintable()), None)
    if bad is not None:
        raise _refused(f"it holds {unprintable(bad)}")
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
            raise _refused(f"unexpected line {line!r}")
        key, value = directive(line)
        if key in seen or (key not in expected and key not in SUBMITIT_DIRECTIVES):
            raise _refused(f"{line!r} sets --{key} " + ("again" if key in seen else "which nlgbench did not ask for"))
        if key in expected and expected[key] != value:
            raise _refused(f"{line!r} does not give --{key} the value {expected[key]!r}")
        seen[key] = value
    missing = sorted(set(expected) - set(seen))
    if missing or commands != 1:
        raise _refused(f"--{missing[0]} is missing" if missing else f"{commands} command lines instead of 1")


def thread_warnings(spec: SweepSpec, options: SlurmOptions) -> list[str]:
    """Lines that say when a task's CPUs and its worker's threads disagree (timings not like for like)."""
    cpus = options.cpus_per_cell or spec.threads
    if spec.threads is None:
        return [
            f"warning: threads: null in the spec: each worker uses every core of its node (os.cpu_count()) while "
            f"Slurm gives its task {cpus or 'the default number of'} CPU(s); set threads: N in the spec "
            "(tasks then ask for N CPUs) for timings that do not depend on the node"
        ]
    if options.cpus_per_cell is not None and options.cpus_per_cell < spec.threads:
        return [
            f"warning: --cpus-per-cell {options.cpus_per_cell} is less than the spec's threads: {spec.threads}; "
            "workers will share CPUs"
        ]
    return []


def slurm_executor(folder: Path) -> Any:
    """submitit's SlurmExecutor for the run folder; one line when Slurm's commands are not here."""
    import submitit

    try:
        return submitit.SlurmExecutor(folder=submitit_dir(folder), max_num_timeout=0)
    except RuntimeError:
        raise UserError(
            "Slurm's srun/sbatch are not on PATH on this machine: run on the cluster's login node (or "
            "start a single-node cluster: scripts/slurm-single-node.sh start)"
        ) from None


def submit(
    folder: Path,
    book: Book,
    spec: SweepSpec,
    options: SlurmOptions,
    cells: Sequence[tuple[int, CellConfig]],
    log: Callable[[str], None],
) -> list[Submission]:
    """Submit `cells` ((seq, config) pairs, their folders already prepared) as one job array per
    device kind. Each submission is recorded before sbatch runs (with a unique job name, so a parent
    that dies before recording sbatch's answer leaves a job that can be found again) and again
    with its job id."""
    executor = slurm_executor(folder)
    out = []
    for group in GROUPS:
        chosen = [(seq, c) for seq, c in cells if group_of(c) == group]
        if not chosen:
            continue
        uid = uuid.uuid4().hex[:12]
        params = sbatch_parameters(options, group, spec.threads, f"nlgbench-{uid}")
        sbatch_script(folder, params, len(chosen))  # checked before anything is recorded or submitted
        tasks = [Task(index=i, cell_id=c.cell_id, label=c.label, seq=seq) for i, (seq, c) in enumerate(chosen)]
        sub = Submission(
            uid=uid, job_name=params["job_name"], group=group, submitted_at=time.time(), parameters=params, tasks=tasks
        )
        book.submissions.append(sub)
        book.write(folder)
        executor.update_parameters(**params)
        submit_array(folder, book, sub, executor, [c for _, c in chosen])
        log(
            f"submitted Slurm job {sub.job_id}: {len(tasks)} {group} cell(s), one per task"
            + (f", at most {options.max_parallel} at once" if options.max_parallel and len(tasks) > 1 else "")
            + f"; logs in {submitit_dir(folder)}"
        )
        out.append(sub)
    return out


def submit_array(folder: Path, book: Book, sub: Submission, executor: Any, cells: Sequence[CellConfig]) -> None:
    """sbatch one recorded submission (its tasks run `run_task`) and record its job and task ids; a
    refusal drops the record and is one line."""
    from submitit.core.utils import FailedJobError

    try:
        with executor.batch():
            jobs = [executor.submit(run_task, str(cell_dir(folder.resolve(), c.cell_id)), c.threads) for c in cells]
    except (FailedJobError, OSError) as exc:
        book.submissions.remove(sub)
        book.write(folder)
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise UserError(f"sbatch refused the {sub.group} cells' job array: {message}") from None
    sub.job_id = jobs[0].job_id.split("_")[0]
    for task, job in zip(sub.tasks, jobs, strict=True):
        task.slurm_id = job.job_id
    book.write(folder)


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


def dry_run_text(spec: SweepSpec, out_dir: Path, options: SlurmOptions) -> str:
    """What `run --executor slurm` would submit: per device kind the array's size, one cell per
    task, and submitit's sbatch script; cells the run folder already holds finished are left out."""
    cells = spec.cells()
    finished: set[str] = set()
    if has_store(out_dir):
        with Store(out_dir) as store:
            finished = {r.cell_id for r in store.results() if r.status == OK}
    todo = [c for c in cells if c.cell_id not in finished]
    lines = [
        f"slurm: would submit {len(todo)} of {len(cells)} cells ({len(cells) - len(todo)} finished already), "
        "one cell per job array task; nothing is submitted (--dry-run)"
    ]
    lines += thread_warnings(spec, options)
    for group in GROUPS:
        chosen = [c for c in todo if group_of(c) == group]
        if not chosen:
            continue
        params = sbatch_parameters(options, group, spec.threads, "nlgbench-<id>")
        throttle = min(len(chosen), options.max_parallel or len(chosen))
        lines.append(
            f"--- {group} cells: 1 job array of {len(chosen)} task(s), 1 cell per task, at most "
            f"{throttle if options.max_parallel else 'all (no --max-parallel)'} at once; sbatch script:"
        )
        lines.append(sbatch_script(out_dir, params, len(chosen)).rstrip())
    return "\n".join(lines)
