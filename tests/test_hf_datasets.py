"""Hugging Face datasets as a data source: `hf:` dataset entries, offline.

Every dataset is built here and written as the Hub holds data files (Parquet in a folder, read by
`datasets.load_dataset`, the Hub's own code path) or by `save_to_disk` (read by `load_from_disk`);
the library's cache is kept under tmp_path. The Hub itself is only asked, offline, for a dataset it
cannot have cached.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats

import helpers
import nlgbench
from helpers import read_csv
from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.spec import load_spec, parse_spec
from nlgbench.data.hubdata import content_sha256, hub_records, open_table
from nlgbench.data.hubsource import HubSource, hub_warnings
from nlgbench.data.items import Dataset
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

datasets = pytest.importorskip("datasets")

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "how-to" / "hf-datasets.md"
VERSIONS = {"nlgbench": "0.1.0", "torch": "2.13", "transformers": "5.24", "sacrebleu": "2.5"}
DA_COLUMNS = {"lp": "lp", "source": "src", "hypothesis": "mt", "reference": "ref", "human": "score"}


@pytest.fixture(autouse=True)
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The library's cache under tmp_path (its module setting for this process, the environment for
    the CLI's), and the Hub offline."""
    cache = tmp_path / "hf-datasets-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return cache


def da_rows() -> dict[str, list[Any]]:
    """A small WMT-DA-shaped table: two language pairs and two years; one missing score (None), one NaN."""
    return {
        "lp": ["de-en", "de-en", "de-en", "en-de", "de-en", "en-de", "en-de"],
        "src": ["Das Haus.", "Ein Hund.", "Alt.", "The cat.", "Der Baum.", "A car.", "The sun."],
        "mt": ["The house.", "A dog runs.", "Old.", "Die Katze.", "The tree is.", "Ein Wagen.", "Die Sonne."],
        "ref": ["The house.", "A dog.", "Old.", "Die Katze.", "The tree.", "Ein Auto.", "Die Sonne."],
        "score": [0.9, 0.1, 0.5, 1.2, None, -0.4, float("nan")],
        "raw": [90.0, 40.0, 60.0, 95.0, 50.0, 20.0, 70.0],
        "year": [2019, 2019, 2018, 2019, 2019, 2019, 2019],
    }


def save(folder: Path, rows: dict[str, list[Any]], how: str = "saved", split: str = "train") -> Path:
    """`rows` as a folder: `saved` (DatasetDict.save_to_disk), `dataset` (Dataset.save_to_disk) or
    `parquet` (SPLIT.parquet, as a Hub repository holds data files)."""
    table = datasets.Dataset.from_dict(rows)
    if how == "saved":
        datasets.DatasetDict({split: table}).save_to_disk(str(folder))
    elif how == "dataset":
        table.save_to_disk(str(folder))
    else:
        folder.mkdir(parents=True)
        table.to_parquet(str(folder / f"{split}.parquet"))
    return folder


def source(folder: Path, **entry: Any) -> HubSource:
    raw = {"hf": str(folder), "columns": DA_COLUMNS, **entry}
    return HubSource.parse(raw, "t.datasets[0]", folder.parent)


def load(folder: Path, **entry: Any) -> Dataset:
    return DatasetRef(hf=source(folder, **entry)).load()


