"""Start-up: every cell records `startup_s`; a local sweep forks its cells from a fork server
(`nlgbench.execution.forkserver`) that imported torch and transformers once, still one fresh process per
cell with the spec's threads and a plain worker's memory baseline; NLGBENCH_FORKSERVER=0 runs plain
`python -c` workers. (Kills, Ctrl-C and exit codes of both: tests/test_faults_signals.py.)"""

from __future__ import annotations

import csv
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import cli_subprocess, read_csv, write_jsonl, write_spec
from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.result import CellResult
from nlgbench.encoders.registry import EncoderRef
from nlgbench.execution import forkserver
from nlgbench.execution.forkserver import ForkServer, resident_file_ranges
from nlgbench.execution.preload import LIBRARIES, architecture_modules, cell_modules, forked_cells, shared_modules
from nlgbench.execution.workerprocess import prepare_cell, run_worker, worker_environment
from nlgbench.runs.csvfiles import csv_row
from nlgbench.runs.resultfile import check_shape, read_result
from tiny import TEXTS

pytestmark = pytest.mark.integration

# A sitecustomize that writes "ROLE PID PPID" lines to $PID_LOG: a plain worker (`python -c BOOT CELL_DIR`)
# as it starts; a fork server as it starts and each of its children right after the fork.
PID_SHIM = """
import os, sys
def _record(role):
    with open(os.environ["PID_LOG"], "a") as fh:
        fh.write(f"{role} {os.getpid()} {os.getppid()}\\n")
if os.environ.get("PID_LOG") and sys.argv[:1] == ["-c"]:
    if os.path.isfile(os.path.join(sys.argv[1], "config.json")):
        _record("worker")
    else:
        _record("server")
        os.register_at_fork(after_in_child=lambda: _record("child"))
"""


@dataclass
class Sweep:
    """A finished 3-cell sweep: its run folder, the CLI's pid, the pid lines and the sweep's wall time."""

    out: Path
    cli_pid: int
    pids: list[tuple[str, int, int]]
    wall_s: float

    def results(self) -> list[CellResult]:
        with (self.out / "results.csv").open(encoding="utf-8", newline="") as fh:
            return [read_result(self.out / "cells" / row["cell_id"]) for row in csv.DictReader(fh)]


@pytest.fixture(scope="module")
def tiny(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=2, name="bert")


def run_sweep(folder: Path, model: Path, forkserver_setting: str) -> Sweep:
    """Three BERTScore cells of the tiny model (2, 1 and 2 layers with idf) with threads: 2, through the
    CLI in a fresh process, NLGBENCH_FORKSERVER set as given and PID_SHIM recording the processes."""
    folder.mkdir(parents=True)
    data = folder / "data.jsonl"
    rows = [
        {"lp": "de-en", "seg_id": i, "reference": TEXTS[i], "hypothesis": TEXTS[(i + 1) % 8], "human": float(i % 3)}
        for i in range(len(TEXTS))
    ]
    write_jsonl(data, rows)
    spec = {
        "name": "startup",
        "datasets": [{"path": str(data)}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 2,
        "metrics": [
            {"metric": "bertscore", "encoders": [str(model), {"name": str(model), "num_layers": 1}]},
            {"metric": "bertscore", "options": {"idf": True}, "encoders": [str(model)]},
        ],
    }
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    shim = folder / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(PID_SHIM, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in [str(shim), os.environ.get("PYTHONPATH", "")] if p),
        "PID_LOG": str(folder / "pids.txt"),
        forkserver.FORKSERVER_ENV: forkserver_setting,
    }
    out = folder / "out"
    start = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nlgbench.cli", "run", str(folder / "spec.json"), "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=600)
    wall = time.time() - start
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    lines = (folder / "pids.txt").read_text(encoding="utf-8").split()
    pids = [(lines[i], int(lines[i + 1]), int(lines[i + 2])) for i in range(0, len(lines), 3)]
    return Sweep(out, proc.pid, pids, wall)


