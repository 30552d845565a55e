"""Fault injection, processes: a worker or the fork server killed, allocation failures, Ctrl-C,
truncated segments and a soak of kill -9 then resume; each gives one line and a folder that resumes.

Each case runs the real CLI (`python -m nlgbench.cli`, a subprocess) on tiny random models.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest

from faultkit import (
    assert_consistent,
    csv_rows,
    faulty,
    is_fork_server,
    scores_of,
    start_cli,
    stored_cells,
    two_cell_spec,
    user_rows,
    wait_for,
    workers_of,
    write_spec,
)
from helpers import cli_subprocess, write_jsonl

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_worker_killed_by_a_signal_is_failed_not_oom(forkserver: str, tmp_path: Path, tiny_model: Path) -> None:
    """A cell's process killed by SIGKILL (a fork server's child, or a plain worker): recorded failed, with
    the signal; the sweep goes on."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    env = {**faulty(tmp_path, gate=str(gate)), "NLGBENCH_FORKSERVER": forkserver}
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    workers_of(proc)[0].send_signal(signal.SIGKILL)  # as the kernel's OOM killer would, but it did not
    gate.touch()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-2000:]  # the sweep went on; one cell is not ok
    rows = csv_rows(out)
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"] == "worker killed by signal 9 (SIGKILL)"
    assert_consistent(out, 1)


def test_fork_server_killed_during_a_cell_is_named(tmp_path: Path, tiny_model: Path) -> None:
    """The fork server killed by SIGKILL while its child runs a cell (held at the gate): the cell is
    recorded failed, its error naming the fork server (not "worker killed"); the next cell runs in a
    new server."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    env = {**faulty(tmp_path, gate=str(gate)), "NLGBENCH_FORKSERVER": "1"}
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    servers = [c for c in psutil.Process(proc.pid).children() if is_fork_server(c)]
    assert len(servers) == 1
    servers[0].send_signal(signal.SIGKILL)
    gate.touch()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-2000:]
    rows = csv_rows(out)
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"] == "the cell's fork server died (killed by signal 9, SIGKILL) and its worker with it"
    assert_consistent(out, 1)


def test_death_causes_and_memory_errors() -> None:
    from nlgbench.execution.workerprocess import death_cause

    assert death_cause(-9, oom_killed=True) == (
        "worker killed by the kernel's out-of-memory killer (signal 9, SIGKILL)",
        True,
    )
    assert death_cause(-9, oom_killed=False) == ("worker killed by signal 9 (SIGKILL)", False)
    assert death_cause(-11, oom_killed=True) == ("worker killed by signal 11 (SIGSEGV)", False)
    assert death_cause(3, oom_killed=False) == ("worker exited with code 3 and wrote no result", False)
    assert death_cause(-9, oom_killed=True, server=True) == (
        "the cell's fork server died (killed by the kernel's out-of-memory killer, signal 9, SIGKILL) and its "
        "worker with it",
        True,
    )
    assert death_cause(3, oom_killed=False, server=True) == (
        "the cell's fork server exited with code 3 before the cell's worker wrote a result",
        False,
    )


@pytest.mark.parametrize(
    "error, status",
    [
        (MemoryError(), "oom"),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to "
                "allocate 35184372088832 bytes. Error code 12 (Cannot allocate memory)"
            ),
            "oom",
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "failed"),
    ],
)
def test_worker_records_allocation_failures_as_oom(error: Exception, status: str, tmp_path: Path) -> None:
    from nlgbench.core.cell import CellConfig, DatasetRef, write_config
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.execution.worker import failure

    config = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef(name="x"),
        aligner=None,
        dataset=DatasetRef(path="d.jsonl"),
        device="cpu",
        batch_size=4,
        repeats=1,
        warmup=0,
        threads=None,
    )
    write_config(tmp_path, "abc", "label", config)
    result = failure(tmp_path, error)
    assert result.status == status and result.error and result.error.startswith(type(error).__name__)
    assert (tmp_path / "traceback.txt").is_file()


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_ctrl_c_prints_one_line_and_no_worker_traceback(forkserver: str, tmp_path: Path, tiny_model: Path) -> None:
    """Ctrl-C during a cell: exit 130, one line, no traceback, nothing recorded; with the fork server (its
    child held at the gate: a tiny model's cell is over within a second) and with plain workers."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    env = {"NLGBENCH_FORKSERVER": forkserver}
    if forkserver == "1":
        env.update(faulty(tmp_path, gate=str(tmp_path / "gate")))
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    time.sleep(1.5)  # the worker is at the gate, or importing torch
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "nlgbench: interrupted; run the same command again to resume"
    assert stored_cells(out) == []  # nothing half-recorded
    assert not (out / "results.csv").exists() or csv_rows(out) == []


def test_truncated_segments_are_counted_and_warned_once(tmp_path: Path, tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    model = Path(shutil.copytree(tiny_model, tmp_path / "short"))
    config = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    (model / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 7}), encoding="utf-8")
    spec = two_cell_spec(tmp_path, model)
    out = tmp_path / "out"
    proc = cli_subprocess("run", str(spec), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]

    tokenizer = AutoTokenizer.from_pretrained(model)
    too_long = sum(
        1 for r in user_rows() if any(len(tokenizer(r[k])["input_ids"]) > 7 for k in ("hypothesis", "reference"))
    )
    assert 0 < too_long < len(user_rows())
    rows = csv_rows(out)
    assert list(rows[0]).index("truncated_segments") > list(rows[0]).index("metric_options")
    assert [r["truncated_segments"] for r in rows] == [str(too_long)] * 2
    for row in rows:
        result = json.loads((out / "cells" / row["cell_id"] / "result.json").read_text(encoding="utf-8"))
        assert result["scorer"]["truncated_segments"] == too_long
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{too_long} of 8 segments" in warnings[0], proc.stdout