def spec_dict(datasets_: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    return {"name": "hf", "datasets": datasets_, "metrics": [{"metric": "sentbleu"}], **changes}


# ----------------------------------------------------------------------------- loading


def test_saved_dataset_is_filtered_mapped_and_checked(tmp_path: Path) -> None:
    folder = save(tmp_path / "da", da_rows())
    ds = load(folder, split="train", filter={"year": 2019})
    assert ds.name == "da" and ds.human_dims == ["human"] and not ds.has_systems and not ds.warnings
    # year 2018 dropped; seg_id: the row's position among the kept rows of its lp, from 1
    assert [(it.lp, it.seg_id, it.hypothesis) for it in ds.items] == [
        ("de-en", 1, "The house."),
        ("de-en", 2, "A dog runs."),
        ("de-en", 3, "The tree is."),
        ("en-de", 1, "Die Katze."),
        ("en-de", 2, "Ein Wagen."),
        ("en-de", 3, "Die Sonne."),
    ]
    assert [it.source for it in ds.items[:2]] == ["Das Haus.", "Ein Hund."]
    assert [it.references for it in ds.items[:2]] == [("The house.",), ("A dog.",)]
    human = [it.human for it in ds.items]
    assert human[:2] == [0.9, 0.1] and math.isnan(human[2]) and math.isnan(human[5])  # None and NaN: missing
    assert ds.missing_human("human") == 2
    (key, sha) = next(iter(ds.files.items()))
    assert key == f"hf:{folder}" and sha == content_sha256(
        [r for _, r in hub_records(source(folder, filter={"year": 2019}))]
    )


def test_parquet_folder_loads_through_load_dataset_as_the_hub_does(tmp_path: Path, hf_cache: Path) -> None:
    """The same rows as Parquet files in a folder: read by `datasets.load_dataset(folder)` (which
    prepares them in the library's cache, here under tmp_path), giving the same items and content hash."""
    saved = load(save(tmp_path / "saved", da_rows()), split="train")
    parquet = load(save(tmp_path / "pq", da_rows(), how="parquet"), split="train")
    assert [(it.key, it.hypothesis, it.references) for it in parquet.items] == [
        (it.key, it.hypothesis, it.references) for it in saved.items
    ]
    assert list(parquet.files.values()) == list(saved.files.values())
    assert any(hf_cache.rglob("*.arrow")), "load_dataset prepared the Parquet files in the library's cache"
    # without split: the one split there is
    assert len(load(tmp_path / "pq").items) == len(parquet.items)


def test_split_choice_and_saved_single_dataset(tmp_path: Path) -> None:
    folder = save(tmp_path / "one", da_rows(), how="dataset")
    assert len(load(folder).items) == 7
    with pytest.raises(UserError, match=r"holds one dataset \(Dataset.save_to_disk\), no splits; drop split"):
        load(folder, split="train")
    two = tmp_path / "two"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict(da_rows()), "test": datasets.Dataset.from_dict(da_rows())}
    ).save_to_disk(str(two))
    with pytest.raises(UserError, match="has splits train, test; give split:"):
        load(two)
    with pytest.raises(UserError, match=r"unknown split 'tset'; did you mean 'test'\?"):
        load(two, split="tset")
    with pytest.raises(UserError, match=r"pq: cannot load it: Unknown split \"tset\". Should be one of \['train'\]"):
        load(save(tmp_path / "pq", da_rows(), how="parquet"), split="tset")  # the library's own message


def test_several_references_and_dimensions(tmp_path: Path) -> None:
    rows = {
        "doc": ["d1", "d1", "d2"],
        "out": ["a b", "b c", "c d"],
        "ref1": ["a b", "b", "c"],
        "ref2": ["a", "", "d"],  # an empty further reference: fewer references on that row
        "refs": [["a b", "x"], ["b"], ["c", "d", "e"]],
        "flu": [4.0, 3.0, None],
        "rel": [2.0, float("nan"), 5.0],
    }
    folder = save(tmp_path / "multi", rows)
    human = {"fluency": "flu", "relevance": "rel"}
    by_columns = load(folder, lp="en", columns={"hypothesis": "out", "reference": ["ref1", "ref2"], "human": human})
    assert [it.references for it in by_columns.items] == [("a b", "a"), ("b",), ("c", "d")]
    assert by_columns.human_dims == ["fluency", "relevance"]
    assert [it.humans for it in by_columns.items] == [
        {"fluency": 4.0, "relevance": 2.0},
        {"fluency": 3.0},
        {"relevance": 5.0},
    ]
    assert [it.lp for it in by_columns.items] == ["en"] * 3
    by_list = load(folder, columns={"hypothesis": "out", "reference": "refs", "human": human, "doc_id": "doc"})
    assert [it.references for it in by_list.items] == [("a b", "x"), ("b",), ("c", "d", "e")]
    assert [it.doc_id for it in by_list.items] == ["d1", "d1", "d2"] and by_list.has_docs
    assert [it.lp for it in by_list.items] == ["all"] * 3  # no lp column and no lp: given
    one = DatasetRef(
        hf=source(folder, columns={"hypothesis": "out", "reference": "refs", "human": human}), human="relevance"
    )
    assert [it.human for it in one.load().items][::2] == [2.0, 5.0]


def test_explode_makes_one_item_per_list_element(tmp_path: Path) -> None:
    rows = {"id": [101, 102], "outs": [["x", "y"], ["z"]], "refs": [["r"], ["s", "t"]], "q": [[1.0, 2.0], [3.0]]}
    folder = save(tmp_path / "nested", rows)
    columns = {"doc_id": "id", "hypothesis": "outs", "reference": "refs", "human": "q"}
    ds = load(folder, explode=["outs", "q"], lp="en", columns=columns)
    assert [(it.seg_id, it.doc_id, it.hypothesis, it.references, it.human) for it in ds.items] == [
        (1, "101", "x", ("r",), 1.0),  # an integer id column: written out as text
        (2, "101", "y", ("r",), 2.0),
        (3, "102", "z", ("s", "t"), 3.0),
    ]
    bad = save(tmp_path / "ragged", {**rows, "q": [[1.0], [3.0]]})
    with pytest.raises(
        UserError, match=r"hf dataset ragged row 1: the exploded lists differ in length \(outs: 2, q: 1\)"
    ):
        load(bad, explode=["outs", "q"], columns=columns)


# ----------------------------------------------------------------------------- checks


