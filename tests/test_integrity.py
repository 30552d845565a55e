"""Data integrity at the edges: seg_ids survive every file
of a run folder as written, `load_scores` keeps id and text columns as text, a truncated or edited
scores.csv is refused where it is read back, and broken run files are one line naming the file.

Run folders are built with `import-scores` (no model), and the CLI runs in this process
(`nlgbench.cli.main`): its one-line errors are checked as a user sees them.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import nlgbench
from helpers import read_csv, write_jsonl
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.integration

# Integer-like texts that Python's int() reads as 7, 10, 5 or 7 ("1_0", "+5", "٧": an Arabic-Indic
# digit), beside their plain forms, and one id that is no number at all. In one file they are ten
# different items.
TRICKY_IDS = ["007", "7", "x9", "1_0", "10", "+5", "5", "\u0667", "-0", "0"]


def data_with_ids(path: Path, ids: Sequence[Any], lp: str = "de-en") -> Path:
    """A user data file with one item per id (human scores varied, so correlations are defined)."""
    rows = [
        {
            "lp": lp,
            "seg_id": seg,
            "source": f"s{i}",
            "reference": f"r{i}",
            "hypothesis": f"h{i}",
            "human": float((i * 7) % 5),
        }
        for i, seg in enumerate(ids)
    ]
    return write_jsonl(path, rows, ensure_ascii=False)


def write_import(path: Path, keys: Sequence[tuple[str, str]], shift: float = 0.0) -> Path:
    """An import-scores CSV scoring each (lp, seg_id) key; scores differ per key (and per `shift`)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "system", "score"])
        w.writerows([lp, seg, "", repr(((i * 3) % 7) / 7 + shift)] for i, (lp, seg) in enumerate(keys))
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the CLI run in this process."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The CLI's single error line (exit 2, no traceback: a traceback would propagate here)."""
    code, out, err = cli(capsys, *args)
    lines = [line for line in err.splitlines() if line.startswith("nlgbench: error:")]
    assert code == 2 and len(lines) == 1, (code, out, err)
    return lines[0]


def imported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ids: Sequence[Any], encoders: Sequence[str] = ("a",)
) -> tuple[Path, Path, list[str]]:
    """(run folder, data file, cell ids): one imported cell per encoder over a file with `ids`."""
    data, run = data_with_ids(tmp_path / "data.jsonl", ids), tmp_path / "run"
    keys = [(it.lp, str(it.seg_id)) for it in load_dataset(None, path=str(data)).items]
    for n, encoder in enumerate(encoders):
        scores = write_import(tmp_path / f"{encoder}.csv", keys, shift=n / 10)
        code, _, err = cli(
            capsys, "import-scores", scores, "--dataset", data, "--metric", "m", "--encoder", encoder, "--out", run
        )
        assert code == 0, err
    return run, data, [r["cell_id"] for r in read_csv(run / "results.csv")]


# ----------------------------------------------------------------------------- 7: seg_ids as written


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["3", "1", "2"], [1, 2, 3]),  # plain integers (texts of a TSV, or JSON strings) are integers
        ([3, 1, 2], [1, 2, 3]),
        (["007", "7"], ["007", "7"]),  # int() reads each pair as one number: they are two texts
        (["1_0", "10"], ["10", "1_0"]),
        (["+5", "5"], ["+5", "5"]),
        (["\u0667", "7"], ["7", "\u0667"]),
        (["-0", "0"], ["-0", "0"]),
        (["01", "2"], ["01", "2"]),  # one id not in plain form makes every id of the file text
        (["-3", "2"], [-3, 2]),
        ([2**63 - 1, -(2**63)], [-(2**63), 2**63 - 1]),  # the store's 64-bit integers
        ([2**63, 1], ["1", str(2**63)]),  # beyond them: every id text, none lost
        ([str(-(2**63) - 1), "2"], [str(-(2**63) - 1), "2"]),
    ],
)
def test_seg_ids_are_integers_only_in_plain_form(ids: list[Any], expected: list[Any], tmp_path: Path) -> None:
    items = load_dataset(None, path=str(data_with_ids(tmp_path / "d.jsonl", ids))).items
    assert [it.seg_id for it in items] == expected


HUGE_IDS = [1, 2, 2**63, -(2**63) - 1, 10**30, 6, 7, 8, 9, 2**63 - 1]


