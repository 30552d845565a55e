"""Hugging Face datasets as a data source: `hf:` dataset entries, offline: loading (filters, column
mappings, splits, several references and dimensions, explode) and the checks of an entry.

Every dataset is built here and written as the Hub holds data files (Parquet in a folder, read by
`datasets.load_dataset`, the Hub's own code path) or by `save_to_disk` (read by `load_from_disk`);
the library's cache is kept under tmp_path. The Hub itself is only asked, offline, for a dataset it
cannot have cached.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from hfkit import DA_COLUMNS, da_rows, datasets, load, private_hf_cache, save, source, spec_dict
from nlgbench.core.cell import DatasetRef
from nlgbench.core.spec import parse_spec
from nlgbench.data.hubdata import content_sha256, hub_records, open_table
from nlgbench.data.hubsource import HubSource
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The library's cache under tmp_path and the Hub offline, for every test (`hfkit.private_hf_cache`)."""
    return private_hf_cache(tmp_path, monkeypatch)


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
