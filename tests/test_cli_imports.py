"""The command line starts without torch where it needs no model: `nlgbench --help`, `nlgbench score` with a
metric that runs none (sentbleu, chrf, rouge*), and `nlgbench report` and `nlgbench compare` on a run (which read
its cells' metric options, labels and scores, and run no metric) import neither torch nor transformers. Each
command runs in a fresh process through the CLI's `main`, which then reports what it imported; a BERTScore command
is the control that the probe does see torch. (Their times: benchmarks/cli_startup.py, no timed assertion here.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import committed_copy
from tiny import TEXTS

pytestmark = pytest.mark.integration

# The CLI's main in this process, then a JSON line: its exit code and which heavy libraries it imported.
PROBE = """
import contextlib, json, sys
from nlgbench.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in ("torch", "transformers") if m in sys.modules)}))
"""

HEAVY = ["torch", "transformers"]


def probe(*args: str) -> dict[str, object]:
    """Run `nlgbench ARGS` through PROBE in a fresh process; its exit code and heavy imports."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def texts(tmp_path: Path) -> list[str]:
    """A candidates and a references file of eight lines: `-c FILE -r FILE`."""
    cands, refs = tmp_path / "cands.txt", tmp_path / "refs.txt"
    cands.write_text("".join(f"{t}\n" for t in TEXTS[1:] + TEXTS[:1]), encoding="utf-8")
    refs.write_text("".join(f"{t}\n" for t in TEXTS), encoding="utf-8")
    return ["-c", str(cands), "-r", str(refs)]


def test_help_imports_no_torch() -> None:
    assert probe("--help") == {"code": 0, "loaded": []}


@pytest.mark.parametrize("metric", ["chrf", "sentbleu", "rouge1", "rougeL"])
def test_a_metric_without_a_model_scores_without_torch(metric: str, texts: list[str]) -> None:
    assert probe("score", "--metric", metric, *texts) == {"code": 0, "loaded": []}


def test_the_probe_sees_torch_where_a_model_runs(texts: list[str], tiny_bert: Callable[..., Path]) -> None:
    model = tiny_bert(TEXTS, num_layers=2)
    assert probe("score", "--metric", "bertscore", "--encoder", str(model), *texts) == {"code": 0, "loaded": HEAVY}


def test_report_imports_no_torch(tmp_path: Path) -> None:
    """A committed run as a fresh clone has it (BERTScore cells, labels read from each metric's options)."""
    run = committed_copy("example", tmp_path)
    assert probe("report", str(run)) == {"code": 0, "loaded": []}


def test_compare_imports_no_torch(tmp_path: Path) -> None:
    run = committed_copy("example", tmp_path)
    pair = ["--candidate", "all-MiniLM-L6-v2[num_layers=3]", "--baseline", "all-MiniLM-L6-v2", "--resamples", "100"]
    assert probe("compare", str(run), *pair) == {"code": 0, "loaded": []}
