"""`hf:` datasets in cells and runs: the content and revision in a cell id, the warning on an unpinned
revision, the CLI's dry run and a lexical sweep on a saved dataset, and the documented mappings
(WMT DA, WMT MQM, SummEval) on local Parquet folders.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats

import helpers
import nlgbench
from helpers import read_csv
from hfkit import DA_COLUMNS, DOC, VERSIONS, da_rows, private_hf_cache, save, spec_dict
from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.spec import load_spec, parse_spec
from nlgbench.data.hubsource import HubSource, hub_warnings
from nlgbench.data.items import Dataset
from nlgbench.encoders.registry import EncoderRef

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The library's cache under tmp_path and the Hub offline, for every test (`hfkit.private_hf_cache`)."""
    return private_hf_cache(tmp_path, monkeypatch)


# ----------------------------------------------------------------------------- cell ids


def test_content_and_revision_are_in_the_cell_id(tmp_path: Path) -> None:
    folder = save(tmp_path / "da", da_rows())
    spec = parse_spec(spec_dict([{"hf": "da", "split": "train", "columns": DA_COLUMNS}]), base=tmp_path)
    (before,) = spec.cells()
    sha = "sha256:" + next(iter(DatasetRef(hf=spec.datasets[0].hf).load().files.values()))
    assert before.inputs == {f"hf:{folder}": sha}
    assert before.to_dict()["dataset"]["hf"] == {"hf": str(folder), "split": "train", "columns": DA_COLUMNS}
    assert CellConfig.from_dict(json.loads(json.dumps(before.to_dict()))).cell_id == before.cell_id  # config.json
    changed = {**da_rows(), "score": [0.9, 0.1, 0.5, 1.2, None, -0.4, 0.7]}
    save(tmp_path / "da2", changed)
    folder.rename(tmp_path / "old")
    (tmp_path / "da2").rename(folder)
    (after,) = spec.cells()
    assert after.cell_id != before.cell_id and after.inputs[f"hf:{folder}"] != sha
    assert {k: v for k, v in after.to_dict().items() if k != "inputs"} == {
        k: v for k, v in before.to_dict().items() if k != "inputs"
    }
    # two entries filtering one dataset: two contents, two ids
    two = parse_spec(
        spec_dict([{"hf": "da", "columns": DA_COLUMNS, "filter": {"lp": lp}} for lp in ("de-en", "en-de")]),
        base=tmp_path,
    ).cells()
    assert len({c.cell_id for c in two}) == 2 and len({c.inputs[f"hf:{folder}"] for c in two}) == 2


def test_revision_as_requested_is_in_the_cell_id() -> None:
    """The revision is part of the entry the id hashes (a Hub dataset: its content hash joins it in
    `inputs` when the spec's cells are made; here both are fixed)."""

    def cell(revision: str | None) -> CellConfig:
        raw = {"hf": "RicardoRei/wmt-da-human-evaluation", "split": "train", "columns": DA_COLUMNS}
        hub = HubSource.from_dict({**raw, **({"revision": revision} if revision else {})})
        inputs = {hub.key: "sha256:" + "0" * 64}
        return CellConfig("sentbleu", {}, EncoderRef("none"), None, DatasetRef(hf=hub), "cpu", 64, 3, 1, None, inputs)

    ids = {cell(r).id_under(VERSIONS) for r in (None, "main", "a" * 40, "b" * 40)}
    assert len(ids) == 4
    assert HubSource.from_dict({"hf": "o/x", "revision": "a" * 40, "columns": DA_COLUMNS}).pinned
    # the filter in one order: the same rows, the same entry (and id) however the spec lists them
    one = HubSource.from_dict({"hf": "o/x", "columns": DA_COLUMNS, "filter": {"lp": ["zh-en", "de-en"], "year": 2019}})
    other = HubSource.from_dict(
        {"hf": "o/x", "columns": DA_COLUMNS, "filter": {"year": [2019], "lp": ["de-en", "zh-en"]}}
    )
    assert one == other and one.to_dict()["filter"] == {"lp": ["de-en", "zh-en"], "year": [2019]}


def test_unpinned_hub_revision_is_warned_about() -> None:
    def warnings(name: str, revision: str | None) -> list[str]:
        raw = {"hf": name, "columns": DA_COLUMNS, **({"revision": revision} if revision else {})}
        return hub_warnings(HubSource.from_dict(raw))

    assert warnings("RicardoRei/wmt-da-human-evaluation", None) == [
        "hf dataset RicardoRei/wmt-da-human-evaluation: no revision is given, so the data is not pinned; the cell "
        "id holds its content's sha256 (changed data makes new cells), but to reproduce this run pin revision: "
        "<40-hex commit>"
    ]
    assert warnings("o/x", "main")[0].startswith("hf dataset o/x: revision 'main' is not a commit, so the data is not")
    assert warnings("o/x", "0123456789abcdef0123456789abcdef01234567") == []
    assert warnings("/data/folder", None) == []  # a local folder: its content is its identity


