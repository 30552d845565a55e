"""Fault injection, the run folder: its lock, `--wait`, a read-only folder, a full disk, the file-size
limit and a corrupt store leave exactly the finished cells, nothing lost, nothing duplicated.

Each case runs the real CLI (`python -m nlgbench.cli`, a subprocess) on tiny random models or the
test-only `wordcount` metric.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from faultkit import (
    assert_consistent,
    csv_rows,
    faulty,
    scores_of,
    start_cli,
    stored_cells,
    two_cell_spec,
    two_count_cells,
    user_rows,
    wait_for,
    workers_of,
)
from helpers import assert_one_line, cli_subprocess, committed_copy

pytestmark = pytest.mark.integration


def test_second_writer_of_a_locked_folder_exits_naming_the_holder(tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    first = start_cli("run", str(spec), "--out", str(out), env=faulty(tmp_path, gate=str(gate)))
    scores = write_import_file(tmp_path / "scores.csv")
    try:
        wait_for(lambda: workers_of(first), what="the first sweep's worker")
        second = cli_subprocess("run", str(spec), "--out", str(out))
        assert_one_line(second, f"{out} is in use by another nlgbench process (pid {first.pid})", "--wait")
        assert ": ok in " not in second.stdout
        assert_one_line(cli_subprocess("repair", str(out)), f"pid {first.pid}")
        assert_one_line(
            cli_subprocess(
                "import-scores",
                str(scores),
                "--dataset",
                str(tmp_path / "faults.jsonl"),
                "--metric",
                "bertscore",
                "--encoder",
                "other",
                "--out",
                str(out),
            ),
            f"pid {first.pid}",
        )
    finally:
        gate.touch()
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert stdout.count(": ok in ") == 2
    assert_consistent(out, 2)


def write_import_file(path: Path) -> Path:
    """Precomputed scores for the items of `user_rows()` (import-scores' CSV)."""
    lines = [f"{r['lp']},{r['seg_id']},,{i / 10}" for i, r in enumerate(user_rows())]
    path.write_text("lp,seg_id,system,score\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_run_wait_waits_for_the_holder(tmp_path: Path, wordcount_metric: str) -> None:
    from nlgbench.runs.folder import locked

    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    with locked(out):
        assert (out / ".lock").read_text().strip() == str(os.getpid())
        waiting = start_cli("run", str(spec), "--out", str(out), "--wait")
        assert waiting.stdout is not None
        line = waiting.stdout.readline()
        assert line.startswith(f"waiting for pid {os.getpid()}"), line
        time.sleep(0.5)
        assert waiting.poll() is None and not (out / "results.sqlite").exists()  # nothing ran meanwhile
    stdout, stderr = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, stderr[-2000:]
    assert stdout.count(": ok in ") == 2
    assert_consistent(out, 2)


def test_out_is_an_existing_file(tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    target = tmp_path / "taken.txt"
    target.write_text("mine\n", encoding="utf-8")
    assert_one_line(cli_subprocess("run", str(spec), "--out", str(target)), str(target), "is a file")
    assert target.read_text(encoding="utf-8") == "mine\n"
    assert_one_line(cli_subprocess("run", str(spec), "--out", str(target / "sub")), "cannot create the run folder")


def can_run_python_as_nobody() -> bool:
    """Whether user nobody can start this interpreter (not when it lives under root's private home)."""
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "pass"], capture_output=True, user=65534, group=65534, extra_groups=[], check=False
        )
    except OSError:  # the interpreter itself cannot be executed by nobody
        return False
    return probe.returncode == 0


def can_mount_read_only() -> bool:
    """Whether `unshare --mount` may bind-mount a folder read-only here (root with CAP_SYS_ADMIN)."""
    return (
        shutil.which("unshare") is not None
        and subprocess.run(
            ["unshare", "--mount", "sh", "-c", "mount --bind / / && mount -o remount,ro,bind / /"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )


def run_read_only(target: Path, shim_folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with `target` read-only to it, as real as this machine allows: not root - chmod 555; root -
    as user nobody after chmod 555, else in a mount namespace where `target` is a read-only bind mount
    (EROFS), else with FAULT_SHIM refusing writes under `target` as a read-only file system would."""
    command = [sys.executable, "-m", "nlgbench.cli", *args]
    kwargs: dict = {"capture_output": True, "text": True, "timeout": 600}
    env = dict(os.environ, HOME=str(shim_folder))
    if os.geteuid() != 0 or can_run_python_as_nobody():
        if os.geteuid() == 0:
            os.chown(target, 65534, 65534)
            kwargs.update(user=65534, group=65534, extra_groups=[])
        target.chmod(0o555)
        try:
            return subprocess.run(command, env=env, **kwargs)
        finally:
            target.chmod(0o755)
    if can_mount_read_only():
        mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        return subprocess.run(["unshare", "--mount", "sh", "-c", mount, str(target), *command], env=env, **kwargs)
    return subprocess.run(command, env={**env, **faulty(shim_folder, readonly=str(target))}, **kwargs)


@pytest.fixture
def shared_dir() -> Path:
    """A folder any user can read (tmp_path's parents are private to root when root runs the tests)."""
    folder = Path(tempfile.mkdtemp(prefix="nlgbench-faults-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(folder)


@pytest.mark.parametrize("case", ["read-only folder", "read-only parent"])
def test_read_only_run_folder(case: str, shared_dir: Path, tiny_model: Path) -> None:
    model = Path(shutil.copytree(tiny_model, shared_dir / "model"))
    spec = two_cell_spec(shared_dir, model)
    parent = shared_dir / "runs"
    out = parent / "out"
    if case == "read-only folder":
        assert cli_subprocess("run", str(spec), "--out", str(out)).returncode == 0
        before = ((out / "results.csv").read_bytes(), stored_cells(out), sorted(p.name for p in out.rglob("*")))
    else:
        parent.mkdir()
    proc = run_read_only(out if case == "read-only folder" else parent, shared_dir, "run", str(spec), "--out", str(out))
    if case == "read-only folder":
        assert_one_line(proc, f"cannot write to the run folder {out}")
        assert ((out / "results.csv").read_bytes(), stored_cells(out), sorted(p.name for p in out.rglob("*"))) == before
        assert_consistent(out, 2)
    else:
        assert_one_line(proc, f"cannot create the run folder {out}")
        assert not out.exists()


@pytest.mark.parametrize("mode", ["sqlite", "csv"])
def test_disk_full_keeps_finished_cells(mode: str, tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    full = cli_subprocess("run", str(spec), "--out", str(out), env=faulty(tmp_path, mode=mode, after="1"))
    if mode == "sqlite":  # the second cell's record fails: the store and results.csv keep the first
        assert_one_line(full, "results.sqlite", "database or disk is full", "finished cells are kept")
        assert_consistent(out, 1)
        repaired = cli_subprocess("repair", str(out))  # its result.json is in cells/: repair records it
        assert repaired.returncode == 0 and "added 1 cell(s)" in repaired.stdout, repaired.stdout + repaired.stderr
        assert_consistent(out, 2)
    else:  # results.csv cannot be rewritten after the second cell: the store holds both
        assert_one_line(full, "no space left", "results.csv", "finished cells are kept")
        assert [status for _, status in stored_cells(out)] == ["ok", "ok"]
    again = cli_subprocess("run", str(spec), "--out", str(out))
    assert again.returncode == 0 and again.stdout.count("skipped") == 2 and ": ok in " not in again.stdout
    assert_consistent(out, 2)


def file_size_limit(limit: int):
    """For Popen's preexec_fn: writes past `limit` bytes fail with EFBIG, as under `ulimit -f` (SIGXFSZ
    ignored, so the write returns the error instead of killing the process)."""

    def arm() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return arm


def test_report_and_compare_over_the_file_size_limit_are_one_line(tmp_path: Path) -> None:
    """`ulimit -f 100` during report (a figure 20 in wide is larger): one line naming the file and the limit,
    exit 2, and no half-written or temporary file left; compare's table into a file under the limit too."""
    limit = 100 * 1024
    run = committed_copy("example", tmp_path)
    pair = ["--candidate", "all-MiniLM-L6-v2", "--baseline", "all-mpnet-base-v2", "--resamples", "100"]
    assert cli_subprocess("compare", str(run), *pair).returncode == 0  # the dataset fetched into the cache, unlimited
    command = [sys.executable, "-m", "nlgbench.cli", "report", str(run), "--figure-width", "20"]  # PNGs over the limit
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, preexec_fn=file_size_limit(limit))
    line = assert_one_line(proc, str(run / "report"), "file too large", "ulimit -f")
    assert line.endswith("then run the same command again"), line
    left = [p for p in (run / "report").iterdir()]
    assert not [p.name for p in left if p.name.startswith(".") or p.suffix == ".tmp"]
    assert all(p.stat().st_size < limit for p in left)  # none cut off at the limit
    with (tmp_path / "compare.txt").open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "nlgbench.cli", "compare", str(run), *pair],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            preexec_fn=file_size_limit(64),
        )
    proc.stdout = (tmp_path / "compare.txt").read_text(encoding="utf-8")  # the first 64 bytes of the table
    assert_one_line(proc, "file too large", "ulimit -f")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, wordcount_for_module: str) -> tuple[Path, Path]:
    """(spec, run folder) of a finished 2-cell sweep; tests copy the folder before breaking it."""
    folder = tmp_path_factory.mktemp("finished")
    spec = two_count_cells(folder, wordcount_for_module)
    out = folder / "out"
    assert cli_subprocess("run", str(spec), "--out", str(out)).returncode == 0
    return spec, out


CORRUPTIONS = {
    "garbage": lambda path: path.write_bytes(b"this is not a database" * 100),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "emptied": lambda path: path.write_bytes(b""),
    "deleted": lambda path: path.unlink(),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_store_is_refused_and_repaired(case: str, finished_run: tuple[Path, Path], tmp_path: Path) -> None:
    spec, original = finished_run
    out = Path(shutil.copytree(original, tmp_path / "out"))
    CORRUPTIONS[case](out / "results.sqlite")
    refused = cli_subprocess("run", str(spec), "--out", str(out))
    line = assert_one_line(refused, f"nlgbench repair {out}")
    assert ("corrupt" in line) if case in {"garbage", "truncated"} else ("no results.sqlite" in line), line
    assert ": ok in " not in refused.stdout
    if case == "garbage":  # readers say so too
        assert_one_line(cli_subprocess("report", str(out)), "corrupt", "nlgbench repair")

    repaired = cli_subprocess("repair", str(out))
    assert repaired.returncode == 0, repaired.stderr
    assert "2 cell(s)" in repaired.stdout and "2 ok" in repaired.stdout, repaired.stdout
    if case in {"garbage", "truncated"}:
        assert (out / "results.sqlite.corrupt").is_file() and "kept as" in repaired.stdout
    assert_consistent(out, 2)
    assert scores_of(out) == scores_of(original)
    keep = ["cell_id", "status", "pearson_global", "kendall_global", "pearson_segment", "ms_per_segment_mean"]
    keep.append("truncated_segments")
    assert [{k: r[k] for k in keep} for r in csv_rows(out)] == [{k: r[k] for k in keep} for r in csv_rows(original)]
    again = cli_subprocess("run", str(spec), "--out", str(out))
    assert again.returncode == 0 and again.stdout.count("skipped") == 2 and ": ok in " not in again.stdout
    if case == "deleted":
        assert cli_subprocess("repair", str(out)).stdout.startswith("nothing to repair")
