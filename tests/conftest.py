"""Test set-up: datasets through the mirror setting (../shared/datasets), a private cache, no Hub.

Set at import time, before any test module imports huggingface_hub (which reads its
environment once).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"

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
# The API's scorers on torch, as sweep cells run: tests of other mechanics compare the two exactly, and a
# calibration per tiny model per process would cost each test seconds. The default (`backend: auto`) is
# tested where it is the subject (test_backend_auto.py, the bert_score drop-in tests), with this unset.
os.environ["NLGBENCH_BACKEND"] = "torch"

# Test tiers (tests/tiers.py): every test has one; plain `pytest` runs unit and component.
# pytester: tests/test_structure.py runs the tier rule on probe tests; shared_fixtures: the shared fixtures (spec
# builder, run folder, the CLI in process and in a subprocess, tiny models, the `wordcount` metric);
# paperkit: the run the paper-report tests share.
pytest_plugins = ["pytester", "shared_fixtures", "paperkit"]
from tiers import pytest_addoption, pytest_collection_modifyitems, tier_guard  # noqa: E402,F401
