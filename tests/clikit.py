"""Helpers of the CLI bad-input tests (tests/test_cli_*.py): the check that nothing loads a model or
starts a worker, specs with one metric entry changed, the one-line error a call must give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nlgbench.encoders.registry
import nlgbench.encoders.runtime
import nlgbench.execution.local
import nlgbench.metrics.bertscore
from helpers import minimal_spec, write_spec
from nlgbench.cli import main
from nlgbench.metrics import get_metric, metric_names

PREFIX = "nlgbench: error: "


def refuse_model_loading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bad input must be rejected before any model is loaded or any worker started.

    Also runs each test from an empty folder, so names like `all-MiniLM-L6-v3` are never a
    local folder by accident.
    """

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded / a worker started for bad input")

    for name in metric_names():  # import every metric module first: one imported while the patch is on
        get_metric(name)  # would keep the stub as its `load_encoder` for the rest of the session
    monkeypatch.setattr(nlgbench.encoders.runtime, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.metrics.bertscore, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.execution.local, "execute", forbidden)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)


def with_metric(**changes: Any) -> dict[str, Any]:
    """A valid spec whose single metric entry gets `changes`."""
    entry = {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"], **changes}
    return minimal_spec(metrics=[entry])


def user_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI, check it failed as bad input (exit 2, one stderr line), return the message."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 2, (code, captured.out, captured.err)
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(PREFIX), captured.err
    assert captured.out == ""
    return lines[0][len(PREFIX) :]


def run_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: dict[str, Any] | str) -> str:
    """`nlgbench run SPEC --out DIR` must fail as bad input and write no results."""
    out = tmp_path / "out"
    message = user_error(capsys, "run", str(write_spec(tmp_path, spec)), "--out", str(out))
    assert not (out / "results.sqlite").exists()
    assert not (out / "cells").exists()
    return message


ROWS = [
    {"lp": "de-en", "seg_id": 1, "source": "Hallo", "reference": "Hello", "hypothesis": "Hi", "human": 0.5},
    {"lp": "de-en", "seg_id": 2, "source": "Welt", "reference": "World", "hypothesis": "Earth", "human": -0.1},
    {"lp": "fr-en", "seg_id": 7, "source": "Oui", "reference": "Yes", "hypothesis": "Yeah", "human": 1.0},
]
