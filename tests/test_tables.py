"""Markdown tables of results.csv rows (scripts/results_table.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from helpers import load_script
from nlgbench.foundations.errors import UserError
from nlgbench.runs.rundata import RunData

pytestmark = pytest.mark.unit


def load_results_table() -> Any:
    """scripts/results_table.py as a module (scripts are not a package)."""
    return load_script("scripts/results_table.py", "results_table")


SCRIPT = load_results_table()
by_dataset_table, cells_table = SCRIPT.by_dataset_table, SCRIPT.cells_table


def row(
    metric: str, aligner: str, encoder: str, dataset: str, ms: str, r: str, status: str = "ok", exit_layer: str = ""
) -> dict[str, str]:
    return {
        "metric": metric,
        "aligner": aligner,
        "encoder": encoder,
        "dataset": dataset,
        "n_segments": "10",
        "ms_per_segment_median": ms,
        "peak_rss_mib": "900",
        "params": "22600000",
        "weight_mib": "86.1",
        "mean_exit_layer": exit_layer,
        "pearson_global": r,
        "kendall_global": "0.3",
        "pearson_segment": "0.4",
        "kendall_segment": "0.2",
        "status": status,
    }


def test_by_dataset_table_pivots_datasets_and_marks_failures() -> None:
    rows = [
        row("moverscore", "wmd", "m", "a", "12.34", "0.5"),
        row("moverscore", "wmd", "m", "b", "", "", "failed"),
        row("bertscore", "none", "m[early_exit=0.5]", "a", "3", "0.61234", exit_layer="7.5"),
    ]
    table = by_dataset_table(rows).splitlines()
    assert table[0] == (
        "| metric | encoder | params (M) | weights MiB | a ms/seg | a pearson (global) | b ms/seg | b pearson (global) "
        "| mean exit layer |"
    )
    assert table[2] == "| moverscore (wmd) | m | 22.6 | 86.1 | 12.3 | 0.500 | - | failed | - |"
    assert table[3] == "| bertscore | m[early_exit=0.5] | 22.6 | 86.1 | 3.0 | 0.612 | - | - | 7.50 |"
    assert len(cells_table(rows).splitlines()) == 2 + 3


def test_cells_table_names_each_correlation_with_its_level() -> None:
    header, first = cells_table([row("bertscore", "none", "m", "a", "3", "0.61234")]).splitlines()[0::2]
    columns = [c.strip() for c in header.strip("|").split("|")]
    quality = columns[columns.index("mean exit layer") + 1 : columns.index("status")]
    assert quality == ["pearson (global)", "kendall (global)", "pearson (segment, by lp)", "kendall (segment, by lp)"]
    values = [c.strip() for c in first.strip("|").split("|")]
    assert values[columns.index("pearson (global)")] == "0.612" and values[columns.index("peak RSS MiB")] == "900.0"


def test_a_results_csv_under_the_old_column_names_gives_the_same_tables(tmp_path: Path) -> None:
    """A results.csv under the old names only (format 1, LEGACY_COLUMNS: pearson_pooled, weight_mb ...)
    reads as the new one (`RunData.results_csv`, upgraded by nlgbench.runs.migrate)."""
    import csv

    from nlgbench.runs.csvfiles import LEGACY_COLUMNS

    rows = [row("bertscore", "none", "m", "a", "3", "0.61234"), row("moverscore", "wmd", "m", "b", "", "", "failed")]
    renamed = {new: old for old, new in LEGACY_COLUMNS.items()}
    old_rows = [{renamed.get(k, k): v for k, v in r.items()} for r in rows]
    assert "pearson_global" not in old_rows[0] and old_rows[0]["pearson_pooled"] == "0.61234"
    with (tmp_path / "results.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(old_rows[0]))
        writer.writeheader()
        writer.writerows(old_rows)
    read = list(csv.DictReader(io.StringIO(RunData.results_csv(tmp_path), newline="")))
    assert by_dataset_table(read) == by_dataset_table(rows) and cells_table(read) == cells_table(rows)
    assert "0.612" in by_dataset_table(read)


def test_missing_results_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no results.csv"):
        RunData.results_csv(tmp_path)


def test_cells_that_differ_only_in_metric_options_get_their_own_rows() -> None:
    from nlgbench.core.labels import options_label

    assert (
        options_label("sentsim", {"against": "reference", "token_part": "wmd", "layer": None})
        == "against=reference,token_part=wmd"
    )
    assert options_label("bertscore", {"idf": False, "layer": None}) == ""  # all defaults
    assert options_label("moverscore", {"stop_words": ["a", "an", "the", "of"]}) == "stop_words=[4 items]"
    assert options_label("not-registered", {"x": 1}) == ""  # imported scores of an unknown metric
    bert = row("sentsim", "none", "m", "a", "10", "0.6")
    wmd = dict(row("sentsim", "none", "m", "a", "12", "0.5"), metric_options="token_part=wmd")
    table = by_dataset_table([bert, wmd]).splitlines()
    assert table[2].startswith("| sentsim | m |") and table[3].startswith("| sentsim[token_part=wmd] | m |")


def test_markdown_cells_cannot_add_columns_or_markup() -> None:
    """A name holding | stays in its column, and one holding HTML shows as written: rendered the way a
    docs build renders .md files (Python-Markdown's tables), no element comes from a cell; for the
    terminal (`html=False`) < stays as it is."""
    import markdown as python_markdown

    from nlgbench.reporting.markup import markdown

    names = ["x|y", "<img src=x onerror=alert(1)>", "a & b \\ c", "two\nlines"]
    table = markdown(["dataset", "p"], [[name, "< 0.01"] for name in names])
    lines = table.splitlines()
    assert len(lines) == 2 + len(names)
    assert "<img" not in table and "&lt;img src=x onerror=alert(1)&gt;" in table
    page = python_markdown.markdown(table, extensions=["tables"])
    assert "<img" not in page and page.count("<td>") == 2 * len(names)
    assert "<td>x|y</td>" in page and "<td>&lt;img src=x onerror=alert(1)&gt;</td>" in page
    assert "<td>a &amp; b \\ c</td>" in page and "<td>two lines</td>" in page
    assert markdown(["p"], [["< 0.01"], ["x|y"]], html=False).splitlines()[2:] == ["| < 0.01 |", "| x\\|y |"]
