"""The progress line names its two Pearson figures; a live bar inside each
cell and an ETA from a cost model on a terminal; one line per cell elsewhere."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.encoders.hfcache import checkpoint_params
from nlgbench.encoders.registry import EncoderRef
from nlgbench.execution.eta import (
    DEFAULT_FIXED_S,
    DEFAULT_RATE,
    LEXICAL_PARAMS,
    CostModel,
    encoder_params,
    header_params,
    time_split,
)
from nlgbench.execution.progress import PROGRESS_ENV, CellProgress, live
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.metrics.common import length_sorted_map
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

TEXTS = ["a small cat sat on the mat", "the dog ran far away from home", "it rained all day long"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nlgbench.data.loaders import load_dataset

    texts = [t for it in load_dataset("wmt16", max_segments=6).items for t in (it.reference, it.hypothesis)]
    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert", texts, num_layers=3)


def sweep(tmp_path: Path, tiny: Path, progress: str | None) -> subprocess.CompletedProcess[str]:
    """Two BERTScore cells (the tiny model and its 1-layer cut) on 6 WMT16 segments per pair,
    through the CLI with stdout and stderr captured (not a terminal); `progress` sets NLGBENCH_PROGRESS."""
    spec = {
        "name": "progress",
        "datasets": [{"name": "wmt16", "max_segments": 6}],
        "batch_size": 4,
        "repeats": 2,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": [str(tiny), {"name": str(tiny), "num_layers": 1}]}],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != PROGRESS_ENV}
    if progress is not None:
        env[PROGRESS_ENV] = progress
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "run", str(tmp_path / "spec.json"), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_not_a_terminal_one_line_per_cell_naming_both_pearsons(tmp_path: Path, tiny: Path) -> None:
    proc = sweep(tmp_path, tiny, None)
    cell_lines = [line for line in proc.stdout.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[", line)]
    assert len(cell_lines) == 2 and all(": ok in " in line for line in cell_lines), proc.stdout  # timestamped
    assert "texts encoded" not in proc.stderr and "repeat 1/2" not in proc.stderr, proc.stderr  # no bar, no phase lines
    with (tmp_path / "run" / "results.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for line, row in zip(cell_lines, rows, strict=True):
        shown = re.search(r"pearson \(global\) (\S+), pearson \(segment, by lp\) (\S+)", line)
        assert shown is not None, line
        assert float(shown.group(1)) == pytest.approx(float(row["pearson_global"]), abs=5e-5)  # what report shows
        assert float(shown.group(2)) == pytest.approx(float(row["pearson_segment"]), abs=5e-5)  # mean over lps
        assert f"(cell {row['cell_id']})" in line
    assert "ETA" in cell_lines[0] and "ETA" not in cell_lines[1]


def test_on_a_terminal_a_bar_inside_the_cell_and_the_sweep_eta(tmp_path: Path, tiny: Path) -> None:
    proc = sweep(tmp_path, tiny, "1")
    running = [line for line in proc.stdout.splitlines() if ": running (cell" in line]
    assert len(running) == 2 and "sweep ETA ~" in running[0] and "(first guess)" in running[0], proc.stdout
    assert "sweep ETA" in running[1] and "first guess" not in running[1], proc.stdout  # learnt from cell 1
    assert not running[0][0].isdigit()  # on a terminal, no timestamps
    assert re.search(r"repeat 2/2: [0-9.]+ s, [0-9]+ items/s", proc.stderr), proc.stderr[-2000:]
    assert re.search(r"repeat 1/2 texts encoded: +\d+%", proc.stderr), proc.stderr[-2000:]  # tqdm's bar


def test_progress_is_live_on_a_terminal_or_when_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert live(Terminal()) and not live(io.StringIO())
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not live(Terminal())
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert live(io.StringIO())


def test_metrics_report_their_batches_to_the_bar() -> None:
    heard: list[tuple[str, int, int]] = []
    context = CellContext(progress=lambda what, done, total: heard.append((what, done, total)))
    out = length_sorted_map(lambda batch: [i * 2 for i in batch], [5, 1, 4, 2, 3, 9, 7], 3, context)
    assert out == [0, 2, 4, 6, 8, 10, 12]
    assert heard == [("inputs scored", 3, 7), ("inputs scored", 6, 7), ("inputs scored", 7, 7)]
    length_sorted_map(lambda batch: list(batch), [1, 2], 3)  # another context (none given): nobody hears
    CellContext().advance("inputs scored", 1, 1)
    assert len(heard) == 3

    stream = io.StringIO()
    with CellProgress(True, stream, refresh_s=0) as bar:
        bar.stage("repeat 1/3")
        bar("texts encoded", 40, 100)
        bar("texts encoded", 100, 100)
    assert "repeat 1/3 texts encoded" in stream.getvalue() and "100/100" in stream.getvalue()
    quiet = io.StringIO()
    with CellProgress(False, quiet) as bar:
        bar("texts encoded", 40, 100)
    assert quiet.getvalue() == ""


def test_parameters_from_the_safetensors_headers(tmp_path: Path, tiny: Path) -> None:
    """The cost model's sizes: the checkpoint's parameters without loading it; a cut counts its first
    layers only, as many as a model saved with that many layers."""
    assert header_params(tiny) == checkpoint_params(tiny)
    one_layer = make_tiny_bert(tmp_path / "one", TEXTS, num_layers=1)
    full_vocab_cut = header_params(tiny, num_layers=1)
    per_layer = (checkpoint_params(tiny) - full_vocab_cut) / 2
    assert per_layer > 0 and header_params(one_layer) == checkpoint_params(one_layer)
    assert header_params(one_layer) == header_params(one_layer, num_layers=1) == header_params(one_layer, num_layers=5)
    # the same architecture with another vocabulary: the layer tensors are the same size
    assert checkpoint_params(one_layer) - header_params(one_layer, num_layers=0) == per_layer
    assert encoder_params(EncoderRef(name=str(tiny), num_layers=1)) == full_vocab_cut
    assert encoder_params(EncoderRef(name="none")) == 0
    assert encoder_params(EncoderRef(name=str(tmp_path / "missing"))) is None


def cell(encoder: str, metric: str = "bertscore", items: int = 100, repeats: int = 3) -> CellConfig:
    return CellConfig(
        metric=metric,
        options={},
        encoder=EncoderRef(name=encoder),
        aligner=None,
        dataset=DatasetRef(name="wmt16", max_segments=items),
        device="cpu",
        batch_size=8,
        repeats=repeats,
        warmup=1,
        threads=1,
    )


def test_eta_scales_by_parameters_not_by_the_mean_of_finished_cells(tmp_path: Path, tiny: Path) -> None:
    """The issue's case: after a large model's cell the sweep predicted every remaining cell at its
    time. Here a cell 4x larger finishes first; the ETA of the rest is rate x their units."""
    big, small = str(tiny), make_tiny_bert(tmp_path / "small", TEXTS, num_layers=1)
    p_big, p_small = checkpoint_params(tiny), checkpoint_params(small)
    cells = [cell(big), cell(str(small)), cell(str(small), items=50), cell("none", metric="sentbleu")]
    items = {c.dataset.label: c.dataset.max_segments for c in cells}
    model = CostModel.of(cells, items)
    ids = [c.cell_id for c in cells]
    passes = 3 + 1  # 3 repeats and the memory pass
    assert model.units[ids[0]] == p_big * 100 * passes and model.units[ids[1]] == p_small * 100 * passes
    assert model.units[ids[3]] == LEXICAL_PARAMS * 100 * passes
    # nothing finished: the default guess, a fixed start-up plus DEFAULT_RATE per unit
    assert model.guessed and model.eta(ids[1:2]) == pytest.approx(DEFAULT_FIXED_S + DEFAULT_RATE * p_small * 400)
    model.finished(ids[0], 80.0)
    # one cell whose time is not split (no timing): DEFAULT_FIXED_S is its fixed part, the rest its rate
    rate = (80.0 - DEFAULT_FIXED_S) / (p_big * 400)
    assert model.eta(ids[1:3]) == pytest.approx(2 * DEFAULT_FIXED_S + rate * p_small * (400 + 200), rel=1e-12)
    assert model.eta(ids[1:3]) < 80.0 * 2  # the average-of-finished-cells ETA
    model.finished(ids[1], 10.0)  # two BERTScore cells of different sizes: seconds = fixed + rate x units, fitted
    slope = (80.0 - 10.0) / (p_big * 400 - p_small * 400)
    fixed = min(max(45.0 - slope * (p_big * 400 + p_small * 400) / 2, 0.0), 10.0)
    rate = (90.0 - 2 * fixed) / (p_big * 400 + p_small * 400)
    assert model.fit("bertscore") == pytest.approx((fixed, rate), rel=1e-9)
    assert model.eta([ids[2]]) == pytest.approx(fixed + rate * p_small * 200, rel=1e-9)
    model.finished(ids[2], 5.0)
    model.finished(ids[3], 1.0)
    assert model.rate("sentbleu") == pytest.approx(
        (1.0 - 0.5) / (LEXICAL_PARAMS * 400), rel=1e-12
    )  # fixed: half of 1 s


def test_eta_learns_the_fixed_cost_of_a_cell_from_its_result(tmp_path: Path, tiny: Path) -> None:
    """A finished cell's time outside its timed repeats (start-up, data and model load,
    prepare, warm-up, writing) is the fixed cost of the next ones, and only its repeats set the rate;
    the start-up predicted is the last finished cell's (after the first, a warm fork server's)."""
    big, small = str(tiny), str(make_tiny_bert(tmp_path / "small", TEXTS, num_layers=1))
    cells = [cell(big), cell(big, items=50), cell(small), cell(small, items=20)]
    model = CostModel.of(cells, {c.dataset.label: c.dataset.max_segments for c in cells})
    ids = [c.cell_id for c in cells]
    model.finished(ids[0], 30.0, repeats_s=18.0, startup_s=4.0)  # fixed: 12 s, 4 of them start-up
    assert model.fit("bertscore") == pytest.approx((12.0, 18.0 / model.units[ids[0]]), rel=1e-12)
    # the half-size cell: all of the fixed cost, half the repeats' time (without the split: 7 + 23 / 2)
    assert model.eta([ids[1]]) == pytest.approx(12.0 + 9.0, rel=1e-12)
    model.finished(ids[1], 17.5, repeats_s=9.0, startup_s=0.5)  # forked from a warm server: fixed 8.5 s
    # start-up of the last cell (0.5 s) plus the median of the rest (8 s and 8 s)
    assert model.fit("bertscore") == pytest.approx((8.5, 27.0 / (model.units[ids[0]] + model.units[ids[1]])))
    before = model.fit("bertscore")
    model.finished(ids[2], 3.0)  # a failed cell: no timing, so no split; it does not move the fit
    assert model.fit("bertscore") == before and not model.guessed


def test_time_split_reads_a_result(tmp_path: Path, tiny: Path) -> None:
    """What the local launcher hands the cost model: the repeats' and the start-up's seconds of a cell's
    result.json; None for a failed one."""
    from nlgbench.core.result import CellResult
    from nlgbench.runs.resultfile import read_result

    proc = sweep(tmp_path, tiny, None)
    assert proc.returncode == 0
    for folder in sorted((tmp_path / "run" / "cells").iterdir()):
        result = read_result(folder)
        assert result.timing is not None and result.timing.startup_s is not None
        assert result.memory is not None and result.memory.pass_s is not None and result.memory.pass_s > 0
        assert time_split(result) == (sum(result.timing.repeat_s) + result.memory.pass_s, result.timing.startup_s)
        failed = CellResult.not_finished(result.cell_id, result.label, result.config, "worker killed", oom=False)
        assert time_split(failed) == (None, None)


PTY_SCRIPT = """
import time
from nlgbench.execution.progress import CellProgress
with CellProgress(True, refresh_s=0.05) as bar:
    bar.stage("repeat 1/1")
    for i in range(6):
        bar("texts encoded", i + 1, 10)
        time.sleep(0.1)
    bar.line("    repeat 1/1: 0.6 s, 10 items/s")