def test_seg_ids_beyond_64_bits_are_stored_as_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A seg_id the store's 64-bit integers cannot hold makes the file's ids text: the cell is recorded
    (not an OverflowError on every rerun), and repair and report read it back, every id as written."""
    run, data, (a,) = imported(capsys, tmp_path, HUGE_IDS)
    ids = [it.seg_id for it in load_dataset(None, path=str(data)).items]
    assert sorted(ids) == sorted(str(i) for i in HUGE_IDS)
    assert [r["status"] for r in read_csv(run / "results.csv")] == ["ok"]
    assert list(nlgbench.load_scores(run, a)["seg_id"]) == ids
    cells_only(run)
    code, out, err = cli(capsys, "repair", run)
    assert code == 0 and "skipped" not in out, (out, err)
    assert cli(capsys, "report", run)[0] == 0
    published = read_csv(run / "report" / "metric_scores.csv")
    assert [r["seg_id"] for r in published if r["cell_id"] == a] == ids


def test_integer_like_text_seg_ids_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Ids that int() would merge come out of every file of the run as they went in."""
    run, data, (a, b) = imported(capsys, tmp_path, TRICKY_IDS, encoders=("a", "b"))
    ids = [it.seg_id for it in load_dataset(None, path=str(data)).items]
    assert sorted(ids) == sorted(TRICKY_IDS) and all(isinstance(s, str) for s in ids)
    assert [r["seg_id"] for r in read_csv(run / "cells" / a / "scores.csv")] == ids
    db = sqlite3.connect(run / "results.sqlite")
    try:
        stored = [s for (s,) in db.execute("SELECT seg_id FROM segment_scores WHERE cell_id = ? ORDER BY idx", (a,))]
    finally:
        db.close()
    assert stored == ids  # text, as given: not 7 for "007"
    assert list(nlgbench.load_scores(run, a)["seg_id"]) == ids
    from nlgbench.runs.rundata import RunData

    assert list(RunData.open(run).segments(a).seg_id) == ids
    assert cli(capsys, "report", run)[0] == 0
    published = read_csv(run / "report" / "metric_scores.csv")
    assert [r["seg_id"] for r in published if r["cell_id"] == a] == ids
    # import-scores of the cell's own scores.csv: the same keys, the same correlation
    code, _, err = cli(
        capsys,
        "import-scores",
        run / "cells" / a / "scores.csv",
        "--dataset",
        data,
        "--metric",
        "m",
        "--encoder",
        "copy",
        "--out",
        tmp_path / "run2",
    )
    assert code == 0, err
    assert (
        read_csv(tmp_path / "run2" / "results.csv")[0]["pearson_global"]
        == read_csv(run / "results.csv")[0]["pearson_global"]
    )
    # compare on the published report folder alone (what a clone of the repository holds)
    shutil.rmtree(run / "cells")
    (run / "results.sqlite").unlink()
    code, out, err = cli(capsys, "compare", run, "--candidate", "a", "--baseline", "b", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["n"] == len(TRICKY_IDS)


def test_old_store_with_integer_column_still_loads_and_records_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A results.sqlite written before (seg_id INTEGER, no format number: format 1) loads; a cell recorded
    into it keeps text ids (tests/test_run_format.py reads a store 0.1.0 wrote)."""
    run, data, (a,) = imported(capsys, tmp_path, [1, 2, 3, 4, 5])
    db = sqlite3.connect(run / "results.sqlite")
    try:
        with db:
            db.execute("ALTER TABLE segment_scores RENAME TO kept")
            db.execute(
                "CREATE TABLE segment_scores (cell_id TEXT, idx INTEGER, lp TEXT, seg_id INTEGER, system TEXT, "
                "score REAL, human REAL, extra_json TEXT, PRIMARY KEY (cell_id, idx))"
            )
            db.execute("INSERT INTO segment_scores SELECT * FROM kept")
            db.execute("DROP TABLE kept")
            db.execute("PRAGMA user_version = 0")  # written before format numbers
    finally:
        db.close()
    before = (run / "results.sqlite").read_bytes()
    from nlgbench.runs.rundata import RunData

    assert list(RunData.open(run).segments(a).seg_id) == [1, 2, 3, 4, 5]
    assert (run / "results.sqlite").read_bytes() == before  # reading an old store leaves it as it is

    assert list(RunData.open(run).segments(a).seg_id) == [1, 2, 3, 4, 5]
    text = data_with_ids(tmp_path / "text.jsonl", ["007", "7", "x9"])
    scores = write_import(tmp_path / "t.csv", [("de-en", s) for s in ("007", "7", "x9")])
    code, _, err = cli(
        capsys, "import-scores", scores, "--dataset", text, "--metric", "m", "--encoder", "t", "--out", run
    )
    assert code == 0, err
    cell = next(r["cell_id"] for r in read_csv(run / "results.csv") if r["encoder"] == "t")
    assert sorted(RunData.open(run).segments(cell).seg_id) == ["007", "7", "x9"]
    assert list(RunData.open(run).segments(a).seg_id) == [1, 2, 3, 4, 5]


def test_import_scores_matches_seg_ids_as_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file's "007" is not the data's 7: the key is the text (spaces around it aside)."""
    data = data_with_ids(tmp_path / "d.jsonl", [7, 8, 9])
    scores = tmp_path / "s.csv"
    scores.write_text("lp,seg_id,system,score\nde-en,007,,0.1\nde-en, 8 ,,0.2\nde-en,9,,0.3\n", encoding="utf-8")
    line = one_line(
        capsys, "import-scores", scores, "--dataset", data, "--metric", "m", "--encoder", "e", "--out", tmp_path / "run"
    )
    assert "(de-en, 007, -)" in line and "(de-en, 7, -)" in line


# ----------------------------------------------------------------------------- 8: load_scores keeps text


def test_load_scores_keeps_ids_and_texts_as_text(tmp_path: Path) -> None:
    from nlgbench.core.scores import write_scores
    from nlgbench.data.items import Item

    items = [
        Item("de-en", seg, "", "s", "r", "h", float(i), doc_id=doc, extra={"note": note})
        for i, (seg, doc, note) in enumerate([("007", "0012", "0042"), ("x9", "d2", "n/a"), ("7", "3", "1e5")])
    ]
    cell = tmp_path / "run" / "cells" / "c1"
    cell.mkdir(parents=True)
    write_scores(cell / "scores.csv", items, [0.5, 0.25, 0.125])
    frame = nlgbench.load_scores(tmp_path / "run", "c1")
    assert list(frame["seg_id"]) == ["007", "x9", "7"]
    assert list(frame["doc_id"]) == ["0012", "d2", "3"]
    assert list(frame["item.note"]) == ["0042", "n/a", "1e5"]
    assert list(frame["score"]) == [0.5, 0.25, 0.125] and list(frame["human"]) == [0.0, 1.0, 2.0]
    write_scores(
        cell / "scores.csv",
        [it.__class__(**{**it.__dict__, "seg_id": n}) for n, it in enumerate(items, 1)],
        [0.5, 0.25, 0.125],
    )
    assert list(nlgbench.load_scores(tmp_path / "run", "c1")["seg_id"]) == [1, 2, 3]  # integer data stays integer


# ----------------------------------------------------------------------------- 10: scores.csv checked on reading


def cells_only(run: Path) -> None:
    """The run folder without its store (report then reads cells/, repair rebuilds from it)."""
    (run / "results.sqlite").unlink()


def truncate(path: Path, keep: int) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[: keep + 1]), encoding="utf-8")


