"""The report's index.html says what the numbers came from (versions, run dates,
machine, threads, batch sizes; the sweep spec's name as its title), shows every figure at a readable
size with a click to its full-size file and a caption, and Table 4 (quantities.*) gives each r with
its n and 95% interval, leaving out quantities measured with nothing else. Checked on a regenerated
copy of the committed reports/example, on a real tiny sweep with a store, and in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

matplotlib.use("Agg")

from nlgbench.cli import main
from nlgbench.core.result import CellResult
from nlgbench.data.loaders import load_dataset
from nlgbench.reporting.figures.drawing import FigureFile
from nlgbench.reporting.quantities_table import quantity_correlations, quantity_csv, quantity_note, quantity_rows
from nlgbench.reporting.runinfo import run_info
from nlgbench.reporting.webpage import MAX_HEIGHT_PX, MAX_WIDTH_PX, figure_html, png_inches, svg_inches
from nlgbench.runs.provenance import PUBLISHED_RUN, Provenance
from nlgbench.statistics.correlation import fisher_interval
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "reports" / "example"


def run_facts(page: str) -> dict[str, str]:
    """The page's run facts (its <dl class='run'>), label -> text."""
    block = page.split("<dl class='run'>", 1)[1].split("</dl>", 1)[0]
    return {html.unescape(k): html.unescape(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block)}


def title(page: str) -> str:
    return html.unescape(re.search(r"<h1>(.*?)</h1>", page).group(1))  # type: ignore[union-attr]


