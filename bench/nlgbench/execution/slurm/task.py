"""What runs on a node: one job array task (submitit calls `run_task`), the cell's worker in a fresh
`python -c` process (`nlgbench.execution.workerprocess.run_worker`; a task runs one cell, so no fork server).
It writes only its own `DIR/cells/<id>/` (result.json, scores.csv and slurm.json, each atomically),
never the store. The cell's `startup_s` counts from the task process's start: under Slurm the task's
own start-up (Python, submitit, nlgbench) is part of what each cell costs."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, TRACEBACK_FILE
from nlgbench.execution.slurm.book import read_task_record, write_task_record
from nlgbench.execution.workerprocess import run_worker


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


def run_task(cell_dir: str, threads: int | None) -> str:
    """One job array task, run by submitit on a node. Writes only the cell's folder: slurm.json when
    it starts and ends, result.json when the worker died without one (why it died). A finished
    result's environment gains the node and Slurm ids where the worker did not record them.
    Returns the cell's status."""
    folder = Path(cell_dir)
    for stale in (RESULT_FILE, SCORES_FILE, TRACEBACK_FILE):  # a requeued task starts clean
        (folder / stale).unlink(missing_ok=True)
    where = slurm_environment()
    record: dict[str, Any] = {**read_task_record(folder), **where, "started_at": time.time()}
    for key in ("ended_at", "worker_s", "status", "state", "collected_at"):
        record.pop(key, None)
    write_task_record(folder, record)
    start = time.perf_counter()
    result = run_worker(folder, threads, started=psutil.Process().create_time())
    worker_s = time.perf_counter() - start
    if not (folder / RESULT_FILE).exists():
        result.write(folder)  # the worker died: its cause (signal, exit code) is the cell's result
    elif result.ok:
        env = dict(result.environment or {})
        missing = {
            k: v for k, v in where.items() if k in ("node", "slurm_job_id", "slurm_array_task_id") and k not in env
        }
        if missing:
            result = replace(result, environment={**env, **missing})
            result.write(folder)
    record.update(ended_at=time.time(), worker_s=worker_s, status=result.status)
    write_task_record(folder, record)
    return result.status
