"""Fixtures shared by several test modules, a pytest plugin (tests/conftest.py lists it in `pytest_plugins`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tiny import TEXTS


@pytest.fixture(scope="module")
def tiny_model(tiny_bert: Callable[..., Path]) -> Path:
    """The tiny 2-layer BERT named `bert` that the sweeps on `tiny.TEXTS` score (built once a session)."""
    return tiny_bert(TEXTS, num_layers=2, name="bert")
