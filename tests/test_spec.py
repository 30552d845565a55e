"""Sweep specs: parsing the shape docs/architecture.md gives (Sweep spec), cell expansion, deterministic
cell ids, `run --dry-run`.

No model is loaded: registry names and registered Hub ids pass validation without touching
the model, and an autouse fixture fails any test that tries.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import nlgbench.core.cell
import nlgbench.encoders.runtime
import nlgbench.execution.local
import nlgbench.metrics.bertscore
from helpers import minimal_spec, write_jsonl
from nlgbench.cli import main
from nlgbench.core.cell import CellConfig
from nlgbench.core.spec import DatasetRef, load_spec, parse_spec
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef, resolve_source
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric, metric_names

pytestmark = pytest.mark.unit

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

    for name in metric_names():  # import every metric module first: one imported while the patch is on
        get_metric(name)  # would keep the stub as its `load_encoder` for the rest of the session
    monkeypatch.setattr(nlgbench.encoders.runtime, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.metrics.bertscore, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.execution.local, "execute", forbidden)


MY_ROWS = [
    {
        "lp": "de-en",
        "seg_id": i + 1,
        "source": "s",
        "reference": f"ref {i}",
        "hypothesis": f"hyp {i}",
        "human": float(i),
    }
    for i in range(3)
]


def write_my_data(folder: Path) -> Path:
    """QUICKSTART's own data file, `data/my.jsonl` under `folder` (a spec's data file must exist)."""
    data = folder / "data" / "my.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(data, MY_ROWS)
    return data


def write_spec(folder: Path, spec: dict[str, Any], name: str = "spec.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_my_data(folder)
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def ids(spec: dict[str, Any], base: Path | None = None) -> list[str]:
    """The spec's cell ids; `base` gets QUICKSTART's data file (relative paths are read from there)."""
    if base is not None:
        write_my_data(base)
    return [c.cell_id for c in parse_spec(spec, base=base).cells()]


# --------------------------------------------------------------------------- parsing


@pytest.mark.component
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
        EncoderRef("all-MiniLM-L6-v2"),  # named by its Hub id in the spec: the registry name, one cell
        EncoderRef("all-MiniLM-L6-v2", num_layers=3),
    ]
    assert [e.label for e in entry.encoders][2] == "all-MiniLM-L6-v2[num_layers=3]"
    assert entry.aligners == [None]
    assert resolve_source("all-MiniLM-L6-v2") == resolve_source("sentence-transformers/all-MiniLM-L6-v2")
    assert len(spec.cells()) == 3 * 3


@pytest.mark.component
def test_examples_quickstart_parses() -> None:
    spec = load_spec(REPO / "examples" / "quickstart.yaml")
    assert spec.name == "quickstart"
    cells = spec.cells()
    assert len(cells) == len(spec.metrics[0].encoders) * len(spec.datasets)
    assert all(c.metric == "bertscore" and c.device in spec.devices for c in cells)


@pytest.mark.component
def test_defaults(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, {k: v for k, v in minimal_spec().items() if k != "name"}, "my-sweep.yaml"))
    assert spec.name == "my-sweep"  # from the file name
    assert spec.devices == ["cpu"] and spec.batch_sizes == [64]
    assert (spec.repeats, spec.warmup, spec.threads) == (3, 1, None)
    assert spec.metrics[0].options == {"idf": False, "layer": None}


@pytest.mark.component
def test_scalars_or_lists() -> None:
    spec = parse_spec(
        minimal_spec(
            datasets="wmt15",
            devices="cuda:1",
            batch_size=[1, 8],
            threads=4,
            metrics={"metric": "bertscore", "encoders": "all-MiniLM-L6-v2"},
        )
    )
    assert spec.datasets == [DatasetRef(name="wmt15")]
    assert spec.devices == ["cuda:1"] and spec.batch_sizes == [1, 8] and spec.threads == 4
    assert spec.metrics[0].encoders == [EncoderRef("all-MiniLM-L6-v2")]


@pytest.mark.component
def test_absolute_data_path_kept(tmp_path: Path) -> None:
    data = tmp_path / "abs" / "d.tsv"
    data.parent.mkdir()
    data.write_text("lp\tseg_id\treference\thypothesis\thuman\nde-en\t1\ta\tb\t1\n", encoding="utf-8")
    spec = parse_spec(minimal_spec(datasets=[{"path": str(data), "max_segments": 10}]), base=tmp_path / "other")
    assert spec.datasets == [DatasetRef(path=str(data), max_segments=10)]
    assert spec.datasets[0].label == "d[:10]"


# --------------------------------------------------------------------------- cells


@pytest.mark.component
def test_cell_expansion_count_and_order() -> None:
    spec = parse_spec(
        minimal_spec(
            datasets=["wmt16", {"name": "wmt15", "max_segments": 10}],
            devices=["cpu", "cuda"],
            batch_size=[1, 64],
            metrics=[
                {
                    "metric": "bertscore",
                    "encoders": [
                        "all-mpnet-base-v2",
                        "all-MiniLM-L6-v2",
                        {"name": "all-MiniLM-L6-v2", "num_layers": 3},
                    ],
                },
                {"metric": "bertscore", "options": {"idf": True}, "encoders": ["all-MiniLM-L6-v2"]},
            ],
        )
    )
    cells = spec.cells()
    assert len(cells) == (3 + 1) * 2 * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    # stable order: metric entry, encoder, aligner, dataset, device, batch size (innermost)
    assert [(c.device, c.batch_size) for c in cells[:4]] == [("cpu", 1), ("cpu", 64), ("cuda", 1), ("cuda", 64)]
    assert [c.dataset.label for c in cells[:8]] == ["wmt16"] * 4 + ["wmt15[:10]"] * 4
    assert [c.encoder.label for c in cells[::8]] == [
        "all-mpnet-base-v2",
        "all-MiniLM-L6-v2",
        "all-MiniLM-L6-v2[num_layers=3]",
        "all-MiniLM-L6-v2",
    ]
    assert [dict(c.options)["idf"] for c in cells[::8]] == [False, False, False, True]
    assert cells[0].label == "bertscore | all-mpnet-base-v2 | wmt16 | cpu | bs1"


@pytest.mark.component
def test_duplicate_cells_collapse() -> None:
    spec = parse_spec(
        minimal_spec(
            metrics=[
                {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2", "all-MiniLM-L6-v2"]},
                {"metric": "bertscore", "options": {"idf": False}, "encoders": ["all-MiniLM-L6-v2"]},
            ]
        )
    )
    assert len(spec.cells()) == 1


@pytest.mark.component
def test_cell_ids_deterministic(tmp_path: Path) -> None:
    first, second = ids(QUICKSTART, tmp_path), ids(QUICKSTART, tmp_path)
    assert first == second
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in first)
    assert len(set(first)) == len(first)


@pytest.mark.component
def test_sweep_name_does_not_change_cell_ids() -> None:
    assert ids(minimal_spec(name="a", description="x")) == ids(minimal_spec(name="b"))


@pytest.mark.integration
def test_cell_ids_stable_across_processes(tmp_path: Path) -> None:
    """Resuming needs the same ids in a new process (no hash randomisation, no dict-order effects)."""
    path = write_spec(tmp_path, QUICKSTART)
    code = (
        "import sys; from nlgbench.core.spec import load_spec; "
        "print(' '.join(c.cell_id for c in load_spec(sys.argv[1]).cells()))"
    )
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
        {"inputs": {"/data/own.jsonl": "sha256:" + "0" * 64}},
        {"batch_tokens": 4096},
    ],
    ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items()),
)
def test_cell_id_changes_with_each_config_field(change: dict[str, Any]) -> None:
    changed = dataclasses.replace(BASE_CELL, **change)
    assert changed.cell_id != BASE_CELL.cell_id
    assert dataclasses.replace(BASE_CELL).cell_id == BASE_CELL.cell_id


def test_cell_fields_all_covered() -> None:
    """Every CellConfig field that defines the cell (compared) appears in the config that the id hashes (a
    new field must not be left out); `inputs` and `batch_tokens` only where set, so cells without local
    files or a token budget keep their ids. The one field that does not define it, `registry_files` (the
    worker's instruction, paths of this machine), is left out of equality, the id and result.json."""
    compared = {f.name for f in dataclasses.fields(CellConfig) if f.compare}
    assert {f.name for f in dataclasses.fields(CellConfig)} - compared == {"registry_files"}
    with_inputs = dataclasses.replace(BASE_CELL, inputs={"/data/own.jsonl": "sha256:" + "0" * 64}, batch_tokens=4096)
    assert set(with_inputs.to_dict()) == compared
    assert set(BASE_CELL.to_dict()) == compared - {"inputs", "batch_tokens"}
    assert CellConfig.from_dict(with_inputs.to_dict()) == with_inputs


@pytest.mark.component
def test_committed_example_cell_ids_unchanged() -> None:
    """reports/example was measured with these ids: catalogue data and registered encoders get no
    `inputs`, so the spec's cells get the same ids again under the library versions that run recorded
    (under a newer transformers minor the ids differ on purpose: resuming then measures anew)."""
    recorded = [json.loads(line) for line in (REPO / "reports" / "example" / "report" / "cells.jsonl").open()]
    cells = load_spec(REPO / "examples" / "quickstart.yaml").cells()
    assert [r["cell_id"] for r in recorded] == ["014a0324952f", "2986462f35bb", "1ea7b63d1adf"]
    then = [
        {**nlgbench.core.cell.recorded_score_versions(r["environment"]), **nlgbench.core.cell.metric_versions(c.metric)}
        for c, r in zip(cells, recorded, strict=True)
    ]
    assert [c.id_under(versions) for c, versions in zip(cells, then, strict=True)] == [r["cell_id"] for r in recorded]
    assert all(not c.inputs for c in cells)


@pytest.mark.component
def test_hub_id_and_registered_name_are_one_cell() -> None:
    spec = parse_spec(
        minimal_spec(
            metrics=[
                {"metric": "bertscore", "encoders": ["sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"]}
            ]
        )
    )
    (cell,) = spec.cells()
    assert cell.encoder == EncoderRef("all-MiniLM-L6-v2") and cell.label.startswith("bertscore | all-MiniLM-L6-v2 |")
    assert cell.cell_id == ids(minimal_spec())[0]


@pytest.mark.component
def test_user_data_file_content_in_cell_id(tmp_path: Path) -> None:
    data = write_my_data(tmp_path)
    spec = parse_spec(minimal_spec(datasets=[{"path": str(data)}]))
    (before,) = spec.cells()
    assert before.inputs == {str(data): "sha256:" + hashlib.sha256(data.read_bytes()).hexdigest()}
    data.write_text(data.read_text(encoding="utf-8").replace('"human": 1.0', '"human": -1.0'), encoding="utf-8")
    (after,) = spec.cells()
    assert after.cell_id != before.cell_id
    assert {k: v for k, v in after.to_dict().items() if k != "inputs"} == {
        k: v for k, v in before.to_dict().items() if k != "inputs"
    }


def test_repeated_yaml_key_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: t\nrepeats: 3\ndatasets: [wmt16]\nrepeats: 5\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"at line 4, column 1: repeated key 'repeats' \(first at line 2\)"):
        load_spec(path)
    # a merge key may still be overridden
    path.write_text("base: &b {a: 1}\nother:\n  <<: *b\n  a: 2\n", encoding="utf-8")
    with pytest.raises(UserError, match="unknown key 'base'"):
        load_spec(path)


