"""Test set-up: datasets through the mirror setting (../shared/datasets), a private cache, no Hub.

Set at import time, before any test module imports huggingface_hub (which reads its
environment once).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from nlgbench.metrics import metric_registry
from tiny import make_tiny_bert

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
PLUGINS = REPO / "tests" / "plugins"  # test-only metrics, registered through the `nlgbench.metrics` entry point

os.environ.setdefault("NLGBENCH_DATA_MIRROR", str(SHARED_DATASETS))
# A relative mirror (the README's `../shared/datasets`) is made absolute here: tests run the CLI in other
# folders (an installed wheel's in a shadowing folder), where it would name nothing once the cache is empty.
if "://" not in os.environ["NLGBENCH_DATA_MIRROR"]:
    os.environ["NLGBENCH_DATA_MIRROR"] = str(Path(os.environ["NLGBENCH_DATA_MIRROR"]).expanduser().resolve())
# A private cache per test process: pytest-xdist's workers inherit the controller's environment, and a
# cache made here for the controller is replaced by one per worker (a user's own NLGBENCH_CACHE is kept).
if "NLGBENCH_CACHE" not in os.environ or os.environ.get("NLGBENCH_TEST_CACHE") == os.environ["NLGBENCH_CACHE"]:
    os.environ["NLGBENCH_CACHE"] = tempfile.mkdtemp(prefix="nlgbench-test-cache-")
    os.environ["NLGBENCH_TEST_CACHE"] = os.environ["NLGBENCH_CACHE"]
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# Test tiers (tests/tiers.py): every test has one; plain `pytest` runs unit and component.
# pytester: tests/test_structure.py runs the tier rule on probe tests; fixtures: the shared fixtures.
pytest_plugins = ["pytester", "fixtures", "paperkit"]
from tiers import pytest_addoption, pytest_collection_modifyitems, tier_guard  # noqa: E402,F401

# ----------------------------------------------------------------------------- shared fixtures


def folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file under `folder` (relative path) -> (size, modification time in ns)."""
    return {str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns) for f in folder.rglob("*")}


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Path]]:
    """`tiny_bert(texts, num_layers=4, name=None, seed=0)`: a tiny random BERT folder (`tiny.make_tiny_bert`),
    built once per session for each set of arguments and shared by the tests that ask for the same one.
    Tests read it; one that changes a model copies it first (checked at the session's end). `name` names the
    folder (a model's label comes from it); without it the folder is a fresh numbered `tiny<N>`."""
    built: dict[tuple[tuple[str, ...], int, str | None, int], tuple[Path, dict[str, tuple[int, int]]]] = {}

    def build(texts: Iterable[str], num_layers: int = 4, name: str | None = None, seed: int = 0) -> Path:
        key = (tuple(texts), num_layers, name, seed)
        if key not in built:
            folder = tmp_path_factory.mktemp("tiny")
            model = make_tiny_bert(folder / name if name else folder, key[0], num_layers=num_layers, seed=seed)
            built[key] = (model, folder_state(model))
        return built[key][0]

    yield build
    for model, state in built.values():
        assert folder_state(model) == state, f"a test changed the shared tiny model {model}"


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the test (tiny models run fastest so, and the machine is shared), then back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def wordcount_metric(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test-only metric `wordcount` (tests/plugins/nlgbench_testmetrics.py: runs no model, imports no
    torch), installed through its entry point for this test and every process it starts: its name."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH", "")) if p))
    metric_registry.cache_clear()
    yield "wordcount"
    metric_registry.cache_clear()  # before sys.path is restored: the next use reads the real entry points
    sys.modules.pop("nlgbench_testmetrics", None)
