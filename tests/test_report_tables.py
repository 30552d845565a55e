"""The report's tables without a sweep's numbers: the Pareto front and quantity correlations by hand,
every table naming its human dimension, level, method, unit and test (a labelled run), import-scores
reproducing a known correlation, and numbers printed readably.
"""

from __future__ import annotations

import csv
import html
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.foundations import fmt
from nlgbench.reporting.compare import compare
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.quantities_table import quantity_correlations, quantity_note, quantity_rows
from nlgbench.reporting.relative_table import pareto_front
from nlgbench.reporting.report import write_report
from nlgbench.runs.importscores import import_scores as import_scores_file
from nlgbench.runs.rundata import RunData

pytestmark = pytest.mark.integration

SUMMARISATION = Path(__file__).parent / "data" / "summarisation.jsonl"  # 8 documents x 4 systems, 4 dimensions


def test_pareto_front_by_hand() -> None:
    # (time, quality): B dominates D (faster and better); A, B, C are each best at their speed
    times = [1.0, 2.0, 4.0, 3.0, float("nan")]
    quals = [0.5, 0.7, 0.9, 0.6, 1.0]
    assert pareto_front(times, quals) == [0, 1, 2]


def test_quantity_correlations_average_per_metric_matrices() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for metric, n_encoders in (("m1", 4), ("m2", 5), ("m3", 2)):  # m3: too few encoders for a matrix
        for e in range(n_encoders):
            rows.append(
                {
                    "metric": metric,
                    "encoder": f"e{e}",
                    "device": "cpu",
                    "ms_per_segment": rng.uniform(1, 9),
                    "rss_growth_mb": rng.uniform(100, 900),
                    "peak_rss_mb": rng.uniform(900, 1900),
                    "cuda_peak_allocated_mb": np.nan,
                    "cuda_peak_reserved_mb": np.nan,
                    "params": rng.uniform(1e6, 9e6),
                    "disk_mb": rng.uniform(10, 90),
                    "quality": rng.uniform(0, 1),
                }
            )
    df = pd.DataFrame(rows)
    got = quantity_correlations(df)
    assert got.n_metrics == 2
    columns = ["ms_per_segment", "rss_growth_mb", "params", "disk_mb", "quality"]  # model memory: RSS growth
    want = np.mean([np.corrcoef(df[df["metric"] == m][columns].to_numpy().T) for m in ("m1", "m2")], axis=0)
    order = ["CPU time", "model memory", "parameters", "disk", "quality"]
    assert np.allclose(got.r.loc[order, order].to_numpy(), want)
    # the encoders behind each entry: the fewest of the metrics averaged (they share encoders)
    assert (got.n.loc[order, order].to_numpy() == 4).all() and (got.metrics.loc[order, order].to_numpy() == 2).all()
    assert got.r.loc["GPU time"].isna().all() and (got.n.loc["GPU time"] == 0).all()  # not measured: no number
    header, text = quantity_rows(got)
    cpu = dict(zip(header, next(r for r in text if r[0] == "CPU time"), strict=True))
    low, high = got.interval("CPU time", "quality")
    assert (
        cpu["CPU time"] == ""
        and "GPU time" not in cpu  # measured with nothing: left out
        and cpu["quality"] == f"{got.r.loc['CPU time', 'quality']:.2f} [{low:.2f}, {high:.2f}] (n=4)"
    )
    # fewer than 3 encoders per metric: no matrix at all, said in words, not 1.00s
    few = quantity_correlations(df[df["metric"] == "m3"])
    assert few.n_metrics == 0 and few.r.isna().all().all()
    assert all(c in ("", "-") for r in quantity_rows(few)[1] for c in r[1:])
    assert "No matrix" in quantity_note(few)
    # a quantity constant across the encoders (one checkpoint, fewer layers): n/a, not '-'
    same_disk = df[df["metric"] == "m1"].assign(disk_mb=50.0)
    flat = quantity_correlations(same_disk)
    disk = dict(zip(quantity_rows(flat)[0], next(r for r in quantity_rows(flat)[1] if r[0] == "disk"), strict=True))
    assert disk["quality"] == "n/a" and "GPU time" not in disk


