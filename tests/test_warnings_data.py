"""Warnings are data: a cell's data warnings (a `max_segments` head ordered by human score,
truncated segments, missing human scores, undefined correlations) are kept in result.json
(`warnings`), the store, results.csv's `warnings` column, report/index.html and report/cells.jsonl;
`import-scores --max-segments` applies the same checks (`nlgbench.core.datawarnings`)."""

from __future__ import annotations

import csv
import html
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import read_csv, write_jsonl
from nlgbench.cli import main
from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.datawarnings import data_warnings
from nlgbench.core.result import CellResult
from nlgbench.data.items import Dataset, Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.execution.local import truncation_warning
from nlgbench.runs.csvfiles import LEGACY_COLUMNS
from nlgbench.runs.resultfile import check_shape, read_result
from nlgbench.runs.store import Store
from tiny import TEXTS

pytestmark = pytest.mark.integration

HEAD = 12  # max_segments: the first 12 de-en items, whose human scores rise with the row order
MISSING_SEG = 3  # the de-en item without a human score

# What the run must record about the data below (texts of nlgbench.data.items and core.datawarnings).
SORTED_HEAD = (
    "dataset 'sorted', de-en: the first 11 items are ordered by human score (Spearman +1.00 of row order vs "
    "human), so max_segments keeps a biased subset; use sample: {n: 11, seed: 0}"
)
MISSING = "1 of 16 items have no human score on 'human'; its correlations use the other 15"
CONSTANT = "correlations undefined on 'human': human scores constant in fr-en"


def data_rows() -> list[dict]:
    """de-en: 16 items whose human score is their position (one missing); fr-en: 4 items with one
    constant human score."""
    rows = []
    for lp, n in (("de-en", 16), ("fr-en", 4)):
        for k in range(n):
            i = len(rows)
            human = None if (lp == "de-en" and k + 1 == MISSING_SEG) else float(k) if lp == "de-en" else 2.0
            rows.append(
                {
                    "lp": lp,
                    "seg_id": k + 1,
                    "reference": TEXTS[i % len(TEXTS)],
                    "hypothesis": TEXTS[(i + 1) % len(TEXTS)],
                    "human": human,
                }
            )
    return rows


def write_data(folder: Path) -> Path:
    path = folder / "sorted.jsonl"
    write_jsonl(path, data_rows())
    return path


