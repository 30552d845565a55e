"""Own data beyond one reference and one human score: several references, several human
dimensions with missing values, documents, string seg_ids; one results.csv row per dimension, the
long correlations.csv, and `--human DIM` in report and compare.

Scores enter through `import-scores` (no model needed), so every figure can be checked against SciPy
on the very numbers written."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from helpers import cli_subprocess, read_csv, write_jsonl
from nlgbench.core.spec import parse_spec
from nlgbench.data.items import HUMAN
from nlgbench.data.loaders import load_dataset
from nlgbench.foundations.errors import UserError
from nlgbench.runs.importscores import import_scores
from nlgbench.runs.rundata import RunData

pytestmark = pytest.mark.integration

DATA = Path(__file__).parent / "data" / "summarisation.jsonl"
DIMENSIONS = ["coherence", "consistency", "fluency", "relevance"]


def items_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_committed_example_file_is_what_its_generator_writes(tmp_path: Path) -> None:
    """tests/data/summarisation.jsonl is reproducible from tests/data/make_summarisation.py."""
    script = tmp_path / "make_summarisation.py"
    shutil.copy(DATA.with_name("make_summarisation.py"), script)
    import runpy

    runpy.run_path(str(script), run_name="__main__")
    assert (tmp_path / "summarisation.jsonl").read_bytes() == DATA.read_bytes()


def test_loader_reads_references_dimensions_documents_and_string_ids() -> None:
    raw = items_of(DATA)
    ds = load_dataset(path=DATA)
    assert ds.human_dims == DIMENSIONS and ds.has_docs and ds.max_references == 3
    assert [it.key for it in ds.items] == sorted((r["lp"], r["seg_id"], r["system"]) for r in raw)
    by_key = {(r["lp"], r["seg_id"], r["system"]): r for r in raw}
    for it in ds.items:
        r = by_key[it.key]
        assert it.references == tuple(r["references"]) and it.reference == r["references"][0]
        assert it.doc_id == r["doc_id"] and it.hypothesis == r["hypothesis"]
        assert it.humans == {d: v for d, v in r["human"].items() if v is not None}
        assert it.human == r["human"]["coherence"]  # the first dimension is primary
    assert ds.missing_human("fluency") == sum(r["human"]["fluency"] is None for r in raw) == 1
    relevance = load_dataset(path=DATA, human="relevance")
    assert relevance.human_dims == ["relevance"]
    assert [it.human for it in relevance.items] == [by_key[it.key]["human"]["relevance"] for it in relevance.items]
    with pytest.raises(
        UserError, match="dataset 'summarisation': unknown human dimension 'relevancy'; did you mean 'relevance'"
    ):
        load_dataset(path=DATA, human="relevancy")


def test_tsv_reference_and_human_columns(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_text(
        "lp\tseg_id\tdoc_id\treference\treference_2\thypothesis\thuman.adequacy\thuman.fluency\n"
        "en\tb\td1\tr one\tr two\th one\t4\t\n"
        "en\ta\td1\tr three\t\th two\t2.5\t3\n",
        encoding="utf-8",
    )
    ds = load_dataset(path=path)
    assert [it.seg_id for it in ds.items] == ["a", "b"]  # text ids, text order
    a, b = ds.items
    assert a.references == ("r three",) and b.references == ("r one", "r two")
    assert a.humans == {"adequacy": 2.5, "fluency": 3.0} and b.humans == {"adequacy": 4.0}
    assert ds.human_dims == ["adequacy", "fluency"] and ds.missing_human("fluency") == 1
    both = tmp_path / "both.tsv"
    both.write_text("lp\tseg_id\treference\thypothesis\thuman\thuman.a\nen\t1\tr\th\t1\t2\n", encoding="utf-8")
    with pytest.raises(UserError, match="either one 'human' column or 'human.DIM' columns"):
        load_dataset(path=both)


def test_mixed_integer_and_text_seg_ids_become_text(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [{"lp": "en", "seg_id": s, "reference": "r", "hypothesis": "h", "human": 1.0} for s in (10, "9", "x")]
    write_jsonl(path, rows)
    assert [it.seg_id for it in load_dataset(path=path).items] == ["10", "9", "x"]
    path.write_text(
        "".join(json.dumps(dict(r, seg_id=s)) + "\n" for r, s in zip(rows, (10, "9", 2), strict=True)), encoding="utf-8"
    )
    assert [it.seg_id for it in load_dataset(path=path).items] == [2, 9, 10]  # all integers: numeric order


def test_spec_human_selection() -> None:
    spec = parse_spec(
        {
            "datasets": [{"path": str(DATA)}, {"path": str(DATA), "human": "fluency"}],
            "human": "relevance",
            "metrics": [{"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}],
        }
    )
    assert [d.human for d in spec.datasets] == ["relevance", "fluency"]
    spec = parse_spec(
        {
            "datasets": [{"name": "wmt16", "human": "all"}],
            "metrics": [{"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}],
        }
    )
    assert spec.datasets[0].human is None and "human" not in spec.datasets[0].to_dict()  # ids of old cells kept
    with pytest.raises(UserError, match=r"datasets\[0\]\.human must be a human dimension's name or 'all'"):
        parse_spec({"datasets": [{"path": str(DATA), "human": 3}], "metrics": [{"metric": "bertscore"}]})


def write_scores_file(path: Path, scores: dict[tuple[str, str, str], float]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "system", "score"])
        w.writerows([*key, repr(value)] for key, value in scores.items())
    return path


def imported_run(tmp_path: Path) -> tuple[Path, dict, dict]:
    """Two 'encoders' of one metric imported over the example file: scores from its human scores plus noise."""
    rng = np.random.default_rng(3)
    raw = items_of(DATA)
    sets = {}
    for encoder, noise in (("good", 0.3), ("poor", 1.5)):
        sets[encoder] = {
            (r["lp"], r["seg_id"], r["system"]): float(
                np.mean([v for v in r["human"].values() if v is not None]) + rng.normal(0, noise)
            )
            for r in raw
        }
        import_scores(
            write_scores_file(tmp_path / f"{encoder}.csv", sets[encoder]),
            str(DATA),
            "mymetric",
            encoder,
            tmp_path / "run",
        )
    return tmp_path / "run", sets, {(r["lp"], r["seg_id"], r["system"]): r for r in raw}


def test_one_results_row_per_dimension_and_every_figure_named(tmp_path: Path) -> None:
    run, sets, raw = imported_run(tmp_path)
    rows = read_csv(run / "results.csv")
    assert [(r["encoder"], r["human_dim"]) for r in rows] == [(e, d) for e in ("good", "poor") for d in DIMENSIONS]
    for row in rows:
        dim = row["human_dim"]
        keys = [k for k in sets[row["encoder"]] if raw[k]["human"][dim] is not None]
        x = np.array([sets[row["encoder"]][k] for k in keys])
        h = np.array([raw[k]["human"][dim] for k in keys])
        assert int(row["n_missing_human"]) == len(raw) - len(keys)
        assert float(row["pearson_global"]) == pytest.approx(stats.pearsonr(x, h)[0], abs=1e-12)
        assert float(row["kendall_global"]) == pytest.approx(stats.kendalltau(x, h)[0], abs=1e-12)
    long = read_csv(run / "correlations.csv")
    assert long and {"level", "grouping", "method", "human_dim"} <= set(long[0])
    pooled = {
        (r["encoder"], r["human_dim"], r["method"]): float(r["value"])
        for r in long
        if r["level"] == "global" and r["value"] != ""
    }
    for row in rows:
        assert pooled[(row["encoder"], row["human_dim"], "pearson")] == pytest.approx(
            float(row["pearson_global"]), abs=1e-12
        )


def test_human_option_picks_the_dimension_in_compare_and_report(tmp_path: Path) -> None:
    from nlgbench.reporting.compare import compare
    from nlgbench.reporting.quality import QualityOptions
    from nlgbench.reporting.report import write_report

    run, sets, raw = imported_run(tmp_path)
    fluency = RunData.open(run, "fluency")
    seg = fluency.segments(fluency.cells["cell_id"].iloc[0])
    assert len(seg) == len(raw) - 1 and set(fluency.cells["human_dim"]) == {"fluency"}
    keys = [k for k in sets["good"] if raw[k]["human"]["fluency"] is not None]
    result = compare(fluency, "good", "poor", options=QualityOptions("pearson", "pooled"), n_resamples=50)
    (row,) = result["rows"]
    x = [sets["good"][k] for k in keys]
    h = [raw[k]["human"]["fluency"] for k in keys]
    assert row["quality_candidate"] == pytest.approx(stats.pearsonr(x, h)[0], abs=1e-12)
    assert result["human_dims"] == ["fluency"]
    with pytest.raises(UserError, match="unknown human dimension 'fluent'; did you mean 'fluency'"):
        RunData.open(run, "fluent")
    index = write_report(run, options=QualityOptions("pearson", "pooled"), human="relevance")
    assert "(relevance)" in index.read_text(encoding="utf-8")


def test_single_score_data_keeps_one_row_named_human(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [
        {"lp": "de-en", "seg_id": i + 1, "reference": "r", "hypothesis": "h", "human": float(i % 4)} for i in range(8)
    ]
    write_jsonl(path, rows)
    scores = {("de-en", str(i + 1), ""): float((i * 3) % 5) for i in range(8)}
    import_scores(write_scores_file(tmp_path / "s.csv", scores), str(path), "m", "e", tmp_path / "run")
    (row,) = read_csv(tmp_path / "run" / "results.csv")
    assert row["human_dim"] == HUMAN and row["n_missing_human"] == "0"
    x, h = [scores[("de-en", str(i + 1), "")] for i in range(8)], [r["human"] for r in rows]
    assert math.isclose(float(row["pearson_global"]), stats.pearsonr(x, h)[0], abs_tol=1e-12)


def test_import_scores_accepts_a_cells_own_scores_csv(tmp_path: Path) -> None:
    """A cell's scores.csv (with human, doc_id, human.DIM and output columns) imports as is."""
    run, sets, raw = imported_run(tmp_path)
    rows = read_csv(run / "results.csv")
    own = run / "cells" / rows[0]["cell_id"] / "scores.csv"
    header = own.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert (
        header[:5] == ["lp", "seg_id", "system", "score", "human"] and "doc_id" in header and "human.fluency" in header
    )
    again = import_scores(own, str(DATA), "mymetric", "copy", tmp_path / "run2")
    assert again.correlation is not None and again.correlation["pearson_pooled"] == pytest.approx(
        float(rows[0]["pearson_global"]), abs=1e-12
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("lp,seg_id,system,score,scroe\nen,doc-00-M0,M0,1.0,2\n", encoding="utf-8")
    with pytest.raises(UserError, match="unknown column\\(s\\) scroe"):
        import_scores(bad, str(DATA), "mymetric", "typo", tmp_path / "run3")


# ----------------------------------------------------------------------------- end to end through the CLI

IMPORTERS = Path(__file__).parent / "data" / "importers"


def cli(*args: str, cwd: Path) -> str:
    """The real CLI in a fresh process (as a user runs it); its stdout, or a failure showing stderr."""
    proc = cli_subprocess(*args, cwd=cwd, env={"HF_HUB_OFFLINE": "1"}, timeout=900)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    return proc.stdout


def end_to_end_spec(folder: Path, data: Path, model: Path) -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(
        f"name: e2e\ndatasets: [{{path: {data}}}]\nrepeats: 1\nwarmup: 0\nbatch_size: 4\nmetrics:\n"
        f"  - metric: bertscore\n    encoders: [{model}, {{name: {model}, num_layers: 1}}]\n"
        "  - metric: rouge1\n",
        encoding="utf-8",
    )
    return spec


def test_summeval_layout_imports_and_runs_sweep_report_compare(tmp_path: Path) -> None:
    """End to end: a SummEval-layout file -> import -> sweep -> report -> compare, four
    dimensions, summary (item) and system level; figures checked against SciPy on scores.csv."""
    from tiny import make_tiny_bert

    data = tmp_path / "summeval.jsonl"
    cli(
        "datasets",
        "import",
        "summeval",
        str(IMPORTERS / "summeval" / "model_annotations.aligned.paired.jsonl"),
        "--out",
        str(data),
        cwd=tmp_path,
    )
    texts = [t for r in items_of(data) for t in (r["hypothesis"], *r["references"])]
    model = make_tiny_bert(tmp_path / "tiny", texts, num_layers=2)
    cli("run", str(end_to_end_spec(tmp_path, data, model)), "--out", str(tmp_path / "run"), cwd=tmp_path)
    rows = read_csv(tmp_path / "run" / "results.csv")
    assert {r["status"] for r in rows} == {"ok"} and len(rows) == 3 * len(DIMENSIONS)
    assert [r["human_dim"] for r in rows[:4]] == DIMENSIONS
    raw = {(r["lp"], r["seg_id"], r["system"]): r for r in items_of(data)}
    for row in rows:
        scores = read_csv(tmp_path / "run" / "cells" / row["cell_id"] / "scores.csv")
        dim = row["human_dim"]
        kept = [s for s in scores if raw[(s["lp"], s["seg_id"], s["system"])]["human"][dim] is not None]
        x = np.array([float(s["score"]) for s in kept])
        h = np.array([raw[(s["lp"], s["seg_id"], s["system"])]["human"][dim] for s in kept])
        docs = sorted({s["doc_id"] for s in kept})
        per_doc = [
            stats.pearsonr(x[idx], h[idx])[0]
            for d in docs
            for idx in [[i for i, s in enumerate(kept) if s["doc_id"] == d]]
            if len(idx) >= 3 and np.ptp(x[idx]) > 0 and np.ptp(h[idx]) > 0
        ]
        if np.ptp(x) == 0:  # this fixture's summaries all overlap the same: ROUGE-1 is constant, nothing defined
            assert (
                row["pearson_item"] == row["pearson_system"] == ""
                and "metric scores constant" in row["correlation_note"]
            )
            continue
        assert float(row["pearson_item"]) == pytest.approx(float(np.mean(per_doc)), abs=1e-12)
        systems = sorted({s["system"] for s in kept})
        sx = [
            math.fsum(x[i] for i, s in enumerate(kept) if s["system"] == m) / sum(s["system"] == m for s in kept)
            for m in systems
        ]
        sh = [
            math.fsum(h[i] for i, s in enumerate(kept) if s["system"] == m) / sum(s["system"] == m for s in kept)
            for m in systems
        ]
        assert float(row["pearson_system"]) == pytest.approx(stats.pearsonr(sx, sh)[0], abs=1e-12)
    cli("report", str(tmp_path / "run"), "--level", "item", "--human", "relevance", cwd=tmp_path)
    index = (tmp_path / "run" / "report" / "index.html").read_text(encoding="utf-8")
    assert "pearson (item, by doc_id)" in index and "(relevance)" in index
    out = cli(
        "compare",
        str(tmp_path / "run"),
        "--candidate",
        f"{model}[num_layers=1]",
        "--baseline",
        str(model),
        "--level",
        "system",
        "--correlation",
        "kendall",
        "--human",
        "coherence",
        cwd=tmp_path,
    )
    assert "kendall (system, by lp) with human dimension coherence" in out and "| bertscore | summeval |" in out


def test_wmt_da_folder_imports_and_runs_sweep_report_compare(tmp_path: Path) -> None:
    """End to end: a WMT DA folder layout -> import -> sweep -> report -> compare (one human score)."""
    from tiny import make_tiny_bert

    data = tmp_path / "da.jsonl"
    cli("datasets", "import", "wmt-da", str(IMPORTERS / "DAseg-wmt99"), "--out", str(data), cwd=tmp_path)
    texts = [t for r in items_of(data) for t in (r["hypothesis"], *r["references"])]
    model = make_tiny_bert(tmp_path / "tiny", texts, num_layers=2)
    cli("run", str(end_to_end_spec(tmp_path, data, model)), "--out", str(tmp_path / "run"), cwd=tmp_path)
    rows = read_csv(tmp_path / "run" / "results.csv")
    assert {r["status"] for r in rows} == {"ok"} and {r["human_dim"] for r in rows} == {HUMAN} and len(rows) == 3
    for row in rows:
        scores = read_csv(tmp_path / "run" / "cells" / row["cell_id"] / "scores.csv")
        x, h = [float(s["score"]) for s in scores], [float(s["human"]) for s in scores]
        assert float(row["pearson_global"]) == pytest.approx(stats.pearsonr(x, h)[0], abs=1e-12)
    cli("report", str(tmp_path / "run"), cwd=tmp_path)
    out = cli(
        "compare",
        str(tmp_path / "run"),
        "--candidate",
        f"{model}[num_layers=1]",
        "--baseline",
        str(model),
        cwd=tmp_path,
    )
    assert "pearson (global)" in out and "| bertscore | da |" in out