# ----------------------------------------------------------------------------- labels


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two 'encoders' of one metric imported over tests/data/summarisation.jsonl (documents, systems and
    four human dimensions): human relevance plus noise, so every level has a defined quality."""
    root = tmp_path_factory.mktemp("labels")
    rows = [json.loads(line) for line in SUMMARISATION.read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(1)
    for encoder, noise in (("big", 0.5), ("small", 1.5)):
        path = root / f"{encoder}.csv"
        with path.open("w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["lp", "seg_id", "system", "score"])
            for r in rows:
                w.writerow([r["lp"], r["seg_id"], r["system"], repr(r["human"]["relevance"] + noise * rng.normal())])
        import_scores_file(path, str(SUMMARISATION), "mymetric", encoder, root / "run")
    return root / "run"


LABEL_CASES = [
    # (report's argv, the API's options, human dimension, level, method, label, unit resampled, test)
    (
        ["--human", "relevance", "--correlation", "kendall", "--level", "system", "--resample", "both"],
        None,
        "relevance",
        "system",
        "kendall",
        "kendall (system, by lp)",
        "systems and documents (boot-both), per language pair",
        "paired bootstrap",
    ),
    (
        ["--level", "item"],
        None,
        "coherence",  # each cell's first dimension
        "item",
        "pearson",
        "pearson (item, by doc_id)",
        "documents, stratified by language pair",
        "paired bootstrap",
    ),
    (
        None,
        QualityOptions(method="spearman", level="segment", test="permutation"),
        "fluency",
        "segment",
        "spearman",
        "spearman (segment, by lp)",
        "segments, stratified by language pair",
        "paired permutation (perm-both)",
    ),
]


@pytest.mark.parametrize(
    ("argv", "options", "human", "level", "method", "label", "unit", "test"),
    LABEL_CASES,
    ids=["system-kendall-boot-both", "item-pearson-first-dimension", "segment-spearman-permutation"],
)
def test_every_table_names_its_human_dimension_level_method_unit_and_test(
    labelled_run: Path,
    tmp_path: Path,
    argv: list[str] | None,
    options: QualityOptions | None,
    human: str,
    level: str,
    method: str,
    label: str,
    unit: str,
    test: str,
) -> None:
    """Tradeoff, relative and quantities in every format (md note, tex % lines, csv
    columns, index.html) say which human dimension, level and method their quality is, what the
    bootstrap resampled and which test gave p; the CLI passes --human, --level and --resample through."""
    run = tmp_path / "run"
    shutil.copytree(labelled_run, run)
    if options is None:
        assert main(["report", str(run), *(argv or [])]) == 0
    else:
        write_report(run, options=options, human=human, n_resamples=200, seed=3)
    n, seed = (1000, 0) if options is None else (200, 3)
    out = run / "report"
    quality = f"quality = {label}, against human dimension {human}"
    # trade-off: the note under the table in Markdown, LaTeX and HTML, the columns in CSV
    trade_note = (out / "tradeoff.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    title = f"quality = {label[:1].upper()}{label[1:]}, against human dimension {human}"  # Kendall, Pearson
    assert trade_note.startswith(f"{title}, with its 95% bootstrap percentile interval; retained = quality / the")
    assert f"p = two-sided {test} test of equal quality" in trade_note
    assert f"bootstrap resampling {unit} ({n} resamples, seed {seed}; the compare command's numbers)" in trade_note
    assert "`" not in trade_note and "nlgbench" not in trade_note
    assert "resamples of segments" not in trade_note
    if options is not None:
        assert f"{n} permutations, seed {seed}" in trade_note
    tex = (out / "tradeoff.tex").read_text(encoding="utf-8")
    assert f"% {trade_note}\n" in tex and "\\begin{table*}" in tex  # the note, then the floats (tests/test_latex.py)
    trade = pd.read_csv(out / "tradeoff.csv")
    assert len(trade) == 2 and set(trade["human_dim"]) == {human} and set(trade["level"]) == {level}
    assert set(trade["method"]) == {method} and set(trade["test"]) == {test} and set(trade["resampling"]) == {unit}
    result = compare(
        RunData.open(run, human),
        "small",
        "big",
        options=options or QualityOptions(method=method, level=level, resample="both" if "both" in unit else "auto"),
        n_resamples=n,
        seed=seed,
    )
    (row,) = result["rows"]
    (small,) = trade[trade["encoder"] == "small"].to_dict("records")
    assert small["p_value"] == row["p_value"] and small["p_bootstrap"] == row["p_bootstrap"]
    md = html.unescape((out / "tradeoff.md").read_text(encoding="utf-8"))  # a p below 2/resamples: '&lt; 0.01'
    p_shown = next(li for li in md.splitlines() if "| small |" in li)
    assert p_shown.rstrip(" |").endswith(fmt.p_value(row["p_value"], n, missing=fmt.UNDEFINED))
    # relative: the same facts (no interval or test of its own: it points to the trade-off table's)
    rel_note = (out / "relative.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert rel_note.startswith(f"{quality}; retained = quality / the baseline encoder's quality")
    assert rel_note.endswith("Intervals and tests: the trade-off table.") and "mean rows" not in rel_note
    assert not (out / "relative.tex").exists()
    rel = pd.read_csv(out / "relative.csv")
    assert set(rel["human_dim"]) == {human} and set(rel["level"]) == {level} and set(rel["method"]) == {method}
    # quantities (two encoders: no table written, the page says why): which quality it would correlate
    assert not (out / "quantities.md").exists() and not (out / "quantities.tex").exists()
    q_note = (
        next(
            line
            for line in html.unescape((out / "index.html").read_text(encoding="utf-8")).splitlines()
            if line.startswith("<p>No table written (quantities.*): ")
        )
        .removeprefix("<p>No table written (quantities.*): ")
        .removesuffix("</p>")
    )
    assert f"The quality column(s): {label}, against human dimension {human}, per encoder the mean" in q_note
    # index.html: the first paragraph and every table's note
    page = html.unescape((out / "index.html").read_text(encoding="utf-8"))
    summary = page.split("<p>", 1)[1].split("</p>", 1)[0]
    assert f"quality = {label} with human judgments ({human})" in summary
    assert f"95% percentile bootstrap intervals (figures, trade-off table) resampling {unit} ({n} resamples" in summary
    assert f"p against the baseline (trade-off table): {test} test" in summary
    assert all(f"<p>{note}" in page for note in (trade_note, rel_note)) and q_note in page


def known_correlation_file(path: Path, r: float, max_segments: int) -> tuple[Path, list]:
    """Scores whose pooled Pearson with the WMT16 humans is exactly r (an orthogonal-noise construction)."""
    items = load_dataset("wmt16", max_segments=max_segments).items
    h = np.array([it.human for it in items])
    hc = (h - h.mean()) / np.linalg.norm(h - h.mean())
    noise = np.random.default_rng(0).normal(size=len(h))
    noise -= noise.mean()
    noise -= (noise @ hc) * hc
    noise /= np.linalg.norm(noise)
    score = 3.0 + 2.0 * (r * hc + math.sqrt(1 - r * r) * noise)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "system", "score"])
        for it, s in zip(items, score, strict=True):
            w.writerow([it.lp, it.seg_id, it.system, repr(float(s))])
    return path, items


def import_scores(path: Path, out: Path, max_segments: int, metric: str, encoder: str) -> int:
    """`nlgbench import-scores PATH --dataset wmt16 --max-segments N --metric M --encoder E --out OUT`."""
    argv = ["import-scores", str(path), "--dataset", "wmt16", "--max-segments", str(max_segments)]
    return main([*argv, "--metric", metric, "--encoder", encoder, "--out", str(out)])


def test_import_scores_reproduces_a_known_correlation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, items = known_correlation_file(tmp_path / "scores.csv", 0.6, 20)
    out = tmp_path / "run"
    assert import_scores(path, out, 20, "comet", "external-model") == 0
    (row,) = read_csv(out / "results.csv")
    assert float(row["pearson_global"]) == pytest.approx(0.6, abs=1e-12)  # float64 over 120 values: ~1e-13
    assert row["n_segments"] == str(len(items)) and row["status"] == "ok" and row["ms_per_segment_median"] == ""
    # a second import into the same folder sits beside it, and the report runs on imported cells alone
    path2, _ = known_correlation_file(tmp_path / "scores2.csv", 0.3, 20)
    assert import_scores(path2, out, 20, "comet", "other-model") == 0
    assert main(["report", str(out), "--baseline", "external-model"]) == 0
    rel = pd.read_csv(out / "report" / "relative.csv")
    (row,) = rel[rel["encoder"] == "other-model"].to_dict("records")  # one dataset: its row, no 'mean' row
    assert row["retained"] == pytest.approx(0.5, abs=1e-12) and math.isnan(row["speedup"])  # float64: ~1e-13
    capsys.readouterr()


@pytest.mark.parametrize(
    "content, message",
    [
        ("lp,seg_id,score\nde-en,1,0.5\n", "missing column(s) system"),
        ("lp,seg_id,system,score,extra\nde-en,1,,0.5,1\n", "unknown column(s) extra"),
        ("lp,seg_id,system,score\nde-en,x,,0.5\n", "1 key(s) not in wmt16[:2]: (de-en, x, -)"),  # text ids are ids
        ("lp,seg_id,system,score\nde-en,,,0.5\n", "empty seg_id"),
        ("lp,seg_id,system,score\nde-en,1,,high\n", "score 'high' is not a number"),
        ("lp,seg_id,system,score\nde-en,1,,1_5\n", "score '1_5' is not a number (plain decimal digits"),  # float(): 15
        ("lp,seg_id,system,score\nde-en,1,,\u0661\n", "score '\u0661' is not a number"),  # float(): 1
        ("lp,seg_id,system,score\nde-en,1,,1e308\nde-en,2,,-1e308\n", "score '1e308' is beyond ±1e+100"),
        ("lp,seg_id,system,score\nde-en,1,,-Infinity\n", "score '-Infinity' is not a finite number"),
        ("lp,seg_id,system,score\nde-en,1,,0.5\nde-en,1,,0.6\n", "duplicate key (de-en, 1, -)"),
        ("lp,seg_id,system,score\nde-en,1,,0.5\nxx-en,9,,0.6\n", "1 key(s) not in wmt16[:2]: (xx-en, 9, -)"),
    ],
)
def test_import_scores_bad_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "s.csv"
    path.write_text(content, encoding="utf-8")
    code = import_scores(path, tmp_path / "out", 2, "m", "e")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_import_scores_names_missing_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, items = known_correlation_file(tmp_path / "scores.csv", 0.5, 2)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # drop the last item
    assert import_scores(path, tmp_path / "out", 2, "m", "e") == 2
    err = capsys.readouterr().err
    last = items[-1]
    assert f"1 item(s) of wmt16[:2] missing from the file: ({last.lp}, {last.seg_id}, -)" in err


def test_numbers_print_readably() -> None:
    from nlgbench.foundations import fmt

    assert fmt.p_value(0.0371) == "0.037"
    assert fmt.p_value(2.14e-5) == "2.1e-05"
    assert fmt.p_value(0.0, 1000) == "< 0.002"  # no resample crossed 0: the bootstrap cannot say more
    assert fmt.p_value(float("nan")) == "-" and fmt.p_value(None) == "-"
    assert fmt.number(0.12345) == "0.123" and fmt.number(np.float64(2.0), 1) == "2.0" and fmt.number(math.inf) == "-"
    assert fmt.number("text") == "text"
    assert fmt.percent(0.9534) == "95.3%" and fmt.percent(math.nan) == "-"
    assert fmt.times(2.5) == "2.50x" and fmt.times(math.nan) == "-"
    # undefined (cannot be computed) reads differently from unknown (not measured)
    assert fmt.number(math.nan, missing=fmt.UNDEFINED) == "n/a" and fmt.number(None) == "-"
    assert fmt.percent(None, missing=fmt.UNDEFINED) == "n/a" and fmt.p_value(math.nan, missing=fmt.UNDEFINED) == "n/a"
    assert fmt.signed(0.0123) == "+0.012" and fmt.signed(-0.3) == "-0.300" and fmt.signed(math.nan) == "-"
