"""The shared fixtures of tests/shared_fixtures.py do what their docstrings say: the CLI in process and in a
subprocess, the spec builder, the run folder."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import minimal_spec
from nlgbench.core.spec import load_spec
from shared_fixtures import CliCall

pytestmark = pytest.mark.unit


def test_cli_in_process_gives_the_exit_code_and_what_was_printed(cli_in_process: Callable[..., CliCall]) -> None:
    listed = cli_in_process("list", "metrics")
    assert listed.code == 0 and "bertscore" in listed.out and listed.err == ""
    refused = cli_in_process("run", "no-such-spec.yaml")
    assert refused.code == 2 and refused.out == "" and refused.err.startswith("nlgbench: error:")


def test_spec_file_writes_a_spec_the_loader_reads(spec_file: Callable[..., Path], tmp_path: Path) -> None:
    path = spec_file(minimal_spec(name="built", metrics=[{"metric": "sentbleu"}]), name="built.yaml")
    assert path == tmp_path / "built.yaml"
    assert load_spec(path).name == "built"


def test_run_folder_is_not_made_yet(run_folder: Path, tmp_path: Path) -> None:
    assert run_folder.parent == tmp_path and not run_folder.exists()


@pytest.mark.integration
def test_cli_subprocess_runs_the_cli_in_a_fresh_process(
    cli_subprocess: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    listed = cli_subprocess("list", "metrics")
    assert listed.returncode == 0 and "bertscore" in listed.stdout
