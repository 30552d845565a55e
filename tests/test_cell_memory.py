"""A cell's memory belongs to the cell: the same BERTScore cell of the real all-MiniLM-L6-v2 measures the
same baseline (within 1%), peak RSS and model memory (RSS growth; both within 2%)
alone and in a sweep with an OpenVINO, an ONNX Runtime and an all-mpnet-base-v2 cell, and forked
from the fork server as in a plain worker: each cell imports, before its baseline, what a fresh process
running it alone would (`nlgbench.execution.preload.cell_modules`).
benchmarks/cell_memory.py prints the same comparison as a table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpers import cli_subprocess, read_csv, write_spec
from nlgbench.core.result import Memory
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.execution import forkserver
from nlgbench.measurement import allocator
from nlgbench.runs.resultfile import read_result

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        local_snapshot("sentence-transformers/all-MiniLM-L6-v2") is None
        or local_snapshot("sentence-transformers/all-mpnet-base-v2") is None,
        reason="the real MiniLM-L6 and MPNet are not in the local HF cache",
    ),
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("onnxruntime", "openvino", "nncf")),
        reason="extras `onnx` and `openvino` not installed",
    ),
]

MINILM = "all-MiniLM-L6-v2"
NEIGHBOURS = ["all-mpnet-base-v2", {"name": MINILM, "backend": "openvino"}, {"name": MINILM, "backend": "onnxruntime"}]
BASELINE_TOLERANCE = 0.01  # RSS after the imports, what the cell imported: 504-505 MiB in every run here
# Peak RSS and model memory (RSS growth) within 2% of each other. They are measured over load, prepare and
# one pass under the allocator's measuring policy (every block of 128 KiB or more mapped on allocation and
# unmapped on free), so they follow the live tensors, not what the heap kept: the same cell spread by 0.2%
# over runs here (173.6-173.8 MiB growth), where glibc's moving threshold made it 11% (241-268 MiB).
# A neighbour's libraries counted in the cell (before the per-cell imports) added 50-64 MiB.
TOLERANCE = 0.02


def minilm_memory(folder: Path, encoders: list[object], forkserver_setting: str) -> Memory:
    """Run a BERTScore sweep of `encoders` (5 WMT16 segments per pair, one repeat, no warm-up, one thread)
    through the CLI and return the plain MiniLM cell's memory."""
    folder.mkdir(parents=True)
    spec = {
        "name": "cell-memory",
        "datasets": [{"name": "wmt16", "max_segments": 5}],
        "repeats": 1,
        "warmup": 0,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": encoders}],
    }
    out = folder / "out"
    done = cli_subprocess(
        "run", str(write_spec(folder, spec)), "--out", str(out), env={"NLGBENCH_FORKSERVER": forkserver_setting}
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (row,) = [r for r in read_csv(out / "results.csv") if r["encoder"] == MINILM]
    memory = read_result(out / "cells" / row["cell_id"]).memory
    assert memory is not None
    return memory


@pytest.fixture(scope="module")
def alone_forked(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    if not forkserver.enabled():
        pytest.skip("the fork server runs on Linux only")
    return minilm_memory(tmp_path_factory.mktemp("alone-forked") / "sweep", [MINILM], "1")


@pytest.fixture(scope="module")
def alone_plain(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    return minilm_memory(tmp_path_factory.mktemp("alone-plain") / "sweep", [MINILM], "0")


@pytest.fixture(scope="module")
def crowded_forked(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    """The MiniLM cell last, after its three neighbours, forked from the sweep's one fork server."""
    if not forkserver.enabled():
        pytest.skip("the fork server runs on Linux only")
    return minilm_memory(tmp_path_factory.mktemp("crowded-forked") / "sweep", [*NEIGHBOURS, MINILM], "1")


def assert_close(mine: Memory, theirs: Memory) -> None:
    """The baseline within BASELINE_TOLERANCE, peak RSS and model memory within TOLERANCE of the smaller."""
    assert abs(mine.baseline_rss_mb - theirs.baseline_rss_mb) <= BASELINE_TOLERANCE * theirs.baseline_rss_mb
    for what in ("peak_rss_mb", "rss_growth_mb"):
        a, b = getattr(mine, what), getattr(theirs, what)
        assert abs(a - b) <= TOLERANCE * min(a, b), f"{what}: {a:.1f} against {b:.1f} MiB"
    assert mine.pass_s is not None and mine.pass_s > 0
    if allocator.on_glibc():
        assert mine.allocator_policy == theirs.allocator_policy == allocator.MEASURING


def test_a_cells_memory_does_not_depend_on_its_neighbours(alone_forked: Memory, crowded_forked: Memory) -> None:
    """The fork server imports only what every cell imports: OpenVINO, ONNX Runtime and MPNet's
    architecture are their cells' own, never counted in the MiniLM cell (before: up to 64 MiB more)."""
    assert_close(crowded_forked, alone_forked)


def test_a_forked_cell_measures_the_memory_of_a_plain_worker(alone_forked: Memory, alone_plain: Memory) -> None:
    assert_close(alone_forked, alone_plain)


def test_the_peak_of_the_unique_set_is_recorded(alone_forked: Memory, alone_plain: Memory) -> None:
    """USS counts pages no other process maps: never above RSS; and the forked cell still shares the
    pages of torch's and transformers' imports with its server, which a plain worker holds alone."""
    for memory in (alone_forked, alone_plain):
        assert memory.peak_uss_mb is not None and 0 < memory.peak_uss_mb <= memory.peak_rss_mb
    assert alone_forked.peak_uss_mb is not None and alone_plain.peak_uss_mb is not None
    assert alone_forked.peak_uss_mb < alone_plain.peak_uss_mb
