"""The Slurm launcher's bookkeeping in a run folder: `DIR/slurm/submissions.json` (the job book: every
submission, its job id, sbatch parameters, which cell each task runs, when it was submitted and
collected; written by the parent only, holding the lock) and each task's `DIR/cells/<id>/slurm.json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nlgbench.foundations.deferred import require
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic
from nlgbench.runs.folder import own_folder, slurm_dir, submitit_dir

BOOK_FILE = "submissions.json"  # DIR/slurm/submissions.json: written by the parent only (holding the lock)
TASK_FILE = "slurm.json"  # DIR/cells/<id>/slurm.json: the task's record (job ids, node, times), then Slurm's verdict


def require_submitit() -> None:
    """submitit is the optional extra `slurm`: one line naming it where it is missing, before anything runs."""
    require("submitit", "slurm", "a Slurm sweep (--executor slurm, or kind: slurm in the spec's executor block)")


def log_path(folder: Path, slurm_id: str) -> Path:
    """The task's stderr (where the worker's progress and tracebacks go), as submitit names it."""
    require_submitit()
    from submitit.core.utils import JobPaths

    return JobPaths(submitit_dir(folder), job_id=slurm_id, task_id=0).stderr


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
        path = slurm_dir(folder) / BOOK_FILE
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls([Submission.from_dict(s) for s in raw["submissions"]])
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(
                f"{path} is not a submissions record nlgbench can read ({exc}); move it aside to "
                "start the Slurm bookkeeping afresh (finished cells are kept in the store)"
            ) from None

    def write(self, folder: Path) -> None:
        write_atomic(
            own_folder(slurm_dir(folder)) / BOOK_FILE,
            json.dumps({"submissions": [asdict(s) for s in self.submissions]}, indent=1),
        )

    def latest(self) -> dict[str, tuple[Submission, Task]]:
        """Each cell's last task (a resubmitted cell's older tasks are history)."""
        out: dict[str, tuple[Submission, Task]] = {}
        for sub in self.submissions:
            for task in sub.tasks:
                out[task.cell_id] = (sub, task)
        return out

    def uncollected_jobs(self) -> list[str]:
        """The job ids of the cells' latest tasks not collected yet, in submission order."""
        return sorted(
            {sub.job_id for sub, task in self.latest().values() if task.collected_at is None and sub.job_id},
            key=lambda j: (len(j), j),
        )


def read_task_record(cell_dir: Path) -> dict[str, Any]:
    """The task's `slurm.json` in its cell folder ({} when there is none, or it cannot be read)."""
    try:
        return dict(json.loads((cell_dir / TASK_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def write_task_record(cell_dir: Path, record: Mapping[str, Any]) -> None:
    write_atomic(cell_dir / TASK_FILE, json.dumps(dict(record), indent=1))
