"""results.csv's columns: one quality figure by default everywhere, every correlation
column naming its level, MiB columns named MiB, and the old names kept for one release with the same
values. Checked on the committed run folders (real MiniLM / MPNet cells, read back from their published
report/ as report and compare read them) and on a fresh folder of imported scores."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from nlgbench.core.result import CellResult
from nlgbench.execution.launcher_base import summary
from nlgbench.reporting.compare import compare
from nlgbench.reporting.quality import DEFAULT_QUALITY, QualityOptions
from nlgbench.reporting.relative_table import with_quality
from nlgbench.runs.csvfiles import (
    LEGACY_COLUMNS,
    NOTE_COLUMN,
    QUALITY_COLUMNS,
    RESULTS_COLUMNS,
    column_label,
    write_views,
)
from nlgbench.runs.importscores import import_scores
from nlgbench.runs.rundata import RunData, find_results
from nlgbench.statistics.correlation import METHODS
from nlgbench.statistics.levels import LEVELS, canonical_level

pytestmark = pytest.mark.integration

REPORTS = Path(__file__).resolve().parents[1] / "reports"
COMMITTED = [REPORTS / "example", REPORTS / "similarity"]  # the committed folders with a published report/
MIB_COLUMNS = [c for c in RESULTS_COLUMNS if c.endswith("_mib")]


def rows_of(folder: Path) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(RunData.results_csv(folder), newline=""))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def written_now(folder: Path, tmp_path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """results.csv as the view writer writes it now from the folder's stored results (report/cells.jsonl)."""
    write_views(tmp_path, find_results(folder)[0])
    return rows_of(tmp_path)


def correlation_columns_of(header: list[str]) -> list[str]:
    """The columns of a results.csv header that hold a correlation figure: a method's name among
    their words (`pearson_global`, `kendall_pooled`, `system_spearman`, `pearson_global_ci_low`)."""
    return [c for c in header if set(c.split("_")) & set(METHODS)]


def first_correlation_column(header: list[str]) -> str:
    return correlation_columns_of(header)[0]


@pytest.fixture(scope="module")
def imported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh run folder of two imported cells on the first 20 WMT16 segments per lp (no model)."""
    from nlgbench.data.loaders import load_dataset

    out = tmp_path_factory.mktemp("imported") / "run"
    items = load_dataset("wmt16", max_segments=20).items
    for encoder, noise in (("good", 0.3), ("poor", 3.0)):
        path = out.parent / f"{encoder}.csv"
        lines = ["lp,seg_id,system,score"] + [
            f"{it.lp},{it.seg_id},{it.system},{it.human + noise * math.sin(7.0 * i)!r}" for i, it in enumerate(items)
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        import_scores(path, "wmt16", "comet", encoder, out, max_segments=20)
    return out


# ----------------------------------------------------------------------------- the header


def test_every_correlation_column_names_its_level_and_the_old_names_sit_before_the_note() -> None:
    legacy = [c for c in RESULTS_COLUMNS if c in LEGACY_COLUMNS]
    assert RESULTS_COLUMNS[-1] == NOTE_COLUMN and RESULTS_COLUMNS[-1 - len(legacy) : -1] == legacy
    assert len(set(RESULTS_COLUMNS)) == len(RESULTS_COLUMNS)
    current = [c for c in correlation_columns_of(RESULTS_COLUMNS) if c not in LEGACY_COLUMNS]
    assert set(QUALITY_COLUMNS) <= set(current) and "pearson_global_ci_low" in current
    for column in current:  # method first, then its level, then at most a qualifier (ci_low)
        method, level, *rest = column.split("_")
        assert method in METHODS and level in LEVELS and rest in ([], ["ci", "low"], ["ci", "high"]), column
    assert set(MIB_COLUMNS) == {f"{c}_mib" for c in ("peak_rss", "rss_growth", "cuda_peak_allocated")} | {
        "cuda_peak_reserved_mib",
        "disk_mib",
        "weight_mib",
        "peak_uss_mib",
    }
    assert not [c for c in RESULTS_COLUMNS if c.endswith("_mb") and c not in LEGACY_COLUMNS]
    assert {old: new for old, new in LEGACY_COLUMNS.items() if old.endswith("_mb")} == {
        c[: -len("_mib")] + "_mb": c
        for c in MIB_COLUMNS
        if c != "peak_uss_mib"  # new: never had an _mb name
    }
    assert set(LEGACY_COLUMNS.values()) <= set(RESULTS_COLUMNS) - set(LEGACY_COLUMNS)


def test_the_first_correlation_column_is_the_default_quality_and_labels_agree() -> None:
    first = first_correlation_column(RESULTS_COLUMNS)
    assert first == f"{DEFAULT_QUALITY.method}_{canonical_level(DEFAULT_QUALITY.level)}"
    assert column_label(first) == DEFAULT_QUALITY.label == "pearson (global)"
    for column in QUALITY_COLUMNS:  # the tables' and progress line's labels are report's and compare's
        method, level = column.split("_")
        assert column_label(column) == QualityOptions(method=method, level=level).label


# ----------------------------------------------------------------------------- the values


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_committed_results_csv_is_what_the_view_writer_writes_now(folder: Path, tmp_path: Path) -> None:
    """The committed results.csv is rewritten from the stored results (report/cells.jsonl), not stale."""
    results, source = find_results(folder)
    assert source.name == "report/"
    write_views(tmp_path, results)
    assert (tmp_path / "results.csv").read_bytes() == (folder / "results.csv").read_bytes()


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_first_correlation_column_is_what_report_compare_and_the_progress_line_show(
    folder: Path, tmp_path: Path
) -> None:
    header, rows = written_now(folder, tmp_path)
    first = first_correlation_column(header)
    run = RunData.open(folder)
    shown = with_quality(run, DEFAULT_QUALITY)  # report's default figure per cell
    by_id = {r["cell_id"]: r for r in rows}
    assert len(shown) == len(rows) > 0
    for cell_id, quality in zip(shown["cell_id"], shown["quality"], strict=True):
        # the worker's correlate and report's quality: the same Pearson over the same segments, ~1e-15
        assert float(by_id[cell_id][first]) == pytest.approx(quality, abs=1e-12), cell_id
        line = summary(run.results[cell_id], 1.0)
        assert f"{DEFAULT_QUALITY.label} {float(by_id[cell_id][first]):.4f}" in line, line
    if folder.name == "example":  # compare's default quality of a pair, candidate and baseline
        result = compare(run, "all-MiniLM-L6-v2", "all-mpnet-base-v2", n_resamples=100)
        assert result["quality"] == DEFAULT_QUALITY.label
        (row,) = result["rows"]
        cells = {r["encoder"]: float(r[first]) for r in rows}
        assert row["quality_candidate"] == pytest.approx(cells["all-MiniLM-L6-v2"], abs=1e-12)
        assert row["quality_baseline"] == pytest.approx(cells["all-mpnet-base-v2"], abs=1e-12)


def check_legacy(rows: list[dict[str, str]]) -> set[str]:
    """Every old column holds its new column's text; returns the new columns filled in some row."""
    for row in rows:
        assert {old: row[old] for old in LEGACY_COLUMNS} == {old: row[new] for old, new in LEGACY_COLUMNS.items()}
    return {new for row in rows for new in LEGACY_COLUMNS.values() if row[new] != ""}


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_legacy_columns_equal_their_new_columns(folder: Path, tmp_path: Path) -> None:
    _, rows = written_now(folder, tmp_path)
    filled = check_legacy(rows)
    # not equal by being blank: the measured figures and the memory columns are there
    assert {"pearson_global", "pearson_segment", "peak_rss_mib", "disk_mib", "weight_mib"} <= filled
    # and the old names mean what they meant: result.json's segment-level mean and pooled figures
    results = {r.cell_id: r for r in find_results(folder)[0]}
    for row in rows:
        c = results[row["cell_id"]].correlation or {}
        assert float(row["pearson"]) == c["pearson"] and float(row["kendall"]) == c["kendall"]
        assert (
            float(row["pearson_pooled"]) == c["pearson_pooled"] and float(row["kendall_pooled"]) == c["kendall_pooled"]
        )