def prepared_cell(model: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A one-item BERTScore cell of `model` on one thread, prepared in TMP/cell: (its folder, its data file)."""
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"lp": "de-en", "seg_id": 1, "reference": "a", "hypothesis": "b", "human": 1.0}) + "\n")
    cell = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef(name=str(model)),
        aligner=None,
        dataset=DatasetRef(path=str(data)),
        device="cpu",
        batch_size=4,
        repeats=1,
        warmup=0,
        threads=1,
    )
    folder = tmp_path / "cell"
    prepare_cell(cell, folder)
    return folder, data


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory, tiny: Path) -> Sweep:
    return run_sweep(tmp_path_factory.mktemp("forked") / "sweep", tiny, "1")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, tiny: Path) -> Sweep:
    return run_sweep(tmp_path_factory.mktemp("plain") / "sweep", tiny, "0")


@pytest.mark.skipif(not forkserver.enabled(), reason="the fork server runs on Linux only")
def test_cells_are_fresh_children_of_one_fork_server(forked: Sweep) -> None:
    (server,) = [(pid, ppid) for role, pid, ppid in forked.pids if role == "server"]
    children = [(pid, ppid) for role, pid, ppid in forked.pids if role == "child"]
    assert server[1] == forked.cli_pid  # the sweep started one server ...
    assert len(children) == 3 and len({pid for pid, _ in children}) == 3  # ... which forked one process per cell
    assert {ppid for _, ppid in children} == {server[0]}
    assert not [role for role, _, _ in forked.pids if role == "worker"]


def test_without_the_fork_server_each_cell_is_a_plain_worker(plain: Sweep) -> None:
    """NLGBENCH_FORKSERVER=0: each cell in its own `python -c` worker, a child of the sweep."""
    workers = [(pid, ppid) for role, pid, ppid in plain.pids if role == "worker"]
    assert len(workers) == 3 and len({pid for pid, _ in workers}) == 3
    assert {ppid for _, ppid in workers} == {plain.cli_pid}
    assert not [role for role, _, _ in plain.pids if role in ("server", "child")]


@pytest.mark.parametrize("mode", ["forked", "plain"])
def test_every_cell_records_its_startup_and_the_spec_threads(mode: str, request: pytest.FixtureRequest) -> None:
    """startup_s (launcher's start of the cell's process until the worker could load) is set for every cell
    and lies within the sweep; results.csv shows it; the worker ran on the spec's 2 threads."""
    run: Sweep = request.getfixturevalue(mode)
    results = run.results()
    assert [r.status for r in results] == ["ok"] * 3
    for result in results:
        assert result.timing is not None and result.environment is not None
        assert result.timing.startup_s is not None and 0 < result.timing.startup_s < run.wall_s
        assert result.timing.startup_s + result.timing.load_s + sum(result.timing.repeat_s) < run.wall_s
        assert result.environment["torch_threads"] == 2
    with (run.out / "results.csv").open(encoding="utf-8", newline="") as fh:
        shown = [float(row["startup_s"]) for row in csv.DictReader(fh)]
    assert shown == [pytest.approx(r.timing.startup_s, abs=5e-4) for r in results if r.timing]


@pytest.mark.skipif(not resident_file_ranges(), reason="/proc/self/pagemap is not readable here")
def test_a_forked_cell_measures_memory_as_a_plain_worker(forked: Sweep, plain: Sweep) -> None:
    """The baseline is taken after the imports in both; a forked child maps the server's resident library
    pages first (`forkserver.populate`), else its baseline would lack them (about a third here)."""
    for mine, theirs in zip(forked.results(), plain.results(), strict=True):
        assert mine.memory is not None and theirs.memory is not None
        assert mine.memory.baseline_rss_mb > 0.9 * theirs.memory.baseline_rss_mb
        assert mine.memory.rss_growth_mb > 0


def test_startup_imports_the_architectures_of_the_cells(tiny: Path, tmp_path: Path) -> None:
    assert architecture_modules([str(tiny)]) == ["transformers.models.bert.modeling_bert"]
    assert architecture_modules([str(tmp_path / "missing"), "none"]) == []
    assert "transformers.modeling_utils" in LIBRARIES  # what made up most of MiniLM's load_s


def test_a_server_that_imported_another_nlgbench_exits_3(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server checks it imported the parent's package, as the worker does: here the parent claims
    another one, so the server exits 3 before forking, and the cell is recorded failed with the server's exit 3."""
    folder, _ = prepared_cell(tiny, tmp_path)
    monkeypatch.setattr(forkserver, "PACKAGE_DIR", tmp_path / "elsewhere" / "nlgbench")
    with ForkServer() as server:
        server.start(worker_environment(1))
        result = run_worker(folder, 1, server=server)
    assert result.status == "failed"
    assert result.error == "the cell's fork server exited with code 3 before the cell's worker wrote a result"


@pytest.mark.parametrize("forked_worker", [True, False])
def test_a_cell_failing_after_startup_records_its_startup(forked_worker: bool, tiny: Path, tmp_path: Path) -> None:
    """A cell whose data file vanished after the sweep prepared it fails in its data phase, after start-up:
    result.json keeps that start-up (and reads back), results.csv shows it; a result without it still reads."""
    if forked_worker and not forkserver.enabled():
        pytest.skip("the fork server runs on Linux only")
    folder, data = prepared_cell(tiny, tmp_path)
    data.unlink()
    start = time.time()
    if forked_worker:
        with ForkServer() as server:
            server.start(worker_environment(1))
            result = run_worker(folder, 1, server=server)
    else:
        result = run_worker(folder, 1)
    wall = time.time() - start
    assert result.status == "failed" and "data.jsonl" in (result.error or "")
    assert result.timing is None and result.startup_seconds is not None
    assert 0 < result.startup_seconds < wall
    written = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    assert written["startup_s"] == result.startup_seconds and "timing" not in written
    assert CellResult.from_dict(written).startup_seconds == result.startup_seconds
    row = csv_row(result)
    assert row["status"] == "failed" and float(row["startup_s"]) == pytest.approx(result.startup_seconds, abs=5e-4)
    del written["startup_s"]  # a failed cell written before start-up was recorded
    older = CellResult.from_dict(written)
    assert older.startup_seconds is None and csv_row(older)["startup_s"] == "" and older.to_dict() == written
    with pytest.raises(ValueError, match="field 'startup_s' must be seconds"):
        check_shape({**written, "startup_s": "4.2"})


def backend_cells(model: Path, data: Path, metric: str) -> list[CellConfig]:
    """A cell of `metric` (no model) and BERTScore cells of `model` on torch and on ONNX Runtime."""

    def cell(metric: str, encoder: EncoderRef) -> CellConfig:
        return CellConfig(metric, {}, encoder, None, DatasetRef(path=str(data)), "cpu", 4, 1, 0, 1)

    plain, onnx = EncoderRef(name=str(model)), EncoderRef(name=str(model), backend="onnxruntime")
    return [cell(metric, EncoderRef(name="none")), cell("bertscore", plain), cell("bertscore", onnx)]


def test_a_fork_server_imports_only_what_every_cell_imports(tiny: Path, tmp_path: Path, wordcount_metric: str) -> None:
    """A cell imports what a fresh process running it alone would: a model-free cell only the correlation's
    scipy.stats, a torch cell no backend, a backend cell its backend; the server the intersection."""
    free, torch_cell, onnx_cell = backend_cells(tiny, tmp_path / "data.jsonl", wordcount_metric)
    assert cell_modules(free) == ["scipy.stats"]
    bert = "transformers.models.bert.modeling_bert"
    assert cell_modules(torch_cell) == [*LIBRARIES, bert, "scipy.stats"]
    assert cell_modules(onnx_cell) == [*LIBRARIES, "onnxruntime", "onnx", bert, "scipy.stats"]
    assert shared_modules([torch_cell, onnx_cell]) == cell_modules(torch_cell)  # no backend for the torch cell
    assert shared_modules([free, torch_cell, onnx_cell]) == ["scipy.stats"]  # no torch for the model-free cell
    # ... which therefore starts a plain worker: the server of a mixed sweep holds the model cells' torch
    assert forked_cells([free, torch_cell, onnx_cell]) == [torch_cell, onnx_cell]
    assert shared_modules(forked_cells([free, torch_cell, onnx_cell])) == cell_modules(torch_cell)


@pytest.mark.parametrize("forkserver_setting", ["1", "0"])
def test_a_cell_without_a_model_never_imports_torch_or_a_neighbours_backend(
    forkserver_setting: str, tiny: Path, tmp_path: Path, wordcount_metric: str
) -> None:
    """A sweep of a model-free cell (the test metric `wordcount`) before a BERTScore cell on ONNX Runtime:
    the model-free cell's worker, forked from the sweep's fork server or plain, never imported torch, ONNX
    Runtime or any other model library (its scorer records `sys.modules` after scoring), and its
    environment records the installed torch without threads; the ONNX cell ran."""
    if forkserver_setting == "1" and not forkserver.enabled():
        pytest.skip("the fork server runs on Linux only")
    rows = [
        {"lp": "de-en", "seg_id": i, "reference": "r", "hypothesis": t, "human": float(i)} for i, t in enumerate(TEXTS)
    ]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    spec = {
        "name": "imports",
        "datasets": [{"path": str(data)}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 1,
        "metrics": [
            {"metric": wordcount_metric},
            {"metric": "bertscore", "encoders": [{"name": str(tiny), "backend": "onnxruntime"}]},
        ],
    }
    out = tmp_path / "out"
    done = cli_subprocess(
        "run",
        str(write_spec(tmp_path, spec)),
        "--out",
        str(out),
        env={forkserver.FORKSERVER_ENV: forkserver_setting, "NLGBENCH_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows_by_metric = {row["metric"]: row for row in read_csv(out / "results.csv")}
    assert set(rows_by_metric) == {"wordcount", "bertscore"} and all(
        r["status"] == "ok" for r in rows_by_metric.values()
    )
    counted = read_result(out / "cells" / rows_by_metric["wordcount"]["cell_id"])
    assert counted.scorer is not None and counted.scorer["loaded_libraries"] == []
    assert counted.environment is not None and counted.environment["torch_threads"] is None
    assert counted.environment["torch"] == importlib.metadata.version("torch")
    # the hypotheses' word counts, by hand: "the cat sat on the mat" 6, "a dog ran in the park" 6, ...
    assert [float(r["score"]) for r in read_csv(out / "cells" / counted.cell_id / "scores.csv")] == [
        6,
        6,
        4,
        4,
        5,
        5,
        4,
        4,
    ]
