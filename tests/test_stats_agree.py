"""Acceptance: worker (`nlgbench run`), `import-scores`, `report` and `compare` on one run folder agree
on every correlation figure they print or store (result.json, results.csv, report tables and notes,
compare's table and --json), at every level (pooled, lp mean, system), checked against SciPy on the
cells' own scores.csv. The data have a 2-segment and a 1-segment language pair (2 and 1 systems):
they have no correlation, are left out of the lp mean and the system level, and are counted."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from helpers import read_csv, write_jsonl
from nlgbench.cli import main
from nlgbench.statistics.levels import canonical_level
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

# lp -> systems of its segments: two normal pairs, one of 2 segments (2 systems), one of 1 segment
LAYOUT = {
    "aa-en": ["S0", "S1", "S2", "S3"] * 2 + ["S0"],
    "bb-en": ["S0", "S1", "S2"] * 2,
    "cc-en": ["S0", "S1"],
    "dd-en": ["S0"],
}
NORMAL, SMALL = ["aa-en", "bb-en"], ["cc-en", "dd-en"]
WORDS = "the a cat dog sat ran on under mat house red green quickly slowly big small old new".split()
METHODS = {"pearson": lambda x, h: stats.pearsonr(x, h)[0], "kendall": lambda x, h: stats.kendalltau(x, h)[0]}
LEVELS = ("pooled", "lp_mean", "system")
RESAMPLES = 200


def sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8)))) + "."


def write_data(path: Path) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = [
        {
            "lp": lp,
            "seg_id": i + 1,
            "system": system,
            "source": sentence(rng),
            "reference": sentence(rng),
            "hypothesis": sentence(rng),
            "human": float(rng.normal()),
        }
        for lp, systems in LAYOUT.items()
        for i, system in enumerate(systems)
    ]
    write_jsonl(path, rows)
    return rows


def expected(scores_csv: Path, sign: float) -> dict[str, float]:
    """Every figure by SciPy from the cell's scores.csv: pooled over all segments; lp mean over the
    pairs of >= 3 segments; system level over the pairs of >= 3 systems (means per system)."""
    df = pd.read_csv(scores_csv, keep_default_na=False)
    df["score"] = sign * df["score"].astype(float)
    out = {}
    for name, fn in METHODS.items():
        out[f"{name}/pooled"] = fn(df["score"], df["human"])
        out[f"{name}/lp_mean"] = float(
            np.mean([fn(g["score"], g["human"]) for lp, g in df.groupby("lp") if lp in NORMAL])
        )
        per_system = df.groupby(["lp", "system"])[["score", "human"]].mean().reset_index()
        out[f"{name}/system"] = float(
            np.mean([fn(g["score"], g["human"]) for lp, g in per_system.groupby("lp") if lp in NORMAL])
        )
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two measured cells (a tiny random BERT, full and cut to 1 layer) and two imported cells."""
    root = tmp_path_factory.mktemp("agree")
    data = root / "tiny.jsonl"
    rows = write_data(data)
    model = make_tiny_bert(root / "model", [r[k] for r in rows for k in ("reference", "hypothesis")], num_layers=2)
    spec = {
        "name": "agree",
        "datasets": [{"path": str(data)}],
        "batch_size": 8,
        "repeats": 1,
        "warmup": 0,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": [str(model), {"name": str(model), "num_layers": 1}]}],
    }
    (root / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["run", str(root / "spec.yaml"), "--out", str(out)]) == 0
    rng = np.random.default_rng(1)
    for encoder in ("ext-a", "ext-b"):
        path = root / f"{encoder}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["lp", "seg_id", "system", "score"])
            for r in rows:
                w.writerow([r["lp"], r["seg_id"], r["system"], repr(r["human"] + float(rng.normal()))])
        with contextlib.redirect_stdout(printed):
            assert (
                main(
                    [
                        "import-scores",
                        str(path),
                        "--dataset",
                        str(data),
                        "--metric",
                        "comet",
                        "--encoder",
                        encoder,
                        "--out",
                        str(out),
                    ]
                )
                == 0
            )
    cells = read_csv(out / "results.csv")
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells)
    return {"out": out, "cells": cells, "printed": printed.getvalue()}