def published_cells(folder: Path) -> list[dict]:
    lines = (folder / "report" / "cells.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed reports/example, its report written again from report/ alone."""
    copy = tmp_path_factory.mktemp("html") / "example"
    shutil.copytree(EXAMPLE, copy)
    assert main(["report", str(copy)]) == 0
    return copy


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep with a store: BERTScore with a tiny random BERT and three cuts of it (four
    encoders: enough for a Fisher interval), on WMT16, 4 segments per language pair."""
    root = tmp_path_factory.mktemp("sweep")
    items = load_dataset("wmt16", max_segments=4).items
    model = make_tiny_bert(root / "tiny", [t for it in items for t in (it.reference, it.hypothesis)], num_layers=4)
    spec = {
        "name": "html-sweep",
        "datasets": [{"name": "wmt16", "max_segments": 4}],
        "batch_size": 8,
        "repeats": 2,
        "warmup": 1,
        "threads": 1,
        "metrics": [
            {
                "metric": "bertscore",
                "encoders": [str(model), *({"name": str(model), "num_layers": k} for k in (3, 2, 1))],
            }
        ],
    }
    (root / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    assert main(["run", str(root / "spec.yaml"), "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    return out


# ----------------------------------------------------------------------------- the run's facts


def test_example_page_names_versions_machine_threads_and_batch_sizes(example: Path) -> None:
    page = (example / "report" / "index.html").read_text(encoding="utf-8")
    facts = run_facts(page)
    cells = published_cells(example)
    envs = [c["environment"] for c in cells]
    # from the cells' recorded environment, not from the machine writing the report
    for key, name in (("nlgbench", "nlgbench"), ("torch", "torch"), ("transformers", "transformers"), ("pot", "POT")):
        (version,) = {e[key] for e in envs}
        assert f"{name} {version}" in facts["versions"], (name, facts["versions"])
    (cpu,) = {e["cpu_model"] for e in envs}
    (cores,) = {e["cpu_cores_logical"] for e in envs}
    assert facts["machine"].startswith(f"{cpu}, {cores} logical cores") and "no GPU" in facts["machine"]
    (threads,) = {e["torch_threads"] for e in envs}
    assert facts["threads"].startswith(f"{threads} torch threads")
    sizes = sorted({c["config"]["batch_size"] for c in cells})
    assert facts["batch size"] == "cpu: " + ", ".join(map(str, sizes))
    (repeats,) = {c["config"]["repeats"] for c in cells}
    assert facts["timing"].startswith(f"{repeats} timed repeats")
    # the committed folder was published with its run's facts (report/run.json): spec name and dates
    published = json.loads((example / "report" / PUBLISHED_RUN).read_text(encoding="utf-8"))
    assert published["spec_names"] == ["quickstart"] and title(page) == "nlgbench report: quickstart"
    assert facts["spec"].startswith("quickstart")
    assert facts["run dates"].startswith("2026-")


def test_a_folder_without_its_runs_facts_says_so(example: Path, tmp_path: Path) -> None:
    """A published folder without report/run.json records neither the spec's name nor when its cells
    ran: the page says so and invents nothing."""
    copy = tmp_path / "example"
    shutil.copytree(example, copy)
    (copy / "report" / PUBLISHED_RUN).unlink()
    assert main(["report", str(copy)]) == 0
    page = (copy / "report" / "index.html").read_text(encoding="utf-8")
    facts = run_facts(page)
    assert title(page) == f"nlgbench report: {copy.name}"
    assert facts["spec"].startswith("not recorded") and "run folder's name" in facts["spec"]
    assert facts["run dates"].startswith("not recorded")
    assert not (copy / "report" / PUBLISHED_RUN).exists()  # nothing invented


def test_facts_come_from_the_cells_not_from_this_machine() -> None:
    """Versions, machine and threads as each cell recorded them; cells that disagree are counted."""
    first, second, third = [CellResult.from_json(json.dumps(c)) for c in published_cells(EXAMPLE)]
    env = {"torch": "9.9.9+test", "transformers": "8.8.8", "pot": "0.0.1", "nlgbench": "7.7.7", "python": "3.99"}
    gpu = {"gpu": "Test GPU", "gpu_memory_mb": 81920, "cuda": "13.0", "cpu_model": "Test CPU", "cpu_cores_logical": 64}
    results = [
        replace(first, environment={**(first.environment or {}), **env}),
        replace(second, environment={**(second.environment or {}), **env, **gpu}),
        third,
    ]
    info = run_info(Path("somewhere"), results, Provenance(), "report/")
    facts = dict(info.facts)
    assert "torch 9.9.9+test (2 cells); 2" in facts["versions"] and "POT 0.0.1 (2 cells)" in facts["versions"]
    assert (
        "Test CPU, 64 logical cores" in facts["machine"]
        and "GPU Test GPU (80 GiB, CUDA 13.0) (1 cell)" in facts["machine"]
    )
    assert info.title == "somewhere" and "report/" in info.title_note


def test_spec_name_and_dates_from_the_store_and_from_a_fresh_clone(sweep: Path, tmp_path: Path) -> None:
    page = (sweep / "report" / "index.html").read_text(encoding="utf-8")
    facts = run_facts(page)
    assert title(page) == "nlgbench report: html-sweep" and "<title>nlgbench report: html-sweep</title>" in page
    assert facts["spec"] == "html-sweep"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d( to (\d{4}-\d\d-\d\d )?\d\d:\d\d)? UTC", facts["run dates"])
    assert facts["batch size"] == "cpu: 8" and facts["threads"] == "1 torch thread (spec threads: 1)"
    published = json.loads((sweep / "report" / PUBLISHED_RUN).read_text(encoding="utf-8"))
    assert published["spec_names"] == ["html-sweep"] and len(published["recorded_at"]) == 4
    # what a fresh clone has (no store, no cells/): the same title and dates, from report/run.json
    fresh = tmp_path / "fresh"
    shutil.copytree(sweep, fresh, ignore=shutil.ignore_patterns("results.sqlite", "cells"))
    assert main(["report", str(fresh)]) == 0
    again = (fresh / "report" / "index.html").read_text(encoding="utf-8")
    assert title(again) == title(page) and run_facts(again) == facts


# ----------------------------------------------------------------------------- figures


def test_every_figure_links_its_full_size_file_and_has_a_caption(example: Path) -> None:
    page = (example / "report" / "index.html").read_text(encoding="utf-8")
    figures = re.findall(r"<figure style='width:(\d+)px'>(.*?)</figure>", page, flags=re.S)
    pngs = sorted(p.name for p in (example / "report").glob("*.png"))
    assert len(figures) == len(pngs) > 0
    for width, body in figures:
        target, src = re.search(r"<a href='([^']+)'[^>]*><img src='([^']+)'", body).groups()  # type: ignore[union-attr]
        assert src in pngs and target == src.replace(".png", ".pdf") and (example / "report" / target).is_file()
        box = re.search(r"width='(\d+)' height='(\d+)'", body)
        assert (
            box is not None and int(box.group(1)) == int(width) <= MAX_WIDTH_PX and int(box.group(2)) <= MAX_HEIGHT_PX
        )
        caption = html.unescape(re.search(r"<figcaption>(.*?) \(<a", body).group(1))  # type: ignore[union-attr]
        assert len(caption) > 20
        links = re.findall(r"<figcaption>.*?</figcaption>", body)[0]
        assert "PDF</a>" in links and "SVG</a>" in links


def test_figure_size_read_from_the_files_and_a_caption_shown(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.3, 2.5), dpi=150)
    ax.plot([0, 1], [0, 1])
    for ext in ("png", "svg", "pdf"):
        fig.savefig(tmp_path / f"f.{ext}", format=ext, dpi=150)
    plt.close(fig)
    w, h, px = png_inches((tmp_path / "f.png").read_bytes())  # type: ignore[misc]
    assert (round(w, 2), round(h, 2), px) == (3.3, 2.5, round(3.3 * 150))
    assert [round(v, 2) for v in svg_inches((tmp_path / "f.svg").read_text())] == [3.3, 2.5]  # type: ignore[union-attr]
    paths = [tmp_path / "f.png", tmp_path / "f.pdf", tmp_path / "f.svg"]
    shown = figure_html(figure_file(paths, note="bars: 95%"))
    assert "width='396' height='300'" in shown  # 3.3 in at 120 px per inch
    assert "<a href='f.pdf'" in shown and "Runtime vs quality. Bars: 95%" in shown
    assert "What is plotted &amp; why. (" in figure_html(figure_file(paths, caption="What is plotted & why."))
    vector_only = figure_html(figure_file([tmp_path / "f.pdf"]))
    assert "<img" not in vector_only and "f.pdf" in vector_only
    svg_shown = figure_html(figure_file([tmp_path / "f.svg", tmp_path / "f.pdf"]))
    assert "<img src='f.svg'" in svg_shown and "<a href='f.pdf'" in svg_shown


def figure_file(paths: list[Path], note: str = "", caption: str = "") -> FigureFile:
    """What figure_html reads of a FigureFile (its title, files, note and caption)."""
    return SimpleNamespace(title="Runtime vs quality", paths=paths, note=note, caption=caption)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- Table 4: n and intervals


def quantity_frame(
    n_encoders: int, metrics: tuple[str, ...] = ("m1",), gpu: bool = False, seed: int = 0
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for metric in metrics:
        for e in range(n_encoders):
            for device in ("cpu", "cuda") if gpu else ("cpu",):
                rows.append(
                    {
                        "metric": metric,
                        "encoder": f"e{e}",
                        "device": device,
                        "ms_per_segment": rng.uniform(1, 9),
                        "rss_growth_mb": rng.uniform(100, 900),
                        "peak_rss_mb": rng.uniform(900, 1900),
                        "cuda_peak_allocated_mb": rng.uniform(100, 900) if device == "cuda" else np.nan,
                        "cuda_peak_reserved_mb": rng.uniform(100, 900) if device == "cuda" else np.nan,
                        "params": rng.uniform(1e6, 9e6),
                        "disk_mb": rng.uniform(10, 90),
                        "quality": rng.uniform(0, 1),
                    }
                )
    return pd.DataFrame(rows)


def test_quantities_show_n_and_the_fisher_interval() -> None:
    df = quantity_frame(6)
    matrix = quantity_correlations(df)
    header, rows = quantity_rows(matrix)
    # an all-'-' column (GPU time in a CPU-only run) is left out, and the note says so
    assert "GPU time" not in header and [r[0] for r in rows] == header[1:]
    assert "Left out, measured with no other quantity: GPU time." in quantity_note(matrix, "q")
    cpu = dict(zip(header, next(r for r in rows if r[0] == "CPU time"), strict=True))
    got = stats.pearsonr(df["ms_per_segment"], df["quality"])  # independent: SciPy's r and Fisher interval
    low, high = got.confidence_interval(0.95)
    assert cpu["quality"] == f"{got.statistic:.2f} [{low:.2f}, {high:.2f}] (n=6)"
    table = quantity_csv(matrix)
    row = table[(table["quantity"] == "CPU time") & (table["other"] == "quality")].iloc[0]
    assert row["r"] == pytest.approx(got.statistic) and row["n"] == 6 and row["metrics"] == 1
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert "GPU time" not in set(table["quantity"]) | set(table["other"])
    # GPU cells: GPU time is measured, so it stays
    with_gpu = quantity_correlations(quantity_frame(6, gpu=True))
    assert "GPU time" in quantity_rows(with_gpu)[0] and not with_gpu.unmeasured()


def test_three_encoders_never_show_a_bare_r() -> None:
    matrix = quantity_correlations(quantity_frame(3))
    header, rows = quantity_rows(matrix)
    entries = [c for r in rows for k, c in enumerate(r[1:], start=1) if header[k] != r[0]]
    assert entries and all(re.fullmatch(r"-?\d\.\d\d \[n/a: n<4\] \(n=3\)", c) for c in entries), entries
    assert set(quantity_csv(matrix)["note"]) == {"no interval: n < 4"}
    assert all(np.isnan(fisher_interval(0.99, 3)))  # no interval from 3 points


def test_averaged_metrics_take_the_fewest_encoders() -> None:
    """Metrics share their encoders: the interval of the mean r is one metric's, from the fewest."""
    df = pd.concat([quantity_frame(5, ("m1",), seed=1), quantity_frame(4, ("m2",), seed=2)])
    matrix = quantity_correlations(df)
    r = np.mean([np.corrcoef(g["ms_per_segment"], g["quality"])[0, 1] for _, g in df.groupby("metric")])
    assert matrix.r.loc["CPU time", "quality"] == pytest.approx(r) and matrix.n.loc["CPU time", "quality"] == 4
    assert matrix.interval("CPU time", "quality") == pytest.approx(fisher_interval(r, 4))


def test_sweep_quantities_in_every_format(sweep: Path) -> None:
    out = sweep / "report"
    table = pd.read_csv(out / "quantities.csv")
    assert list(table.columns) == ["quantity", "other", "r", "ci_low", "ci_high", "n", "metrics", "note"]
    assert "GPU time" not in set(table["quantity"]) | set(table["other"])
    shown = table.dropna(subset=["r"])
    assert len(shown) and (shown["n"] == 4).all() and shown["ci_low"].notna().all()
    md = (out / "quantities.md").read_text(encoding="utf-8")
    assert "GPU time" not in md.splitlines()[0] and re.search(r"\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\] \(n=4\)", md)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "GPU ms/seg" not in page and "<th>GPU time</th>" not in page  # empty columns left out
    assert re.search(r"<td>-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\] \(n=4\)</td>", page)


# ----------------------------------------------------------------------------- in a browser


def test_page_in_headless_chromium(example: Path, tmp_path: Path) -> None:
    """The page as a reader sees it: images load at a readable size (no figure wider than
    MAX_WIDTH_PX or taller than MAX_HEIGHT_PX), each inside a link to its PDF, the run facts shown;
    a screenshot is left in the test's folder for a look."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "Debian's chromium and chromium-driver are needed (scripts/setup.sh installs them)"
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        browser.get((example / "report" / "index.html").as_uri())
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.clientWidth, i.clientHeight,"
            " i.parentElement.tagName, i.parentElement.getAttribute('href')]);"
        )
        assert len(images) == len(list((example / "report").glob("*.png")))
        for complete, natural, width, height, parent, href in images:
            assert complete and natural > 100, images
            assert 300 <= width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, images
            assert parent == "A" and href.endswith(".pdf") and (example / "report" / href).is_file()
        facts = browser.execute_script(
            "return Array.from(document.querySelectorAll('dl.run dt')).map(d => d.textContent);"
        )
        assert {"spec", "run dates", "versions", "machine", "threads", "batch size"} <= set(facts)
        browser.save_screenshot(str(tmp_path / "index.png"))
    finally:
        browser.quit()


@pytest.mark.system
def test_point_tooltips_and_sortable_tables_in_chromium(example: Path, tmp_path: Path) -> None:
    """Each plotted point has a tooltip, in the SVG file (`<title>` in its group) and over the PNG on the
    page, naming its encoder, its time per segment (the median of its cell's repeats), its quality (the
    Pearson r of its scores, recomputed with scipy) and interval, and its cell id; the hovered spot is the
    tooltip's own circle (nothing covers it). A click on a table's header sorts its rows by that column,
    a second click the other way."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from nlgbench.runs.rundata import RunData

    run = RunData.open(example)
    expected = {}
    for cell_id in run.cells["cell_id"]:
        seg, timing = run.segments(cell_id), run.results[cell_id].timing
        assert timing is not None
        expected[cell_id] = (
            f"{float(np.median(timing.ms_per_segment)):.3g} ms",
            f"{stats.pearsonr(seg.score, seg.human)[0]:.3f}",
        )
    svg = (example / "report" / "runtime_cpu_wmt16_100.svg").read_text(encoding="utf-8")
    titled = re.findall(r'<g id="cell-([0-9a-f]{12})"><title>([^<]*)</title>', svg)
    assert sorted(c for c, _ in titled) == sorted(expected)
    for cell_id, text in titled:
        ms, quality = expected[cell_id]
        assert f"time per segment: {ms}" in html.unescape(text) and f"quality {quality} [95% " in text
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "Debian's chromium and chromium-driver are needed (scripts/setup.sh installs them)"
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    browser = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        browser.get((example / "report" / "index.html").as_uri())
        spots = browser.execute_script(
            "return Array.from(document.querySelectorAll('svg.points circle')).map(c => { c.scrollIntoView();"
            " const b = c.getBoundingClientRect(); const hit = document.elementFromPoint(b.x + b.width / 2,"
            " b.y + b.height / 2); return [c.querySelector('title').textContent, hit === c]; });"
        )
        assert len(spots) == 9  # 3 encoders in each of the 3 figures
        assert all(hit for _, hit in spots), spots
        runtime = [text for text, _ in spots if "time per segment" in text]
        assert len(runtime) == 3
        for text in runtime:
            cell_id = text.rsplit("cell ", 1)[1]
            ms, quality = expected[cell_id]
            assert f"time per segment: {ms}" in text and f"quality {quality} [95% " in text
        assert {text.splitlines()[0] for text in runtime} == {
            "all-mpnet-base-v2 (BERTScore)",  # the metric's published name
            "all-MiniLM-L6-v2 (BERTScore)",
            "all-MiniLM-L6-v2 L3 (BERTScore)",
        }
        table = browser.find_elements(By.TAG_NAME, "table")[0]  # the trade-off table
        header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
        column = header.index("ms/seg")

        def values() -> list[float]:
            cells = table.find_elements(By.CSS_SELECTOR, f"tbody tr td:nth-child({column + 1})")
            return [float(td.text) for td in cells]

        before = values()
        th = table.find_elements(By.CSS_SELECTOR, "thead th")[column]
        browser.execute_script("arguments[0].scrollIntoView(); arguments[0].click();", th)
        assert values() == sorted(before) and th.get_attribute("aria-sort") == "ascending"
        browser.execute_script("arguments[0].click();", th)
        assert values() == sorted(before, reverse=True) and th.get_attribute("aria-sort") == "descending"
    finally:
        browser.quit()
