"""Sweep specs: parsing the DESIGN.md shape, cell expansion, deterministic cell ids, `run --dry-run`.

No model is loaded: registry names and registered Hub ids pass validation without touching
the model, and an autouse fixture fails any test that tries.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import nlgbench.encoders
import nlgbench.runner
import nlgbench.cell
import nlgbench.metrics.bertscore
from nlgbench.cli import main
from nlgbench.encoder_registry import EncoderRef, resolve_source
from nlgbench.hfcache import local_snapshot
from helpers import minimal_spec
from nlgbench.cell import CellConfig
from nlgbench.spec import DatasetRef, load_spec, parse_spec

REPO = Path(__file__).resolve().parents[1]

QUICKSTART = {
    "name": "quickstart",
    "datasets": ["wmt16", {"name": "wmt16", "max_segments": 200}, {"path": "data/my.jsonl"}],
    "devices": ["cpu"],
    "batch_size": 64,
    "repeats": 3,
    "threads": None,
    "metrics": [
        {
            "metric": "bertscore",
            "options": {"idf": False},
            "encoders": [
                "all-mpnet-base-v2",
                "sentence-transformers/all-MiniLM-L6-v2",
                {"name": "all-MiniLM-L6-v2", "num_layers": 3},
            ],
        }
    ],
}


@pytest.fixture(autouse=True)
def no_model_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded / a worker started")

    monkeypatch.setattr(nlgbench.encoders, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.metrics.bertscore, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.runner, "execute", forbidden)


def write_spec(folder: Path, spec: dict[str, Any], name: str = "spec.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def ids(spec: dict[str, Any]) -> list[str]:
    return [c.cell_id for c in parse_spec(spec).cells()]


# --------------------------------------------------------------------------- parsing


def test_quickstart_shape_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_spec(tmp_path / "specs", QUICKSTART)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative data path is relative to the spec file, not the cwd
    spec = load_spec(path)
    assert spec.name == "quickstart"
    assert spec.datasets == [
        DatasetRef(name="wmt16"),
        DatasetRef(name="wmt16", max_segments=200),
        DatasetRef(path=str((tmp_path / "specs" / "data" / "my.jsonl").resolve())),
    ]
    assert [d.label for d in spec.datasets] == ["wmt16", "wmt16[:200]", "my"]
    assert spec.devices == ["cpu"]
    assert spec.batch_sizes == [64]
    assert spec.repeats == 3
    assert spec.warmup == 1
    assert spec.threads is None
    (entry,) = spec.metrics
    assert entry.metric == "bertscore"
    assert entry.options == {"idf": False, "layer": None}
    assert entry.encoders == [
        EncoderRef("all-mpnet-base-v2"),
        EncoderRef("sentence-transformers/all-MiniLM-L6-v2"),
        EncoderRef("all-MiniLM-L6-v2", num_layers=3),
    ]
    assert [e.label for e in entry.encoders][2] == "all-MiniLM-L6-v2[num_layers=3]"
    assert entry.aligners == [None]
    assert resolve_source("all-MiniLM-L6-v2") == resolve_source("sentence-transformers/all-MiniLM-L6-v2")
    assert len(spec.cells()) == 3 * 3


def test_examples_quickstart_parses() -> None:
    spec = load_spec(REPO / "examples" / "quickstart.yaml")
    assert spec.name == "quickstart"
    cells = spec.cells()
    assert len(cells) == len(spec.metrics[0].encoders) * len(spec.datasets)
    assert all(c.metric == "bertscore" and c.device in spec.devices for c in cells)


def test_defaults(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, {k: v for k, v in minimal_spec().items() if k != "name"}, "my-sweep.yaml"))
    assert spec.name == "my-sweep"  # from the file name
    assert spec.devices == ["cpu"] and spec.batch_sizes == [64]
    assert (spec.repeats, spec.warmup, spec.threads) == (3, 1, None)
    assert spec.metrics[0].options == {"idf": False, "layer": None}


def test_scalars_or_lists() -> None:
    spec = parse_spec(minimal_spec(datasets="wmt15", devices="cuda:1", batch_size=[1, 8], threads=4,
                              metrics={"metric": "bertscore", "encoders": "all-MiniLM-L6-v2"}))
    assert spec.datasets == [DatasetRef(name="wmt15")]
    assert spec.devices == ["cuda:1"] and spec.batch_sizes == [1, 8] and spec.threads == 4
    assert spec.metrics[0].encoders == [EncoderRef("all-MiniLM-L6-v2")]


def test_absolute_data_path_kept(tmp_path: Path) -> None:
    data = tmp_path / "abs" / "d.tsv"
    spec = parse_spec(minimal_spec(datasets=[{"path": str(data), "max_segments": 10}]), base=tmp_path / "other")
    assert spec.datasets == [DatasetRef(path=str(data), max_segments=10)]
    assert spec.datasets[0].label == "d[:10]"


# --------------------------------------------------------------------------- cells


def test_cell_expansion_count_and_order() -> None:
    spec = parse_spec(minimal_spec(
        datasets=["wmt16", {"name": "wmt15", "max_segments": 10}],
        devices=["cpu", "cuda"],
        batch_size=[1, 64],
        metrics=[
            {"metric": "bertscore", "encoders": ["all-mpnet-base-v2", "all-MiniLM-L6-v2",
                                                 {"name": "all-MiniLM-L6-v2", "num_layers": 3}]},
            {"metric": "bertscore", "options": {"idf": True}, "encoders": ["all-MiniLM-L6-v2"]},
        ],
    ))
    cells = spec.cells()
    assert len(cells) == (3 + 1) * 2 * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    # stable order: metric entry, encoder, aligner, dataset, device, batch size (innermost)
    assert [(c.device, c.batch_size) for c in cells[:4]] == [("cpu", 1), ("cpu", 64), ("cuda", 1), ("cuda", 64)]
    assert [c.dataset.label for c in cells[:8]] == ["wmt16"] * 4 + ["wmt15[:10]"] * 4
    assert [c.encoder.label for c in cells[::8]] == [
        "all-mpnet-base-v2", "all-MiniLM-L6-v2", "all-MiniLM-L6-v2[num_layers=3]", "all-MiniLM-L6-v2"]
    assert [dict(c.options)["idf"] for c in cells[::8]] == [False, False, False, True]
    assert cells[0].label == "bertscore | all-mpnet-base-v2 | wmt16 | cpu | bs1"


def test_duplicate_cells_collapse() -> None:
    spec = parse_spec(minimal_spec(metrics=[
        {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2", "all-MiniLM-L6-v2"]},
        {"metric": "bertscore", "options": {"idf": False}, "encoders": ["all-MiniLM-L6-v2"]},
    ]))
    assert len(spec.cells()) == 1


def test_cell_ids_deterministic() -> None:
    first, second = ids(QUICKSTART), ids(QUICKSTART)
    assert first == second
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in first)
    assert len(set(first)) == len(first)


def test_sweep_name_does_not_change_cell_ids() -> None:
    assert ids(minimal_spec(name="a", description="x")) == ids(minimal_spec(name="b"))


def test_cell_ids_stable_across_processes(tmp_path: Path) -> None:
    """Resuming needs the same ids in a new process (no hash randomisation, no dict-order effects)."""
    path = write_spec(tmp_path, QUICKSTART)
    code = "import sys; from nlgbench.spec import load_spec; print(' '.join(c.cell_id for c in load_spec(sys.argv[1]).cells()))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [c.cell_id for c in load_spec(path).cells()]


BASE_CELL = CellConfig(
    metric="bertscore",
    options={"idf": False, "layer": None},
    encoder=EncoderRef("all-MiniLM-L6-v2"),
    aligner=None,
    dataset=DatasetRef(name="wmt16"),
    device="cpu",
    batch_size=64,
    repeats=3,
    warmup=1,
    threads=None,
)


@pytest.mark.parametrize(
    "change",
    [
        {"metric": "moverscore"},
        {"options": {"idf": True, "layer": None}},
        {"options": {"idf": False, "layer": 4}},
        {"encoder": EncoderRef("all-mpnet-base-v2")},
        {"encoder": EncoderRef("sentence-transformers/all-MiniLM-L6-v2")},
        {"encoder": EncoderRef("all-MiniLM-L6-v2", num_layers=3)},
        {"aligner": "wmd"},
        {"dataset": DatasetRef(name="wmt15")},
        {"dataset": DatasetRef(name="wmt16", max_segments=100)},
        {"dataset": DatasetRef(path="/data/wmt16.jsonl")},
        {"device": "cuda"},
        {"device": "cuda:1"},
        {"batch_size": 1},
        {"repeats": 5},
        {"warmup": 0},
        {"threads": 4},
    ],
    ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items()),
)
def test_cell_id_changes_with_each_config_field(change: dict[str, Any]) -> None:
    changed = dataclasses.replace(BASE_CELL, **change)
    assert changed.cell_id != BASE_CELL.cell_id
    assert dataclasses.replace(BASE_CELL).cell_id == BASE_CELL.cell_id


def test_cell_fields_all_covered() -> None:
    """Every CellConfig field appears in the config that the id hashes (a new field must not be left out)."""
    assert set(BASE_CELL.to_dict()) == {f.name for f in dataclasses.fields(CellConfig)}


def test_cell_id_changes_with_score_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    before = BASE_CELL.cell_id
    versions = nlgbench.cell.score_versions()
    assert set(versions) >= {"nlgbench", "torch", "transformers"}
    monkeypatch.setattr(nlgbench.cell, "score_versions", lambda: dict(versions, torch="0.0"))
    assert BASE_CELL.cell_id != before


@pytest.mark.parametrize(
    "options",
    [None, {}, {"idf": False}, {"idf": False, "layer": None}, {"layer": None, "idf": False}],
    ids=["absent", "empty", "idf-false", "both-defaults", "reordered"],
)
def test_option_defaults_filled(options: dict[str, Any] | None) -> None:
    entry: dict[str, Any] = {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}
    if options is not None:
        entry["options"] = options
    assert ids(minimal_spec(metrics=[entry])) == ids(minimal_spec())
    assert parse_spec(minimal_spec(metrics=[entry])).metrics[0].options == {"idf": False, "layer": None}


def test_non_default_options_change_id() -> None:
    idf = ids(minimal_spec(metrics=[{"metric": "bertscore", "options": {"idf": True}, "encoders": ["all-MiniLM-L6-v2"]}]))
    layer = ids(minimal_spec(metrics=[{"metric": "bertscore", "options": {"layer": 3}, "encoders": ["all-MiniLM-L6-v2"]}]))
    assert len({*idf, *layer, *ids(minimal_spec())}) == 3


# --------------------------------------------------------------------------- dry run


def test_dry_run_prints_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec(tmp_path, dict(QUICKSTART, devices=["cpu", "cuda"]))
    out = tmp_path / "out"
    assert main(["run", str(path), "--dry-run", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    cells = load_spec(path).cells()
    assert len(cells) == 3 * 3 * 2
    assert lines[:-1] == [f"{c.cell_id}  {c.label}" for c in cells]
    assert "bertscore | all-MiniLM-L6-v2[num_layers=3] | wmt16[:200] | cuda | bs64" in captured.out
    sources = {resolve_source(e.name) for e in load_spec(path).metrics[0].encoders}
    missing = sorted(s for s in sources if local_snapshot(s) is None)
    assert lines[-1] == f"{len(cells)} cells; models not in the local cache: {', '.join(missing) or 'none'}"
    assert not out.exists()  # nothing run, nothing written