def cell_expected(out: Path, cell_id: str) -> tuple[dict, dict[str, float]]:
    result = json.loads((out / "cells" / cell_id / "result.json").read_text(encoding="utf-8"))
    sign = 1.0 if result["metric"]["higher_is_better"] else -1.0
    return result, expected(out / "cells" / cell_id / "scores.csv", sign)


def test_result_json_and_results_csv(run: dict) -> None:
    for row in run["cells"]:
        result, want = cell_expected(run["out"], row["cell_id"])
        c = result["correlation"]
        for method in METHODS:
            for level, key, got in (
                ("pooled", f"{method}_global", c[f"{method}_pooled"]),
                ("lp_mean", f"{method}_segment", c[method]),
                ("system", f"{method}_system", c["system"][method]),
            ):
                assert got == pytest.approx(want[f"{method}/{level}"], abs=1e-12), key
                assert float(row[key]) == pytest.approx(got, abs=1e-12), key  # results.csv holds the same number
        # the too-small pairs: no correlation, left out, counted, the same in every section
        assert c["n_lps"] == 4 and c["n_lps_too_small"] == 2 and c["min_points"] == 3 and row["n_lps"] == "4"
        assert c["system"]["n_lps_too_small"] == 2
        for lp in SMALL:
            assert c["per_lp"][lp]["pearson"] is None and c["system"]["per_lp"][lp]["kendall"] is None
        assert [c["per_lp"][lp]["n"] for lp in LAYOUT] == [9, 6, 2, 1]
        assert [c["system"]["per_lp"][lp]["n_systems"] for lp in LAYOUT] == [4, 3, 2, 1]
        lo, hi = c["bootstrap"]["pearson_pooled_ci"]
        assert float(row["pearson_global_ci_low"]) == lo and float(row["pearson_global_ci_high"]) == hi


def test_printed_by_run_and_import_scores(run: dict) -> None:
    """`run` prints each cell's global (pooled) and segment (lp-mean) Pearson, `import-scores` Pearson and
    Kendall at both levels, the global Pearson (report's default) first, each named with its level."""
    printed = run["printed"]
    run_lines = re.findall(r"ok in .*pearson \(global\) -?[0-9.]+, pearson \(segment, by lp\) (-?[0-9.]+)", printed)
    pooled_lines = re.findall(r"ok in .*pearson \(global\) (-?[0-9.]+), pearson \(segment", printed)
    imported = re.findall(
        r"as cell (\w+) .*: pearson \(global\) (-?[0-9.]+), kendall \(global\) (-?[0-9.]+), "
        r"pearson \(segment, by lp\) (-?[0-9.]+), kendall \(segment, by lp\) (-?[0-9.]+)",
        printed,
    )
    assert len(run_lines) == 2 and len(imported) == 2, printed
    measured = [c for c in run["cells"] if c["device"] == "cpu"]
    assert sorted(run_lines) == sorted(
        f"{cell_expected(run['out'], c['cell_id'])[1]['pearson/lp_mean']:.4f}" for c in measured
    )
    assert sorted(pooled_lines) == sorted(
        f"{cell_expected(run['out'], c['cell_id'])[1]['pearson/pooled']:.4f}" for c in measured
    )
    for cell_id, *shown in imported:
        _, want = cell_expected(run["out"], cell_id)
        assert shown == [
            f"{want[k]:.4f}" for k in ("pearson/pooled", "kendall/pooled", "pearson/lp_mean", "kendall/lp_mean")
        ]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("level", LEVELS)
