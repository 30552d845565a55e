"""Links at the edges: nothing nlgbench writes into a run folder follows a symbolic link out of it,
and no command writes its output file (`--out`) through a symbolic or hard link.

Each case plants a link to a file or folder outside the run folder, runs the real CLI
(`python -m nlgbench.cli`, a subprocess) and checks the outside target is byte for byte untouched
and the command ends with one line and exit code 2 (or, where the link is no longer used at all,
succeeds without touching it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers import assert_one_line, cli_subprocess
from securitykit import KEEP, snapshot, write_spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, wordcount_for_module: str) -> tuple[Path, Path]:
    """(spec, run folder) of a finished one-cell sweep; tests copy the folder before planting links."""
    folder = tmp_path_factory.mktemp("sec-run")
    spec = write_spec(folder, folder / "no-model", metric=wordcount_for_module)
    run = folder / "run"
    proc = cli_subprocess("run", str(spec), "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return spec, run


@pytest.fixture
def run(finished: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the finished run folder (its cells, store, results.csv) to plant links in."""
    return Path(shutil.copytree(finished[1], tmp_path / "run"))


def outside_file(tmp_path: Path, name: str) -> Path:
    target = tmp_path / "outside" / name
    target.parent.mkdir(exist_ok=True)
    target.write_text(KEEP, encoding="utf-8")
    return target


# ----------------------------------------------------------------------------- 2: links in a run folder


def test_symlinked_lock_is_refused_and_its_target_untouched(run: Path, tmp_path: Path) -> None:
    v1 = outside_file(tmp_path, "v1")
    (run / ".lock").unlink()
    (run / ".lock").symlink_to(v1)
    assert_one_line(cli_subprocess("repair", str(run)), str(run / ".lock"), "symbolic link")
    assert v1.read_text(encoding="utf-8") == KEEP


def test_hard_linked_lock_is_refused_and_its_target_untouched(run: Path, tmp_path: Path) -> None:
    v1 = outside_file(tmp_path, "v1")
    (run / ".lock").unlink()
    os.link(v1, run / ".lock")
    assert_one_line(cli_subprocess("repair", str(run)), str(run / ".lock"), "hard link")
    assert v1.read_text(encoding="utf-8") == KEEP


def test_symlinked_temporary_is_never_written_through(run: Path, tmp_path: Path) -> None:
    """A link planted where the old code put its fixed temporary name (results.csv.tmp), and
    results.csv itself a link: the rewrite replaces results.csv with a file of its own."""
    v2, v3 = outside_file(tmp_path, "v2"), outside_file(tmp_path, "v3")
    before = (run / "results.csv").read_text(encoding="utf-8")
    (run / "results.csv.tmp").symlink_to(v2)
    proc = cli_subprocess("repair", str(run))
    assert proc.returncode == 0, proc.stderr
    assert v2.read_text(encoding="utf-8") == KEEP
    assert not (run / "results.csv").is_symlink() and (run / "results.csv").read_text(encoding="utf-8") == before
    (run / "results.csv").unlink()
    (run / "results.csv").symlink_to(v3)
    assert cli_subprocess("repair", str(run)).returncode == 0
    assert v3.read_text(encoding="utf-8") == KEEP
    assert not (run / "results.csv").is_symlink() and (run / "results.csv").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == ["results.csv.tmp"]  # no leftovers


