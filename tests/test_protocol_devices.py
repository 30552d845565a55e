"""The measurement protocol around the device: the environment record, CUDA trackers and scores
(skipped without CUDA), the spec's batch_tokens, benchmarks/gpu.py's summary, a real cell with a
token budget, and the memory trackers' peak USS.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from helpers import load_script, write_jsonl
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import load_encoder
from nlgbench.measurement.devices import Device
from nlgbench.measurement.environment import environment, job_record, parse_nvidia_smi
from nlgbench.measurement.protocol import (
    WARMUP_MAX_PASSES,
    measure_scoring,
)
from nlgbench.measurement.trackers import CudaEventTracker, MemoryTracker, UssSampler
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.metrics.embedding import embed_texts
from protocolkit import CUDA, TEXTS, needs_cuda
from tiny import make_tiny_bert

pytestmark = pytest.mark.component

# ----------------------------------------------------------------------------- environment


@pytest.mark.integration
def test_environment_records_node_and_slurm_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(key, raising=False)
    env = environment(Device("cpu"))
    assert env["node"] and env["slurm_job_id"] is None and env["slurm_array_task_id"] is None
    assert job_record({"SLURM_JOB_ID": "4242", "SLURM_ARRAY_JOB_ID": "4240", "SLURM_ARRAY_TASK_ID": "2"}) == {
        "node": env["node"],
        "slurm_job_id": "4242",
        "slurm_array_job_id": "4240",
        "slurm_array_task_id": "2",
    }
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert environment(Device("cpu"))["slurm_job_id"] == "77"


def test_parse_nvidia_smi() -> None:
    assert parse_nvidia_smi("570.86.15, 1980, 1980, 2619, 2619\n") == {
        "gpu_driver": "570.86.15",
        "gpu_sm_clock_mhz": 1980,
        "gpu_sm_clock_max_mhz": 1980,
        "gpu_mem_clock_mhz": 2619,
        "gpu_mem_clock_max_mhz": 2619,
    }
    assert parse_nvidia_smi("570.86.15, [N/A], 1980, [N/A], 2619")["gpu_sm_clock_mhz"] is None
    assert parse_nvidia_smi("") == {} and parse_nvidia_smi("only, three, fields") == {}


@pytest.mark.integration
def test_cuda_trackers_record_nothing_on_cpu() -> None:
    with CudaEventTracker(Device("cpu")) as events:
        pass
    assert events.seconds is None
    assert "gpu_driver" not in environment(Device("cpu"))


# ----------------------------------------------------------------------------- CUDA (skipped without it)


@needs_cuda
@pytest.mark.system
@pytest.mark.parametrize("idf", [False, True])
def test_cuda_scores_equal_cpu_scores(idf: bool) -> None:
    """fp32 BERTScore on CUDA equals CPU to 1e-5 (5.7e-7 was measured on an H100)."""
    from nlgbench.api import score_outputs
    from nlgbench.data.loaders import load_dataset

    items = load_dataset("wmt16", max_segments=50).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    cpu = score_outputs(hyps, refs, "bertscore", "all-MiniLM-L6-v2", device="cpu", idf=idf)
    cuda = score_outputs(hyps, refs, "bertscore", "all-MiniLM-L6-v2", device="cuda", idf=idf)
    for column in ("score", "precision", "recall"):
        assert max(abs(a - b) for a, b in zip(cpu[column], cuda[column], strict=True)) <= 1e-5, column


class CudaScorer:
    """Matrix products on the GPU, one per item."""

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        x = torch.randn(256, 256, device="cuda")
        with timer.phase("encode"):
            for _ in items:
                x = torch.tanh(x @ x)
        return Scores(primary="f1", columns={"f1": [0.0] * len(items)})


@needs_cuda
def test_cuda_protocol_records_events_clocks_and_a_stable_warm_up() -> None:
    run = measure_scoring(CudaScorer(), list(range(200)), warmup=1, repeats=3, batch_size=8, device=Device("cuda"))
    assert run.warmup_items == 200 and run.warmup_stable is not None
    assert run.warmup_passes_s is not None and 2 <= len(run.warmup_passes_s) <= WARMUP_MAX_PASSES
    assert run.repeat_cuda_s is not None and len(run.repeat_cuda_s) == 3
    # events span the GPU work inside the wall-clock window
    assert all(0 < c <= w * 1.05 + 1e-3 for c, w in zip(run.repeat_cuda_s, run.repeat_s, strict=True))
    assert run.gpu_sm_clock_mhz is not None and len(run.gpu_sm_clock_mhz) == 3
    env = environment(Device("cuda"))
    assert env["gpu"] and env["gpu_capability"] and env["gpu_memory_mb"] > 0 and "gpu_driver" in env


@needs_cuda
def test_inputs_are_pinned_and_embeddings_equal_cpu(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "bert", TEXTS, num_layers=2)
    cuda = load_encoder(EncoderRef(str(folder)), "cuda")
    ids, mask = cuda.pad([[2, 5, 3], [2, 3]])
    assert ids.is_pinned() and mask.is_pinned()
    cpu = load_encoder(EncoderRef(str(folder)), "cpu")
    timer = PhaseTimer()
    on_gpu, on_cpu = embed_texts(cuda, TEXTS, 2, 4, timer), embed_texts(cpu, TEXTS, 2, 4, PhaseTimer())
    assert "tokenize_overlapped" in timer.seconds  # prepared in the background on CUDA
    for text in on_cpu:
        torch.testing.assert_close(on_gpu[text][1].cpu(), on_cpu[text][1], rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- spec


def test_spec_batch_tokens_is_crossed_into_cells_and_keeps_other_ids() -> None:
    from helpers import minimal_spec
    from nlgbench.core.spec import parse_spec
    from nlgbench.foundations.errors import UserError

    plain = parse_spec(minimal_spec()).cells()
    assert [c.batch_tokens for c in plain] == [None] and "batch_tokens" not in plain[0].to_dict()
    budget = parse_spec(minimal_spec(batch_tokens=[4096, 8192], batch_size=[32, 64])).cells()
    assert [(c.batch_size, c.batch_tokens) for c in budget] == [(32, 4096), (32, 8192), (64, 4096), (64, 8192)]
    assert len({c.cell_id for c in budget} | {plain[0].cell_id}) == 5
    assert parse_spec(minimal_spec(batch_tokens=4096)).cells()[0].to_dict()["batch_tokens"] == 4096
    assert parse_spec(minimal_spec(batch_tokens=None)).cells()[0].cell_id == plain[0].cell_id
    both = parse_spec(minimal_spec(batch_tokens=[None, 4096])).cells()
    assert [c.batch_tokens for c in both] == [None, 4096] and both[0].cell_id == plain[0].cell_id
    for bad in (0, -5, True, "many", 2.5):
        with pytest.raises(UserError, match="batch_tokens must be an integer >= 1"):
            parse_spec(minimal_spec(batch_tokens=bad))


# ----------------------------------------------------------------------------- benchmarks/gpu.py


def load_gpu_benchmark() -> Any:
    return load_script("benchmarks/gpu.py", "gpu_benchmark")


@pytest.mark.integration
@pytest.mark.skipif(CUDA, reason="checks the behaviour without CUDA")
def test_gpu_benchmark_says_no_cuda_device_and_stops(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "gpu")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no CUDA device") and not (tmp_path / "gpu").exists()


def test_gpu_benchmark_summary_reads_results_csv_rows() -> None:
    gpu = load_gpu_benchmark()
    row = {
        "metric": "bertscore",
        "aligner": "none",
        "encoder": "all-MiniLM-L6-v2",
        "device": "cuda",
        "batch_size": "64",
        "status": "ok",
        "n_segments": "3360",
        "ms_per_segment_mean": "0.40",
        "ms_per_segment_median": "0.39",
        "ms_per_segment_cv": "0.021",
        "warmup_passes": "3",
        "phase_ms": "encode=0.30;tokenize=0.02;match=0.06;other=0.02;tokenize_overlapped=0.11",
        "cuda_peak_allocated_mib": "484.0",
        "pearson_global": "0.5",
        "startup_s": "0.42",
        "load_s": "1.5",
        "energy_j_per_segment": "0.0123",
        "energy_counter": "nvml",
        "error": "",
    }
    cut = {**row, "encoder": "all-MiniLM-L6-v2[num_layers=3]", "ms_per_segment_median": "0.30"}
    rows = [gpu.summary_row("quickstart", r) for r in (row, cut)]
    assert rows[0]["metric"] == "bertscore" and rows[0]["encode_share"] == pytest.approx(0.75)
    assert rows[0]["tokenize_overlapped_ms"] == pytest.approx(0.11) and rows[0]["cv"] == pytest.approx(0.021)
    assert gpu.ratio(rows, "quickstart", "cuda", "all-MiniLM-L6-v2[num_layers=3]", "all-MiniLM-L6-v2") == pytest.approx(
        0.3 / 0.39
    )
    lines = gpu.checks(rows, "cuda", None)
    assert any("encode share" in line and "75%" in line and "met" in line for line in lines)
    assert any("largest CV" in line and "2.1%" in line for line in lines)
    assert "| quickstart | bertscore | all-MiniLM-L6-v2 | cuda | 64 | 3360 | 0.390 | 2.1% | 3 | 75 |" in gpu.table(rows)
    # CUDA MiB, start-up s, load s, mJ/segment, pearson (global)
    assert gpu.table(rows).splitlines()[2].endswith("| 484 | 0.42 | 1.50 | 12.30 | 0.500 | ok |")
    no_counter = gpu.summary_row(
        "quickstart", {**row, "energy_j_per_segment": "", "energy_counter": "n/a (no counter)"}
    )
    assert "| n/a (no counter) |" in gpu.table([no_counter])


def test_gpu_benchmark_reads_results_csv_with_the_old_column_names(tmp_path: Path) -> None:
    """reports/gpu was measured before the columns were renamed: its results.csv (old names) still
    gives the CUDA memory and the global Pearson in the summary."""
    gpu = load_gpu_benchmark()
    run = tmp_path / "gpu-quickstart-cuda"
    run.mkdir()
    (run / "results.csv").write_text(
        "metric,encoder,device,batch_size,status,ms_per_segment_median,cuda_peak_allocated_mb,pearson,pearson_pooled\n"
        "bertscore,all-MiniLM-L6-v2,cuda,64,ok,0.4,485.0,0.61,0.59\n",
        encoding="utf-8",
    )
    (row,) = [gpu.summary_row("quickstart", r) for r in gpu.read_rows(run)]
    assert row["cuda_peak_allocated_mib"] == 485.0 and row["pearson_global"] == 0.59


# ----------------------------------------------------------------------------- a real cell


@pytest.mark.integration
def test_a_cell_with_a_token_budget_scores_as_its_batch_size_cell(tmp_path: Path) -> None:
    """Two cells through the runner and worker (tiny model, own data): the token-budget cell
    has its own id and column, the same scores to float32 round-off, and the protocol's record."""
    import json

    import nlgbench

    model = make_tiny_bert(tmp_path / "bert", TEXTS, num_layers=2)
    data = tmp_path / "d.jsonl"
    rows = [
        {
            "lp": lp,
            "seg_id": k + 1,
            "source": "s",
            "reference": TEXTS[(k + 2 * j) % len(TEXTS)],
            "hypothesis": TEXTS[(k + 1) % len(TEXTS)],
            "human": float((k * 7 + j) % 5),
        }
        for j, lp in enumerate(("de-en", "fr-en"))
        for k in range(6)
    ]
    write_jsonl(data, rows)
    spec = {
        "name": "budget",
        "datasets": [{"path": str(data)}],
        "batch_size": 4,
        "batch_tokens": [None, 24],
        "repeats": 2,
        "warmup": 1,
        "metrics": [{"metric": "bertscore", "encoders": [str(model)]}],
    }
    frame = nlgbench.run(spec, tmp_path / "run", quiet=True)
    assert list(frame["status"]) == ["ok", "ok"]
    with (tmp_path / "run" / "results.csv").open(encoding="utf-8", newline="") as fh:
        csv_rows = list(csv.DictReader(fh))
    assert [r["batch_tokens"] for r in csv_rows] == ["", "24"] and all(r["warmup_passes"] == "1" for r in csv_rows)
    assert all(r["ms_per_segment_cv"] != "" for r in csv_rows)
    plain, budget = (nlgbench.load_scores(tmp_path / "run", r["cell_id"]) for r in csv_rows)
    assert (plain["score"] - budget["score"]).abs().max() <= 1e-6
    result = json.loads((tmp_path / "run" / "cells" / csv_rows[1]["cell_id"] / "result.json").read_text())
    assert (
        result["config"]["batch_tokens"] == 24
        and "batch_tokens"
        not in json.loads((tmp_path / "run" / "cells" / csv_rows[0]["cell_id"] / "result.json").read_text())["config"]
    )
    timing = result["timing"]
    assert len(timing["warmup_passes_s"]) == 1 and len(timing["repeat_cpu_s"]) == 2 and "repeat_cuda_s" not in timing
    for phases, wall in zip(timing["phases_s"], timing["repeat_s"], strict=True):
        assert {"tokenize", "encode", "match", "other"} <= set(phases)
        assert sum(v for k, v in phases.items() if not k.endswith("_overlapped")) == pytest.approx(wall, rel=1e-6)
    env = result["environment"]
    assert env["node"] and {"slurm_job_id", "slurm_array_job_id", "slurm_array_task_id"} <= set(env)


def test_the_uss_sampler_sees_a_peak_freed_before_the_block_ends() -> None:
    """256 MiB written (each page touched, so this process's alone) and freed inside the block: the sampled
    peak lies at least about 256 MiB above the USS at entry, though the USS at the block's end is back."""
    with UssSampler(interval=0.02) as sampler:
        entry = sampler.peak_mb
        assert entry is not None
        block = np.ones(2**25)  # 2**25 float64 = 256 MiB
        time.sleep(0.3)
        del block
    assert sampler.peak_mb is not None and sampler.peak_mb - entry >= 0.95 * 256


def test_the_memory_tracker_records_the_peak_uss_only_when_its_block_completes() -> None:
    with MemoryTracker(Device("cpu")) as done:
        pass
    assert done.peak_uss_mb is not None and 0 < done.peak_uss_mb <= done.peak_rss_mb
    with pytest.raises(RuntimeError), MemoryTracker(Device("cpu")) as failed:
        raise RuntimeError("the block failed")
    assert failed.peak_uss_mb is None
