"""Delimited rows are read whole or refused: a CSV or TSV row with more or fewer fields than its
header (`en,2,A,1,5`: a decimal comma) is one error line naming the file and the line, in
import-scores, the table importer and the own-data loader alike (`nlgbench.data.text.checked_table`,
the one rule they share), never half-read (the 5 dropped, a missing human score read as none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlgbench.cli import main
from nlgbench.data.importers.table import table_records
from nlgbench.data.text import csv_table, tsv_table
from nlgbench.data.userfile import load_user_file
from nlgbench.foundations.errors import UserError
from nlgbench.runs.importscores import import_scores, read_scores

pytestmark = pytest.mark.unit

HEADER = "lp,seg_id,system,score\n"


def data_file(path: Path) -> Path:
    """Three scored items of one system (en, seg_ids 1-3, system A)."""
    rows = [
        {"lp": "en", "seg_id": i, "system": "A", "reference": f"r{i}", "hypothesis": f"h{i}", "human": i / 4}
        for i in (1, 2, 3)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def one_error_line(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    """The CLI's single error line (exit 2; a traceback would propagate here)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("nlgbench: error:")]
    assert code == 2 and len(lines) == 1, (code, out, err)
    return lines[0]


@pytest.mark.parametrize(
    ("row", "fields"),
    [("en,2,A,1,5", 5), ("en,2,A", 3), ("en,2,A,0.5,", 5), ("en,2", 2)],
)
def test_import_scores_refuses_a_row_with_more_or_fewer_fields(
    row: str, fields: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`en,2,A,1,5` was stored as score 1.0 (the 5 dropped); now one line naming the file and line."""
    scores = tmp_path / "s.csv"
    scores.write_text(HEADER + f"en,1,A,0.3\n{row}\nen,3,A,0.7\n", encoding="utf-8")
    line = one_error_line(
        capsys, "import-scores", scores, "--dataset", data_file(tmp_path / "d.jsonl"),
        "--metric", "m", "--encoder", "e", "--out", tmp_path / "run",
    )  # fmt: skip
    assert line == f"nlgbench: error: {scores} line 3: {fields} comma-separated fields, header has 4"
    assert not (tmp_path / "run").exists()


def test_import_scores_reads_quoted_fields_and_numbers_lines_as_written(tmp_path: Path) -> None:
    """A quoted field keeps its comma or line break; blank lines are skipped; a row is numbered by
    the line it starts on (here line 7, after a blank line and a record over two lines)."""
    scores = tmp_path / "s.csv"
    scores.write_text(HEADER + '"en",1,"A",0.3\n\nen,2,A,"0.5"\nen,"3\n",A,0.7\nen,4,A,1,5\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"s\.csv line 7: 5 comma-separated fields, header has 4$"):
        read_scores(scores)
    scores.write_text(HEADER + '"en",1,"A",0.3\n\nen,2,"A",0.5\r\n"en","3",A,0.7\n', encoding="utf-8")
    assert read_scores(scores) == {("en", "1", "A"): 0.3, ("en", "2", "A"): 0.5, ("en", "3", "A"): 0.7}


@pytest.mark.parametrize(("text", "line"), [('en,1,A,"0.3\nen,2,A,0.5\n', 2), ('en,1,A,0.3\nen,2,"A"x,0.5\n', 3)])
def test_malformed_csv_quoting_is_refused_not_read_as_other_rows(text: str, line: int, tmp_path: Path) -> None:
    """A quote left open (it would swallow the rest of the file into one field) or text after a
    closing quote is one line naming where the record starts."""
    scores = tmp_path / "s.csv"
    scores.write_text(HEADER + text, encoding="utf-8")
    with pytest.raises(UserError, match=rf"s\.csv line {line}: not readable as CSV"):
        read_scores(scores)


def test_a_cells_own_scores_csv_still_imports_with_its_further_columns(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "lp,seg_id,system,score,human,doc_id,precision\nen,1,A,0.3,0.25,,0.1\nen,2,A,0.5,0.5,d,0.2\n"
        "en,3,A,0.7,0.75,,0.3\n",
        encoding="utf-8",
    )
    result = import_scores(scores, str(data_file(tmp_path / "d.jsonl")), "m", "e", tmp_path / "run")
    assert result.n_segments == 3
    scores.write_text(scores.read_text(encoding="utf-8") + "en,4,A,0.9,1.0,,0.4,x\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"scores\.csv line 5: 8 comma-separated fields, header has 7"):
        read_scores(scores)


TABLE_HEADER = "lp,seg_id,system,hypothesis,reference,human\n"


@pytest.mark.parametrize(("row", "fields"), [("en,2,A,hi,hello", 5), ("en,2,A,hi,hello,0,7", 7)])
def test_table_importer_refuses_a_csv_row_with_more_or_fewer_fields(row: str, fields: int, tmp_path: Path) -> None:
    """A short row was read with its human score missing (pandas fills the gap); a long one gave
    pandas' tokenizer message. Both are now the loader's one line."""
    table = tmp_path / "t.csv"
    table.write_text(TABLE_HEADER + f"en,1,A,hi there,hello there,0.5\n{row}\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"t\.csv line 3: {fields} comma-separated fields, header has 6$"):
        table_records(table)


def test_table_importer_reads_csv_as_before(tmp_path: Path) -> None:
    """Quoted commas, empty cells (an empty text; a missing score) and "NA" as text, as pandas read them."""
    table = tmp_path / "t.csv"
    table.write_text(TABLE_HEADER + 'en,1,A,"hi, there",NA,0.5\nen,2,A,,hello,\n', encoding="utf-8")
    records = table_records(table)
    assert [(r["hypothesis"], r["references"], r["human"]) for r in records] == [
        ("hi, there", ["NA"], 0.5),
        ("", ["hello"], None),
    ]


def test_tsv_rows_keep_the_same_rule(tmp_path: Path) -> None:
    """The own-data loader's TSV and the table importer's TSV go through the same check."""
    data = tmp_path / "d.tsv"
    data.write_text("lp\tseg_id\treference\thypothesis\thuman\nen\t1\tr\th\t0.5\nen\t2\tr\th\t0,5\t1\n")
    with pytest.raises(UserError, match=r"d\.tsv line 3: 6 tab-separated fields, header has 5$"):
        load_user_file(data)
    header, rows = tsv_table(data, "a\tb\n\n1\t2\n")
    assert (header, rows) == (["a", "b"], [(3, ["1", "2"])])
    assert csv_table(data, " a , b\n\n1,2\n") == (["a", "b"], [(3, ["1", "2"])])
    with pytest.raises(UserError, match="is empty"):
        csv_table(data, "\n\n")


def test_a_published_reports_metric_scores_csv_is_read_whole_or_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed report (report/ alone, no store) read by compare: a short row gave a TypeError
    traceback, a long one was read with its extra field dropped."""
    rows = "".join(f"en,{i},{s},{(i * 7 + ord(s)) % 10 / 10}\n" for s in "ABC" for i in range(1, 7))
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"lp": "en", "seg_id": i, "system": s, "reference": "r", "hypothesis": "h", "human": i / 7})
            + "\n"
            for s in "ABC"
            for i in range(1, 7)
        ),
        encoding="utf-8",
    )
    for encoder in ("a", "b"):
        (tmp_path / f"{encoder}.csv").write_text(HEADER + rows, encoding="utf-8")
        import_scores(tmp_path / f"{encoder}.csv", str(data), "m", encoder, tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "--format", "svg"]) == 0
    published = tmp_path / "published"
    (published / "report").mkdir(parents=True)
    for name in ("cells.jsonl", "metric_scores.csv", "run.json"):
        (published / "report" / name).write_bytes((tmp_path / "run" / "report" / name).read_bytes())
    scores = published / "report" / "metric_scores.csv"
    lines = scores.read_text(encoding="utf-8").splitlines(keepends=True)
    compare = ["compare", published, "--candidate", "a", "--baseline", "b", "--resamples", "100"]
    assert main([str(arg) for arg in compare]) == 0, capsys.readouterr().err  # whole, it reads
    for changed, fields in ((lines[2].rstrip("\r\n") + ",9\n", 6), (lines[2].rsplit(",", 1)[0] + "\n", 4)):
        scores.write_text("".join([*lines[:2], changed, *lines[3:]]), encoding="utf-8")
        line = one_error_line(capsys, *compare)
        assert line == f"nlgbench: error: {scores} line 3: {fields} comma-separated fields, header has 5"
