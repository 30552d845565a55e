"""Helpers of the fault-injection tests (tests/test_faults_*.py): user data and specs on the tiny
models, the run folder's rows and stored cells, the CLI started in the background and its workers.
"""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from helpers import write_jsonl
from nlgbench.execution.forkserver import SERVER_MODULE
from tiny import TEXTS

# ----------------------------------------------------------------------------- shared helpers


def user_rows(n_per_lp: int = 4, lps: Sequence[str] = ("de-en", "fr-en"), human=None) -> list[dict]:
    """Own-data rows: `human(i)` gives the human score of the i-th row (default: varied)."""
    rows = []
    for lp in lps:
        for k in range(n_per_lp):
            i = len(rows)
            rows.append(
                {
                    "lp": lp,
                    "seg_id": k + 1,
                    "source": TEXTS[(i + 3) % len(TEXTS)],
                    "reference": TEXTS[i % len(TEXTS)],
                    "hypothesis": TEXTS[(i + 1) % len(TEXTS)],
                    "human": float(human(i)) if human else float((i * 7) % 5),
                }
            )
    return rows


def write_spec(
    folder: Path, model: Path, data: Path, *, name: str = "faults", extra: str = "", metrics: str | None = None
) -> Path:
    """A small spec over `data` with the tiny model at `model` (BERTScore, 1 repeat, no warm-up)."""
    metrics = metrics or f"  - metric: bertscore\n    encoders: [{model}]\n"
    spec = folder / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\ndatasets: [{{path: {data}}}]\nrepeats: 1\nwarmup: 0\nbatch_size: 4\n{extra}metrics:\n{metrics}",
        encoding="utf-8",
    )
    return spec