def test_legacy_columns_of_imported_cells_and_the_progress_figures(imported_run: Path) -> None:
    header, rows = rows_of(imported_run)
    assert header == RESULTS_COLUMNS and len(rows) == 2
    filled = check_legacy(rows)
    assert {"pearson_global", "kendall_segment"} <= filled and not filled & set(MIB_COLUMNS)  # nothing measured
    run = RunData.open(imported_run)
    shown = with_quality(run, DEFAULT_QUALITY)
    for row, quality in zip(rows, shown["quality"], strict=True):
        assert float(row[first_correlation_column(header)]) == pytest.approx(quality, abs=1e-12)
    assert float(rows[0]["pearson_global"]) > float(rows[1]["pearson_global"])  # less noise, closer to humans


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_mib_columns_are_bytes_over_2_to_the_20(folder: Path, tmp_path: Path) -> None:
    """disk and weights: result.json's byte counts / 2**20, rounded to 2 decimals; memory: result.json's
    MiB figures (the trackers divide bytes, or KiB, by powers of 1024), rounded to 1 decimal."""
    _, rows = written_now(folder, tmp_path)
    results: dict[str, CellResult] = {r.cell_id: r for r in find_results(folder)[0]}
    for row in rows:
        result = results[row["cell_id"]]
        assert result.disk_bytes is not None and result.scorer is not None and result.memory is not None
        assert float(row["disk_mib"]) == round(result.disk_bytes / 2**20, 2)
        assert float(row["weight_mib"]) == round(result.scorer["weight_bytes"] / 2**20, 2)
        assert float(row["disk_mib"]) != round(result.disk_bytes / 1e6, 2)  # not MB
        assert float(row["peak_rss_mib"]) == round(result.memory.peak_rss_mb, 1)
        assert float(row["rss_growth_mib"]) == round(result.memory.rss_growth_mb, 1)


def test_the_memory_trackers_report_mib() -> None:
    import resource

    import psutil

    from nlgbench.measurement.trackers import peak_rss_mb, rss_mb

    before = psutil.Process().memory_info().rss
    now = rss_mb()
    after = psutil.Process().memory_info().rss
    assert min(before, after) / 2**20 - 1 <= now <= max(before, after) / 2**20 + 1  # MiB, not MB (5% apart)
    assert peak_rss_mb() == pytest.approx(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**20, abs=1)
