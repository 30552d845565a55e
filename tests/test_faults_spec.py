"""Fault injection, cell identity and the spec: changed data or weights make a new cell, a Hub id and
its registry name one; a broken encoder folder, a bad name or key, an uncached model stop before any
cell with one line.

Each case runs the real CLI (`python -m nlgbench.cli`, a subprocess) on tiny random models.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from faultkit import assert_consistent, csv_rows, user_rows, write_spec
from helpers import assert_one_line, cli_subprocess, write_jsonl
from tiny import TEXTS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_model_2(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=2, name="bert", seed=1)


# ------------------------------------------------------------------ 2, 5, 6: cell identity, encoder folders, spec


def copy_model(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_changed_user_data_is_a_new_cell(tmp_path: Path, tiny_model: Path) -> None:
    """2: the cell id holds the data file's sha256: negated human scores are measured again, not skipped."""
    data = write_jsonl(tmp_path / "own.jsonl", user_rows())
    spec, run = write_spec(tmp_path, tiny_model, data), tmp_path / "run"
    first = cli_subprocess("run", str(spec), "--out", str(run))
    assert first.returncode == 0, first.stderr[-3000:]
    write_jsonl(data, user_rows(human=lambda i: -((i * 7) % 5)))
    second = cli_subprocess("run", str(spec), "--out", str(run))
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
    third = cli_subprocess("run", str(spec), "--out", str(run))  # unchanged since: resumed, nothing run
    assert third.returncode == 0 and "done already" in third.stdout and ": ok in " not in third.stdout
    assert_consistent(run, expected_ok=2)


def test_changed_local_weights_are_a_new_cell(tmp_path: Path, tiny_model: Path, tiny_model_2: Path) -> None:
    """2: the cell id holds a local model folder's weights fingerprint (size, mtime, safetensors header)."""
    model = copy_model(tiny_model, tmp_path / "model")
    spec = write_spec(tmp_path, model, write_jsonl(tmp_path / "own.jsonl", user_rows()))
    before = cli_subprocess("run", str(spec), "--dry-run")
    shutil.copyfile(tiny_model_2 / "model.safetensors", model / "model.safetensors")  # same shapes, other values
    after = cli_subprocess("run", str(spec), "--dry-run")
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
    proc = cli_subprocess("run", str(spec), "--dry-run")
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
    line = assert_one_line(cli_subprocess("run", str(spec), "--dry-run"), BROKEN[case], str(model))
    assert "encoders[0]" in line
    if case == "truncated":  # `run` makes the same spec-time check (one case suffices: the spec is loaded alike)
        assert assert_one_line(cli_subprocess("run", str(spec), "--out", str(run))) == line
        assert not run.exists()
    cache = tmp_path / "hub"
    assert_one_line(
        cli_subprocess("models", "import", str(model), "--as", "org/broken", env={"HF_HUB_CACHE": str(cache)}),
        BROKEN[case],
    )
    assert not (cache / "models--org--broken").exists()


def test_list_encoders_shows_a_broken_cache_entry(tmp_path: Path, tiny_model: Path) -> None:
    """5: a cache entry broken after import is listed as `broken` with why (exit 0), and a spec naming it stops."""
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "NLGBENCH_ENCODERS": str(tmp_path / "enc.yaml")}
    (tmp_path / "enc.yaml").write_text(
        "encoders:\n  tiny: {hub_id: org/tiny, family: bert, layers: 2}\n", encoding="utf-8"
    )
    imported = cli_subprocess("models", "import", str(tiny_model), "--as", "org/tiny", env=env)
    assert imported.returncode == 0, imported.stderr[-3000:]
    listed = cli_subprocess("list", "encoders", env=env)
    assert listed.returncode == 0 and [r.split()[5] for r in listed.stdout.splitlines() if r.startswith("tiny ")] == [
        "yes"
    ]
    (weights,) = (tmp_path / "hub" / "models--org--tiny" / "snapshots").glob("*/model.safetensors")
    weights.write_bytes(weights.read_bytes()[:100])
    listed = cli_subprocess("list", "encoders", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr[-3000:]
    assert [r.split()[5] for r in listed.stdout.splitlines() if r.startswith("tiny ")] == ["broken"]
    assert "tiny:" in listed.stderr and "is truncated" in listed.stderr
    spec = write_spec(tmp_path, Path("tiny"), write_jsonl(tmp_path / "own.jsonl", user_rows()))
    assert_one_line(cli_subprocess("run", str(spec), "--dry-run", env=env), "is truncated")


def test_long_name_without_out_refused(tmp_path: Path, tiny_model: Path) -> None:
    """6: a 300-character name would be `reports/<name>` (File name too long): refused, nothing created."""
    spec = write_spec(tmp_path, tiny_model, write_jsonl(tmp_path / "own.jsonl", user_rows()))
    spec.write_text(spec.read_text(encoding="utf-8").replace("name: faults", "name: " + "n" * 300), encoding="utf-8")
    for extra in ((), ("--dry-run",)):
        assert_one_line(cli_subprocess("run", str(spec), *extra, cwd=tmp_path), "300 characters", "at most 100")
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
    assert_one_line(cli_subprocess("run", str(spec), cwd=work), "'../../x' is not a plain folder name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "faults.yaml", "own.jsonl", "spec.yaml"]
    assert list(work.iterdir()) == []


def test_repeated_yaml_key_refused(tmp_path: Path, tiny_model: Path) -> None:
    """6: a repeated key is refused naming the key and both lines (YAML would keep the last silently)."""
    spec = write_spec(tmp_path, tiny_model, write_jsonl(tmp_path / "own.jsonl", user_rows()), extra="repeats: 5\n")
    assert spec.read_text(encoding="utf-8").splitlines()[5] == "repeats: 5"
    for extra in ((), ("--dry-run",)):
        assert_one_line(
            cli_subprocess("run", str(spec), "--out", str(tmp_path / "run"), *extra),
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
    dry = assert_one_line(cli_subprocess("run", str(spec), "--dry-run"), needle, str(data))
    real = assert_one_line(cli_subprocess("run", str(spec), "--out", str(tmp_path / "run")), needle)
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
