"""Test set-up: datasets through the mirror setting (../shared/datasets), a private cache, no Hub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


@pytest.fixture(scope="session", autouse=True)
def _offline_environment(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Point the dataset catalogue at the shared copies and keep every test off the network."""
    os.environ.setdefault("NLGBENCH_DATA_MIRROR", str(SHARED_DATASETS))
    os.environ.setdefault("NLGBENCH_CACHE", str(tmp_path_factory.mktemp("nlgbench-cache")))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
