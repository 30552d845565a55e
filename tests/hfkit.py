"""Helpers of the Hugging Face dataset tests (tests/test_hf_datasets*.py): the library's cache under
tmp_path, a small WMT-DA-shaped table written as the Hub holds it, `hf:` entries and specs over it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nlgbench.core.cell import DatasetRef
from nlgbench.data.hubsource import HubSource
from nlgbench.data.items import Dataset

datasets = pytest.importorskip("datasets")

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "how-to" / "hf-datasets.md"
VERSIONS = {"nlgbench": "0.1.0", "torch": "2.13", "transformers": "5.24", "sacrebleu": "2.5"}
DA_COLUMNS = {"lp": "lp", "source": "src", "hypothesis": "mt", "reference": "ref", "human": "score"}


def private_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
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
