"""Sweeps on Slurm, against a real single-node cluster.

The `slurm` tests start Debian's slurmctld, slurmd and munged through scripts/slurm-single-node.sh
(a state folder and free ports of their own; stopped at the end of the session) and run the real
CLI (`python -m nlgbench.cli`, subprocesses) with `--executor slurm` on tiny random models: a
4-cell sweep whose scores equal a local run's, one task killed with scancel mid-run and resubmitted
alone, Ctrl-C with and without --cancel-on-exit, `status` and `collect` from another process, and
sbatch refusing a job. The other tests need no cluster: options, the dry run of the full study
(prints the job arrays, submits nothing), and how `collect` records Slurm's states of tasks that
ended without a result (TIMEOUT, OUT_OF_MEMORY, PREEMPTED: states a cluster without cgroups or
preemption cannot produce in a test).
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from helpers import assert_one_line, write_jsonl
from tiny import TEXTS, make_tiny_bert

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm-single-node.sh"


# ----------------------------------------------------------------------------- helpers


def slurm_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process, allowed 900 s (a cluster's queue may be slow)."""
    return helpers.cli_subprocess(*args, env=env, timeout=900)


def start_nlgbench(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """The CLI in the background, SIGINT at its default action (as a terminal's foreground job; a test run
    started with `&` from a non-interactive shell would otherwise hand it an ignored SIGINT)."""
    return subprocess.Popen(
        [sys.executable, "-m", "nlgbench.cli", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def csv_rows(run: Path) -> dict[str, dict[str, str]]:
    with (run / "results.csv").open(encoding="utf-8") as fh:
        return {r["cell_id"]: r for r in csv.DictReader(fh)}


def book(run: Path) -> list[dict]:
    return json.loads((run / "slurm" / "submissions.json").read_text(encoding="utf-8"))["submissions"]


def task_record(run: Path, cell_id: str) -> dict:
    return json.loads((run / "cells" / cell_id / "slurm.json").read_text(encoding="utf-8"))


def squeue_state(task_id: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T", "--jobs", task_id.split("_")[0]],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    states = dict(line.split("|") for line in out.stdout.split())
    return states.get(task_id, "")


def wait_for(check, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def free_port_pair() -> int:
    """A port p with p and p + 1 free on localhost (slurmctld and slurmd)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 40000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two adjacent free ports")


def write_data(path: Path, n_per_lp: int) -> Path:
    rows = []
    for lp in ("de-en", "fr-en"):
        for k in range(n_per_lp):
            i = len(rows)
            rows.append(
                {
                    "lp": lp,
                    "seg_id": k + 1,
                    "reference": TEXTS[i % len(TEXTS)],
                    "hypothesis": TEXTS[(i + 1) % len(TEXTS)],
                    "human": float((i * 7) % 5),
                }
            )
    write_jsonl(path, rows)
    return path


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running single-node Slurm cluster; yields the environment that points Slurm's commands at it."""
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "NLGBENCH_SLURM_DIR": str(state), "NLGBENCH_SLURM_PORT": str(free_port_pair())}
    start = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted((state / "log").glob("*.log"))
    )
    assert start.returncode == 0, start.stdout + start.stderr + logs
    assert "is idle" in start.stdout, start.stdout
    try:
        yield {"SLURM_CONF": str(state / "etc" / "slurm.conf")}
    finally:
        stop = subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("slurm-models")
    return (
        make_tiny_bert(folder / "bert-a", TEXTS, num_layers=2, seed=0),
        make_tiny_bert(folder / "bert-b", TEXTS, num_layers=2, seed=1),
    )


def write_spec(folder: Path, models: tuple[Path, ...], data: Path, batch_sizes: list[int], name: str) -> Path:
    """BERTScore over `models` x `batch_sizes` on `data`; one thread per cell (so the Slurm tasks ask for
    one CPU each and two share this two-core machine), 2 repeats, no warm-up."""
    spec = folder / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\ndatasets: [{{path: {data}}}]\nrepeats: 2\nwarmup: 0\nthreads: 1\n"
        f"batch_size: {batch_sizes}\nmetrics:\n  - metric: bertscore\n"
        f"    encoders: [{', '.join(str(m) for m in models)}]\n",
        encoding="utf-8",
    )
    return spec


# ----------------------------------------------------------------------------- on the cluster


@pytest.mark.system
@pytest.mark.xdist_group("slurm")  # one cluster at a time on this machine
def test_sweep_on_slurm_equals_local_and_a_rerun_resubmits_only_the_cancelled_cell(
    cluster: dict[str, str], models: tuple[Path, Path], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, models, write_data(tmp_path / "data.jsonl", 12), [2, 4], "four")
    local, run = tmp_path / "local", tmp_path / "slurm"
    done = slurm_cli("run", str(spec), "--out", str(local))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [r["status"] for r in csv_rows(local).values()] == ["ok"] * 4

    # the sweep as one job array; one task is cancelled while its worker runs
    proc = start_nlgbench(
        "run", str(spec), "--out", str(run), "--executor", "slurm", "--poll-seconds", "0.5", env=cluster
    )
    try:

        def a_running_task() -> dict | None:
            for path in (run / "cells").glob("*/slurm.json"):
                record = json.loads(path.read_text(encoding="utf-8"))
                if "started_at" in record and "ended_at" not in record:
                    return {**record, "cell_id": path.parent.name}
            return None

        victim = wait_for(a_running_task, 300, "a task to start its worker")
        victim_task = f"{victim['slurm_array_job_id']}_{victim['slurm_array_task_id']}"
        assert squeue_state(victim_task, cluster) == "RUNNING"
        time.sleep(1.0)  # mid-run: its worker is loading or scoring (a cell takes several seconds here)
        subprocess.run(["scancel", victim_task], env={**os.environ, **cluster}, check=True, timeout=60)
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, output[-4000:]
    job = victim["slurm_array_job_id"]
    assert f"submitted Slurm job {job}: 4 cpu cell(s), one per task" in output, output
    assert f"pending, 2 running, 0 done, 0 failed (Slurm job {job})" in output, output  # progress, two slots
    rows = csv_rows(run)
    assert sorted(r["status"] for r in rows.values()) == ["failed", "ok", "ok", "ok"], rows
    assert rows[victim["cell_id"]]["status"] == "failed"
    assert rows[victim["cell_id"]]["error"].startswith(f"Slurm CANCELLED: job {victim_task} on "), rows[
        victim["cell_id"]
    ]
    assert task_record(run, victim["cell_id"])["state"] == "CANCELLED"
    assert json.loads((run / "cells" / victim["cell_id"] / "result.json").read_text())["status"] == "failed"

    status = slurm_cli("status", str(run), env=cluster)
    assert status.returncode == 0, status.stderr
    assert "0 pending, 0 running, 3 done, 1 failed" in status.stdout, status.stdout
    assert f"job {job} (cpu, 4 task(s)" in status.stdout and "1 CANCELLED, 3 COMPLETED" in status.stdout, status.stdout
    assert "per cell (mean of 3): submit -> result recorded" in status.stdout, status.stdout

    # the rerun submits the cancelled cell alone
    rerun = slurm_cli("run", str(spec), "--out", str(run), "--executor", "slurm", "--poll-seconds", "0.5", env=cluster)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "3 finished already, 0 still in Slurm from an earlier submission, 1 to submit" in rerun.stdout, rerun.stdout
    submissions = book(run)
    assert len(submissions) == 2 and [t["cell_id"] for t in submissions[1]["tasks"]] == [victim["cell_id"]]
    assert "1 cpu cell(s)" in rerun.stdout

    # every cell ok, with the local run's cells and scores, byte for byte
    rows, local_rows = csv_rows(run), csv_rows(local)
    assert sorted(rows) == sorted(local_rows)
    assert all(r["status"] == "ok" for r in rows.values()), rows
    for cell_id in rows:
        assert (run / "cells" / cell_id / "scores.csv").read_text() == (
            local / "cells" / cell_id / "scores.csv"
        ).read_text()
        assert rows[cell_id]["pearson_global"] == local_rows[cell_id]["pearson_global"] != ""
        result = json.loads((run / "cells" / cell_id / "result.json").read_text())
        env = result["environment"]
        assert env["node"].split(".")[0] == socket.gethostname().split(".")[0] and env["slurm_job_id"], env
        record = task_record(run, cell_id)
        assert record["state"] in ("COMPLETED", None) and record["status"] == "ok"
        assert record["started_at"] >= record["submitted_at"] - 1 and record["collected_at"] >= record["ended_at"] - 1
    assert f"Slurm job {submissions[1]['job_id']}" in rerun.stdout

    # nothing left to submit
    again = slurm_cli("run", str(spec), "--out", str(run), "--executor", "slurm", env=cluster)
    assert (
        again.returncode == 0
        and "4 finished already, 0 still in Slurm from an earlier submission, 0 to submit" in again.stdout
    )
    assert len(book(run)) == 2


@pytest.mark.system
@pytest.mark.xdist_group("slurm")  # one cluster at a time on this machine
def test_ctrl_c_leaves_jobs_running_unless_cancel_on_exit_and_collect_records_them(
    cluster: dict[str, str], models: tuple[Path, Path], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, models[:1], write_data(tmp_path / "data.jsonl", 6), [4], "one")
    run = tmp_path / "run"
    args = ("run", str(spec), "--out", str(run), "--executor", "slurm", "--poll-seconds", "0.5")

    def submitted(n: int) -> str | None:
        try:
            subs = book(run)
        except (OSError, ValueError):
            return None
        return subs[n - 1]["job_id"] if len(subs) >= n and subs[n - 1]["job_id"] else None

    # --cancel-on-exit: Ctrl-C cancels the job
    proc = start_nlgbench(*args, "--cancel-on-exit", env=cluster)
    job = wait_for(lambda: submitted(1), 120, "the submission")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert f"cancelled Slurm job(s) {job} (--cancel-on-exit)" in output, output
    wait_for(lambda: squeue_state(job, cluster) == "CANCELLED", 60, "the job to be cancelled")

    # without: the job keeps running after Ctrl-C; status and collect see it from other processes
    proc = start_nlgbench(*args, env=cluster)
    job2 = wait_for(lambda: submitted(2), 120, "the second submission")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "1 to submit" in output and f"Slurm job(s) {job2} keep running" in output, output
    assert "nlgbench: interrupted" in output
    assert squeue_state(job2, cluster) in ("PENDING", "RUNNING")
    status = slurm_cli("status", str(run), env=cluster)
    assert status.returncode == 0 and f"(Slurm job {job2})" in status.stdout, status.stdout
    assert "1 pending" in status.stdout or "1 running" in status.stdout, status.stdout
    wait_for(lambda: squeue_state(job2, cluster) == "COMPLETED", 300, "the job to finish", interval=1)
    collected = slurm_cli("collect", str(run), env=cluster)
    assert collected.returncode == 0, collected.stderr
    assert "collected 1 cell(s) (1 ok, 0 not ok)" in collected.stdout, collected.stdout
    assert [r["status"] for r in csv_rows(run).values()] == ["ok"]
    again = slurm_cli("collect", str(run), env=cluster)
    assert "collected 0 cell(s)" in again.stdout


@pytest.mark.system
@pytest.mark.xdist_group("slurm")  # one cluster at a time on this machine
def test_sbatch_refusal_is_one_line_and_leaves_no_submission(
    cluster: dict[str, str], models: tuple[Path, Path], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, models[:1], write_data(tmp_path / "data.jsonl", 4), [4], "refused")
    run = tmp_path / "run"
    proc = slurm_cli(
        "run", str(spec), "--out", str(run), "--executor", "slurm", "--partition", "nosuchpartition", env=cluster
    )
    assert_one_line(proc, "sbatch refused the cpu cells' job array", "partition")
    assert book(run) == []


# ----------------------------------------------------------------------------- without a cluster


def test_executor_options_are_checked_with_one_line(
    models: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nlgbench.cli import main

    spec = write_spec(tmp_path, models[:1], write_data(tmp_path / "data.jsonl", 4), [4], "opts")

    def error(*args: str) -> str:  # in this process: the spec's models are imported once
        capsys.readouterr()
        assert main(list(args)) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("nlgbench: error:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    assert "--partition is a Slurm setting; add --executor slurm" in error("run", str(spec), "--partition", "gpu")
    assert "unknown executor 'slrum'; did you mean 'slurm'?" in error("run", str(spec), "--executor", "slrum")
    assert "nlgbench sets sbatch's --array itself" in error(
        "run", str(spec), "--executor", "slurm", "--slurm-arg", "array=0-3", "--dry-run"
    )
    assert "set partition with the executor's 'partition'" in error(
        "run", str(spec), "--executor", "slurm", "--slurm-arg=--partition=x", "--dry-run"
    )
    assert "--mem must be sbatch's --mem" in error(
        "run", str(spec), "--executor", "slurm", "--mem", "16 GB", "--dry-run"
    )
    assert "--time must be an integer >= 1" in error(
        "run", str(spec), "--executor", "slurm", "--time", "0", "--dry-run"
    )
    assert "--cancel-on-exit is for --executor slurm" in error("run", str(spec), "--cancel-on-exit")
    bad = tmp_path / "bad.yaml"
    bad.write_text(spec.read_text() + "executor: {kind: slurm, partitoin: gpu}\n", encoding="utf-8")
    assert "bad.yaml.executor: unknown key 'partitoin'; did you mean 'partition'?" in error(
        "run", str(bad), "--dry-run"
    )
    bad.write_text(spec.read_text() + "executor: {kind: slurm, slurm_args: {qos: [a, b]}}\n", encoding="utf-8")
    assert "bad.yaml.executor.slurm_args.qos: --qos needs a value" in error("run", str(bad), "--dry-run")


def test_spec_executor_block_and_dry_run_print_the_job_array(models: tuple[Path, Path], tmp_path: Path) -> None:
    spec = write_spec(tmp_path, models, write_data(tmp_path / "data.jsonl", 4), [2, 4], "dry")
    spec.write_text(
        spec.read_text() + "devices: [cpu, cuda]\nexecutor:\n  kind: slurm\n  partition: gpu\n  time: 30\n"
        "  mem: 8G\n  max_parallel: 3\n  slurm_args: {account: nlp, exclusive: true}\n",
        encoding="utf-8",
    )
    run = tmp_path / "run"
    proc = slurm_cli("run", str(spec), "--out", str(run), "--dry-run", "--time", "45")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "8 cells;" in out and "slurm: would submit 8 of 8 cells (0 finished already)" in out, out
    cpu, cuda = out.split("--- cpu cells:")[1].split("--- cuda cells:")
    for part in (cpu, cuda):
        assert "1 job array of 4 task(s), 1 cell per task, at most 3 at once" in part
        for line in (
            "#SBATCH --array=0-3%3",
            "#SBATCH --partition=gpu",
            "#SBATCH --time=45",
            "#SBATCH --mem=8G",
            "#SBATCH --account=nlp",
            "#SBATCH --exclusive",
            "#SBATCH --cpus-per-task=1",
        ):
            assert line in part.splitlines(), (line, part)
        assert "-m submitit.core._submit" in part
    assert "#SBATCH --gpus-per-node=1" in cuda and "gpus" not in cpu
    assert not run.exists()  # nothing written, nothing submitted


def test_full_study_dry_run_prints_the_job_arrays_without_submitting(tmp_path: Path) -> None:
    """With the Hub on (models not cached here would download in the cells; the dry run loads
    nothing), as on a cluster that plans the full study."""
    run = tmp_path / "full"
    proc = slurm_cli(
        "run",
        str(REPO / "examples" / "full-study.yaml"),
        "--out",
        str(run),
        "--executor",
        "slurm",
        "--dry-run",
        "--partition",
        "gpu",
        "--mem",
        "16G",
        "--max-parallel",
        "32",
        env={"HF_HUB_OFFLINE": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "384 cells;" in out and "slurm: would submit 384 of 384 cells" in out, out[-3000:]
    assert out.count("1 job array of 192 task(s), 1 cell per task, at most 32 at once") == 2
    assert out.count("#SBATCH --array=0-191%32") == 2 and out.count("#SBATCH --gpus-per-node=1") == 1
    assert "warning: threads: null in the spec" in out
    assert not run.exists()


def test_status_of_a_folder_without_submissions(tmp_path: Path) -> None:
    proc = slurm_cli("status", str(tmp_path))
    assert (
        proc.returncode == 0
        and proc.stdout.strip() == f"{tmp_path}: 0 cell(s) recorded (0 ok, 0 not ok); no Slurm submissions"
    )
    assert_one_line(slurm_cli("status", str(tmp_path / "missing")), "no such run folder")
    assert_one_line(slurm_cli("collect", str(tmp_path / "missing")), "no such run folder")


def test_collect_records_slurm_states_of_tasks_without_a_result(models: tuple[Path, Path], tmp_path: Path) -> None:
    """Tasks Slurm ended without a result.json: failed with the state first (oom for OUT_OF_MEMORY),
    written to result.json and slurm.json too; a live task, and one ended too recently for its result
    to be visible over NFS, wait; a failed result of the worker keeps its own error when Slurm says COMPLETED."""
    from nlgbench.core.result import CellResult
    from nlgbench.core.spec import load_spec
    from nlgbench.execution.slurm.book import Book, Submission, Task
    from nlgbench.execution.slurm.queue import TaskState
    from nlgbench.execution.slurm.watch import collect
    from nlgbench.execution.workerprocess import prepare_cell
    from nlgbench.runs.store import Store

    spec = load_spec(write_spec(tmp_path, models, write_data(tmp_path / "data.jsonl", 4), [1, 2, 4], "states"))
    cells = spec.cells()
    assert len(cells) == 6
    run = tmp_path / "run"
    for cell in cells:
        prepare_cell(cell, run / "cells" / cell.cell_id)
    crashed = cells[5]
    CellResult.not_finished(crashed.cell_id, crashed.label, crashed, "RuntimeError: boom", oom=False).write(
        run / "cells" / crashed.cell_id
    )
    now = time.time()
    tasks = [Task(index=i, cell_id=c.cell_id, label=c.label, seq=i, slurm_id=f"7_{i}") for i, c in enumerate(cells)]
    sub = Submission(
        uid="u",
        job_name="nlgbench-u",
        group="cpu",
        submitted_at=now - 600,
        parameters={"time": 30},
        tasks=tasks,
        job_id="7",
    )
    states = {
        "7_0": TaskState("TIMEOUT", "n1", None, now - 100),
        "7_1": TaskState("OUT_OF_MEMORY", "n2", None, now - 100),
        "7_2": TaskState("RUNNING", "n1"),
        "7_3": TaskState("PREEMPTED", "n3", None, now - 5),
        "7_4": TaskState("CANCELLED", None, None, now - 1),  # cancelled before it ran: no node, no result to wait for
        "7_5": TaskState("COMPLETED", "n1", None, now - 100),
    }
    book_ = Book([sub])
    with Store(run) as store:
        run_id = store.start_run("t", {}, {})
        merged = collect(run, store, run_id, book_, states, now=now)
        stored = {r.cell_id: r for r in store.results()}
    assert sorted(t.index for t, _ in merged) == [0, 1, 4, 5]
    assert stored[cells[0].cell_id].status == "failed"
    assert stored[cells[0].cell_id].error == "Slurm TIMEOUT: job 7_0 on n1 reached its time limit (30 min)"
    assert stored[cells[1].cell_id].status == "oom"
    assert stored[cells[1].cell_id].error.startswith("Slurm OUT_OF_MEMORY: job 7_1 on n2 ran out of the memory")
    assert stored[cells[4].cell_id].error == "Slurm CANCELLED: job 7_4 was cancelled (scancel, or an administrator)"
    assert stored[cells[5].cell_id].error == "RuntimeError: boom"
    assert cells[2].cell_id not in stored and cells[3].cell_id not in stored  # running; ended 5 s ago
    assert json.loads((run / "cells" / cells[0].cell_id / "result.json").read_text())["error"].startswith(
        "Slurm TIMEOUT"
    )
    assert task_record(run, cells[1].cell_id)["state"] == "OUT_OF_MEMORY"
    assert (
        json.loads((run / "slurm" / "submissions.json").read_text())["submissions"][0]["tasks"][0]["state"] == "TIMEOUT"
    )
    # later: the preempted task's grace has passed; the running one has left squeue and no accounting knows it
    del states["7_2"]
    with Store(run) as store:
        later = collect(run, store, run_id, book_, states, now=now + 60)
    assert [t.index for t, _ in later] == [2, 3]
    assert later[1][1].error == "Slurm PREEMPTED: job 7_3 on n3 was preempted"
    assert later[0][1].error.startswith("Slurm job 7_2 ended without a result and Slurm no longer knows its state")