def test_ids_of_catalogue_and_own_file_cells_unchanged() -> None:
    """Ids computed before `hf:` sources existed, under fixed versions: the `hf` key enters a config only where set."""

    def cell(ds: DatasetRef, inputs: dict[str, str] | None = None) -> CellConfig:
        return CellConfig("sentbleu", {}, EncoderRef("none"), None, ds, "cpu", 64, 3, 1, None, inputs or {})

    assert cell(DatasetRef(name="wmt16", max_segments=40)).id_under(VERSIONS) == "a30bc1dec53e"
    own = DatasetRef(path="/data/own.jsonl", sample=(10, 0), human="relevance", columns=("domain",))
    assert cell(own, {"/data/own.jsonl": "sha256:" + "0" * 64}).id_under(VERSIONS) == "ce5c2bcba2b8"


# ----------------------------------------------------------------------------- the CLI and a run


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process in `cwd`, the Hub and its datasets offline."""
    return helpers.cli_subprocess(*args, cwd=cwd, env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})


@pytest.mark.integration
def test_dry_run_loads_the_dataset_and_prints_its_cells(tmp_path: Path) -> None:
    save(tmp_path / "data" / "da", da_rows())
    spec = tmp_path / "spec.yaml"
    entry = {"hf": "data/da", "split": "train", "filter": {"year": 2019}, "columns": DA_COLUMNS}
    spec.write_text(yaml.safe_dump(spec_dict([entry])), encoding="utf-8")
    proc = cli("run", str(spec), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (expected,) = load_spec(spec).cells()
    assert f"{expected.cell_id}  sentbleu | none | da | cpu | bs64" in proc.stdout
    assert "1 cells" in proc.stdout and "warning" not in proc.stderr  # a local folder needs no revision
    bad = {**entry, "columns": {**DA_COLUMNS, "human": "scroe"}}
    spec.write_text(yaml.safe_dump(spec_dict([bad])), encoding="utf-8")
    proc = cli("run", str(spec), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "nlgbench: error: hf dataset da: no column 'scroe' (human; did you mean 'score', 'ref', 'src'?); "
        "its columns: lp, src, mt, ref, score, raw, year"
    )
    hub = {**entry, "hf": "RicardoRei/wmt-da-human-evaluation"}
    spec.write_text(yaml.safe_dump(spec_dict([hub])), encoding="utf-8")
    proc = cli("run", str(spec), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "wmt-da-human-evaluation: offline (HF_HUB_OFFLINE=1) and not in the local cache" in proc.stderr


@pytest.mark.integration
def test_lexical_cells_run_on_a_saved_dataset(tmp_path: Path) -> None:
    """sentbleu and chrf end to end (`nlgbench.api.run`, worker processes loading the dataset again):
    results.csv names the dataset and its content hash; the correlations are those of scores.csv."""
    folder = save(tmp_path / "da", da_rows())
    spec = tmp_path / "spec.yaml"
    entry = {"hf": "da", "split": "train", "columns": {**DA_COLUMNS, "human": {"z": "score", "raw": "raw"}}}
    second = {**entry, "filter": {"lp": "en-de"}}  # one label, another content
    metrics = [{"metric": "sentbleu"}, {"metric": "chrf"}]
    spec.write_text(yaml.safe_dump(spec_dict([entry, second], metrics=metrics, repeats=1, warmup=0)), encoding="utf-8")
    nlgbench.run(spec, out=tmp_path / "run", quiet=True)
    every = read_csv(tmp_path / "run" / "results.csv")
    sha, other = (next(iter(ref.load().files.values())) for ref in load_spec(spec).datasets)  # as each entry maps
    assert {(r["dataset"], r["dataset_path"], r["dataset_sha256"]) for r in every} == {
        (f"da@{sha[:8]}", f"hf:{folder}", sha),
        (f"da@{other[:8]}", f"hf:{folder}", other),
    }
    rows = [r for r in every if r["dataset_sha256"] == sha]
    assert sorted((r["metric"], r["human_dim"], r["status"]) for r in rows) == [
        (m, d, "ok") for m in ("chrf", "sentbleu") for d in ("raw", "z")
    ]
    for row in rows:
        scores = read_csv(tmp_path / "run" / "cells" / row["cell_id"] / "scores.csv")
        column = f"human.{row['human_dim']}"
        kept = [s for s in scores if s[column] != ""]
        expected = stats.pearsonr([float(s["score"]) for s in kept], [float(s[column]) for s in kept])[0]
        assert float(row["pearson_global"]) == pytest.approx(expected, abs=1e-12)
        assert int(row["n_missing_human"]) == (2 if row["human_dim"] == "z" else 0)
    result = json.loads((tmp_path / "run" / "cells" / rows[0]["cell_id"] / "result.json").read_text(encoding="utf-8"))
    assert result["dataset"]["files"] == {f"hf:{folder}": sha}
    assert result["config"]["inputs"] == {f"hf:{folder}": f"sha256:{sha}"}
    assert np.isfinite(float(rows[0]["ms_per_segment_mean"]))


# ----------------------------------------------------------------------------- the documented mappings


def documented(hub_id: str) -> dict[str, Any]:
    """The dataset entry of the documentation page's YAML block for `hub_id` (the page is the test's input)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    entries = [
        e for b in blocks for e in yaml.safe_load(b)["datasets"] if e["hf"] == hub_id and "max_segments" not in e
    ]
    assert len(entries) == 1, f"one YAML block of {DOC.name} maps {hub_id}"
    return entries[0]