@pytest.mark.component
@pytest.mark.parametrize("name", ["x" * 101, "../../x", "a/b", "..", "a\\b", "tab\there"])
def test_run_name_must_be_a_plain_folder_name(name: str) -> None:
    with pytest.raises(UserError, match=r"spec\.name .*(characters|plain folder name)") as info:
        parse_spec(minimal_spec(name=name))
    assert "\n" not in str(info.value)
    assert parse_spec(minimal_spec(name="x" * 100 + "")).name == "x" * 100
    assert parse_spec(minimal_spec(name="v1.2 final")).name == "v1.2 final"


@pytest.mark.component
@pytest.mark.parametrize("kind", ["missing", "folder", "csv"])
def test_data_path_checked_at_parse(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("d.csv" if kind == "csv" else "d.jsonl")
    if kind == "folder":
        path.mkdir()
    elif kind == "csv":
        path.write_text("lp,seg_id\n", encoding="utf-8")
    message = {"missing": "missing file", "folder": "is a directory", "csv": "unsupported type '.csv'"}[kind]
    with pytest.raises(UserError, match=message):
        parse_spec(minimal_spec(datasets=[{"path": str(path)}]))


def test_cell_id_changes_with_score_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    before = BASE_CELL.cell_id
    versions = nlgbench.core.cell.score_versions()
    assert set(versions) >= {"nlgbench", "torch", "transformers"}
    monkeypatch.setattr(nlgbench.core.cell, "score_versions", lambda: dict(versions, torch="0.0"))
    assert BASE_CELL.cell_id != before


@pytest.mark.component
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


@pytest.mark.component
def test_non_default_options_change_id() -> None:
    idf = ids(
        minimal_spec(metrics=[{"metric": "bertscore", "options": {"idf": True}, "encoders": ["all-MiniLM-L6-v2"]}])
    )
    layer = ids(
        minimal_spec(metrics=[{"metric": "bertscore", "options": {"layer": 3}, "encoders": ["all-MiniLM-L6-v2"]}])
    )
    assert len({*idf, *layer, *ids(minimal_spec())}) == 3


# --------------------------------------------------------------------------- dry run


@pytest.mark.component
def test_dry_run_prints_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # CUDA cells: on a machine that has CUDA (a local dry run of them is refused elsewhere,
    # tests/test_runner.py::test_cuda_spec_without_gpu_is_refused_before_any_cell)
    path = write_spec(tmp_path, dict(QUICKSTART, devices=["cpu", "cuda"]))
    monkeypatch.setattr("nlgbench.cli.run.check_devices", lambda spec: None)
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


def test_lexical_cell_id_changes_with_its_library_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """sacrebleu / rouge-score versions join the ids of their metrics' cells only: an upgrade reruns a
    BLEU cell, while a BERTScore cell keeps its id."""
    import dataclasses
    import importlib.metadata

    bleu = dataclasses.replace(BASE_CELL, metric="sentbleu", options={}, encoder=EncoderRef(name="none"))
    assert nlgbench.core.cell.metric_versions("sentbleu") == {
        "sacrebleu": ".".join(importlib.metadata.version("sacrebleu").split(".")[:2])
    }
    assert nlgbench.core.cell.metric_versions("bertscore") == {}
    before, bert_before = bleu.cell_id, BASE_CELL.cell_id
    real = importlib.metadata.version
    nlgbench.core.cell.metric_versions.cache_clear()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.0" if name == "sacrebleu" else real(name))
    try:
        assert bleu.cell_id != before and BASE_CELL.cell_id == bert_before
    finally:
        nlgbench.core.cell.metric_versions.cache_clear()
