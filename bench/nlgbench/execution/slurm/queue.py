"""What Slurm says about a task, and the commands that ask it: squeue (jobs slurmctld still knows:
pending, running, and finished ones for MinJobAge), sacct for older ones where the cluster keeps
accounting, and scancel. Every call of a Slurm command is here."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from nlgbench.foundations.errors import UserError

# States after which a job does nothing more (squeue's and sacct's long names). Everything else
# Slurm reports (PENDING, CONFIGURING, RUNNING, COMPLETING, SUSPENDED, REQUEUED, ...) is still live.
TERMINAL = {
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "NODE_FAIL",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
}
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


def slurm_command(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run one Slurm command (its output captured); SlurmUnavailable when it is missing or does not answer."""
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


def _squeue_states(ids: Sequence[str]) -> dict[str, TaskState]:
    """What squeue says about the tasks of these jobs (those slurmctld still knows)."""
    out: dict[str, TaskState] = {}
    proc = slurm_command(
        ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%N|%r|%e", "--jobs", ",".join(ids)]
    )
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise SlurmUnavailable(f"squeue failed: {' '.join(proc.stderr.split()) or f'exit code {proc.returncode}'}")
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5:
            task_id, state, node, reason, end = parts
            state = state.split()[0] if state.strip() else "UNKNOWN"
            out[task_id] = TaskState(
                state,
                node or None,
                None if reason in ("", "None") else reason,
                _end_time(end) if state in TERMINAL else None,
            )
    return out


def _sacct_states(ids: Sequence[str]) -> dict[str, TaskState]:
    """What sacct says about the tasks of these jobs; nothing where the cluster keeps no accounting."""
    out: dict[str, TaskState] = {}
    acct = slurm_command(
        [
            "sacct",
            "--noheader",
            "--allocations",
            "--parsable2",
            "--format=JobID,State,NodeList,End",
            "--jobs",
            ",".join(ids),
        ]
    )
    if acct.returncode == 0:  # else: no accounting on this cluster (sacct says so); squeue was all there is
        for line in acct.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[1]:
                state = parts[1].split()[0]
                out.setdefault(
                    parts[0],
                    TaskState(state, parts[2] or None, None, _end_time(parts[3]) if state in TERMINAL else None),
                )
    return out


def query_states(job_ids: Iterable[str]) -> dict[str, TaskState]:
    """Slurm's state of every task of these jobs, by task id (`12_3`, or `12` for a plain job):
    squeue for the jobs slurmctld still knows, sacct (where accounting is kept) for older ones;
    tasks neither knows are missing from the answer."""
    ids = sorted(set(job_ids), key=lambda j: (len(j), j))
    if not ids:
        return {}
    out = _squeue_states(ids)
    known = {t.split("_")[0] for t in out}
    older = [j for j in ids if j not in known]
    if older:
        for task_id, state in _sacct_states(older).items():
            out.setdefault(task_id, state)
    return out


def find_job(job_name: str) -> str | None:
    """The job id of a submission whose sbatch answer was never recorded (the parent died in
    between), found by its unique job name; None when Slurm knows no such job."""
    proc = slurm_command(["squeue", "--noheader", "--states=all", "--format=%F", "--name", job_name])
    ids = sorted({line.strip() for line in proc.stdout.splitlines() if line.strip()})
    return ids[0] if proc.returncode == 0 and ids else None


def cancel(job_ids: Sequence[str]) -> None:
    """scancel these jobs (all their tasks)."""
    if job_ids:
        slurm_command(["scancel", *job_ids])
