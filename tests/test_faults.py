"""Fault injection: every bad input or fault a user can meet gives one line and a clear
exit code, and the run folder keeps exactly the finished cells: nothing lost, nothing duplicated.

Each case runs the real CLI (`python -m nlgbench.cli`, a subprocess) on tiny random models and
small data, so tracebacks, exit codes and the files left behind are what a user would see.
Sections follow the issue's numbered list.
"""

from __future__ import annotations

import csv
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil
import pytest

from helpers import assert_one_line, committed_copy, nlgbench, write_jsonl
from nlgbench.execution.forkserver import SERVER_MODULE
from tiny import TEXTS

pytestmark = pytest.mark.integration

# ----------------------------------------------------------------------------- shared helpers


def user_rows(n_per_lp: int = 4, lps: Sequence[str] = ("de-en", "fr-en"), human=None) -> list[dict]:
    """Own-data rows: `human(i)` gives the human score of the i-th row (default: varied)."""
    rows = []
    for lp in lps:
        for k in range(n_per_lp):
            i = len(rows)
            rows.append(
                {
                    "lp": lp,
                    "seg_id": k + 1,
                    "source": TEXTS[(i + 3) % len(TEXTS)],
                    "reference": TEXTS[i % len(TEXTS)],
                    "hypothesis": TEXTS[(i + 1) % len(TEXTS)],
                    "human": float(human(i)) if human else float((i * 7) % 5),
                }
            )
    return rows


def write_spec(
    folder: Path, model: Path, data: Path, *, name: str = "faults", extra: str = "", metrics: str | None = None
) -> Path:
    """A small spec over `data` with the tiny model at `model` (BERTScore, 1 repeat, no warm-up)."""
    metrics = metrics or f"  - metric: bertscore\n    encoders: [{model}]\n"
    spec = folder / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\ndatasets: [{{path: {data}}}]\nrepeats: 1\nwarmup: 0\nbatch_size: 4\n{extra}metrics:\n{metrics}",
        encoding="utf-8",
    )
    return spec


