"""Tables a paper can use: the trade-off table against compare, the one-dataset relative table, the
metric name alone, captions; report/compare from what a fresh clone has (no results.sqlite, no cells/).
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

matplotlib.use("Agg")

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.cli.parser import build_parser
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import compare, select_metrics
from nlgbench.reporting.figures.drawing import write_figures
from nlgbench.reporting.figures.style import FigureOptions
from nlgbench.reporting.relative_table import QualityIntervals, choose_baselines, relative_table, with_quality
from nlgbench.reporting.report import write_report
from nlgbench.runs.rundata import CellFolderSource, PublishedSource, RunData, StoreSource
from paperkit import PEARSON, REPO, stratified_draw

pytestmark = pytest.mark.integration
INCLUDE = "\\includegraphics[width=\\linewidth,height=0.9\\textheight,keepaspectratio]"  # figures.tex's

# ----------------------------------------------------------------------------- tables


def test_tradeoff_table_is_compares_numbers(paper_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = paper_run / "report"
    table = pd.read_csv(out / "tradeoff.csv")
    cells = read_csv(paper_run / "results.csv")
    base = max((c for c in cells if c["metric"] == "bertscore"), key=lambda c: int(c["params"]))
    cand = min((c for c in cells if c["metric"] == "bertscore"), key=lambda c: int(c["params"]))
    assert (
        main(["compare", str(paper_run), "--candidate", cand["encoder"], "--baseline", base["encoder"], "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert len(result["rows"]) == 3 and set(table["group"]) == {"bertscore"}
    assert set(table[table["metric"] == "sentbleu"]["baseline"]) == {base["encoder"]}  # compared like an encoder
    for r in result["rows"]:
        (row,) = table[(table["encoder"] == cand["encoder"]) & (table["dataset"] == r["dataset"])].to_dict("records")
        assert row["quality"] == r["quality_candidate"] and row["retained"] == r["retained"]
        assert [row["retained_ci_low"], row["retained_ci_high"]] == r["retained_ci"]
        assert row["speedup"] == r["speedup"] and [row["speedup_low"], row["speedup_high"]] == r["speedup_range"]
        assert row["p_bootstrap"] == r["p_bootstrap"] and row["n"] == r["n"]
        (b,) = table[(table["encoder"] == base["encoder"]) & (table["dataset"] == r["dataset"])].to_dict("records")
        assert b["retained"] == 1.0 and b["quality"] == r["quality_baseline"]
    # the retained interval by hand: the ratio of pooled Pearsons over the same paired resamples
    c_cell = next(c for c in cells if c["encoder"] == cand["encoder"] and c["dataset"] == "wmt16[:5]")
    b_cell = next(c for c in cells if c["encoder"] == base["encoder"] and c["dataset"] == "wmt16[:5]")
    cs, bs = (read_csv(paper_run / "cells" / c["cell_id"] / "scores.csv") for c in (c_cell, b_cell))
    x, y = (np.array([float(s["score"]) for s in rows]) for rows in (cs, bs))
    h = np.array([float(s["human"]) for s in cs])
    lps = np.array([s["lp"] for s in cs])
    rng = np.random.default_rng(0)
    ratios = []
    for _ in range(1000):
        idx = stratified_draw(lps, rng)  # segments within each language pair
        ratios.append(stats.pearsonr(x[idx], h[idx])[0] / stats.pearsonr(y[idx], h[idx])[0])
    (row,) = table[(table["encoder"] == cand["encoder"]) & (table["dataset"] == "wmt16[:5]")].to_dict("records")
    assert [row["retained_ci_low"], row["retained_ci_high"]] == pytest.approx(
        list(np.percentile(ratios, [2.5, 97.5])), abs=1e-9
    )
    tex = (out / "tradeoff.tex").read_text(encoding="utf-8")
    assert all(rule in tex for rule in ("\\toprule", "\\midrule", "\\bottomrule"))
    assert "{retained (\\%)} & 95\\% CI" in tex  # tests/test_latex.py compiles it
    md = (out / "tradeoff.md").read_text(encoding="utf-8")
    assert md.count("| BERTScore |") == 6 and md.count("| baseline |") == 3  # published names


def test_one_dataset_relative_table_has_no_mean_rows_and_means_stay_within_a_kind() -> None:
    def row(encoder: str, dataset: str, kind: str, q: float) -> dict:
        return {
            "metric": "m",
            "encoder": encoder,
            "device": "cpu",
            "dataset": dataset,
            "score_type": kind,
            "quality": q,
            "ms_per_segment": 2.0,
            "ms_per_segment_repeats": [2.0],
        }

    one = relative_table(pd.DataFrame([row("big", "d1", "DA", 0.5), row("small", "d1", "DA", 0.4)]), {"m": "big"})
    assert list(one["dataset"]) == ["d1", "d1"]
    many = relative_table(
        pd.DataFrame([row("big", "d1", "DA", 0.5), row("big", "d2", "DA", 0.7), row("big", "q1", "MQM", 0.2)]),
        {"m": "big"},
    )
    assert list(many["dataset"]) == ["d1", "d2", "mean (DA)", "q1"]  # MQM is not averaged with DA, nor alone
    assert many.set_index("dataset").loc["mean (DA)", "quality"] == pytest.approx(0.6)


# ----------------------------------------------------------------------------- --metric, --aligner


def test_metric_name_alone_when_unambiguous_and_aligner() -> None:
    df = pd.DataFrame(
        {
            "metric": ["moverscore (wmd)", "moverscore (wcd)", "bertscore", "sentsim[token_part=wmd]"],
            "metric_name": ["moverscore", "moverscore", "bertscore", "sentsim"],
            "aligner": ["wmd", "wcd", "none", "none"],
        }
    )
    assert select_metrics(df) is None
    assert select_metrics(df, "bertscore") == ["bertscore"] and select_metrics(df, "sentsim") == [
        "sentsim[token_part=wmd]"
    ]
    assert select_metrics(df, "moverscore (wcd)") == ["moverscore (wcd)"]
    assert select_metrics(df, "moverscore", "wmd") == ["moverscore (wmd)"]
    assert select_metrics(df, aligner="wcd") == ["moverscore (wcd)"]
    assert select_metrics(df[df["aligner"] != "wcd"], "moverscore") == ["moverscore (wmd)"]  # one aligner ran
    # a name with several labels picks them all: one row per aligner, named by its label
    assert select_metrics(df, "moverscore") == ["moverscore (wmd)", "moverscore (wcd)"]
    with pytest.raises(UserError, match="did you mean 'moverscore'"):
        select_metrics(df, "moverscor")
    with pytest.raises(UserError, match="unknown aligner 'rwmd'"):
        select_metrics(df, aligner="rwmd")
    for command in ("compare", "report"):  # the CLI's flags
        extra = ["--candidate", "a", "--baseline", "b"] if command == "compare" else []
        args = build_parser().parse_args([command, "DIR", *extra, "--metric", "moverscore", "--aligner", "wmd"])
        assert (args.metric, args.aligner) == ("moverscore", "wmd")


def test_compare_and_report_take_the_metric_name(paper_run: Path, tmp_path: Path) -> None:
    run = RunData.open(paper_run)
    encoders = list(dict.fromkeys(run.cells[run.cells["metric"] == "bertscore"]["encoder"]))
    result = compare(run, encoders[1], encoders[0], "bertscore", n_resamples=20)
    assert {r["metric"] for r in result["rows"]} == {"bertscore"}
    copy = tmp_path / "run"
    shutil.copytree(paper_run, copy)
    write_report(copy, metric="sentbleu", n_resamples=20)
    trade = pd.read_csv(copy / "report" / "tradeoff.csv")
    assert set(trade["metric"]) == {"sentbleu"}  # a lexical baseline: in the trade-off table only
    assert pd.read_csv(copy / "report" / "relative.csv").empty


def test_compare_across_metrics_pairs_each_dataset_cell_of_the_two_metrics(
    paper_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A student's metric against its teacher's. Here BERTScore with the 1-layer cut vs
    sentBLEU: one row per dataset named "bertscore vs sentbleu", each side's quality SciPy's Pearson
    of that cell's own scores.csv, speed-up the ratio of the two cells' median times."""
    run = RunData.open(paper_run)
    cells = run.cells
    cut = list(dict.fromkeys(cells[cells["metric"] == "bertscore"]["encoder"]))[1]
    result = compare(run, cut, "none", candidate_metric="bertscore", baseline_metric="sentbleu", n_resamples=50)
    rows = {r["dataset"]: r for r in result["rows"]}
    assert set(rows) == set(cells["dataset"]) and {r["metric"] for r in rows.values()} == {"bertscore vs sentbleu"}
    for dataset, row in rows.items():
        side = {}
        for metric, encoder in (("bertscore", cut), ("sentbleu", "none")):
            cell = cells[
                (cells["metric"] == metric) & (cells["encoder"] == encoder) & (cells["dataset"] == dataset)
            ].iloc[0]
            scores = pd.read_csv(paper_run / "cells" / cell["cell_id"] / "scores.csv")
            side[metric] = (stats.pearsonr(scores["score"], scores["human"])[0], cell)
            assert row["n"] == len(scores)
        assert row["quality_candidate"] == pytest.approx(side["bertscore"][0], abs=1e-12)
        assert row["quality_baseline"] == pytest.approx(side["sentbleu"][0], abs=1e-12)
        b_ms, c_ms = side["sentbleu"][1]["ms_per_segment_repeats"], side["bertscore"][1]["ms_per_segment_repeats"]
        assert row["speedup"] == pytest.approx(float(np.median(b_ms) / np.median(c_ms)), rel=1e-12)
    # the same metric on both sides is the ordinary comparison
    same = compare(
        run,
        cut,
        list(dict.fromkeys(cells[cells["metric"] == "bertscore"]["encoder"]))[0],
        candidate_metric="bertscore",
        baseline_metric="bertscore",
        n_resamples=50,
    )
    assert {r["metric"] for r in same["rows"]} == {"bertscore"}
    with pytest.raises(UserError, match="--baseline-metric is missing"):
        compare(run, cut, "none", candidate_metric="bertscore")
    with pytest.raises(UserError, match="did you mean 'sentbleu'"):
        compare(run, cut, "none", candidate_metric="bertscore", baseline_metric="sentblue")
    assert (
        main(
            [
                "compare",
                str(paper_run),
                "--candidate",
                cut,
                "--baseline",
                "none",
                "--candidate-metric",
                "bertscore",
                "--baseline-metric",
                "sentbleu",
                "--resamples",
                "100",
            ]
        )
        == 0
    )
    assert "bertscore vs sentbleu" in capsys.readouterr().out