"""


@pytest.mark.skipif(not Path("/usr/bin/script").exists(), reason="needs util-linux script for a pseudo-terminal")
@pytest.mark.parametrize("size", ["cols 0 rows 0", "cols 120 rows 40"])
def test_bars_draw_in_a_pseudo_terminal_and_phase_lines_stand_alone(size: str, tmp_path: Path) -> None:
    """In a real pseudo-terminal, also one reporting 0 columns and 0 lines (where tqdm alone draws
    nothing), the bar is drawn; a phase line closes it first, so it is never glued onto a bar."""
    (tmp_path / "p.py").write_text(PTY_SCRIPT, encoding="utf-8")
    typescript = tmp_path / "typescript"
    command = f"stty {size}; {sys.executable} {tmp_path / 'p.py'}"
    subprocess.run(["script", "-qc", command, str(typescript)], capture_output=True, check=True)
    screen = typescript.read_text(encoding="utf-8", errors="replace")
    pieces = [p for p in screen.replace("\r", "\n").split("\n") if p.strip()]
    assert any("repeat 1/1 texts encoded:" in p and "%|" in p for p in pieces), screen
    (phase,) = [p for p in pieces if "items/s" in p]
    assert phase == "    repeat 1/1: 0.6 s, 10 items/s"  # alone on its line: no bar before or after it