def csv_rows(run: Path) -> list[dict[str, str]]:
    with (run / "results.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def stored_cells(run: Path) -> list[tuple[str, str]]:
    """(cell_id, status) of every cell in results.sqlite, read directly (what is really stored)."""
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return sorted(db.execute("SELECT cell_id, status FROM cells").fetchall())
    finally:
        db.close()


def assert_consistent(run: Path, expected_ok: int) -> None:
    """results.csv, results.sqlite and cells/ hold the same cells, each once, `expected_ok` of them ok."""
    rows = csv_rows(run)
    ids = [r["cell_id"] for r in rows]
    assert len(ids) == len(set(ids)), ids
    assert sorted((r["cell_id"], r["status"]) for r in rows) == stored_cells(run)
    ok = [r["cell_id"] for r in rows if r["status"] == "ok"]
    assert len(ok) == expected_ok, rows
    for cell_id in ok:
        assert (run / "cells" / cell_id / "result.json").is_file() and (
            run / "cells" / cell_id / "scores.csv"
        ).is_file()


@pytest.fixture(scope="module")
def tiny_model(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=2, name="bert")


@pytest.fixture(scope="module")
def tiny_model_2(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=2, name="bert", seed=1)


# ----------------------------------------------------------------------------- 1, 7, 8: correlation, compare, import


def write_import(path: Path, rows: Sequence[dict], score) -> Path:
    """An import-scores CSV (lp, seg_id, system, score) for `rows`, `score(i)` the i-th score."""
    lines = ["lp,seg_id,system,score"] + [f"{r['lp']},{r['seg_id']},,{score(i)!r}" for i, r in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def import_scores(
    run: Path, data: Path, scores: Path, encoder: str, metric: str = "bertscore", *flags: str
) -> subprocess.CompletedProcess[str]:
    return nlgbench(
        "import-scores",
        str(scores),
        "--dataset",
        str(data),
        "--metric",
        metric,
        "--encoder",
        encoder,
        "--out",
        str(run),
        *flags,
    )


def strict_json(text: str) -> dict:
    """json.loads that refuses NaN/Infinity (what other tools' strict parsers do)."""

    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def undefined_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, Path]:
    """A finished sweep whose correlations are all undefined: human scores constant (first
    dataset), one segment per language pair (second); then (run folder, constant data)."""
    root = tmp_path_factory.mktemp("undefined")
    const = write_jsonl(root / "const.jsonl", user_rows(human=lambda i: 3.0))
    varied = write_jsonl(root / "varied.jsonl", user_rows())
    spec = root / "undefined.yaml"
    spec.write_text(
        f"name: undefined\ndatasets: [{{path: {const}}}, {{path: {varied}, max_segments: 1}}]\n"
        f"repeats: 1\nwarmup: 0\nbatch_size: 4\nmetrics:\n  - metric: bertscore\n    encoders: [{tiny_model}]\n",
        encoding="utf-8",
    )
    run = root / "run"
    proc = nlgbench("run", str(spec), "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    progress = [line for line in proc.stdout.splitlines() if ": ok in " in line]
    assert len(progress) == 2, proc.stdout  # the first undefined cell did not stop the sweep
    assert (
        "pearson (global) n/a, pearson (segment, by lp) n/a "
        "(human scores constant in de-en, fr-en; pooled: human scores constant)" in progress[0]
    )
    assert (
        "pearson (global) n/a, pearson (segment, by lp) n/a "
        "(fewer than 3 segments in de-en, fr-en; pooled: fewer than 3 segments)" in progress[1]
    )
    return run, const


def test_undefined_correlation_is_an_ok_cell_with_a_note(undefined_run: tuple[Path, Path]) -> None:
    run, _ = undefined_run
    assert_consistent(run, expected_ok=2)
    rows = csv_rows(run)
    assert list(rows[0])[-1] == "correlation_note"  # after every column of the design's contract
    notes = [r["correlation_note"] for r in rows]
    assert notes == [
        "human scores constant in de-en, fr-en; pooled: human scores constant",
        "fewer than 3 segments in de-en, fr-en; pooled: fewer than 3 segments",
    ]
    for r in rows:
        assert (
            r["status"] == "ok"
            and r["pearson_global"] == r["kendall_global"] == r["pearson_segment"] == r["kendall_segment"] == ""
        )
        result = strict_json((run / "cells" / r["cell_id"] / "result.json").read_text(encoding="utf-8"))
        assert result["correlation"]["note"] == r["correlation_note"] and result["correlation"]["pearson"] is None


def test_report_and_compare_show_n_a_for_undefined_quality(undefined_run: tuple[Path, Path], tmp_path: Path) -> None:
    run, const = undefined_run
    proc = nlgbench("report", str(run))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    index = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert "quality n/a for bertscore" in index and "human scores constant" in index and "No plot" in index
    table = (run / "report" / "relative.md").read_text(encoding="utf-8")
    assert "| n/a | n/a |" in table and "nan" not in table

    # an imported cell of the same data compares with the measured one: quality n/a, speed unknown
    scores = write_import(tmp_path / "s.csv", user_rows(), lambda i: 0.1 * (i % 3))
    assert import_scores(run, const, scores, "other").returncode == 0
    proc = nlgbench("compare", str(run), "--candidate", "other", "--baseline", csv_rows(run)[0]["encoder"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = [line for line in proc.stdout.splitlines() if line.startswith("| bertscore")]
    assert len(row) == 1 and "nan" not in proc.stdout, proc.stdout
    cols = [c.strip() for c in row[0].strip("|").split("|")]
    assert cols[2] == "imported / cpu" and cols[4:8] == ["n/a"] * 4 and cols[10:] == ["-", "-"], cols
    assert cols[8] == "n/a [bootstrap: 8 segments]" and cols[9] == "n/a", cols  # p names its test and units
    assert "candidate and baseline quality n/a: human scores constant" in proc.stdout


def test_constant_metric_scores_import_with_a_note(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", user_rows())
    proc = import_scores(tmp_path / "run", data, write_import(tmp_path / "s.csv", user_rows(), lambda i: 0.5), "flat")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "pearson (global) n/a, kendall (global) n/a, pearson (segment, by lp) n/a, kendall (segment, by lp) n/a "
        "(metric scores constant in de-en, fr-en; "
        "pooled: metric scores constant)" in proc.stdout
    )
    assert csv_rows(tmp_path / "run")[0]["correlation_note"].startswith("metric scores constant")


# Pooled Pearson of these scores with user_rows()' human scores: comparing the scores with
# themselves made the old Williams formula take the square root of a negative rounding error.
WILLIAMS_CRASH = [0.7559, 0.9752, 0.5721, 0.9743, 0.6559, 0.7117, 0.9139, 0.7046]


def test_compare_identical_scores(tmp_path: Path) -> None:
    data, run = write_jsonl(tmp_path / "d.jsonl", user_rows()), tmp_path / "run"
    scores = write_import(tmp_path / "s.csv", user_rows(), lambda i: WILLIAMS_CRASH[i])
    for name in ("a", "b"):
        assert import_scores(run, data, scores, name).returncode == 0
    proc = nlgbench("compare", str(run), "--candidate", "a", "--baseline", "b", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    row = strict_json(proc.stdout)["rows"][0]
    assert row["device"] == "imported" and row["delta"] == 0.0 and row["p_williams"] == 1.0 and row["williams_t"] == 0.0
    assert row["speedup"] is None and row["memory_ratio"] is None  # unknown, not NaN
    proc = nlgbench("compare", str(run), "--candidate", "a", "--baseline", "b")
    assert proc.returncode == 0 and "nan" not in proc.stdout
    assert "| 1.000 [bootstrap: 8 segments] | 1.000 [8] | - | - |" in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", ["compare", "report"])
def test_system_level_without_systems_is_one_line(command: str, tmp_path: Path) -> None:
    data, run = write_jsonl(tmp_path / "d.jsonl", user_rows()), tmp_path / "run"
    scores = write_import(tmp_path / "s.csv", user_rows(), lambda i: WILLIAMS_CRASH[i])
    for name in ("a", "b"):
        assert import_scores(run, data, scores, name).returncode == 0
    args = ["--candidate", "a", "--baseline", "b"] if command == "compare" else []
    proc = nlgbench(command, str(run), *args, "--level", "system")
    assert_one_line(proc, "system-level correlation needs datasets with system names")
    assert "Warning" not in proc.stderr and "nan" not in proc.stdout
    assert not (run / "report").exists()


def test_import_direction_flags(tmp_path: Path) -> None:
    """BaryScore is registered lower-is-better; scores stored negated (-W) import with --higher-is-better."""
    data, run = write_jsonl(tmp_path / "d.jsonl", user_rows()), tmp_path / "run"
    distance = [5.0 - r["human"] + 0.01 * i for i, r in enumerate(user_rows())]  # W: small where humans are pleased
    scores = write_import(tmp_path / "s.csv", user_rows(), lambda i: -distance[i])  # stored as -W
    pearson = {}
    for flag in ("", "--higher-is-better", "--lower-is-better"):
        proc = import_scores(run, data, scores, "e", "baryscore", *([flag] if flag else []))
        assert proc.returncode == 0, proc.stderr[-3000:]
        (cell,) = csv_rows(run)  # the same file under the same names is one cell, its direction replaced
        result = strict_json((run / "cells" / cell["cell_id"] / "result.json").read_text(encoding="utf-8"))
        assert result["metric"]["higher_is_better"] == (flag == "--higher-is-better")
        pearson[flag] = float(cell["pearson_global"])
    assert pearson["--higher-is-better"] > 0.9  # -W agrees with the humans as given
    assert pearson[""] == pearson["--lower-is-better"] == pytest.approx(-pearson["--higher-is-better"], abs=1e-12)
    proc = import_scores(run, data, scores, "e", "baryscore", "--higher-is-better", "--lower-is-better")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr and "Traceback" not in proc.stderr
    assert_consistent(run, expected_ok=1)


# ------------------------------------------------------------------ 2, 5, 6: cell identity, encoder folders, spec


def copy_model(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_changed_user_data_is_a_new_cell(tmp_path: Path, tiny_model: Path) -> None:
    """2: the cell id holds the data file's sha256: negated human scores are measured again, not skipped."""
    data = write_jsonl(tmp_path / "own.jsonl", user_rows())
    spec, run = write_spec(tmp_path, tiny_model, data), tmp_path / "run"
    first = nlgbench("run", str(spec), "--out", str(run))
    assert first.returncode == 0, first.stderr[-3000:]
    write_jsonl(data, user_rows(human=lambda i: -((i * 7) % 5)))
    second = nlgbench("run", str(spec), "--out", str(run))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "done already" not in second.stdout and ": ok in " in second.stdout
    assert_consistent(run, expected_ok=2)
    before, after = csv_rows(run)
    assert before["cell_id"] != after["cell_id"]
    assert float(after["pearson_segment"]) == pytest.approx(-float(before["pearson_segment"]), abs=1e-12)
    config = json.loads((run / "cells" / after["cell_id"] / "config.json").read_text(encoding="utf-8"))["config"]
    assert config["inputs"][str(data)].startswith("sha256:") and config["inputs"][str(tiny_model)].startswith(
        "weights:"
    )
    third = nlgbench("run", str(spec), "--out", str(run))  # unchanged since: resumed, nothing run
    assert third.returncode == 0 and "done already" in third.stdout and ": ok in " not in third.stdout
    assert_consistent(run, expected_ok=2)


def test_changed_local_weights_are_a_new_cell(tmp_path: Path, tiny_model: Path, tiny_model_2: Path) -> None:
    """2: the cell id holds a local model folder's weights fingerprint (size, mtime, safetensors header)."""
    model = copy_model(tiny_model, tmp_path / "model")
    spec = write_spec(tmp_path, model, write_jsonl(tmp_path / "own.jsonl", user_rows()))
    before = nlgbench("run", str(spec), "--dry-run")
    shutil.copyfile(tiny_model_2 / "model.safetensors", model / "model.safetensors")  # same shapes, other values
    after = nlgbench("run", str(spec), "--dry-run")
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    (before_id, *before_label), (after_id, *after_label) = before.stdout.split("  "), after.stdout.split("  ")
    assert before_id != after_id and before_label == after_label


def test_hub_id_and_registry_name_are_one_cell(tmp_path: Path) -> None:
    """7b: `sentence-transformers/all-MiniLM-L6-v2` is the registered `all-MiniLM-L6-v2`: one cell, labelled
    with the registry name, with the id of the quickstart's cell (reports/example's, under its versions)."""
    spec = tmp_path / "same.yaml"
    spec.write_text(
        "name: same\ndatasets: [{name: wmt16, max_segments: 100}]\nmetrics:\n  - metric: bertscore\n"
        "    options: {idf: false}\n"
        "    encoders: [sentence-transformers/all-MiniLM-L6-v2, all-MiniLM-L6-v2]\n",
        encoding="utf-8",
    )
    proc = nlgbench("run", str(spec), "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from nlgbench.core.spec import load_spec

    quickstart = load_spec(Path(__file__).resolve().parents[1] / "examples" / "quickstart.yaml").cells()[1]
    assert quickstart.encoder.name == "all-MiniLM-L6-v2" and quickstart.batch_size == 64
    assert proc.stdout.splitlines()[:2] == [
        f"{quickstart.cell_id}  bertscore | all-MiniLM-L6-v2 | wmt16[:100] | cpu | bs64",
        "1 cells; models not in the local cache: none",
    ]


def broken_folder(case: str, tiny_model: Path, folder: Path) -> Path:
    """A copy of the tiny model broken one way (an empty folder for "empty")."""
    if case == "empty":
        folder.mkdir()
        return folder
    copy_model(tiny_model, folder)
    weights = folder / "model.safetensors"
    if case == "bad-config":
        (folder / "config.json").write_text('{"model_type": "bert",', encoding="utf-8")
    elif case == "no-weights":
        weights.unlink()
    elif case == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif case == "corrupt-header":
        data = bytearray(weights.read_bytes())
        data[8:16] = b"\xff" * 8
        weights.write_bytes(bytes(data))
    return folder


BROKEN = {
    "bad-config": "config.json is not valid JSON",
    "empty": "has no config.json",
    "no-weights": "has no weight file",
    "truncated": "is truncated",
    "corrupt-header": "corrupt safetensors header",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_encoder_folder_stops_before_any_cell(case: str, tmp_path: Path, tiny_model: Path) -> None:
    """5: checked at spec time, --dry-run included; nothing is run or written; models import refuses it too."""
    model = broken_folder(case, tiny_model, tmp_path / "model")
    spec, run = write_spec(tmp_path, model, write_jsonl(tmp_path / "own.jsonl", user_rows())), tmp_path / "run"
    line = assert_one_line(nlgbench("run", str(spec), "--dry-run"), BROKEN[case], str(model))
    assert "encoders[0]" in line
    if case == "truncated":  # `run` makes the same spec-time check (one case suffices: the spec is loaded alike)
        assert assert_one_line(nlgbench("run", str(spec), "--out", str(run))) == line
        assert not run.exists()
    cache = tmp_path / "hub"
    assert_one_line(
        nlgbench("models", "import", str(model), "--as", "org/broken", env={"HF_HUB_CACHE": str(cache)}),
        BROKEN[case],
    )
    assert not (cache / "models--org--broken").exists()


def test_list_encoders_shows_a_broken_cache_entry(tmp_path: Path, tiny_model: Path) -> None:
    """5: a cache entry broken after import is listed as `broken` with why (exit 0), and a spec naming it stops."""
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "NLGBENCH_ENCODERS": str(tmp_path / "enc.yaml")}
    (tmp_path / "enc.yaml").write_text(
        "encoders:\n  tiny: {hub_id: org/tiny, family: bert, layers: 2}\n", encoding="utf-8"
    )
    imported = nlgbench("models", "import", str(tiny_model), "--as", "org/tiny", env=env)
    assert imported.returncode == 0, imported.stderr[-3000:]
    listed = nlgbench("list", "encoders", env=env)
    assert listed.returncode == 0 and [r.split()[5] for r in listed.stdout.splitlines() if r.startswith("tiny ")] == [
        "yes"
    ]
    (weights,) = (tmp_path / "hub" / "models--org--tiny" / "snapshots").glob("*/model.safetensors")
    weights.write_bytes(weights.read_bytes()[:100])
    listed = nlgbench("list", "encoders", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr[-3000:]
    assert [r.split()[5] for r in listed.stdout.splitlines() if r.startswith("tiny ")] == ["broken"]
    assert "tiny:" in listed.stderr and "is truncated" in listed.stderr
    spec = write_spec(tmp_path, Path("tiny"), write_jsonl(tmp_path / "own.jsonl", user_rows()))
    assert_one_line(nlgbench("run", str(spec), "--dry-run", env=env), "is truncated")


def test_long_name_without_out_refused(tmp_path: Path, tiny_model: Path) -> None:
    """6: a 300-character name would be `reports/<name>` (File name too long): refused, nothing created."""
    spec = write_spec(tmp_path, tiny_model, write_jsonl(tmp_path / "own.jsonl", user_rows()))
    spec.write_text(spec.read_text(encoding="utf-8").replace("name: faults", "name: " + "n" * 300), encoding="utf-8")
    for extra in ((), ("--dry-run",)):
        assert_one_line(nlgbench("run", str(spec), *extra, cwd=tmp_path), "300 characters", "at most 100")
    assert not (tmp_path / "reports").exists()


def test_name_with_path_refused(tmp_path: Path, tiny_model: Path) -> None:
    """6: `name: ../../x` would write outside reports/: refused (not rewritten), nothing created."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    data = write_jsonl(tmp_path / "own.jsonl", user_rows())
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        write_spec(tmp_path, tiny_model, data).read_text(encoding="utf-8").replace("name: faults", "name: ../../x"),
        encoding="utf-8",
    )
    assert_one_line(nlgbench("run", str(spec), cwd=work), "'../../x' is not a plain folder name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "faults.yaml", "own.jsonl", "spec.yaml"]
    assert list(work.iterdir()) == []


def test_repeated_yaml_key_refused(tmp_path: Path, tiny_model: Path) -> None:
    """6: a repeated key is refused naming the key and both lines (YAML would keep the last silently)."""
    spec = write_spec(tmp_path, tiny_model, write_jsonl(tmp_path / "own.jsonl", user_rows()), extra="repeats: 5\n")
    assert spec.read_text(encoding="utf-8").splitlines()[5] == "repeats: 5"
    for extra in ((), ("--dry-run",)):
        assert_one_line(
            nlgbench("run", str(spec), "--out", str(tmp_path / "run"), *extra),
            "at line 6",
            "repeated key 'repeats' (first at line 3)",
        )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("case", ["folder", "csv", "bad-row"])
def test_dry_run_checks_data_as_run_does(case: str, tmp_path: Path, tiny_model: Path) -> None:
    """6: `--dry-run` refuses what `run` refuses: a data path that is a folder, a .csv, a bad row."""
    if case == "folder":
        data = tmp_path / "data.jsonl"
        data.mkdir()
    elif case == "csv":
        data = tmp_path / "data.csv"
        data.write_text("lp,seg_id,reference,hypothesis,human\nde-en,1,a,b,1\n", encoding="utf-8")
    else:
        data = write_jsonl(tmp_path / "data.jsonl", [*user_rows(), {"lp": "de-en", "seg_id": 9, "human": 1.0}])
    needle = {"folder": "is a directory", "csv": "unsupported type '.csv'", "bad-row": "missing column(s)"}[case]
    spec = write_spec(tmp_path, tiny_model, data)
    dry = assert_one_line(nlgbench("run", str(spec), "--dry-run"), needle, str(data))
    real = assert_one_line(nlgbench("run", str(spec), "--out", str(tmp_path / "run")), needle)
    assert dry == real
    assert not (tmp_path / "run").exists()


def test_uncached_model_with_the_hub_unreachable_is_one_line(tmp_path: Path) -> None:
    """The Hub on (no HF_HUB_OFFLINE) but unreachable (a closed port on this machine): a model not in the
    cache is one line naming it and what to do, at once, not a minute of retries and two tracebacks."""
    (tmp_path / "h.txt").write_text("a b\nc d\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "empty-hub")}
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "score", "-c", "h.txt", "-r", "h.txt", "--encoder", "org/not-cached"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=45,  # the Hub library's own retries took 55 s
    )
    line = assert_one_line(proc, "model 'org/not-cached' is not in the local Hugging Face cache")
    assert "the Hub cannot be reached (http://127.0.0.1:9: " in line and "--as org/not-cached" in line
    assert proc.stderr.splitlines() == [line], proc.stderr[-3000:]


# ------------------------------------------------------------- 3, 4, 9: lock, filesystem and store faults, signals


def two_cell_spec(folder: Path, model: Path, *, name: str = "faults", n_per_lp: int = 4, extra: str = "") -> Path:
    """A 2-cell sweep (the tiny model with 2 and with 1 layer) over own data."""
    data = write_jsonl(folder / f"{name}.jsonl", user_rows(n_per_lp))
    metrics = f"  - metric: bertscore\n    encoders: [{model}, {{name: {model}, num_layers: 1}}]\n"
    return write_spec(folder, model, data, name=name, metrics=metrics, extra=extra)


def two_count_cells(folder: Path, metric: str, *, name: str = "faults") -> Path:
    """A 2-cell sweep of the test metric `metric` (`wordcount_metric`: no model, so a sweep's mechanics
    without a model's seconds), its `scale` 1 and 2, over own data."""
    data = write_jsonl(folder / f"{name}.jsonl", user_rows())
    metrics = "".join(f"  - metric: {metric}\n    options: {{scale: {scale}}}\n" for scale in (1.0, 2.0))
    return write_spec(folder, folder / "no-model", data, name=name, metrics=metrics)


def scores_of(run: Path) -> dict[str, list[str]]:
    """cell id -> its scores.csv `score` column as written (exact reprs)."""
    out = {}
    for row in csv_rows(run):
        with (run / "cells" / row["cell_id"] / "scores.csv").open(encoding="utf-8") as fh:
            out[row["cell_id"]] = [r["score"] for r in csv.DictReader(fh)]
    return out


def wait_for(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    """The cell worker processes of a running CLI process: its `python -c ...` children, or, where it
    started a fork server (`nlgbench.execution.forkserver`, itself a `python -c` child), that server's
    forked children (which keep its command line; not what it runs while importing, such as the
    `ldconfig -p` of ctypes.util.find_library)."""
    try:
        workers: list[psutil.Process] = []
        for child in psutil.Process(proc.pid).children():
            if "-c" not in child.cmdline():
                continue
            if is_fork_server(child):
                workers += [w for w in child.children() if is_fork_server(w)]
            else:
                workers.append(child)
        return workers
    except psutil.Error:
        return []


def is_fork_server(process: psutil.Process) -> bool:
    return any(SERVER_MODULE in arg for arg in process.cmdline())


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The CLI in the background, in its own session (so a test can signal its process group as a terminal does),
    with SIGINT at its default action as in a terminal's foreground job (a test run started with `&` from a
    non-interactive shell would otherwise hand its children an ignored SIGINT)."""
    return subprocess.Popen(
        [sys.executable, "-m", "nlgbench.cli", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_second_writer_of_a_locked_folder_exits_naming_the_holder(tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    first = start_cli("run", str(spec), "--out", str(out), env=faulty(tmp_path, gate=str(gate)))
    scores = write_import_file(tmp_path / "scores.csv")
    try:
        wait_for(lambda: workers_of(first), what="the first sweep's worker")
        second = nlgbench("run", str(spec), "--out", str(out))
        assert_one_line(second, f"{out} is in use by another nlgbench process (pid {first.pid})", "--wait")
        assert ": ok in " not in second.stdout
        assert_one_line(nlgbench("repair", str(out)), f"pid {first.pid}")
        assert_one_line(
            nlgbench(
                "import-scores",
                str(scores),
                "--dataset",
                str(tmp_path / "faults.jsonl"),
                "--metric",
                "bertscore",
                "--encoder",
                "other",
                "--out",
                str(out),
            ),
            f"pid {first.pid}",
        )
    finally:
        gate.touch()
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert stdout.count(": ok in ") == 2
    assert_consistent(out, 2)


def write_import_file(path: Path) -> Path:
    """Precomputed scores for the items of `user_rows()` (import-scores' CSV)."""
    lines = [f"{r['lp']},{r['seg_id']},,{i / 10}" for i, r in enumerate(user_rows())]
    path.write_text("lp,seg_id,system,score\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_run_wait_waits_for_the_holder(tmp_path: Path, wordcount_metric: str) -> None:
    from nlgbench.runs.folder import locked

    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    with locked(out):
        assert (out / ".lock").read_text().strip() == str(os.getpid())
        waiting = start_cli("run", str(spec), "--out", str(out), "--wait")
        assert waiting.stdout is not None
        line = waiting.stdout.readline()
        assert line.startswith(f"waiting for pid {os.getpid()}"), line
        time.sleep(0.5)
        assert waiting.poll() is None and not (out / "results.sqlite").exists()  # nothing ran meanwhile
    stdout, stderr = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, stderr[-2000:]
    assert stdout.count(": ok in ") == 2
    assert_consistent(out, 2)


def test_out_is_an_existing_file(tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    target = tmp_path / "taken.txt"
    target.write_text("mine\n", encoding="utf-8")
    assert_one_line(nlgbench("run", str(spec), "--out", str(target)), str(target), "is a file")
    assert target.read_text(encoding="utf-8") == "mine\n"
    assert_one_line(nlgbench("run", str(spec), "--out", str(target / "sub")), "cannot create the run folder")


def can_run_python_as_nobody() -> bool:
    """Whether user nobody can start this interpreter (not when it lives under root's private home)."""
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "pass"], capture_output=True, user=65534, group=65534, extra_groups=[], check=False
        )
    except OSError:  # the interpreter itself cannot be executed by nobody
        return False
    return probe.returncode == 0


def can_mount_read_only() -> bool:
    """Whether `unshare --mount` may bind-mount a folder read-only here (root with CAP_SYS_ADMIN)."""
    return (
        shutil.which("unshare") is not None
        and subprocess.run(
            ["unshare", "--mount", "sh", "-c", "mount --bind / / && mount -o remount,ro,bind / /"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )


def run_read_only(target: Path, shim_folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with `target` read-only to it, as real as this machine allows: not root - chmod 555; root -
    as user nobody after chmod 555, else in a mount namespace where `target` is a read-only bind mount
    (EROFS), else with FAULT_SHIM refusing writes under `target` as a read-only file system would."""
    command = [sys.executable, "-m", "nlgbench.cli", *args]
    kwargs: dict = {"capture_output": True, "text": True, "timeout": 600}
    env = dict(os.environ, HOME=str(shim_folder))
    if os.geteuid() != 0 or can_run_python_as_nobody():
        if os.geteuid() == 0:
            os.chown(target, 65534, 65534)
            kwargs.update(user=65534, group=65534, extra_groups=[])
        target.chmod(0o555)
        try:
            return subprocess.run(command, env=env, **kwargs)
        finally:
            target.chmod(0o755)
    if can_mount_read_only():
        mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        return subprocess.run(["unshare", "--mount", "sh", "-c", mount, str(target), *command], env=env, **kwargs)
    return subprocess.run(command, env={**env, **faulty(shim_folder, readonly=str(target))}, **kwargs)


@pytest.fixture
def shared_dir() -> Path:
    """A folder any user can read (tmp_path's parents are private to root when root runs the tests)."""
    folder = Path(tempfile.mkdtemp(prefix="nlgbench-faults-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(folder)


@pytest.mark.parametrize("case", ["read-only folder", "read-only parent"])
def test_read_only_run_folder(case: str, shared_dir: Path, tiny_model: Path) -> None:
    model = Path(shutil.copytree(tiny_model, shared_dir / "model"))
    spec = two_cell_spec(shared_dir, model)
    parent = shared_dir / "runs"
    out = parent / "out"
    if case == "read-only folder":
        assert nlgbench("run", str(spec), "--out", str(out)).returncode == 0
        before = ((out / "results.csv").read_bytes(), stored_cells(out), sorted(p.name for p in out.rglob("*")))
    else:
        parent.mkdir()
    proc = run_read_only(out if case == "read-only folder" else parent, shared_dir, "run", str(spec), "--out", str(out))
    if case == "read-only folder":
        assert_one_line(proc, f"cannot write to the run folder {out}")
        assert ((out / "results.csv").read_bytes(), stored_cells(out), sorted(p.name for p in out.rglob("*"))) == before
        assert_consistent(out, 2)
    else:
        assert_one_line(proc, f"cannot create the run folder {out}")
        assert not out.exists()


# A sitecustomize for fault injection, put on PYTHONPATH by `faulty`. FAULT_GATE: a worker waits until that
# file exists (a test acts while a cell is surely running): a plain worker (`python -c BOOT CELL_DIR ...`)
# at its start, a fork server's child right after the fork (the server itself does not wait). FAULT_MODE
# after FAULT_AFTER good writes: `sqlite`, the store's INSERT of a cell fails as on a full disk; `csv`,
# writing results.csv fails with ENOSPC.
# FAULT_READONLY: creating or writing anything under that folder fails with EROFS.
FAULT_SHIM = """
import errno, os, pathlib, sqlite3, sys, time
if os.environ.get("FAULT_READONLY"):
    _ro = os.path.realpath(os.environ["FAULT_READONLY"])
    _mkdir, _open, _access = os.mkdir, os.open, os.access
    def _inside(path):
        real = os.path.realpath(os.fspath(path))
        return real == _ro or real.startswith(_ro + os.sep)
    def _refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
    def _mkdir_ro(path, *a, **k):
        return _refuse(path) if _inside(os.path.dirname(os.path.abspath(path))) else _mkdir(path, *a, **k)
    def _open_ro(path, flags, *a, **k):
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        return _refuse(path) if writes and _inside(path) else _open(path, flags, *a, **k)
    def _access_ro(path, mode, *a, **k):
        return False if mode & os.W_OK and _inside(path) else _access(path, mode, *a, **k)
    os.mkdir, os.open, os.access = _mkdir_ro, _open_ro, _access_ro
def _wait_for_gate():
    while not os.path.exists(os.environ["FAULT_GATE"]):
        time.sleep(0.05)
if os.environ.get("FAULT_GATE") and sys.argv[:1] == ["-c"]:
    if os.path.isfile(os.path.join(sys.argv[1], "config.json")):
        _wait_for_gate()
    else:
        os.register_at_fork(after_in_child=_wait_for_gate)
_mode, _left = os.environ.get("FAULT_MODE"), [int(os.environ.get("FAULT_AFTER", "0"))]

def _spend():
    _left[0] -= 1
    return _left[0] < 0

class _FullDisk(sqlite3.Connection):
    def execute(self, sql, *args):
        if sql.startswith("INSERT INTO cells") and _spend():
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)

if _mode == "sqlite":
    _connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: _connect(*a, factory=_FullDisk, **k)
elif _mode == "csv":
    _replace = os.replace  # write_atomic's temporary (a fresh name) cannot be put in place: the disk is full
    def _replace_full(src, dst, *args, **kwargs):
        if os.path.basename(dst) == "results.csv" and _spend():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(src))
        return _replace(src, dst, *args, **kwargs)
    os.replace = _replace_full
"""


def faulty(folder: Path, **settings: str) -> dict[str, str]:
    """The environment of a CLI run with FAULT_SHIM active and its FAULT_* `settings`."""
    shim = folder / "fault-shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(FAULT_SHIM, encoding="utf-8")
    path = os.pathsep.join(p for p in [str(shim), os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": path, **{f"FAULT_{k.upper()}": v for k, v in settings.items()}}


@pytest.mark.parametrize("mode", ["sqlite", "csv"])
def test_disk_full_keeps_finished_cells(mode: str, tmp_path: Path, wordcount_metric: str) -> None:
    spec = two_count_cells(tmp_path, wordcount_metric)
    out = tmp_path / "out"
    full = nlgbench("run", str(spec), "--out", str(out), env=faulty(tmp_path, mode=mode, after="1"))
    if mode == "sqlite":  # the second cell's record fails: the store and results.csv keep the first
        assert_one_line(full, "results.sqlite", "database or disk is full", "finished cells are kept")
        assert_consistent(out, 1)
        repaired = nlgbench("repair", str(out))  # its result.json is in cells/: repair records it
        assert repaired.returncode == 0 and "added 1 cell(s)" in repaired.stdout, repaired.stdout + repaired.stderr
        assert_consistent(out, 2)
    else:  # results.csv cannot be rewritten after the second cell: the store holds both
        assert_one_line(full, "no space left", "results.csv", "finished cells are kept")
        assert [status for _, status in stored_cells(out)] == ["ok", "ok"]
    again = nlgbench("run", str(spec), "--out", str(out))
    assert again.returncode == 0 and again.stdout.count("skipped") == 2 and ": ok in " not in again.stdout
    assert_consistent(out, 2)


def file_size_limit(limit: int):
    """For Popen's preexec_fn: writes past `limit` bytes fail with EFBIG, as under `ulimit -f` (SIGXFSZ
    ignored, so the write returns the error instead of killing the process)."""

    def arm() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return arm


def test_report_and_compare_over_the_file_size_limit_are_one_line(tmp_path: Path) -> None:
    """`ulimit -f 100` during report (a figure 20 in wide is larger): one line naming the file and the limit,
    exit 2, and no half-written or temporary file left; compare's table into a file under the limit too."""
    limit = 100 * 1024
    run = committed_copy("example", tmp_path)
    pair = ["--candidate", "all-MiniLM-L6-v2", "--baseline", "all-mpnet-base-v2", "--resamples", "100"]
    assert nlgbench("compare", str(run), *pair).returncode == 0  # the dataset fetched into the cache, unlimited
    command = [sys.executable, "-m", "nlgbench.cli", "report", str(run), "--figure-width", "20"]  # PNGs over the limit
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, preexec_fn=file_size_limit(limit))
    line = assert_one_line(proc, str(run / "report"), "file too large", "ulimit -f")
    assert line.endswith("then run the same command again"), line
    left = [p for p in (run / "report").iterdir()]
    assert not [p.name for p in left if p.name.startswith(".") or p.suffix == ".tmp"]
    assert all(p.stat().st_size < limit for p in left)  # none cut off at the limit
    with (tmp_path / "compare.txt").open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "nlgbench.cli", "compare", str(run), *pair],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            preexec_fn=file_size_limit(64),
        )
    proc.stdout = (tmp_path / "compare.txt").read_text(encoding="utf-8")  # the first 64 bytes of the table
    assert_one_line(proc, "file too large", "ulimit -f")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, Path]:
    """(spec, run folder) of a finished 2-cell sweep; tests copy the folder before breaking it."""
    folder = tmp_path_factory.mktemp("finished")
    spec = two_cell_spec(folder, tiny_model)
    out = folder / "out"
    assert nlgbench("run", str(spec), "--out", str(out)).returncode == 0
    return spec, out


CORRUPTIONS = {
    "garbage": lambda path: path.write_bytes(b"this is not a database" * 100),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "emptied": lambda path: path.write_bytes(b""),
    "deleted": lambda path: path.unlink(),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_store_is_refused_and_repaired(case: str, finished_run: tuple[Path, Path], tmp_path: Path) -> None:
    spec, original = finished_run
    out = Path(shutil.copytree(original, tmp_path / "out"))
    CORRUPTIONS[case](out / "results.sqlite")
    refused = nlgbench("run", str(spec), "--out", str(out))
    line = assert_one_line(refused, f"nlgbench repair {out}")
    assert ("corrupt" in line) if case in {"garbage", "truncated"} else ("no results.sqlite" in line), line
    assert ": ok in " not in refused.stdout
    if case == "garbage":  # readers say so too
        assert_one_line(nlgbench("report", str(out)), "corrupt", "nlgbench repair")

    repaired = nlgbench("repair", str(out))
    assert repaired.returncode == 0, repaired.stderr
    assert "2 cell(s)" in repaired.stdout and "2 ok" in repaired.stdout, repaired.stdout
    if case in {"garbage", "truncated"}:
        assert (out / "results.sqlite.corrupt").is_file() and "kept as" in repaired.stdout
    assert_consistent(out, 2)
    assert scores_of(out) == scores_of(original)
    keep = ["cell_id", "status", "pearson_global", "kendall_global", "pearson_segment", "ms_per_segment_mean"]
    keep.append("truncated_segments")
    assert [{k: r[k] for k in keep} for r in csv_rows(out)] == [{k: r[k] for k in keep} for r in csv_rows(original)]
    again = nlgbench("run", str(spec), "--out", str(out))
    assert again.returncode == 0 and again.stdout.count("skipped") == 2 and ": ok in " not in again.stdout
    if case == "deleted":
        assert nlgbench("repair", str(out)).stdout.startswith("nothing to repair")


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_worker_killed_by_a_signal_is_failed_not_oom(forkserver: str, tmp_path: Path, tiny_model: Path) -> None:
    """A cell's process killed by SIGKILL (a fork server's child, or a plain worker): recorded failed, with
    the signal; the sweep goes on."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    env = {**faulty(tmp_path, gate=str(gate)), "NLGBENCH_FORKSERVER": forkserver}
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    workers_of(proc)[0].send_signal(signal.SIGKILL)  # as the kernel's OOM killer would, but it did not
    gate.touch()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-2000:]  # the sweep went on; one cell is not ok
    rows = csv_rows(out)
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"] == "worker killed by signal 9 (SIGKILL)"
    assert_consistent(out, 1)


def test_fork_server_killed_during_a_cell_is_named(tmp_path: Path, tiny_model: Path) -> None:
    """The fork server killed by SIGKILL while its child runs a cell (held at the gate): the cell is
    recorded failed, its error naming the fork server (not "worker killed"); the next cell runs in a
    new server."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    env = {**faulty(tmp_path, gate=str(gate)), "NLGBENCH_FORKSERVER": "1"}
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    servers = [c for c in psutil.Process(proc.pid).children() if is_fork_server(c)]
    assert len(servers) == 1
    servers[0].send_signal(signal.SIGKILL)
    gate.touch()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-2000:]
    rows = csv_rows(out)
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"] == "the cell's fork server died (killed by signal 9, SIGKILL) and its worker with it"
    assert_consistent(out, 1)


def test_death_causes_and_memory_errors() -> None:
    from nlgbench.execution.workerprocess import death_cause

    assert death_cause(-9, oom_killed=True) == (
        "worker killed by the kernel's out-of-memory killer (signal 9, SIGKILL)",
        True,
    )
    assert death_cause(-9, oom_killed=False) == ("worker killed by signal 9 (SIGKILL)", False)
    assert death_cause(-11, oom_killed=True) == ("worker killed by signal 11 (SIGSEGV)", False)
    assert death_cause(3, oom_killed=False) == ("worker exited with code 3 and wrote no result", False)
    assert death_cause(-9, oom_killed=True, server=True) == (
        "the cell's fork server died (killed by the kernel's out-of-memory killer, signal 9, SIGKILL) and its "
        "worker with it",
        True,
    )
    assert death_cause(3, oom_killed=False, server=True) == (
        "the cell's fork server exited with code 3 before the cell's worker wrote a result",
        False,
    )


@pytest.mark.parametrize(
    "error, status",
    [
        (MemoryError(), "oom"),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to "
                "allocate 35184372088832 bytes. Error code 12 (Cannot allocate memory)"
            ),
            "oom",
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "failed"),
    ],
)
def test_worker_records_allocation_failures_as_oom(error: Exception, status: str, tmp_path: Path) -> None:
    from nlgbench.core.cell import CellConfig, DatasetRef, write_config
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.execution.worker import failure

    config = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef(name="x"),
        aligner=None,
        dataset=DatasetRef(path="d.jsonl"),
        device="cpu",
        batch_size=4,
        repeats=1,
        warmup=0,
        threads=None,
    )
    write_config(tmp_path, "abc", "label", config)
    result = failure(tmp_path, error)
    assert result.status == status and result.error and result.error.startswith(type(error).__name__)
    assert (tmp_path / "traceback.txt").is_file()


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_ctrl_c_prints_one_line_and_no_worker_traceback(forkserver: str, tmp_path: Path, tiny_model: Path) -> None:
    """Ctrl-C during a cell: exit 130, one line, no traceback, nothing recorded; with the fork server (its
    child held at the gate: a tiny model's cell is over within a second) and with plain workers."""
    spec = two_cell_spec(tmp_path, tiny_model)
    out = tmp_path / "out"
    env = {"NLGBENCH_FORKSERVER": forkserver}
    if forkserver == "1":
        env.update(faulty(tmp_path, gate=str(tmp_path / "gate")))
    proc = start_cli("run", str(spec), "--out", str(out), env=env)
    wait_for(lambda: workers_of(proc), what="the first worker")
    time.sleep(1.5)  # the worker is at the gate, or importing torch
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "nlgbench: interrupted; run the same command again to resume"
    assert stored_cells(out) == []  # nothing half-recorded
    assert not (out / "results.csv").exists() or csv_rows(out) == []


def test_truncated_segments_are_counted_and_warned_once(tmp_path: Path, tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    model = Path(shutil.copytree(tiny_model, tmp_path / "short"))
    config = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    (model / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 7}), encoding="utf-8")
    spec = two_cell_spec(tmp_path, model)
    out = tmp_path / "out"
    proc = nlgbench("run", str(spec), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]

    tokenizer = AutoTokenizer.from_pretrained(model)
    too_long = sum(
        1 for r in user_rows() if any(len(tokenizer(r[k])["input_ids"]) > 7 for k in ("hypothesis", "reference"))
    )
    assert 0 < too_long < len(user_rows())
    rows = csv_rows(out)
    assert list(rows[0]).index("truncated_segments") > list(rows[0]).index("metric_options")
    assert [r["truncated_segments"] for r in rows] == [str(too_long)] * 2
    for row in rows:
        result = json.loads((out / "cells" / row["cell_id"] / "result.json").read_text(encoding="utf-8"))
        assert result["scorer"]["truncated_segments"] == too_long
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{too_long} of 8 segments" in warnings[0], proc.stdout


def test_soak_kill_9_at_random_moments_then_resume(tmp_path: Path, tiny_model: Path) -> None:
    """10 SIGKILLs of the parent at random moments of a 3-cell sweep, then a rerun: the scores equal an
    uninterrupted run's and every cell is in the folder exactly once. Bounded: about a minute and a half."""
    data = write_jsonl(tmp_path / "soak.jsonl", user_rows(6))
    metrics = (
        f"  - metric: bertscore\n    encoders: [{tiny_model}, {{name: {tiny_model}, num_layers: 1}}]\n"
        f"  - metric: moverscore\n    encoders: [{tiny_model}]\n"
    )
    spec = write_spec(tmp_path, tiny_model, data, name="soak", metrics=metrics)
    reference = tmp_path / "reference"
    assert nlgbench("run", str(spec), "--out", str(reference)).returncode == 0
    assert_consistent(reference, 3)

    out = tmp_path / "out"
    rng = random.Random(13)
    started = time.monotonic()
    for _ in range(10):
        proc = start_cli("run", str(spec), "--out", str(out))
        deadline = time.monotonic() + rng.uniform(0.5, 7.0)
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers += [w for w in workers_of(proc) if w not in workers]
            time.sleep(0.02)
        proc.kill()
        proc.communicate()
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, "a worker outlived its killed parent"
    assert time.monotonic() - started < 80  # 10 kills at most 7 s after each start
    final = nlgbench("run", str(spec), "--out", str(out))
    assert final.returncode == 0, final.stderr[-2000:]
    assert_consistent(out, 3)
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(scores_of(reference))
    assert scores_of(out) == scores_of(reference)
    quality = ["cell_id", "status", "pearson_global", "kendall_global", "pearson_segment", "kendall_segment"]
    assert [{k: r[k] for k in quality} for r in csv_rows(out)] == [
        {k: r[k] for k in quality} for r in csv_rows(reference)
    ]


# ----------------------------------------------------------------------------- 10: tolerances


def test_sentsim_tolerance_follows_the_min_max_spread() -> None:
    """Item 10: SentSim's parts are float32; a few ulps of difference (another CPU, batch shape or BLAS) pass
    through min-max normalisation amplified by e * 4 / spread. The test's tolerance is that bound
    (helpers.min_max_exp_error); the former fixed abs=1e-5 is broken by 1 to 2 ulps, as on a fresh machine."""
    import numpy as np

    from helpers import min_max_exp_error
    from nlgbench.metrics.sentsim import combine, min_max

    # the tiny model's parts in test_reference_free: cosines spread over only 0.025, F1 over 0.09
    cos = np.array([0.94439554, 0.96254462, 0.96974868, 0.95891082], dtype=np.float32)
    f1 = np.array([0.78540498, 0.73606211, 0.82351243, 0.79159093], dtype=np.float32)
    exact = combine(min_max(cos), min_max(f1), False)
    rng = np.random.default_rng(0)

    def moved(values: np.ndarray, ulps: int) -> np.ndarray:
        """Each value moved by a random whole number of float32 ulps in [-ulps, ulps] (positive floats)."""
        steps = rng.integers(-ulps, ulps + 1, size=values.shape).astype(np.int32)
        return (values.view(np.int32) + steps).view(np.float32)

    for ulps in (1, 2, 4):
        worst = max(
            float(np.abs(combine(min_max(moved(cos, ulps)), min_max(moved(f1, ulps)), False) - exact).max())
            for _ in range(300)
        )
        bound = min_max_exp_error(
            ulps * float(np.spacing(cos.max())), float(np.ptp(cos.astype(np.float64)))
        ) + min_max_exp_error(ulps * float(np.spacing(f1.max())), float(np.ptp(f1.astype(np.float64))))
        assert worst <= bound, (ulps, worst, bound)  # the derived tolerance holds
        assert worst > bound / 8, (ulps, worst, bound)  # and is not vacuous: within 8x of what happens
        assert bound > 1e-5  # abs=1e-5 is not guaranteed by the arithmetic even for 1 ulp ...
        if ulps >= 2:
            assert worst > 1e-5, (ulps, worst)  # ... and 2 ulps do break it


def test_output_pipe_closed_early_is_quiet() -> None:
    """`nlgbench list metrics | head -0`: the reader has left before the first line; no BrokenPipeError
    traceback, exit 141 as Unix tools (128 + SIGPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: every write gets EPIPE
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "list", "metrics"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141
