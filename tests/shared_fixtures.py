"""Fixtures shared by the test modules, a pytest plugin (tests/conftest.py lists it in `pytest_plugins`):
a spec builder, a run folder, the CLI in two forms (`cli_in_process`: `nlgbench.cli.main` in this
process; `cli_subprocess`: a fresh `python -m nlgbench.cli`), tiny random BERTs built once a session,
the test-only `wordcount` metric, torch on one thread."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_subprocess as run_cli_subprocess
from helpers import write_spec
from nlgbench.cli import main
from nlgbench.metrics import metric_registry
from tiny import TEXTS, make_tiny_bert

PLUGINS = Path(__file__).resolve().parent / "plugins"  # test-only metrics, through the `nlgbench.metrics` entry point

# ----------------------------------------------------------------------------- specs and run folders


@pytest.fixture
def spec_file(tmp_path: Path) -> Callable[..., Path]:
    """`spec_file(spec, name="spec.yaml")`: `spec` (a dict, dumped as YAML in its key order, or the text
    itself) written to tmp_path; its path."""

    def build(spec: dict[str, Any] | str, name: str = "spec.yaml") -> Path:
        return write_spec(tmp_path, spec, name)

    return build


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """The folder a test's sweep writes to (`--out`): `tmp_path/run`, not made yet (the CLI makes it)."""
    return tmp_path / "run"


# ----------------------------------------------------------------------------- the CLI, in two forms


@dataclass(frozen=True)
class CliCall:
    """What one in-process CLI call gave: its exit code and what it printed on stdout and stderr."""

    code: int
    out: str
    err: str


@pytest.fixture
def cli_in_process(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliCall]:
    """`cli_in_process(*args)`: `nlgbench.cli.main(args)` in this process (no worker of its own unless the
    command starts one); its exit code and captured output. Fast, and a traceback reaches the test."""

    def call(*args: str | Path) -> CliCall:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliCall(code, out, err)

    return call


@pytest.fixture
def cli_subprocess() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`cli_subprocess(*args, cwd=None, env=None, timeout=600)`: the CLI as a user runs it, in a fresh
    process (`helpers.cli_subprocess`); exit code, stdout and stderr as the user sees them."""
    return run_cli_subprocess


# ----------------------------------------------------------------------------- models and metrics


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


@pytest.fixture(scope="module")
def tiny_model(tiny_bert: Callable[..., Path]) -> Path:
    """The tiny 2-layer BERT named `bert` that the sweeps on `tiny.TEXTS` score (built once a session)."""
    return tiny_bert(TEXTS, num_layers=2, name="bert")


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the test (tiny models run fastest so, and the machine is shared), then back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def install_wordcount(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`wordcount` on the path of this process and of every process it starts while `monkeypatch` holds."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH", "")) if p))
    metric_registry.cache_clear()
    yield "wordcount"
    metric_registry.cache_clear()  # before sys.path is restored: the next use reads the real entry points
    sys.modules.pop("nlgbench_testmetrics", None)


@pytest.fixture
def wordcount_metric(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test-only metric `wordcount` (tests/plugins/nlgbench_testmetrics.py: runs no model, imports no
    torch), installed through its entry point for this test and every process it starts: its name. The
    default metric of a test of a sweep's mechanics (workers, the store, resume, faults, report plumbing)."""
    yield from install_wordcount(monkeypatch)


@pytest.fixture(scope="module")
def wordcount_for_module() -> Iterator[str]:
    """`wordcount_metric` from its first use to the module's end: for a module-scoped sweep of it, whose
    tests run the CLI on that run folder again."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield from install_wordcount(monkeypatch)
