"""The runner end to end: isolated cells, output contract, resume, failures, kill-and-resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.runs.csvfiles import CSV_COLUMNS

pytestmark = pytest.mark.integration

REQUIRED_FILLED = [c for c in CSV_COLUMNS if c != "error"]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    items = load_dataset("wmt16", max_segments=8).items
    return tiny_bert([t for it in items for t in (it.reference, it.hypothesis)])


def write_spec(path: Path, encoders: list, max_segments: int = 8, repeats: int = 2) -> Path:
    spec = {
        "name": "test",
        "datasets": [{"name": "wmt16", "max_segments": max_segments}],
        "batch_size": 4,
        "repeats": repeats,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "options": {"idf": True}, "encoders": encoders}],
    }
    path.write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML
    return path


def check_correlations_from_scores(out: Path, row: dict[str, str]) -> None:
    """results.csv's pearson_segment (mean over lps), pearson_global and kendall_global equal SciPy's on scores.csv."""
    scores = read_csv(out / "cells" / row["cell_id"] / "scores.csv")
    s = np.array([float(r["score"]) for r in scores])
    h = np.array([float(r["human"]) for r in scores])
    lps = np.array([r["lp"] for r in scores])
    per_lp = [stats.pearsonr(s[lps == lp], h[lps == lp])[0] for lp in sorted(set(lps))]
    # float64 on both sides from the same exact (repr) scores: sums of n <= 600 terms in another order, ~n u = 7e-14
    assert float(row["pearson_segment"]) == pytest.approx(float(np.mean(per_lp)), abs=1e-12)
    assert float(row["pearson_global"]) == pytest.approx(stats.pearsonr(s, h)[0], abs=1e-12)
    assert float(row["kendall_global"]) == pytest.approx(stats.kendalltau(s, h)[0], abs=1e-12)


def test_sweep_output_contract_and_resume(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "spec.yaml", [str(tiny_dir), {"name": str(tiny_dir), "num_layers": 2}])
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    rows = read_csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        for col in REQUIRED_FILLED:
            assert row[col] != "", f"{col} empty"
        assert row["error"] == ""
        assert int(row["n_segments"]) == 48 and row["n_repeats"] == "2"
        check_correlations_from_scores(out, row)
        result = json.loads((out / "cells" / row["cell_id"] / "result.json").read_text())
        assert len(result["timing"]["repeat_s"]) == 2
        assert result["repeat_agreement"]["agree"] is True
        assert {"cpu_model", "torch", "transformers", "pot", "nlgbench", "git_commit", "torch_threads"} <= set(
            result["environment"]
        )
        assert result["environment"]["torch_threads"] == 1
        scores = read_csv(out / "cells" / row["cell_id"] / "scores.csv")
        assert list(scores[0])[:5] == ["lp", "seg_id", "system", "score", "human"]
        assert {"precision", "recall", "f1"} <= set(scores[0])
        assert [r["score"] for r in scores] == [r["f1"] for r in scores]
    assert int(rows[1]["params"]) < int(rows[0]["params"])
    first_env = json.loads((out / "cells" / rows[0]["cell_id"] / "result.json").read_text())["environment"]
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM segment_scores").fetchone()[0] == 96
        assert db.execute("SELECT COUNT(*) FROM measurements WHERE name = 'repeat_s'").fetchone()[0] == 4
        # the run's environment: per device its cells ran on, as their worker measured it
        assert [json.loads(e) for (e,) in db.execute("SELECT environment_json FROM runs")] == [{"cpu": first_env}]

    # resume: nothing reruns; --force reruns
    capsys.readouterr()
    assert main(["run", str(spec), "--out", str(out)]) == 0
    log = capsys.readouterr().out
    assert log.count("skipped") == 2 and ": ok in " not in log
    assert len(read_csv(out / "results.csv")) == 2
    assert main(["run", str(spec), "--out", str(out), "--force"]) == 0
    assert capsys.readouterr().out.count(": ok in ") == 2
    assert len(read_csv(out / "results.csv")) == 2


def test_failed_cell_is_recorded_and_sweep_goes_on(tiny_dir: Path, tmp_path: Path) -> None:
    broken = Path(shutil.copytree(tiny_dir, tmp_path / "broken"))  # complete files (they pass the spec's checks),
    config = json.loads((broken / "config.json").read_text(encoding="utf-8"))  # but the model cannot be built
    (broken / "config.json").write_text(json.dumps({**config, "hidden_size": "huge"}), encoding="utf-8")
    spec = write_spec(tmp_path / "spec.yaml", [str(broken), str(tiny_dir)], repeats=1)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 1
    rows = read_csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"] and "\n" not in rows[0]["error"]
    assert (out / "cells" / rows[0]["cell_id"] / "traceback.txt").exists()


def test_killed_sweep_resumes_without_rerunning_or_duplicating(tiny_dir: Path, tmp_path: Path) -> None:
    encoders = [str(tiny_dir), {"name": str(tiny_dir), "num_layers": 3}, {"name": str(tiny_dir), "num_layers": 1}]
    # 20 repeats: a cell forked from the fork server lasts seconds, not the 2 s its start-up once took alone
    spec = write_spec(tmp_path / "spec.yaml", encoders, max_segments=40, repeats=20)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "nlgbench.cli", "run", str(spec), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=os.environ)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "[1/3]" in line and ": ok in " in line:  # (not a terminal: one timestamped line per cell, when it ends)
            time.sleep(2.0)  # the second worker is loading or scoring
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    rows = read_csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok"]  # only the first cell was recorded
    first_id = rows[0]["cell_id"]
    with sqlite3.connect(out / "results.sqlite") as db:
        (stamp,) = db.execute("SELECT updated_at FROM cells WHERE cell_id = ?", (first_id,)).fetchone()
    time.sleep(1.0)  # the orphaned worker must be gone: nothing writes its result later
    second_dir = next(p for p in (out / "cells").iterdir() if p.name != first_id)
    assert not (second_dir / "result.json").exists()

    again = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("skipped") == 1 and again.stdout.count(": ok in ") == 2
    rows = read_csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]
    assert len({r["cell_id"] for r in rows}) == 3 and rows[0]["cell_id"] == first_id
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 3
        assert db.execute("SELECT updated_at FROM cells WHERE cell_id = ?", (first_id,)).fetchone()[0] == stamp
        assert db.execute("SELECT COUNT(*) FROM segment_scores").fetchone()[0] == 3 * 240


@pytest.mark.system
@pytest.mark.skipif(
    local_snapshot("sentence-transformers/all-MiniLM-L6-v2") is None, reason="real MiniLM-L6 not cached"
)
def test_real_minilm_cell_matches_bert_score_package(tmp_path: Path) -> None:
    """Acceptance: scores.csv F1 equals bert_score's (MiniLM-L6, WMT16); correlations equal SciPy's."""
    bert_score = pytest.importorskip("bert_score")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "real",
                "datasets": [{"name": "wmt16", "max_segments": 30}],
                "batch_size": 64,
                "repeats": 1,
                "metrics": [{"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    (row,) = read_csv(out / "results.csv")
    assert row["layer"] == "6"
    check_correlations_from_scores(out, row)
    scores = read_csv(out / "cells" / row["cell_id"] / "scores.csv")
    items = load_dataset("wmt16", max_segments=30).items
    assert [(r["lp"], int(r["seg_id"])) for r in scores] == [(it.lp, it.seg_id) for it in items]
    _, _, f = bert_score.score(
        [it.hypothesis for it in items],
        [it.reference for it in items],
        model_type="sentence-transformers/all-MiniLM-L6-v2",
        num_layers=6,
        batch_size=64,
        device="cpu",
        use_fast_tokenizer=True,
    )
    assert np.abs(np.array([float(r["score"]) for r in scores]) - f.numpy()).max() <= 1e-5  # bert_score's decimal=5


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the no-GPU path")
def test_cuda_spec_without_gpu_is_refused_before_any_cell(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local sweep (and its --dry-run) asking for CUDA on a machine without it: one line, exit 2,
    nothing run or written (before, every CUDA cell was run and recorded as failed)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "gpu",
                "datasets": [{"name": "wmt16", "max_segments": 4}],
                "devices": ["cpu", "cuda"],
                "repeats": 1,
                "metrics": [{"metric": "bertscore", "encoders": [str(tiny_dir)]}],
            }
        )
    )
    out = tmp_path / "out"
    for extra in ([], ["--dry-run"]):
        assert main(["run", str(spec), "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "spec devices: device 'cuda': CUDA is not available" in err, err
        assert not out.exists()


def test_moverscore_sweep_crosses_aligners(tiny_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "mover",
                "datasets": [{"name": "wmt16", "max_segments": 4}],
                "repeats": 1,
                "batch_size": 8,
                "metrics": [{"metric": "moverscore", "encoders": [str(tiny_dir)], "aligners": ["wmd", "wcd"]}],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    rows = read_csv(out / "results.csv")
    assert [(r["aligner"], r["status"]) for r in rows] == [("wmd", "ok"), ("wcd", "ok")]
    assert all("transport=" in r["phase_ms"] and "distance=" in r["phase_ms"] for r in rows)
    wmd_scores = [float(r["score"]) for r in read_csv(out / "cells" / rows[0]["cell_id"] / "scores.csv")]
    wcd_scores = [float(r["score"]) for r in read_csv(out / "cells" / rows[1]["cell_id"] / "scores.csv")]
    # WCD <= WMD, score = 1 - d; float64 ~1e-14
    assert all(c >= w - 1e-12 for w, c in zip(wmd_scores, wcd_scores, strict=True))