def drop_scores_record(cell: Path) -> None:
    """result.json as written before it recorded scores.csv's rows and hash."""
    raw = json.loads((cell / "result.json").read_text(encoding="utf-8"))
    raw.pop("scores_csv", None)
    (cell / "result.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")


def test_result_records_rows_and_hash_of_scores_csv(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import hashlib

    run, _, (a,) = imported(capsys, tmp_path, list(range(1, 11)))
    raw = json.loads((run / "cells" / a / "result.json").read_text(encoding="utf-8"))
    data = (run / "cells" / a / "scores.csv").read_bytes()
    assert raw["scores_csv"] == {"rows": 10, "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("old", [False, True], ids=["hashed", "old-result"])
def test_truncated_scores_csv_is_refused(old: bool, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run, _, (a, b) = imported(capsys, tmp_path, list(range(1, 11)), encoders=("a", "b"))
    cells_only(run)
    if old:
        drop_scores_record(run / "cells" / a)
    truncate(run / "cells" / a / "scores.csv", 4)
    line = one_line(capsys, "report", run)
    assert str(run / "cells" / a / "scores.csv") in line and "4 row" in line and "10" in line
    assert not (run / "report").exists()
    line = one_line(capsys, "compare", run, "--candidate", "a", "--baseline", "b")
    assert str(run / "cells" / a / "scores.csv") in line
    code, out, err = cli(capsys, "repair", run)
    assert code == 0, err
    skipped = [line for line in out.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and str(run / "cells" / a) in skipped[0] and "4 row" in skipped[0], out
    assert [r["cell_id"] for r in read_csv(run / "results.csv")] == [b]  # the good cell only


def test_edited_scores_csv_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Same rows, one score changed: the hash says so."""
    run, data, (a,) = imported(capsys, tmp_path, list(range(1, 11)))
    cells_only(run)
    path = run / "cells" / a / "scores.csv"
    rows = read_csv(path)
    rows[3]["score"] = "0.999"
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    line = one_line(capsys, "report", run)
    assert str(path) in line and "sha256" in line
    line = one_line(
        capsys, "import-scores", path, "--dataset", data, "--metric", "m", "--encoder", "x", "--out", tmp_path / "run2"
    )
    assert str(path) in line and "sha256" in line
    code, out, _ = cli(capsys, "repair", run)
    assert code == 0 and sum("skipped" in line for line in out.splitlines()) == 1, out


def test_old_results_without_the_record_still_load(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run, _, (a,) = imported(capsys, tmp_path, list(range(1, 11)))
    cells_only(run)
    drop_scores_record(run / "cells" / a)
    code, out, err = cli(capsys, "report", run)
    assert code == 0 and "nlgbench: error" not in err, err
    code, out, _ = cli(capsys, "repair", run)
    assert code == 0 and "skipped" not in out


def test_old_results_scores_are_read_with_one_unchecked_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A result.json from before the record of scores.csv cannot tell an edited file: load_scores and
    repair still read it, and say so in one warning line naming the file (once per reader, though repair reads
    it twice)."""
    run, _, (a,) = imported(capsys, tmp_path, list(range(1, 11)))
    cells_only(run)
    drop_scores_record(run / "cells" / a)
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    for folder in (run, copy):
        path = folder / "cells" / a / "scores.csv"
        path.write_text(path.read_text(encoding="utf-8").replace(",0.0,", ",0.5,", 1), encoding="utf-8")
    capsys.readouterr()
    frame = nlgbench.load_scores(run, a)
    assert frame["score"][0] == 0.5  # read as it is: nothing to check it against
    warned = [line for line in capsys.readouterr().err.splitlines() if "unchecked" in line]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {run / 'cells' / a / 'scores.csv'}: "), warned
    nlgbench.load_scores(run, a)  # each reader owns what it warned about: a later load says so again
    warned = [line for line in capsys.readouterr().err.splitlines() if "unchecked" in line]
    assert len(warned) == 1, warned
    code, out, err = cli(capsys, "repair", copy)
    warned = [line for line in err.splitlines() if "unchecked" in line]
    assert code == 0 and "skipped" not in out, (out, err)
    assert len(warned) == 1 and str(copy / "cells" / a / "scores.csv") in warned[0], err


# ----------------------------------------------------------------------------- 11: one line, naming the file


def test_non_numeric_score_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run, _, (a, b) = imported(capsys, tmp_path, list(range(1, 11)), encoders=("a", "b"))
    cells_only(run)
    drop_scores_record(run / "cells" / a)  # a result.json from before the hash: the row is parsed
    path = run / "cells" / a / "scores.csv"
    path.write_text(path.read_text(encoding="utf-8").replace(",0.0,", ",abc,", 1), encoding="utf-8")
    for args in (["report", run], ["compare", run, "--candidate", "a", "--baseline", "b"]):
        line = one_line(capsys, *args)
        assert f"{path}:2" in line and "score" in line and "'abc'" in line
    code, out, _ = cli(capsys, "repair", run)
    assert code == 0 and f"{path}:2" in out


@pytest.mark.parametrize(
    ("field", "value"), [("correlation", "garbage"), ("timing", None), ("correlation", None), ("n_segments", "ten")]
)
def test_malformed_result_json_is_one_line(
    field: str, value: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run, _, (a, b) = imported(capsys, tmp_path, list(range(1, 11)), encoders=("a", "b"))
    cells_only(run)
    path = run / "cells" / a / "result.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    if field == "timing":  # a measured cell's: an imported one has none
        raw.pop("imported")
    raw[field] = value
    path.write_text(json.dumps(raw), encoding="utf-8")
    line = one_line(capsys, "report", run)
    assert str(path) in line and field in line
    code, out, err = cli(capsys, "repair", run)
    assert code == 0, err
    assert any(str(path.parent) in line and field in line for line in out.splitlines() if "skipped" in line), out
    assert [r["cell_id"] for r in read_csv(run / "results.csv")] == [b]


def test_non_utf8_results_csv_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run, _, _ = imported(capsys, tmp_path, list(range(1, 11)))
    cells_only(run)
    path = run / "results.csv"
    path.write_bytes(path.read_bytes().replace(b",data,", b",d\xe9ta,"))
    with pytest.raises(UserError, match=f"{path}: not UTF-8"):
        nlgbench.load_run(run)
    line = one_line(capsys, "report", run)
    assert str(path) in line and "UTF-8" in line


# ----------------------------------------------------------------------------- lower severity


def test_import_dataset_path_is_kept_relative_to_the_run_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "work").mkdir()
    data = data_with_ids(tmp_path / "data" / "x.jsonl", list(range(1, 11)))
    keys = [(it.lp, str(it.seg_id)) for it in load_dataset(None, path=str(data)).items]
    monkeypatch.chdir(tmp_path / "work")
    for n, encoder in enumerate(("a", "b")):
        write_import(tmp_path / f"{encoder}.csv", keys, shift=n / 10)
        code, _, err = cli(
            capsys,
            "import-scores",
            f"../{encoder}.csv",
            "--dataset",
            "../data/x.jsonl",
            "--metric",
            "m",
            "--encoder",
            encoder,
            "--out",
            "../proj/run",
        )
        assert code == 0, err
    run = tmp_path / "proj" / "run"
    assert cli(capsys, "report", run)[0] == 0
    for line in (run / "report" / "cells.jsonl").read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        assert result["config"]["dataset"]["path"] == "../../data/x.jsonl"  # from the run folder
        assert str(tmp_path) not in line  # no machine path in what is committed
    shutil.rmtree(run / "cells")
    (run / "results.sqlite").unlink()
    monkeypatch.chdir(tmp_path / "proj")  # another working directory: the published folder still reads
    code, out, err = cli(capsys, "compare", "run", "--candidate", "a", "--baseline", "b", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["n"] == 10


def test_repair_refuses_a_folder_that_is_not_a_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    line = one_line(capsys, "repair", folder)
    assert str(folder) in line and "not a run folder" in line
    assert sorted(os.listdir(folder)) == ["cat.jpg"]


def test_repair_leaves_a_published_folder_as_it_is(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A committed folder (results.csv + report/, no store, no cells/) has nothing to rebuild from: repair
    says so and writes nothing (it used to make an empty store and cut results.csv to its header)."""
    folder = Path(shutil.copytree(Path(__file__).resolve().parents[1] / "reports" / "example", tmp_path / "ex"))
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    line = one_line(capsys, "repair", folder)
    assert "no results.sqlite and no cells/" in line and "nothing to rebuild" in line, line
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == before


def test_import_scores_lines_end_at_newline_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Line separators in import-scores: a seg_id holding U+2028 (or U+0085) is one text, not two CSV records;
    as a name holding a control character it is refused, naming its own line."""
    data = data_with_ids(tmp_path / "d.jsonl", ["x", "y", "e"])
    for seg in ("a\u2028b", "c\x85d"):
        scores = write_import(tmp_path / "s.csv", [("de-en", s) for s in (seg, "y", "e")])
        line = one_line(
            capsys,
            "import-scores",
            scores,
            "--dataset",
            data,
            "--metric",
            "m",
            "--encoder",
            "e",
            "--out",
            tmp_path / "run",
        )
        assert f"{scores}:2: seg_id {seg!r} holds a control character ({seg[1]!r}" in line, line