def csv_rows(run: Path) -> list[dict[str, str]]:
    with (run / "results.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def stored_cells(run: Path) -> list[tuple[str, str]]:
    """(cell_id, status) of every cell in results.sqlite, read directly (what is really stored)."""
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return sorted(db.execute("SELECT cell_id, status FROM cells").fetchall())
    finally:
        db.close()


def assert_consistent(run: Path, expected_ok: int) -> None:
    """results.csv, results.sqlite and cells/ hold the same cells, each once, `expected_ok` of them ok."""
    rows = csv_rows(run)
    ids = [r["cell_id"] for r in rows]
    assert len(ids) == len(set(ids)), ids
    assert sorted((r["cell_id"], r["status"]) for r in rows) == stored_cells(run)
    ok = [r["cell_id"] for r in rows if r["status"] == "ok"]
    assert len(ok) == expected_ok, rows
    for cell_id in ok:
        assert (run / "cells" / cell_id / "result.json").is_file() and (
            run / "cells" / cell_id / "scores.csv"
        ).is_file()


# ------------------------------------------------------------- 3, 4, 9: lock, filesystem and store faults, signals


def two_cell_spec(folder: Path, model: Path, *, name: str = "faults", n_per_lp: int = 4, extra: str = "") -> Path:
    """A 2-cell sweep (the tiny model with 2 and with 1 layer) over own data."""
    data = write_jsonl(folder / f"{name}.jsonl", user_rows(n_per_lp))
    metrics = f"  - metric: bertscore\n    encoders: [{model}, {{name: {model}, num_layers: 1}}]\n"
    return write_spec(folder, model, data, name=name, metrics=metrics, extra=extra)


def two_count_cells(folder: Path, metric: str, *, name: str = "faults") -> Path:
    """A 2-cell sweep of the test metric `metric` (`wordcount_metric`: no model, so a sweep's mechanics
    without a model's seconds), its `scale` 1 and 2, over own data."""
    data = write_jsonl(folder / f"{name}.jsonl", user_rows())
    metrics = "".join(f"  - metric: {metric}\n    options: {{scale: {scale}}}\n" for scale in (1.0, 2.0))
    return write_spec(folder, folder / "no-model", data, name=name, metrics=metrics)


def scores_of(run: Path) -> dict[str, list[str]]:
    """cell id -> its scores.csv `score` column as written (exact reprs)."""
    out = {}
    for row in csv_rows(run):
        with (run / "cells" / row["cell_id"] / "scores.csv").open(encoding="utf-8") as fh:
            out[row["cell_id"]] = [r["score"] for r in csv.DictReader(fh)]
    return out


def wait_for(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    """The cell worker processes of a running CLI process: its `python -c ...` children, or, where it
    started a fork server (`nlgbench.execution.forkserver`, itself a `python -c` child), that server's
    forked children (which keep its command line; not what it runs while importing, such as the
    `ldconfig -p` of ctypes.util.find_library)."""
    try:
        workers: list[psutil.Process] = []
        for child in psutil.Process(proc.pid).children():
            if "-c" not in child.cmdline():
                continue
            if is_fork_server(child):
                workers += [w for w in child.children() if is_fork_server(w)]
            else:
                workers.append(child)
        return workers
    except psutil.Error:
        return []


def is_fork_server(process: psutil.Process) -> bool:
    return any(SERVER_MODULE in arg for arg in process.cmdline())


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The CLI in the background, in its own session (so a test can signal its process group as a terminal does),
    with SIGINT at its default action as in a terminal's foreground job (a test run started with `&` from a
    non-interactive shell would otherwise hand its children an ignored SIGINT)."""
    return subprocess.Popen(
        [sys.executable, "-m", "nlgbench.cli", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# A sitecustomize for fault injection, put on PYTHONPATH by `faulty`. FAULT_GATE: a worker waits until that
# file exists (a test acts while a cell is surely running): a plain worker (`python -c BOOT CELL_DIR ...`)
# at its start, a fork server's child right after the fork (the server itself does not wait). FAULT_MODE
# after FAULT_AFTER good writes: `sqlite`, the store's INSERT of a cell fails as on a full disk; `csv`,
# writing results.csv fails with ENOSPC.
# FAULT_READONLY: creating or writing anything under that folder fails with EROFS.
FAULT_SHIM = """
import errno, os, pathlib, sqlite3, sys, time
if os.environ.get("FAULT_READONLY"):
    _ro = os.path.realpath(os.environ["FAULT_READONLY"])
    _mkdir, _open, _access = os.mkdir, os.open, os.access
    def _inside(path):
        real = os.path.realpath(os.fspath(path))
        return real == _ro or real.startswith(_ro + os.sep)
    def _refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
    def _mkdir_ro(path, *a, **k):
        return _refuse(path) if _inside(os.path.dirname(os.path.abspath(path))) else _mkdir(path, *a, **k)
    def _open_ro(path, flags, *a, **k):
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        return _refuse(path) if writes and _inside(path) else _open(path, flags, *a, **k)
    def _access_ro(path, mode, *a, **k):
        return False if mode & os.W_OK and _inside(path) else _access(path, mode, *a, **k)
    os.mkdir, os.open, os.access = _mkdir_ro, _open_ro, _access_ro
def _wait_for_gate():
    while not os.path.exists(os.environ["FAULT_GATE"]):
        time.sleep(0.05)
if os.environ.get("FAULT_GATE") and sys.argv[:1] == ["-c"]:
    if os.path.isfile(os.path.join(sys.argv[1], "config.json")):
        _wait_for_gate()
    else:
        os.register_at_fork(after_in_child=_wait_for_gate)
_mode, _left = os.environ.get("FAULT_MODE"), [int(os.environ.get("FAULT_AFTER", "0"))]

def _spend():
    _left[0] -= 1
    return _left[0] < 0

class _FullDisk(sqlite3.Connection):
    def execute(self, sql, *args):
        if sql.startswith("INSERT INTO cells") and _spend():
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)

if _mode == "sqlite":
    _connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: _connect(*a, factory=_FullDisk, **k)
elif _mode == "csv":
    _replace = os.replace  # write_atomic's temporary (a fresh name) cannot be put in place: the disk is full
    def _replace_full(src, dst, *args, **kwargs):
        if os.path.basename(dst) == "results.csv" and _spend():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(src))
        return _replace(src, dst, *args, **kwargs)
    os.replace = _replace_full
"""


def faulty(folder: Path, **settings: str) -> dict[str, str]:
    """The environment of a CLI run with FAULT_SHIM active and its FAULT_* `settings`."""
    shim = folder / "fault-shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(FAULT_SHIM, encoding="utf-8")
    path = os.pathsep.join(p for p in [str(shim), os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": path, **{f"FAULT_{k.upper()}": v for k, v in settings.items()}}