def write_scores(path: Path, head: int | None) -> Path:
    """Scores for the data's items (the first `head` per language pair where given), not constant."""
    kept: dict[str, int] = {}
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "system", "score"])
        for i, r in enumerate(data_rows()):
            kept[r["lp"]] = kept.get(r["lp"], 0) + 1
            if head is None or kept[r["lp"]] <= head:
                w.writerow([r["lp"], r["seg_id"], "", repr((i * 7 % 5) / 10)])
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Callable[..., Path]) -> Path:
    """A tiny-model BERTScore sweep over the head (max_segments 12) of a file sorted by human score."""
    root = tmp_path_factory.mktemp("warnings")
    model = tiny_bert(TEXTS, num_layers=2, name="bert")
    spec = {
        "name": "warnings",
        "datasets": [{"path": str(write_data(root)), "max_segments": HEAD}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": [str(model)]}],
    }
    (root / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    assert main(["run", str(root / "spec.yaml"), "--out", str(out)]) == 0
    return out


def expected_warnings() -> list[str]:
    """The head keeps 12 de-en items (one without a human score) and the 4 fr-en ones: 16 in all."""
    return [SORTED_HEAD, MISSING, CONSTANT]


def the_cell(run: Path) -> CellResult:
    (folder,) = (run / "cells").iterdir()
    return read_result(folder)


def test_run_keeps_the_warnings_in_result_json_store_and_results_csv(run_dir: Path) -> None:
    result = the_cell(run_dir)
    assert result.warnings == expected_warnings()
    raw = json.loads((run_dir / "cells" / result.cell_id / "result.json").read_text(encoding="utf-8"))
    assert raw["warnings"] == expected_warnings()
    with Store(run_dir) as store:
        assert store.warnings(result.cell_id) == expected_warnings()
        stored = store.result(result.cell_id)
        assert stored is not None and stored.warnings == expected_warnings()
    (row,) = read_csv(run_dir / "results.csv")
    assert row["warnings"] == "; ".join(expected_warnings())
    header = list(row)  # warnings, then the old names kept one release, then the note, last
    assert header[header.index("warnings") + 1 :] == [*LEGACY_COLUMNS, "correlation_note"]


def test_report_page_and_published_cells_show_the_warnings(run_dir: Path, tmp_path: Path) -> None:
    assert main(["report", str(run_dir)]) == 0
    label = the_cell(run_dir).label
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert "<h2>Warnings</h2>" in page
    for warning in expected_warnings():
        assert f"<td class='t'>{html.escape(label)}</td><td class='t'>{html.escape(warning)}</td>" in page
    assert "'sorted'" not in page  # escaped, not raw
    (line,) = (run_dir / "report" / "cells.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["warnings"] == expected_warnings()
    # a fresh clone holds only the published report data: its page shows the same warnings
    clone = tmp_path / "clone"
    (clone / "report").mkdir(parents=True)
    for name in ("cells.jsonl", "metric_scores.csv"):
        shutil.copy(run_dir / "report" / name, clone / "report" / name)
    assert main(["report", str(clone)]) == 0
    again = (clone / "report" / "index.html").read_text(encoding="utf-8")
    assert all(html.escape(w) in again for w in expected_warnings())


def test_import_scores_max_segments_records_the_same_warnings(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_dir.parent / "sorted.jsonl"
    out = tmp_path / "imported"
    argv = ["import-scores", str(write_scores(tmp_path / "head.csv", HEAD)), "--dataset", str(data)]
    assert main([*argv, "--max-segments", str(HEAD), "--metric", "comet", "--encoder", "ext", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {SORTED_HEAD}" in err
    result = the_cell(out)
    assert result.warnings == the_cell(run_dir).warnings == expected_warnings()
    (row,) = read_csv(out / "results.csv")
    assert row["warnings"] == "; ".join(expected_warnings())
    with Store(out) as store:
        assert store.warnings(result.cell_id) == expected_warnings()
    # the whole file (no head taken): no head warning, the others stay
    whole = tmp_path / "whole"
    argv = ["import-scores", str(write_scores(tmp_path / "all.csv", None)), "--dataset", str(data)]
    assert main([*argv, "--metric", "comet", "--encoder", "ext", "--out", str(whole)]) == 0
    assert the_cell(whole).warnings == [
        "1 of 20 items have no human score on 'human'; its correlations use the other 19",
        CONSTANT,
    ]


def config() -> CellConfig:
    return CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef("m"),
        aligner=None,
        dataset=DatasetRef(name="wmt16"),
        device="cpu",
        batch_size=4,
        repeats=1,
        warmup=0,
        threads=None,
    )


def test_truncated_segments_and_several_dimensions_are_data_warnings() -> None:
    items = [Item("de-en", i, "", "", "r", "h", float(i), humans={"a": float(i)}) for i in range(4)]
    dataset = Dataset("d", items, has_systems=False, human_dims=["a", "b"], warnings=["head warning"])
    correlation = {
        "human_dim": "a",
        "n_missing_human": 0,
        "note": "",
        "dimensions": {
            "a": {"human_dim": "a", "n_missing_human": 0, "note": ""},
            "b": {"human_dim": "b", "n_missing_human": 4, "note": "fewer than 2 segments in de-en"},
        },
    }
    assert data_warnings(dataset, correlation, truncated=2) == [
        "head warning",
        "2 of 4 segments were longer than the model's maximum length and were cut",
        "4 of 4 items have no human score on 'b'; its correlations use the other 0",
        "correlations undefined on 'b': fewer than 2 segments in de-en",
    ]
    assert data_warnings(Dataset("d", items, has_systems=False, human_dims=["a"]), {"human_dim": "a"}) == []
    # the sweep's line is unchanged
    result = CellResult("c", "l", "ok", None, config(), n_segments=4, scorer={"truncated_segments": 2})
    assert truncation_warning(result) == (
        "warning: 2 of 4 segments were longer than the model's maximum length and were cut "
        "(counted per cell: results.csv truncated_segments); warned once per sweep"
    )


def test_older_results_and_stores_have_no_warnings(run_dir: Path, tmp_path: Path) -> None:
    raw = the_cell(run_dir).to_dict()
    old = {k: v for k, v in raw.items() if k != "warnings"}  # a result.json written before warnings were recorded
    result = CellResult.from_dict(old)
    assert result.warnings == [] and "warnings" not in result.to_dict() and result.to_dict() == old
    with pytest.raises(ValueError, match="field 'warnings' must be a list of texts"):
        check_shape({**raw, "warnings": "one text"})
    # a store without the warnings table (one nlgbench 0.1.0 wrote): none, and nothing written
    old_run = shutil.copytree(Path(__file__).parent / "data" / "run_0_1_0", tmp_path / "old")
    before = (old_run / "results.sqlite").read_bytes()
    with Store(old_run) as store:
        cell = store.results()[0].cell_id
        assert store.warnings(cell) == []
        assert store.db.execute("SELECT name FROM sqlite_master WHERE name = 'warnings'").fetchone() is None
    assert (old_run / "results.sqlite").read_bytes() == before