def test_symlinked_report_folder_is_refused(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-report"
    outside.mkdir()
    (outside / "index.html").write_text(KEEP, encoding="utf-8")
    (run / "report").symlink_to(outside, target_is_directory=True)
    assert_one_line(cli_subprocess("report", str(run)), str(run / "report"), "symbolic link")
    assert snapshot(outside) == {"index.html": KEEP.encode()}


def test_symlinked_file_in_report_is_replaced_not_followed(run: Path, tmp_path: Path) -> None:
    v4 = outside_file(tmp_path, "v4")
    (run / "report").mkdir()
    (run / "report" / "index.html").symlink_to(v4)
    (run / "report" / "tradeoff.csv").symlink_to(v4)
    proc = cli_subprocess("report", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert v4.read_text(encoding="utf-8") == KEEP
    assert not (run / "report" / "index.html").is_symlink() and "<html" in (run / "report" / "index.html").read_text()
    assert not (run / "report" / "tradeoff.csv").is_symlink()


def test_run_force_never_deletes_through_a_symlinked_cell_folder(
    finished: tuple[Path, Path], run: Path, tmp_path: Path
) -> None:
    spec = finished[0]
    (cell,) = (run / "cells").iterdir()
    outside = Path(shutil.move(str(cell), str(tmp_path / "outside-cell")))
    before = snapshot(outside)
    assert {"config.json", "result.json", "scores.csv"} <= set(before)
    cell.symlink_to(outside, target_is_directory=True)
    assert_one_line(cli_subprocess("run", str(spec), "--out", str(run), "--force"), str(cell), "symbolic link")
    assert snapshot(outside) == before
    assert_one_line(cli_subprocess("repair", str(run)), str(cell), "symbolic link")
    assert snapshot(outside) == before


@pytest.mark.parametrize("name", ["results.sqlite", "results.sqlite-journal", "results.sqlite-wal"])
def test_symlinked_store_is_refused(name: str, finished: tuple[Path, Path], run: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside" / name
    target.parent.mkdir()
    if name == "results.sqlite":
        shutil.move(str(run / name), str(target))
    else:
        target.write_bytes(b"")  # a journal link to a file the store's next write would fill
    before = snapshot(target)
    (run / name).symlink_to(target)
    for args in (("run", str(finished[0]), "--out", str(run), "--force"), ("repair", str(run)), ("report", str(run))):
        assert_one_line(cli_subprocess(*args), str(run / name), "symbolic link")
        assert snapshot(target) == before, args


# ----------------------------------------------------------------------------- 3: a command's output file


SUMMEVAL = (
    Path(__file__).resolve().parent / "data" / "importers" / "summeval" / "model_annotations.aligned.paired.jsonl"
)


def plant_link(kind: str, path: Path, victim: Path) -> None:
    """`path` made a symbolic or a hard link to `victim`."""
    if kind == "symlink":
        path.symlink_to(victim)
    else:
        os.link(victim, path)


def output_command(command: str, tmp_path: Path, out: Path, model: Path) -> list[str]:
    """The arguments of `command` writing its output to `out`."""
    if command == "score":
        (tmp_path / "c.txt").write_text("the cat sat\na dog ran\n", encoding="utf-8")
        (tmp_path / "r.txt").write_text("the cat sat down\na dog runs\n", encoding="utf-8")
        texts = ["-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt")]
        return ["score", "--metric", "sentbleu", *texts, "--out", str(out)]
    if command == "datasets import":
        return ["datasets", "import", "summeval", str(SUMMEVAL), "--out", str(out)]
    if command == "example":
        return ["example", "quickstart", "--out", str(out)]
    data = write_spec(tmp_path, model).parent / "data.jsonl"
    return ["distill", "--teacher-metric", "chrf", "--student", str(model), "--pairs", str(data), "--out", str(out)]


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("command", ["score", "datasets import", "example"])
def test_output_file_that_is_a_link_is_refused_and_its_target_untouched(
    command: str, kind: str, tiny_model: Path, tmp_path: Path
) -> None:
    victim = outside_file(tmp_path, "victim.jsonl")
    out = tmp_path / ("sc.csv" if command == "score" else "out.jsonl")
    plant_link(kind, out, victim)
    proc = cli_subprocess(*output_command(command, tmp_path, out, tiny_model))
    assert_one_line(proc, str(out), "link")
    assert victim.read_text(encoding="utf-8") == KEEP


def test_distill_out_that_is_a_symlink_is_refused_and_its_target_untouched(tiny_model: Path, tmp_path: Path) -> None:
    victim = tmp_path / "outside" / "student"
    victim.mkdir(parents=True)
    (victim / "distill.json").write_text(KEEP, encoding="utf-8")  # a previous student, which --out may replace
    out = tmp_path / "student"
    out.symlink_to(victim)
    proc = cli_subprocess(*output_command("distill", tmp_path, out, tiny_model))
    assert_one_line(proc, f"--out {out} is a symbolic link")
    assert snapshot(victim) == {"distill.json": KEEP.encode()} and out.is_symlink()
    out.unlink()  # the checkpoint folder beside it (OUT.partial), a link: refused as well, before any training
    (tmp_path / "student.partial").symlink_to(victim)
    proc = cli_subprocess(*output_command("distill", tmp_path, out, tiny_model))
    assert_one_line(proc, f"the checkpoint folder {tmp_path / 'student.partial'} is a symbolic link")
    assert snapshot(victim) == {"distill.json": KEEP.encode()} and not out.exists()


def test_score_out_replaces_a_plain_file_whole(tmp_path: Path, tiny_model: Path) -> None:
    """An existing plain file is replaced (as before), through a temporary file: nothing else left."""
    out = tmp_path / "sc.csv"
    out.write_text("old\n", encoding="utf-8")
    proc = cli_subprocess(*output_command("score", tmp_path, out, tiny_model))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text(encoding="utf-8").splitlines()[0] == "line,score"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