def run_documented(tmp_path: Path, hub_id: str, rows: dict[str, list[Any]]) -> Dataset:
    """The documented entry with its Hub id replaced by a local Parquet folder holding `rows`, as the spec loads it."""
    entry = documented(hub_id)
    folder = save(tmp_path / hub_id.split("/")[1], rows, how="parquet", split=entry["split"])
    spec = parse_spec(spec_dict([{**entry, "hf": str(folder)}]), base=tmp_path)
    return spec.datasets[0].load()


def test_documented_wmt_da_mapping(tmp_path: Path) -> None:
    rows = {
        "lp": ["de-en", "zh-en", "en-de", "de-en"],
        "src": ["Hallo.", "你好。", "Hello.", "Welt."],
        "mt": ["Hello.", "Hello.", "Hallo.", "World."],
        "ref": ["Hi.", "Hi.", "Hallo.", "World."],
        "score": [0.5, -0.3, 1.0, 0.8],
        "raw": [75.0, 40.0, 90.0, 88.0],
        "annotators": [1, 2, 1, 1],
        "domain": ["news"] * 4,
        "year": [2019, 2019, 2019, 2018],
    }
    ds = run_documented(tmp_path, "RicardoRei/wmt-da-human-evaluation", rows)
    assert [(it.lp, it.seg_id, it.source, it.hypothesis, it.reference, it.human) for it in ds.items] == [
        ("de-en", 1, "Hallo.", "Hello.", "Hi.", 0.5),
        ("zh-en", 1, "你好。", "Hello.", "Hi.", -0.3),
    ]


def test_documented_wmt_mqm_mapping(tmp_path: Path) -> None:
    rows = {
        "lp": ["en-de", "en-de", "zh-en", "en-ru", "en-de"],
        "src": ["A.", "A.", "甲。", "B.", "C."],
        "mt": ["A1.", "A2.", "A.", "Б.", "C1."],
        "ref": ["A.", "A.", "A.", "Б.", "C."],
        "score": [-1.0, -5.0, 0.0, -2.0, -0.5],
        "system": ["sysA", "sysB", "sysA", "sysA", "sysA"],
        "annotators": [1, 1, 1, 1, 1],
        "domain": ["news", "news", "ecommerce", "news", "social"],
        "year": [2022, 2022, 2022, 2022, 2021],
    }
    ds = run_documented(tmp_path, "RicardoRei/wmt-mqm-human-evaluation", rows)
    assert ds.has_systems and ds.language_pairs == ["en-de", "zh-en"]
    assert [(it.lp, it.seg_id, it.system, it.hypothesis, it.human) for it in ds.items] == [
        ("en-de", 1, "sysA", "A1.", -1.0),
        ("en-de", 2, "sysB", "A2.", -5.0),
        ("zh-en", 1, "sysA", "A.", 0.0),
    ]


def test_documented_summeval_mapping(tmp_path: Path) -> None:
    dims = ("relevance", "coherence", "fluency", "consistency")
    rows: dict[str, list[Any]] = {
        "machine_summaries": [["s1 of a", "s2 of a", "s3 of a"], ["s1 of b", "s2 of b", "s3 of b"]],
        "human_summaries": [["ref a1", "ref a2"], ["ref b1", "ref b2"]],
        **{dim: [[1.0 + k, 2.0, 3.0], [4.0, 5.0 - k, 1.5]] for k, dim in enumerate(dims)},
        "text": ["article a", "article b"],
        "id": ["dm-test-a", "dm-test-b"],
    }
    ds = run_documented(tmp_path, "mteb/summeval", rows)
    assert ds.human_dims == list(dims) and ds.has_docs and not ds.has_systems
    assert [(it.lp, it.doc_id, it.source, it.hypothesis, it.references) for it in ds.items[:4]] == [
        ("en", "dm-test-a", "article a", "s1 of a", ("ref a1", "ref a2")),
        ("en", "dm-test-a", "article a", "s2 of a", ("ref a1", "ref a2")),
        ("en", "dm-test-a", "article a", "s3 of a", ("ref a1", "ref a2")),
        ("en", "dm-test-b", "article b", "s1 of b", ("ref b1", "ref b2")),
    ]
    assert len(ds.items) == 6 and [it.seg_id for it in ds.items] == [1, 2, 3, 4, 5, 6]
    assert ds.items[0].humans == {"relevance": 1.0, "coherence": 2.0, "fluency": 3.0, "consistency": 4.0}
    assert ds.items[4].humans == {"relevance": 5.0, "coherence": 4.0, "fluency": 3.0, "consistency": 2.0}
