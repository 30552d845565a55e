"""Run-folder formats (nlgbench.runs.migrate): every reader sees an older folder in the current shape,
`nlgbench repair --upgrade` writes it so, and a folder of a newer format is refused in one line.

tests/data/run_0_1_0/ and run_0_2_0/ are real run folders written by the released nlgbench 0.1.0
(format 1) and 0.2.0 (format 2), made by tests/data/make_old_runs.sh from a checkout of each
release, with the sweep tests/data/old_run_spec.yaml (sentBLEU and chrF on 3 WMT16 segments per
language pair).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import assert_one_line, cli_subprocess, read_csv
from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT
from nlgbench.foundations.errors import UserError
from nlgbench.runs.csvfiles import LEGACY_COLUMNS, RESULTS_COLUMNS
from nlgbench.runs.folder import CSV_FILE, FORMAT_FILE, STORE_FILE, cells_dir
from nlgbench.runs.migrate import FORMATS, upgrade_result
from nlgbench.runs.repair import repair
from nlgbench.runs.resultfile import read_result
from nlgbench.runs.rundata import RunData
from nlgbench.runs.store import Store

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data"
SPEC = DATA / "old_run_spec.yaml"
OLD = {"run_0_1_0": 1, "run_0_2_0": 2}  # folder -> the format its release wrote


@pytest.fixture(params=sorted(OLD))
def old(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, int]:
    """(a copy of an old run folder, its format)."""
    folder = shutil.copytree(DATA / request.param, tmp_path / request.param)
    return folder, OLD[request.param]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def user_version(folder: Path) -> int:
    db = sqlite3.connect(folder / STORE_FILE)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def cell_results(folder: Path) -> dict[str, object]:
    return {p.parent.name: read_result(p.parent) for p in sorted(cells_dir(folder).glob(f"*/{RESULT_FILE}"))}


def test_every_format_has_its_line() -> None:
    assert sorted(FORMATS) == list(range(1, RUN_FORMAT + 1))
    assert all(text.strip() and "\n" not in text for text in FORMATS.values())


def test_the_committed_folders_are_what_their_release_wrote(tmp_path: Path) -> None:
    """Unmarked (no format number anywhere), each told by its one difference; no path of a machine."""
    for name, found in OLD.items():
        folder = shutil.copytree(DATA / name, tmp_path / name)  # the store is opened: never the committed file
        assert user_version(folder) == 0 and not (folder / FORMAT_FILE).exists()
        raws = [json.loads(p.read_text(encoding="utf-8")) for p in cells_dir(folder).glob(f"*/{RESULT_FILE}")]
        assert raws and all("format" not in raw for raw in raws)
        assert all(("scores_csv" in raw) == (found == 2) for raw in raws)
        header = (folder / CSV_FILE).read_text(encoding="utf-8").splitlines()[0].split(",")
        assert ("pearson_global" in header) == (found == 2)
        with Store(folder) as store:
            assert store.format == found
        for path in folder.rglob("*"):
            if path.is_file():
                text = path.read_bytes().decode("utf-8", "replace")
                assert "/tmp/" not in text and "/home/" not in text and "/work/" not in text, path


def test_readers_see_the_current_shape_and_change_nothing(old: tuple[Path, int]) -> None:
    folder, found = old
    before = snapshot(folder)
    with Store(folder) as store:
        assert store.format == found
        stored = store.results()
    from_cells = cell_results(folder)
    assert sorted(r.cell_id for r in stored) == sorted(from_cells)
    for result in stored:
        assert result == from_cells[result.cell_id]
        assert json.loads(result.to_json())["format"] == RUN_FORMAT
        assert (result.scores_csv is not None) == (found >= 2)
    run = RunData.open(folder)
    assert sorted(run.results) == sorted(from_cells) and len(run.cells) == len(from_cells)
    for cell_id in run.results:
        assert len(run.segments(cell_id).score) == run.results[cell_id].n_segments
    text = RunData.results_csv(folder)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert next(csv.reader(io.StringIO(text)))[: len(RESULTS_COLUMNS)] == RESULTS_COLUMNS
    old_rows = read_csv(folder / CSV_FILE)
    assert len(rows) == len(old_rows)
    for row, written in zip(rows, old_rows, strict=True):
        assert {k: row[k] for k in written} == written  # every value as the old release wrote it
        assert all(row[new] == written[old] for old, new in LEGACY_COLUMNS.items() if old in written)
    assert snapshot(folder) == before  # reading writes nothing


def test_repair_upgrade_writes_the_current_format(old: tuple[Path, int]) -> None:
    """The store, each result.json and results.csv in the current format, nothing else changed but the
    record of scores.csv a format-1 cell lacked (its file holds the scores the store recorded)."""
    folder, found = old
    with Store(folder) as store:
        before = store.results()
    cells_before = cell_results(folder)
    scores = {p: p.read_bytes() for p in cells_dir(folder).glob("*/scores.csv")}
    done = repair(folder, upgrade=True, log=lambda line: None)
    assert done.store_upgraded and len(done.results_upgraded) == len(cells_before) and not done.added
    assert user_version(folder) == RUN_FORMAT
    assert json.loads((folder / FORMAT_FILE).read_text(encoding="utf-8")) == {"format": RUN_FORMAT}
    for path in cells_dir(folder).glob(f"*/{RESULT_FILE}"):
        assert json.loads(path.read_text(encoding="utf-8"))["format"] == RUN_FORMAT
    after = cell_results(folder)
    assert all(r.scores_csv is not None for r in after.values() if r.ok)  # every finished cell checked now
    unrecorded = {k: replace(r, scores_csv=None) if found == 1 else r for k, r in after.items()}
    assert unrecorded == cells_before
    with Store(folder) as store:
        assert store.format == RUN_FORMAT and store.results() == [after[r.cell_id] for r in before]
    assert {p: p.read_bytes() for p in scores} == scores
    header = (folder / CSV_FILE).read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header == RESULTS_COLUMNS
    again = repair(folder, upgrade=True, log=lambda line: None)
    assert not again.store_upgraded and not again.results_upgraded


def test_a_newer_format_is_refused_naming_both(old: tuple[Path, int]) -> None:
    folder, _ = old
    newer = RUN_FORMAT + 1
    cell = sorted(cells_dir(folder).iterdir())[0]
    raw = json.loads((cell / RESULT_FILE).read_text(encoding="utf-8"))
    (cell / RESULT_FILE).write_text(json.dumps({**raw, "format": newer}), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_result(cell)
    assert f"format {newer}" in str(caught.value) and f"(format {RUN_FORMAT})" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match=f"format {newer}, newer than nlgbench .* reads \\(format {RUN_FORMAT}\\)"):
        upgrade_result({**raw, "format": newer}, "result.json")
    (folder / FORMAT_FILE).write_text(json.dumps({"format": newer}), encoding="utf-8")
    with pytest.raises(UserError, match=f"{FORMAT_FILE} is in run-folder format {newer}"):
        RunData.results_csv(folder)
    db = sqlite3.connect(folder / STORE_FILE)
    db.execute(f"PRAGMA user_version = {newer}")
    db.commit()
    db.close()
    with pytest.raises(UserError, match=f"{STORE_FILE} is in run-folder format {newer}"):
        Store(folder)


# ----------------------------------------------------------------------------- the commands


@pytest.mark.integration
def test_report_compare_and_resume_on_an_old_folder(old: tuple[Path, int]) -> None:
    """report and compare read the old folder as it is; run resumes into it (upgrading its store);
    repair --upgrade writes it in the current format."""
    folder, _ = old
    old_ids = set(cell_results(folder))
    proc = cli_subprocess("report", str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    published = (folder / "report" / "cells.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["format"] for line in published} == {RUN_FORMAT}
    proc = cli_subprocess(
        *("compare", str(folder), "--candidate", "none", "--baseline", "none"),
        *("--candidate-metric", "chrf", "--baseline-metric", "sentbleu", "--resamples", "100"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "chrf vs sentbleu" in proc.stdout
    proc = cli_subprocess("run", str(SPEC), "--out", str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert user_version(folder) == RUN_FORMAT
    with Store(folder) as store:
        statuses = {r.cell_id: r.status for r in store.results()}
    assert old_ids <= set(statuses) and set(statuses.values()) == {"ok"}
    assert {r["cell_id"] for r in read_csv(folder / CSV_FILE)} == set(statuses)
    proc = cli_subprocess("repair", "--upgrade", str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"upgraded to format {RUN_FORMAT}" in proc.stdout
    assert {json.loads(p.read_text(encoding="utf-8"))["format"] for p in cells_dir(folder).glob("*/result.json")} == {
        RUN_FORMAT
    }


@pytest.mark.integration
def test_a_newer_folder_is_one_line_on_the_command_line(old: tuple[Path, int]) -> None:
    folder, _ = old
    db = sqlite3.connect(folder / STORE_FILE)
    db.execute(f"PRAGMA user_version = {RUN_FORMAT + 1}")
    db.commit()
    db.close()
    for command in (
        ["report", str(folder)],
        ["repair", "--upgrade", str(folder)],
        ["run", str(SPEC), "--out", str(folder)],
    ):
        assert_one_line(cli_subprocess(*command), f"format {RUN_FORMAT + 1}", f"(format {RUN_FORMAT})")


def test_a_newer_distillation_checkpoint_is_refused_naming_both(tmp_path: Path) -> None:
    """The checkpoints of `nlgbench distill` carry their own format (the index's `format`)."""
    from nlgbench.distillation.checkpoint import FORMAT, INDEX, read_index

    entry = {"file": "step-00000004.pt", "sha256": "0" * 64, "step": 4}
    (tmp_path / INDEX).write_text(json.dumps({"format": FORMAT + 1, "last": entry, "best": entry}), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_index(tmp_path)
    message = str(caught.value)
    assert f"format {FORMAT + 1}, newer" in message and f"(format {FORMAT})" in message and "\n" not in message