# ----------------------------------------------------------------------------- without results.sqlite


def committed_part(run: Path, dest: Path, as_folder: str = "reports/example") -> list[str]:
    """Copy what git would commit of run folder `run` (were it `as_folder`, by .gitignore) to `dest`."""
    files = sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file())
    asked = "".join(f"{as_folder}/{rel}\n" for rel in files)
    found = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO, input=asked, capture_output=True, text=True
    )
    assert found.returncode in (0, 1), found.stderr  # 1: nothing ignored
    ignored = set(found.stdout.split())
    kept = [rel for rel in files if f"{as_folder}/{rel}" not in ignored]
    for rel in kept:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(run / rel, dest / rel)
    return kept


def test_report_and_compare_from_what_git_keeps(
    paper_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No results.sqlite, no cells/ (both git-ignored: they hold the datasets' human scores): report
    and compare read report/cells.jsonl and report/metric_scores.csv, the human scores again from
    the datasets, and print the same numbers."""
    fresh = tmp_path / "fresh"
    kept = committed_part(paper_run, fresh)
    assert "results.sqlite" not in kept and not any(k.startswith("cells/") for k in kept)
    assert {"results.csv", "report/cells.jsonl", "report/metric_scores.csv"} <= set(kept)
    assert "human" not in (fresh / "report" / "metric_scores.csv").read_text(encoding="utf-8").splitlines()[0]
    assert isinstance(RunData.open(fresh).source, PublishedSource)
    store, published = RunData.open(paper_run), RunData.open(fresh)
    for cell_id in store.cells["cell_id"]:
        a, b = store.segments(cell_id), published.segments(cell_id)
        assert (
            np.array_equal(a.score, b.score) and np.array_equal(a.human, b.human) and list(a.seg_id) == list(b.seg_id)
        )
    cells = read_csv(paper_run / "results.csv")
    base = max((c for c in cells if c["metric"] == "bertscore"), key=lambda c: int(c["params"]))["encoder"]
    cand = min((c for c in cells if c["metric"] == "bertscore"), key=lambda c: int(c["params"]))["encoder"]
    printed = []
    for folder in (paper_run, fresh):
        assert main(["compare", str(folder), "--candidate", cand, "--baseline", base, "--metric", "bertscore"]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and "| bertscore | wmt16[:5] |" in printed[0]
    assert main(["report", str(fresh)]) == 0
    for name in ("tradeoff.csv", "relative.csv", "cells.jsonl", "metric_scores.csv"):
        assert (fresh / "report" / name).read_bytes() == (paper_run / "report" / name).read_bytes(), name
    assert not (fresh / "report" / "quantities.csv").exists()  # 2 encoders: no table to write
    assert "Read from report/" in (fresh / "report" / "index.html").read_text(encoding="utf-8")


def test_report_and_compare_from_cell_folders_without_the_store(paper_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(paper_run, copy, ignore=shutil.ignore_patterns("results.sqlite", "report"))
    run = RunData.open(copy)
    assert isinstance(run.source, CellFolderSource) and isinstance(RunData.open(paper_run).source, StoreSource)
    store = RunData.open(paper_run)
    assert list(run.cells["cell_id"]) == list(store.cells["cell_id"])  # results.csv's order
    for cell_id in store.cells["cell_id"]:
        a, b = store.segments(cell_id), run.segments(cell_id)
        assert np.array_equal(a.score, b.score) and np.array_equal(a.human, b.human)
    assert main(["report", str(copy)]) == 0
    assert pd.read_csv(copy / "report" / "tradeoff.csv").equals(pd.read_csv(paper_run / "report" / "tradeoff.csv"))


@pytest.mark.parametrize("folder", ["example", "similarity"])
def test_documented_commands_on_the_committed_example(
    folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docs' `nlgbench report reports/<folder>` and `nlgbench compare reports/<folder> ...` (results/)
    on a copy of exactly what git holds of the folder (no store, no cells/): compare prints the
    committed trade-off table's numbers, and the report regenerates that table."""
    listed = subprocess.run(
        ["git", "ls-files", f"reports/{folder}"], cwd=REPO, capture_output=True, text=True, check=True
    )
    files = listed.stdout.split()
    assert f"reports/{folder}/report/cells.jsonl" in files and f"reports/{folder}/report/metric_scores.csv" in files, (
        f"reports/{folder} must commit report/cells.jsonl and report/metric_scores.csv (`nlgbench report` writes them)"
    )
    example = tmp_path / folder
    for name in files:
        (example / Path(name).relative_to(f"reports/{folder}")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, example / Path(name).relative_to(f"reports/{folder}"))
    assert main(["report", str(example)]) == 0
    assert main(["compare", str(example), "--candidate", "all-MiniLM-L6-v2", "--baseline", "all-mpnet-base-v2"]) == 0
    printed = capsys.readouterr().out
    committed = pd.read_csv(REPO / f"reports/{folder}/report/tradeoff.csv")
    rows = committed[committed["encoder"] == "all-MiniLM-L6-v2"].to_dict("records")
    assert rows
    for row in rows:
        line = next(li for li in printed.splitlines() if li.startswith(f"| {row['metric']} | {row['dataset']} |"))
        assert (
            f"{100 * row['retained']:.1f}%" in line and f"{row['speedup']:.2f}x" in line
        )  # the committed table's numbers
        assert math.isfinite(row["p_bootstrap"])
    regenerated = pd.read_csv(example / "report" / "tradeoff.csv")
    pd.testing.assert_frame_equal(regenerated, committed, check_exact=False, rtol=1e-9)


# ----------------------------------------------------------------------------- tables and captions for a paper


def test_no_empty_quantities_table_is_written_and_the_page_says_why(paper_run: Path) -> None:
    """Two encoders (the tiny BERT and its 1-layer cut): no metric has the 3 encoders a correlation
    across encoders needs, so quantities.* are not written and index.html says why."""
    out = paper_run / "report"
    assert not [p.name for p in out.glob("quantities.*")]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "No table written (quantities.*): No matrix: no metric has 3 or more encoders" in page
    assert "\\IfFileExists{quantities.tex}" in (out / "preview.tex").read_text(encoding="utf-8")


def test_model_free_metrics_are_compared_rows_of_the_tradeoff_table(paper_run: Path) -> None:
    """sentBLEU has no model: no row of relative.* (it would read 100.0%, 1.00x against itself); in
    tradeoff.* one row per dataset in BERTScore's group, with its quality (Pearson of its segment
    scores, recomputed here with scipy) and interval, its median ms/segment (result.json's repeats),
    and compare's retained, speed-up and p against BERTScore's baseline (compare across metrics)."""
    out = paper_run / "report"
    assert {r["metric"] for r in read_csv(out / "relative.csv")} == {"bertscore"}
    assert "sentbleu" not in (out / "relative.md").read_text(encoding="utf-8")
    run = RunData.open(paper_run)
    trade = pd.read_csv(out / "tradeoff.csv")
    base = str(trade[trade["group"] == "bertscore"]["baseline"].iloc[0])
    lexical = trade[trade["metric"] == "sentbleu"].to_dict("records")
    assert len(lexical) == 3
    assert {(r["group"], r["encoder"], r["baseline_metric"], r["baseline"]) for r in lexical} == {
        ("bertscore", "none", "bertscore", base)
    }
    result = compare(run, "none", base, candidate_metric="sentbleu", baseline_metric="bertscore")
    by_dataset = {r["dataset"]: r for r in result["rows"]}
    cells = run.cells[run.cells["metric"] == "sentbleu"]
    for row in lexical:
        (cell_id,) = cells[cells["dataset"] == row["dataset"]]["cell_id"]
        seg = run.segments(cell_id)
        assert row["quality"] == pytest.approx(stats.pearsonr(seg.score, seg.human)[0], abs=1e-9)
        assert row["quality_ci_low"] < row["quality"] < row["quality_ci_high"]
        timing = run.results[cell_id].timing
        assert timing is not None
        assert row["ms_per_segment"] == pytest.approx(float(np.median(timing.ms_per_segment)), rel=1e-9)
        compared = by_dataset[row["dataset"]]
        assert row["retained"] == pytest.approx(compared["retained"]) and row["speedup"] == compared["speedup"]
        assert row["p_value"] == compared["p_value"] and math.isfinite(row["p_value"])
    md = (out / "tradeoff.md").read_text(encoding="utf-8")
    assert md.count("| sentBLEU |") == 3 and md.count("| no model |") == 3 and "lexical baseline" not in md
    tex = (out / "tradeoff.tex").read_text(encoding="utf-8")
    assert tex.count("\\multicolumn") == 3 and tex.count("\nsentBLEU & ") == 3


def test_a_cheap_metric_as_the_baseline_of_every_row(paper_run: Path, tmp_path: Path) -> None:
    """`--baseline sentbleu`: sentBLEU is each group's first row ('baseline') and every BERTScore
    encoder is compared with it; `--baseline bertscore:ENCODER` names one metric's encoder; a metric's
    unknown encoder is one line naming the known ones."""
    run = RunData.open(paper_run)
    encoders = list(dict.fromkeys(run.cells[run.cells["metric"] == "bertscore"]["encoder"]))
    assert main(["report", str(paper_run), "--baseline", "sentbleu", "--out", str(tmp_path / "cheap")]) == 0
    trade = pd.read_csv(tmp_path / "cheap" / "tradeoff.csv")
    assert set(trade["baseline_metric"]) == {"sentbleu"} and set(trade["baseline"]) == {"none"}
    firsts = trade.groupby("dataset", sort=False).head(1)
    assert set(firsts["metric"]) == {"sentbleu"} and firsts["p_value"].isna().all()
    rest = trade[trade["metric"] == "bertscore"]
    assert len(rest) == 3 * len(encoders) and rest["p_value"].notna().all() and (rest["speedup"] < 1).all()
    md = (tmp_path / "cheap" / "tradeoff.md").read_text(encoding="utf-8")
    assert md.count("| sentBLEU |") == 3 and md.count("| baseline |") == 3
    one = choose_baselines(with_quality(run, PEARSON), f"bertscore:{encoders[1]}")
    assert {r.encoder for r in one.values()} == {encoders[1]}
    with pytest.raises(UserError, match="encoder of bertscore"):
        choose_baselines(with_quality(run, PEARSON), "bertscore:no-such-encoder")


def test_a_metric_without_a_model_has_no_model_memory(paper_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sentBLEU: its model memory is blank in index.html's per-encoder table, its point is absent from
    the model-memory figures (the process peak keeps it), and compare's memory ratio against it reads
    'no model'."""
    page = (paper_run / "report" / "index.html").read_text(encoding="utf-8")
    table = page[page.index("<h2>Per encoder") :]
    row = next(r for r in table.split("<tr>") if r.startswith("<td class='t'>sentBLEU</td>"))
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    header = re.findall(r"<th>([^<]*)</th>", table[: table.index("</thead>")])
    assert cells[header.index("model memory MiB")] == "-" and cells[header.index("peak memory MiB")] != "-"
    svg = (paper_run / "report" / "memory_cpu_wmt16_5.svg").read_text(encoding="utf-8")
    assert "sentbleu" not in svg and "sentBLEU" not in svg
    assert "sentBLEU" in (paper_run / "report" / "peak_memory_cpu_wmt16_5.svg").read_text(encoding="utf-8")
    run = RunData.open(paper_run)
    base = str(run.cells[run.cells["metric"] == "bertscore"]["encoder"].iloc[0])
    args = ["compare", str(paper_run), "--candidate", "none", "--baseline", base, "--resamples", "200"]
    assert main([*args, "--candidate-metric", "sentbleu", "--baseline-metric", "bertscore"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("| no model |") == 3, printed


def test_report_out_and_figures_pick_the_folder_and_the_floats(
    paper_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out` writes the report there (DIR/report untouched); figures.tex sets the runtime figures
    by default, single-column `figure` floats, and `--figures` adds the memory ones (index.html shows
    every figure either way); a kind it does not know is one line."""
    before = (paper_run / "report" / "figures.tex").read_text(encoding="utf-8")
    assert main(["report", str(paper_run), "--out", str(tmp_path / "a"), "--format", "png"]) == 0
    tex = (tmp_path / "a" / "figures.tex").read_text(encoding="utf-8")
    assert tex.count("\\begin{figure}[tbp]") == 4 and "\\begin{figure*}" not in tex
    assert tex.count(INCLUDE + "{runtime_cpu_") == 4 and "{memory_cpu_" not in tex
    page = (tmp_path / "a" / "index.html").read_text(encoding="utf-8")
    assert page.count("<figure") == 12 and "`" not in page  # every figure; no raw backtick shown
    assert (paper_run / "report" / "figures.tex").read_text(encoding="utf-8") == before
    every = ["--figures", "runtime,memory,peak_memory"]
    assert main(["report", str(paper_run), "--out", str(tmp_path / "b"), *every]) == 0
    assert (tmp_path / "b" / "figures.tex").read_text(encoding="utf-8").count("\\begin{figure}") == 12
    assert main(["report", str(paper_run), "--out", str(tmp_path / "c"), "--figures", "speed"]) == 2
    assert "--figures takes a comma-separated list of runtime, memory, peak_memory" in capsys.readouterr().err


def test_the_repeats_spread_in_a_caption_is_over_the_plotted_points_only(paper_run: Path, tmp_path: Path) -> None:
    """A cell left out of the figure (its quality undefined) whose repeats lie 50x apart: the caption's
    spread is the plotted cells' largest, not that cell's."""
    run = RunData.open(paper_run)
    df = with_quality(run, PEARSON)
    df = df[~df["imported"]].copy()
    hidden = (df["metric"] == "sentbleu") & (df["dataset"] == "wmt16[:5]")
    df.loc[hidden, "quality"] = math.nan
    df["ms_per_segment_repeats"] = [
        [1.0, 50.0] if h else list(r) for h, r in zip(hidden, df["ms_per_segment_repeats"], strict=True)
    ]
    files = write_figures(
        df,
        tmp_path,
        PEARSON,
        choose_baselines(df, None),
        QualityIntervals(run, PEARSON, 20),
        FigureOptions(formats=("png",)),
    )
    (caption,) = [f.caption for f in files if f.name == "runtime_cpu_wmt16_5"]
    plotted = df[(df["dataset"] == "wmt16[:5]") & ~hidden]
    worst = max(max(r) / min(r) - 1 for r in plotted["ms_per_segment_repeats"])
    assert "4900" not in caption
    assert f"{100 * worst:.1f}% apart" in caption or "Horizontal bars" in caption, caption


def test_captions_are_short_and_the_method_stays_in_a_comment(paper_run: Path) -> None:
    """Each caption of figures.tex (the runtime figures by default) is under 50 words of a paper: no
    command syntax (backtick, slice, tool name, 'ms/seg ('), the data named as the trade-off table
    names it, the correlation by its published name; the trade-off table's caption fits three lines
    of a column (150 printed characters: about 50 a line at 9 pt); the full method text is a LaTeX comment above each
    float, and in index.html."""
    tex = (paper_run / "report" / "figures.tex").read_text(encoding="utf-8")
    captions = [
        line.strip()[len("\\caption{") : -1] for line in tex.splitlines() if line.strip().startswith("\\caption{")
    ]
    assert len(captions) == 4  # runtime x (3 datasets + the mean over the two DA ones)
    table = (paper_run / "report" / "tradeoff.tex").read_text(encoding="utf-8")
    table_captions = re.findall(r"\\caption\[\{[^}]*\}\]\{(.*)\}\n", table)
    assert len(table_captions) == 3
    for caption in captions + table_captions:
        assert len(caption.split()) < 50, caption
        for tool in ("`", "[:", "nlgbench", "ms/seg (", "\\texttt"):
            assert tool not in caption, (tool, caption)
        assert "one human score" not in caption and "human dimension" not in caption
    assert sum("WMT16, first 5 segments per language pair" in c for c in captions + table_captions) == 2
    assert all(c.startswith("Pearson correlation with human") for c in captions)
    for caption in table_captions:
        printed = re.sub(r"\\[a-z]+|[{}$\\]", "", caption)
        assert len(printed) <= 150, printed
    assert tex.count("% How fig:") == 4
    comments = " ".join(line[2:] for line in tex.splitlines() if line.startswith("% "))
    assert "the pearson correlation of the metric's scores with the dataset's human scores" in comments
    page = html.unescape((paper_run / "report" / "index.html").read_text(encoding="utf-8"))
    assert page.count("<summary>how it was made</summary>") == 12
