"""Machine-readable output and listings that fit a terminal: `--json` on list, status,
run and score (score: tests/test_signature.py); `list` cut to the terminal's width, in full when piped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nlgbench.cli import main
from nlgbench.cli.listing import MIN_COLUMN, fit_widths
from tiny import TEXTS, make_tiny_bert

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("what", ["encoders", "metrics", "aligners", "datasets"])
def test_list_json_is_one_object_per_row(what: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", what]) == 0
    text_rows = capsys.readouterr().out.splitlines()[1:]
    assert main(["list", what, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(text_rows) and all(isinstance(r, dict) and r["name"] for r in rows)


def test_widths_fit_the_terminal_widest_first() -> None:
    assert fit_widths([4, 30, 100], 80) == [4, 30, 42]  # 4 + 30 + 42 + two gaps of 2 = 80
    assert fit_widths([4, 60, 60], 80) == [4, 36, 36]
    assert fit_widths([10, 10, 10], 20) == [MIN_COLUMN, MIN_COLUMN, MIN_COLUMN]  # no column below the minimum
    assert fit_widths([4, 5], 80) == [4, 5]


def pty_lines(argv: list[str], columns: int) -> list[str]:
    """`nlgbench ARGV` in a real pseudo-terminal (util-linux `script`) with `columns` columns."""
    command = f"stty cols {columns}; {sys.executable} -m nlgbench.cli {' '.join(argv)}"
    out = subprocess.run(["script", "-qc", command, "/dev/null"], capture_output=True, text=True, check=True).stdout
    return [line.rstrip("\r") for line in out.splitlines()]


@pytest.mark.skipif(not Path("/usr/bin/script").exists(), reason="needs util-linux script for a pseudo-terminal")
@pytest.mark.parametrize("columns", [100, 0])
def test_list_fits_a_pseudo_terminal_and_stays_whole_when_piped(columns: int) -> None:
    lines = pty_lines(["list", "metrics"], columns)
    assert len(lines) > 5 and max(len(line) for line in lines) <= (columns or 80)  # 0 columns reported: 80
    assert any(line.endswith("…") for line in lines)
    piped = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "list", "metrics"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert max(len(line) for line in piped) > 200 and not any(line.endswith("…") for line in piped)


def test_status_and_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "reports/example", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["source"], status["recorded"], status["ok"]) == ("report/", 3, 3)
    model = make_tiny_bert(tmp_path / "tiny", TEXTS, num_layers=1)
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"lp": "de-en", "seg_id": i, "reference": TEXTS[i], "hypothesis": TEXTS[i + 1], "human": i})
            + "\n"
            for i in range(4)
        ),
        encoding="utf-8",
    )
    spec = {
        "name": "j",
        "datasets": [{"path": str(data)}],
        "repeats": 1,
        "warmup": 0,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": [str(model)]}],
    }
    (tmp_path / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    assert main(["run", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "run"), "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # stdout is the JSON alone; progress went to stderr
    assert (summary["ok"], summary["not_ok"], len(summary["cells"])) == (1, 0, 1)
    assert summary["cells"][0]["status"] == "ok" and "sweep 'j'" in captured.err
    assert os.path.isdir(summary["out"])