def test_soak_kill_9_at_random_moments_then_resume(tmp_path: Path, tiny_model: Path) -> None:
    """10 SIGKILLs of the parent at random moments of a 3-cell sweep, then a rerun: the scores equal an
    uninterrupted run's and every cell is in the folder exactly once. Bounded: about a minute and a half."""
    data = write_jsonl(tmp_path / "soak.jsonl", user_rows(6))
    metrics = (
        f"  - metric: bertscore\n    encoders: [{tiny_model}, {{name: {tiny_model}, num_layers: 1}}]\n"
        f"  - metric: moverscore\n    encoders: [{tiny_model}]\n"
    )
    spec = write_spec(tmp_path, tiny_model, data, name="soak", metrics=metrics)
    reference = tmp_path / "reference"
    assert cli_subprocess("run", str(spec), "--out", str(reference)).returncode == 0
    assert_consistent(reference, 3)

    out = tmp_path / "out"
    rng = random.Random(13)
    started = time.monotonic()
    for _ in range(10):
        proc = start_cli("run", str(spec), "--out", str(out))
        deadline = time.monotonic() + rng.uniform(0.5, 7.0)
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers += [w for w in workers_of(proc) if w not in workers]
            time.sleep(0.02)
        proc.kill()
        proc.communicate()
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, "a worker outlived its killed parent"
    assert time.monotonic() - started < 80  # 10 kills at most 7 s after each start
    final = cli_subprocess("run", str(spec), "--out", str(out))
    assert final.returncode == 0, final.stderr[-2000:]
    assert_consistent(out, 3)
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(scores_of(reference))
    assert scores_of(out) == scores_of(reference)
    quality = ["cell_id", "status", "pearson_global", "kendall_global", "pearson_segment", "kendall_segment"]
    assert [{k: r[k] for k in quality} for r in csv_rows(out)] == [
        {k: r[k] for k in quality} for r in csv_rows(reference)
    ]
