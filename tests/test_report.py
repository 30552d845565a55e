"""report and compare end to end on a real (tiny-model) sweep, numbers checked against independent
computations from the run's own files; index.html opened in Chromium.
"""

from __future__ import annotations

import html
import json
import os
import resource
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.reporting.figures.drawing import build_figures
from nlgbench.reporting.figures.style import FigureOptions
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.relative_table import QualityIntervals, choose_baselines, with_quality
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.significance import williams_test
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

SUMMARISATION = Path(__file__).parent / "data" / "summarisation.jsonl"  # 8 documents x 4 systems, 4 dimensions


def cell_scores(run: Path, cell_id: str) -> tuple[np.ndarray, np.ndarray]:
    rows = read_csv(run / "cells" / cell_id / "scores.csv")
    return np.array([float(r["score"]) for r in rows]), np.array([float(r["human"]) for r in rows])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real three-encoder BERTScore sweep (a tiny random BERT and two cuts of it) on WMT16, 8 per lp."""
    root = tmp_path_factory.mktemp("report")
    items = load_dataset("wmt16", max_segments=8).items
    model = make_tiny_bert(root / "tiny", [t for it in items for t in (it.reference, it.hypothesis)], num_layers=4)
    spec = {
        "name": "report-test",
        "datasets": [{"name": "wmt16", "max_segments": 8}],
        "batch_size": 8,
        "repeats": 3,
        "threads": 1,
        "metrics": [
            {
                "metric": "bertscore",
                "encoders": [str(model), {"name": str(model), "num_layers": 2}, {"name": str(model), "num_layers": 1}],
            }
        ],
    }
    (root / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    assert main(["run", str(root / "spec.yaml"), "--out", str(out)]) == 0
    return out


def test_report_files_and_relative_table(run_dir: Path) -> None:
    assert main(["report", str(run_dir)]) == 0
    out = run_dir / "report"
    for name in (
        "index.html",
        "runtime_cpu_wmt16_8.png",
        "memory_cpu_wmt16_8.png",
        "relative.md",
        "relative.csv",
        "quantities.md",
        "quantities.tex",
        "quantities.csv",
        "tradeoff.md",
        "tradeoff.tex",
        "tradeoff.csv",
        "cells.jsonl",
        "metric_scores.csv",
    ):
        assert (out / name).stat().st_size > 0, name
    cells = read_csv(run_dir / "results.csv")
    base = max(cells, key=lambda r: int(r["params"]))  # default baseline: the most parameters (the 4-layer model)
    assert "num_layers" not in base["encoder"]
    rel = pd.read_csv(out / "relative.csv")
    assert set(rel["baseline"]) == {base["encoder"]}
    assert len(rel) == len(cells) and set(rel["dataset"]) == {"wmt16[:8]"}  # one dataset: no 'mean' rows repeating it
    bs, bh = cell_scores(run_dir, base["cell_id"])
    for r in cells:
        s, h = cell_scores(run_dir, r["cell_id"])
        (row,) = rel[(rel["encoder"] == r["encoder"]) & (rel["dataset"] == r["dataset"])].to_dict("records")
        assert row["quality"] == pytest.approx(stats.pearsonr(s, h)[0], abs=1e-12)
        assert row["retained"] == pytest.approx(stats.pearsonr(s, h)[0] / stats.pearsonr(bs, bh)[0], abs=1e-12)
        b_ms, c_ms = float(base["ms_per_segment_median"]), float(r["ms_per_segment_median"])
        # results.csv keeps 4 decimals of ms (<= 5e-5 off each), the report exact medians: relative <= 5e-5 (1/b + 1/c)
        assert row["speedup"] == pytest.approx(b_ms / c_ms, rel=1.01 * 5e-5 * (1 / b_ms + 1 / c_ms))
    assert not (out / "relative.tex").exists()  # the trade-off table is the paper's float


def test_figures_say_what_their_bars_resample(run_dir: Path) -> None:
    """Each figure's caption (index.html, figures.tex) names the unit the bars'
    bootstrap resampled, with the resamples and the seed; its title says what is plotted only."""
    import matplotlib.pyplot as plt

    assert main(["report", str(run_dir)]) == 0
    bars = "95% percentile bootstrap interval of the quality, resampling segments, stratified by language pair; "
    run = RunData.open(run_dir)
    options = QualityOptions(level="segment")
    df = with_quality(run, options)
    titled = FigureOptions(titles=True)
    figures = list(
        build_figures(df, options, choose_baselines(df, None), QualityIntervals(run, options, 50, 7), titled)
    )
    assert len(figures) == 3  # runtime, model memory, peak memory
    for drawn in figures:
        suptitle = " ".join(drawn.figure._suptitle.get_text().split())  # type: ignore[attr-defined]  # wrapped
        assert suptitle == drawn.title and "bootstrap" not in suptitle
        plt.close(drawn.figure)
    page = html.unescape((run_dir / "report" / "index.html").read_text(encoding="utf-8"))
    tex = (run_dir / "report" / "figures.tex").read_text(encoding="utf-8")
    assert page.count(f"{bars}1000 resamples, seed 0.") == 3
    assert tex.count(f"% Vertical bars: {bars}1000 resamples, seed 0.") == 1  # figures.tex: the runtime figure
    assert tex.count("Bars: 95\\% bootstrap intervals.") == 1  # its caption: the unit is in the comment


def test_report_errors_are_one_line(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    assert main(["report", str(run_dir), "--baseline", "no-such-encoder"]) == 2
    assert main(["report", str(run_dir), "--correlation", "pearsn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("nlgbench: error: ") for line in err)
    assert "did you mean 'pearson'" in err[3]


def test_report_leaves_no_figure_open(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` closes each figure once written, and also when writing one fails (a file over the size
    limit, as under `ulimit -f`: one line, exit 2): a process that reports again and again (the API, a
    test session) gathers no open figures."""
    import matplotlib.pyplot as plt

    plt.close("all")
    run = Path(shutil.copytree(run_dir, tmp_path / "run"))
    assert main(["report", str(run)]) == 0
    assert plt.get_fignums() == []
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, hard))  # Python ignores SIGXFSZ: the write gets EFBIG
    try:
        code = main(["report", str(run)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert code == 2 and "file too large" in capsys.readouterr().err
    assert plt.get_fignums() == []


def test_compare_numbers_match_direct_computations(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells = read_csv(run_dir / "results.csv")
    base = max(cells, key=lambda r: int(r["params"]))
    cand = min(cells, key=lambda r: int(r["params"]))
    assert main(["compare", str(run_dir), "--candidate", cand["encoder"], "--baseline", base["encoder"], "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = result["rows"]
    cs, h = cell_scores(run_dir, cand["cell_id"])
    bs, _ = cell_scores(run_dir, base["cell_id"])
    r_c, r_b = stats.pearsonr(cs, h)[0], stats.pearsonr(bs, h)[0]
    assert row["delta"] == pytest.approx(r_c - r_b, abs=1e-12)
    assert row["delta_ci"][0] <= row["delta"] <= row["delta_ci"][1]
    assert row["p_williams"] == pytest.approx(williams_test(r_c, r_b, stats.pearsonr(cs, bs)[0], len(h))[1], abs=1e-12)
    assert 0 <= row["p_bootstrap"] <= 1
    b_rep = json.loads((run_dir / "cells" / base["cell_id"] / "result.json").read_text())["timing"]["ms_per_segment"]
    c_rep = json.loads((run_dir / "cells" / cand["cell_id"] / "result.json").read_text())["timing"]["ms_per_segment"]
    ratios = [b / c for b in b_rep for c in c_rep]
    # one speed-up definition: the ratio of the medians, the range over all repeat pairs
    assert row["speedup"] == pytest.approx(float(np.median(b_rep)) / float(np.median(c_rep)), rel=1e-12)
    assert row["speedup_range"] == [min(ratios), max(ratios)]
    # same machine, same libraries (tiny cells on a busy test machine may vary over 5%: that warning may come)
    assert [w for w in result["warnings"] if "timing varies" not in w] == []
    assert (
        main(
            [
                "compare",
                str(run_dir),
                "--candidate",
                cand["encoder"],
                "--baseline",
                base["encoder"],
                "--correlation",
                "kendall",
                "--level",
                "lp_mean",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "retained" in text and "kendall (segment, by lp)" in text and "speed-up" in text
    assert main(["compare", str(run_dir), "--candidate", "nope", "--baseline", base["encoder"]]) == 2
    assert "unknown encoder 'nope'" in capsys.readouterr().err


def test_compare_tests_at_the_level_compared(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Segment level: the bootstrap resamples segments within each lp, Williams is per lp over its 8
    segments; --test permutation names its test; each row says what it resampled and how many."""
    cells = read_csv(run_dir / "results.csv")
    base = max(cells, key=lambda r: int(r["params"]))
    cand = min(cells, key=lambda r: int(r["params"]))
    argv = ["compare", str(run_dir), "--candidate", cand["encoder"], "--baseline", base["encoder"], "--json"]
    assert main([*argv, "--level", "segment"]) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = result["rows"]
    assert (result["test"], row["test"]) == ("paired bootstrap", "paired bootstrap")
    assert row["resampling"] == result["resampling"] == "segments, stratified by language pair"
    assert row["n_units"] == 48 and row["williams_test"] == "Williams (Pearson r over segments, per language pair)"
    cs, h = cell_scores(run_dir, cand["cell_id"])
    bs, _ = cell_scores(run_dir, base["cell_id"])
    lps = np.array([r["lp"] for r in read_csv(run_dir / "cells" / cand["cell_id"] / "scores.csv")])
    assert [g["group"] for g in row["williams_by_group"]] == list(dict.fromkeys(lps.tolist()))
    for g in row["williams_by_group"]:
        m = lps == g["group"]
        r_c, r_b, r_cb = stats.pearsonr(cs[m], h[m])[0], stats.pearsonr(bs[m], h[m])[0], stats.pearsonr(cs[m], bs[m])[0]
        assert g["n"] == 8 and g["p"] == pytest.approx(williams_test(r_c, r_b, r_cb, 8)[1], abs=1e-12)
    assert row["p_williams"] is None  # six pairs (NaN, null in JSON): the row points to the per-pair tests
    assert main([*argv, "--test", "permutation", "--resamples", "200"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["test"] == "paired permutation (perm-both)" and row["p_value"] == row["p_permutation"]
    assert 1 / 201 <= row["p_permutation"] <= 1
    assert row["williams_n"] == 48  # global level: Williams over the pooled segments
    assert main([*argv[:-1], "--level", "segment"]) == 0
    text = capsys.readouterr().out
    assert "Williams (Pearson r over segments, per language pair)" in text and "[bootstrap: 48 segments]" in text


def test_index_html_renders_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    """Open the report in a real headless Chromium: every image loads, every table has its rows."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "Debian's chromium and chromium-driver are needed (scripts/setup.sh installs them)"
    index = run_dir / "report" / "index.html"
    if not index.exists():
        assert main(["report", str(run_dir)]) == 0
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        browser.get(index.as_uri())
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);"
        )
        assert len(images) == 3  # runtime, model memory and peak memory on cpu
        assert all(complete and width > 100 for _, complete, width in images), images
        rows = browser.execute_script(
            "return Array.from(document.querySelectorAll('table')).map(t => t.querySelectorAll('tbody tr').length);"
        )
        tradeoff = pd.read_csv(run_dir / "report" / "tradeoff.csv")
        relative = pd.read_csv(run_dir / "report" / "relative.csv")
        # trade-off, relative, per encoder, quantities (GPU time left out), then one signature
        # per measured cell
        assert rows == [len(tradeoff), len(relative), 3, 5, 3] and len(tradeoff) == 3
        first = browser.execute_script(
            "return document.querySelectorAll('table')[1].querySelector('tbody tr td:nth-child(2)').textContent;"
        )
        assert first == relative["encoder"].iloc[0]
        # every figure links its vector versions, which exist
        links = browser.execute_script("return Array.from(document.querySelectorAll('figcaption a')).map(a => a.href);")
        assert len(links) == 6 and all(Path(link.removeprefix("file://")).stat().st_size > 0 for link in links)
    finally:
        browser.quit()