def test_report(run: dict, method: str, level: str) -> None:
    out = run["out"]
    assert main(["report", str(out), "--correlation", method, "--level", level]) == 0
    rel = pd.read_csv(out / "report" / "relative.csv")
    md = (out / "report" / "relative.md").read_text(encoding="utf-8")
    for row in run["cells"]:
        _, want = cell_expected(out, row["cell_id"])
        (got,) = rel[(rel["encoder"] == row["encoder"]) & (rel["dataset"] != "mean")]["quality"]
        assert got == pytest.approx(want[f"{method}/{level}"], abs=1e-12)
        assert f"{want[f'{method}/{level}']:.3f}" in md
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    note = "2 language pair(s) with fewer than 3 {} have no correlation and are left out of the {} level: cc-en, dd-en"
    if level == "pooled":
        assert "left out" not in page
    else:  # the note names the level by its name (lp_mean is the segment level)
        assert note.format("systems" if level == "system" else "segments", canonical_level(level)) in page


@pytest.mark.parametrize("level", LEVELS)
def test_compare(run: dict, level: str, capsys: pytest.CaptureFixture[str]) -> None:
    out, cells = run["out"], run["cells"]
    measured = sorted((c for c in cells if c["device"] == "cpu"), key=lambda c: "num_layers" in c["encoder"])
    imported = sorted((c for c in cells if c["device"] == "imported"), key=lambda c: c["encoder"])
    assert len(measured) == len(imported) == 2 and {c["batch_size"] for c in imported} == {""}  # no batch size
    for method in METHODS:
        for base, cand in (measured, imported):
            argv = [
                "compare",
                str(out),
                "--candidate",
                cand["encoder"],
                "--baseline",
                base["encoder"],
                "--correlation",
                method,
                "--level",
                level,
                "--resamples",
                str(RESAMPLES),
            ]
            assert main([*argv, "--json"]) == 0
            result = json.loads(capsys.readouterr().out)
            (row,) = result["rows"]
            _, want_c = cell_expected(out, cand["cell_id"])
            _, want_b = cell_expected(out, base["cell_id"])
            assert row["quality_candidate"] == pytest.approx(want_c[f"{method}/{level}"], abs=1e-12)
            assert row["quality_baseline"] == pytest.approx(want_b[f"{method}/{level}"], abs=1e-12)
            assert row["delta"] == pytest.approx(row["quality_candidate"] - row["quality_baseline"], abs=1e-12)
            assert row["pearson_pooled_candidate"] == pytest.approx(want_c["pearson/pooled"], abs=1e-12)
            assert row["pearson_pooled_baseline"] == pytest.approx(want_b["pearson/pooled"], abs=1e-12)
            assert row["n"] == 18
            left_out = [] if level == "pooled" else SMALL
            assert row["lps_left_out"] == left_out
            assert any("cc-en, dd-en" in w for w in result["warnings"]) == bool(left_out)
            assert main(argv) == 0
            text = capsys.readouterr().out
            assert f"{want_c[f'{method}/{level}']:.3f}" in text and f"{want_b[f'{method}/{level}']:.3f}" in text
            assert ("left out" in text) == bool(left_out)


def test_the_old_two_point_rule_would_differ(run: dict) -> None:
    """The 2-segment pair is what made the two old engines disagree: a 2-point Pearson is +-1."""
    df = pd.read_csv(run["out"] / "cells" / run["cells"][0]["cell_id"] / "scores.csv", keep_default_na=False)
    two = df[df["lp"] == "cc-en"]
    assert abs(np.corrcoef(two["score"], two["human"])[0, 1]) == pytest.approx(1.0)
    result, want = cell_expected(run["out"], run["cells"][0]["cell_id"])
    with_two = np.mean([stats.pearsonr(g["score"], g["human"])[0] for lp, g in df.groupby("lp") if lp != "dd-en"])
    assert not math.isclose(result["correlation"]["pearson"], with_two, abs_tol=1e-3)