def test_unknown_column_names_the_closest_real_ones(tmp_path: Path) -> None:
    folder = save(tmp_path / "da", da_rows())
    columns = {**DA_COLUMNS, "hypothesis": "mtt", "human": "scroe"}
    with pytest.raises(UserError) as caught:
        load(folder, columns=columns, filter={"yaer": 2019})
    assert str(caught.value) == (
        "hf dataset da: no column 'mtt' (hypothesis; did you mean 'mt'?), 'scroe' (human; did you mean 'score', "
        "'ref', 'src'?), 'yaer' (filter.yaer; did you mean 'year'?); its columns: lp, src, mt, ref, score, raw, year"
    )


def test_filter_value_no_row_holds_is_refused(tmp_path: Path) -> None:
    folder = save(tmp_path / "da", da_rows())
    with pytest.raises(UserError, match=r"filter lp: no row holds 'en-ed'; did you mean 'en-de'"):
        load(folder, filter={"lp": ["de-en", "en-ed"]})
    with pytest.raises(UserError, match=r"filter year: no row holds '2019'; did you mean 2019"):
        load(folder, filter={"year": "2019"})  # text, where the column holds numbers


def test_own_data_checks_apply(tmp_path: Path) -> None:
    """Duplicate ids, a dataset without any human score and a text column holding numbers are refused
    by the own-data record checks, naming the dataset's row."""
    rows = {**da_rows(), "seg": [1, 2, 1, 3, 4, 5, 6]}
    folder = save(tmp_path / "dup", rows)
    duplicate = r"hf dataset dup row 3: duplicate item lp='de-en' seg_id=1 system='' \(first at hf dataset dup row 1\)"
    with pytest.raises(UserError, match=duplicate):
        load(folder, columns={**DA_COLUMNS, "seg_id": "seg"})
    empty = save(tmp_path / "unscored", {**da_rows(), "score": [None] * 7})
    with pytest.raises(UserError, match="hf dataset unscored: no item has a human score"):
        load(empty)
    with pytest.raises(UserError, match=r"hf dataset dup row 1: column 'hypothesis' must be text, got 2019"):
        load(folder, columns={**DA_COLUMNS, "hypothesis": "year"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"columns": {**DA_COLUMNS, "hypotesis": "mt"}}, "unknown item field 'hypotesis'; did you mean 'hypothesis'?"),
        (
            {"columns": {"hypothesis": "mt", "reference": "ref"}},
            r"spec.datasets\[0\].columns: map human to a dataset column",
        ),
        ({"revision": "main"}, "is a local folder, which has no revision"),
        ({"explode": "refs"}, "explode must be a list of list-valued columns"),
        ({"filter": {"year": {"gt": 2018}}}, r"filter.year must be a value or a list of values"),
        ({"lp": "en"}, r"give lp either as a column \(columns.lp\) or as a constant \(lp:\), not both"),
        ({"confg": "x"}, "unknown key 'confg'; did you mean 'config'?"),
    ],
)
def test_entry_shape_checked_when_the_spec_is_read(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    folder = save(tmp_path / "da", da_rows())
    with pytest.raises(UserError, match=message):
        parse_spec(spec_dict([{"hf": str(folder), "columns": DA_COLUMNS, **entry}]), base=tmp_path)


def test_spec_level_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"datasets\[0\].hf: no folder .*nowhere"):
        parse_spec(spec_dict([{"hf": "./nowhere", "columns": DA_COLUMNS}]), base=tmp_path)
    with pytest.raises(UserError, match="neither a local folder nor a Hub dataset id"):
        parse_spec(spec_dict([{"hf": "not a/valid/id", "columns": DA_COLUMNS}]), base=tmp_path)
    with pytest.raises(UserError, match=r"exactly one of 'name' or 'path', or 'hf'"):
        parse_spec(spec_dict([{"hf": "org/x", "name": "wmt16", "columns": DA_COLUMNS}]), base=tmp_path)
    with pytest.raises(UserError, match=r"split, revision belong to Hugging Face entries"):
        parse_spec(spec_dict([{"name": "wmt16", "split": "train", "revision": "main"}]), base=tmp_path)


def test_without_the_library_one_line_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = save(tmp_path / "da", da_rows())
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails as where it is not installed
    with pytest.raises(UserError, match=re.escape("need the datasets library: pip install 'nlgbench[hf]'")):
        open_table(source(folder))


def test_hub_dataset_offline_and_not_cached_is_one_line(tmp_path: Path) -> None:
    hub = HubSource.parse({"hf": "RicardoRei/wmt-da-human-evaluation", "columns": DA_COLUMNS}, "t", tmp_path)
    assert not hub.local and hub.label == "wmt-da-human-evaluation" and not hub.pinned
    with pytest.raises(UserError) as caught:
        open_table(hub)
    assert str(caught.value).startswith(
        "hf dataset RicardoRei/wmt-da-human-evaluation: offline (HF_HUB_OFFLINE=1) and not in the local cache"
    )


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
    return helpers.nlgbench(*args, cwd=cwd, env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})


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
