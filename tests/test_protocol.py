"""The GPU-grade measurement protocol: warm-up until stable, CUDA events beside the wall
clock, the coefficient of variation, per-phase times that add up (overlap shown apart), model
inputs prepared ahead in a background thread, token-budget batching, and the environment record.

Timing-dependent behaviour is tested with scripted pass times, never with real speed. Tests that
need CUDA are skipped without it (they run wherever a GPU is at hand).
"""

from __future__ import annotations

import csv
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from helpers import load_script, write_jsonl
from nlgbench.core.cell import CellConfig, DatasetRef
from nlgbench.core.result import CellResult, Timing
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.measurement.devices import Device
from nlgbench.measurement.environment import environment, job_record, parse_nvidia_smi
from nlgbench.measurement.protocol import (
    OTHER_PHASE,
    WARMUP_MAX_PASSES,
    ScoringRun,
    WarmupPolicy,
    coefficient_of_variation,
    is_stable,
    measure_scoring,
    warm_up,
    warmup_policy,
)
from nlgbench.measurement.trackers import CudaEventTracker, MemoryTracker, UssSampler
from nlgbench.metrics import embedding
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.metrics.common import group_sorted, length_sorted_batches, length_sorted_map
from nlgbench.metrics.embedding import Prefetcher, embed_texts, prepared_batches
from nlgbench.runs.csvfiles import RESULTS_COLUMNS, csv_row
from tiny import make_tiny_bert

pytestmark = pytest.mark.component

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")

TEXTS = [
    "the cat sat on the mat .",
    "a dog barked at the postman for a very long time , then it slept",
    "hi",
    "colourless green ideas sleep furiously while the committee deliberates",
    "one two three four five six seven eight nine ten eleven twelve thirteen",
    "short one",
    "the quick brown fox jumps over the lazy dog",
    "an unusually long sentence with many words that keeps going on and on past the others in length",
    "x",
    "the cat sat on the mat .",  # a duplicate: encoded once
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    folder = make_tiny_bert(tmp_path_factory.mktemp("protocol") / "bert", TEXTS, num_layers=2)
    return load_encoder(EncoderRef(str(folder)), "cpu")


# ----------------------------------------------------------------------------- warm-up


def scripted(times: Sequence[float]) -> tuple[list[int], Any]:
    """A pass runner returning `times` in turn, and the list that counts its calls."""
    calls: list[int] = []

    def run_pass() -> float:
        calls.append(1)
        return times[len(calls) - 1]

    return calls, run_pass


def test_warm_up_fixed_passes_without_the_stability_rule() -> None:
    calls, run = scripted([5.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 1, until_stable=False) == [5.0] and len(calls) == 1
    calls, run = scripted([5.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 3, until_stable=False) == [5.0, 1.0, 1.0]
    calls, run = scripted([5.0])
    assert warm_up(run, 0, until_stable=True) == [] and calls == []  # warmup: 0 is no warm-up, even on CUDA


def test_warm_up_goes_on_until_two_passes_agree_within_two_percent() -> None:
    # a measured fp16 cell: 5.56 s, then 1.25, 1.21 (3.2% apart: not yet), then 1.22 (0.8%: stable)
    calls, run = scripted([5.56, 1.25, 1.21, 1.22, 1.22])
    assert warm_up(run, 1, until_stable=True) == [5.56, 1.25, 1.21, 1.22]
    # one pass has nothing to agree with: at least two
    _, run = scripted([1.0, 1.0, 1.0])
    assert warm_up(run, 1, until_stable=True) == [1.0, 1.0]
    # more passes asked than needed: all of them
    _, run = scripted([1.0, 1.0, 1.0, 1.0])
    assert warm_up(run, 3, until_stable=True) == [1.0, 1.0, 1.0]


def test_warm_up_is_capped() -> None:
    never = [float(2**k) for k in range(20)]  # doubling: never stable
    _, run = scripted(never)
    assert len(warm_up(run, 1, until_stable=True)) == WARMUP_MAX_PASSES
    _, run = scripted(never)
    assert len(warm_up(run, 7, until_stable=True)) == 7  # the spec's number when larger than the cap


def test_is_stable_is_relative_to_the_earlier_pass() -> None:
    assert is_stable([1.0, 1.019]) and not is_stable([1.0, 1.021]) and not is_stable([1.0, 0.97])
    assert not is_stable([1.0]) and not is_stable([])


def test_warmup_policy_per_device() -> None:
    assert warmup_policy(Device("cpu")) == WarmupPolicy(whole_data=False, until_stable=False)
    assert (
        warmup_policy(Device("cuda"))
        == warmup_policy(Device("cuda:1"))
        == WarmupPolicy(whole_data=True, until_stable=True)
    )


class CountingScorer:
    """Scores each item by its value; records how many items each call scored."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        with timer.phase("encode"):
            self.calls.append(len(items))
        with timer.phase("tokenize" + embedding.OVERLAPPED):  # as if measured in the background
            pass
        return Scores(primary="f1", columns={"f1": [float(i) for i in items]})


def test_whole_data_policy_warms_up_over_every_item_at_least_twice() -> None:
    scorer = CountingScorer()
    run = measure_scoring(
        scorer,
        list(range(50)),
        warmup=1,
        repeats=2,
        batch_size=4,
        policy=WarmupPolicy(whole_data=True, until_stable=True),
    )
    assert run.warmup_items == 50 and run.warmup_passes_s is not None
    assert 2 <= len(run.warmup_passes_s) <= WARMUP_MAX_PASSES and scorer.calls == [50] * (len(run.warmup_passes_s) + 2)
    assert run.warmup_stable is not None and run.warmup_s == pytest.approx(sum(run.warmup_passes_s))


def test_phases_add_up_to_the_wall_time_with_overlap_apart() -> None:
    run = measure_scoring(CountingScorer(), list(range(10)), warmup=0, repeats=3, batch_size=4)
    assert run.warmup_passes_s == [] and run.warmup_s == 0.0
    for phases, wall in zip(run.phases_s, run.repeat_s, strict=True):
        assert set(phases) == {"encode", "tokenize_overlapped", OTHER_PHASE}
        counted = sum(v for k, v in phases.items() if not k.endswith(embedding.OVERLAPPED))
        assert counted == pytest.approx(wall, rel=1e-9)


# ----------------------------------------------------------------------------- timing record


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(2**0.5 / 2)  # stdev sqrt(2), mean 2
    assert coefficient_of_variation([2.0]) is None and coefficient_of_variation([]) is None


def scoring_run(repeat_s: list[float], **extra: Any) -> ScoringRun:
    return ScoringRun(
        warmup_s=3.0,
        warmup_items=10,
        repeat_s=repeat_s,
        phases_s=[{"encode": t / 2, "tokenize_overlapped": 0.1, OTHER_PHASE: t / 2} for t in repeat_s],
        scores=Scores("f1", {"f1": [0.5] * 10}),
        max_abs_diff=0.0,
        warmup_passes_s=[2.0, 1.0],
        **extra,
    )


def test_timing_records_cv_and_the_new_fields_only_where_measured() -> None:
    cpu = Timing.of_protocol(0.1, 1.0, 0.2, scoring_run([1.0, 1.1, 0.9], repeat_cpu_s=[2.0, 2.1, 1.9]), 10)
    assert cpu.ms_per_segment == pytest.approx([100.0, 110.0, 90.0])
    assert cpu.ms_per_segment_cv == pytest.approx(0.1)  # stdev 10 ms over mean 100 ms
    assert cpu.phase_ms_per_segment_mean["tokenize_overlapped"] == pytest.approx(10.0)
    shown = cpu.to_dict()
    assert shown["warmup_passes_s"] == [2.0, 1.0] and shown["repeat_cpu_s"] == [2.0, 2.1, 1.9]
    assert "repeat_cuda_s" not in shown and "gpu_sm_clock_mhz" not in shown and "warmup_stable" not in shown
    assert Timing(**shown) == cpu

    cuda = Timing.of_protocol(
        0.1, 1.0, 0.2, scoring_run([1.0], repeat_cuda_s=[0.95], gpu_sm_clock_mhz=[1980], warmup_stable=True), 10
    )
    assert cuda.ms_per_segment_cv is None and "ms_per_segment_cv" not in cuda.to_dict()  # one repeat: no CV
    assert cuda.to_dict()["repeat_cuda_s"] == [0.95] and cuda.to_dict()["warmup_stable"] is True


def test_results_csv_has_the_new_columns_before_the_note() -> None:
    columns = RESULTS_COLUMNS
    assert columns[-1] == "correlation_note"
    assert {"ms_per_segment_cv", "warmup_passes", "batch_tokens"} <= set(columns)
    config = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef("m"),
        aligner=None,
        dataset=DatasetRef(name="wmt16"),
        device="cpu",
        batch_size=4,
        repeats=3,
        warmup=1,
        threads=None,
        batch_tokens=512,
    )
    failed = CellResult.not_finished("abc", "label", config, "boom", oom=False)
    assert csv_row(failed)["batch_tokens"] == 512
    assert CellResult.from_json(failed.to_json()).config.batch_tokens == 512


# ----------------------------------------------------------------------------- token budget


def test_group_sorted_by_size_and_by_token_budget() -> None:
    lengths = [10, 8, 8, 5, 3, 3, 3, 1]  # sorted longest first
    assert list(group_sorted(lengths, 3)) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    batches = list(group_sorted(lengths, 3, tokens=16))
    assert batches == [[0], [1, 2], [3, 4, 5], [6, 7]]
    assert all(len(b) * lengths[b[0]] <= 16 for b in batches)
    assert list(group_sorted([40, 12, 2], 3, tokens=16)) == [[0], [1], [2]]  # longer than the budget: alone
    assert list(group_sorted([], 3, tokens=16)) == []


def test_group_sorted_cuts_a_batch_before_padding_outnumbers_real_tokens() -> None:
    # Hand-made: 40 with 12 and 11 pads 3 x 40 = 120 tokens for 63 real (<= 2 x 63); adding the 10
    # would pad 160 for 73 real (> 146), so the batch ends there, well before batch_size 64.
    lengths = [40, 12, 11, 10, 10, 9]
    assert list(group_sorted(lengths, 64)) == [[0, 1, 2], [3, 4, 5]]
    assert list(group_sorted(lengths, 64, tokens=1000)) == [[0, 1, 2], [3, 4, 5]]
    assert list(group_sorted(lengths, 2)) == [[0, 1], [2, 3], [4, 5]]  # batch_size still binds


@pytest.mark.parametrize("tokens", [None, 200])
def test_group_sorted_batches_are_maximal_under_both_rules(tokens: int | None) -> None:
    rng = random.Random(7)
    for _ in range(200):
        lengths = sorted(
            (rng.choice([rng.randint(1, 30), rng.randint(30, 150)]) for _ in range(rng.randint(1, 90))), reverse=True
        )
        batches = list(group_sorted(lengths, 16, tokens))
        assert [i for b in batches for i in b] == list(range(len(lengths)))

        def fits(batch: list[int], lengths: list[int] = lengths) -> bool:
            padded, real = len(batch) * lengths[batch[0]], sum(lengths[i] for i in batch)
            size_ok = padded <= tokens if tokens is not None else len(batch) <= 16
            return len(batch) == 1 or (size_ok and padded <= 2 * real)

        assert all(fits(b) for b in batches)
        assert all(not fits(b + [b[-1] + 1]) for b in batches[:-1])  # cut only where the next input broke a rule


def test_length_sorted_map_follows_the_cells_budget() -> None:
    lengths = [3, 7, 1, 7, 5]
    seen: list[list[int]] = []

    def fn(batch: list[int]) -> list[int]:
        seen.append(batch)
        return [lengths[i] for i in batch]

    assert length_sorted_map(fn, lengths, 64, CellContext(batch_tokens=14)) == lengths
    assert seen == [[1, 3], [4, 0], [2]] == list(length_sorted_batches(lengths, 64, tokens=14))
    seen.clear()
    assert length_sorted_map(fn, lengths, 64) == lengths  # no context: `batch_size` inputs per batch
    assert seen == [[1, 3, 4, 0, 2]]
    with pytest.raises(ValueError, match="token budget must be >= 1"):
        CellContext(batch_tokens=0)


# ----------------------------------------------------------------------------- prefetching


def test_prefetcher_yields_the_same_items_threaded_or_not() -> None:
    for threaded in (True, False):
        with Prefetcher(iter(range(50)), threaded=threaded, depth=3) as stream:
            assert list(stream) == list(range(50))
            assert list(stream) == []  # exhausted stays exhausted
        assert stream.wait_s >= 0 and stream.hidden_s >= 0
        if not threaded:
            assert stream.hidden_s == 0.0


def test_prefetcher_hides_producer_time_behind_the_consumer() -> None:
    def slow() -> Iterator[int]:
        for i in range(5):
            time.sleep(0.02)
            yield i

    with Prefetcher(slow(), threaded=True, depth=5) as stream:
        for _ in stream:
            time.sleep(0.05)  # the consumer's own work: the producer runs meanwhile
    # about 0.1 s produced, nearly all while the consumer slept: more hidden than waited for
    assert stream.busy_s >= 0.09 and stream.hidden_s > stream.wait_s


def test_prefetcher_synchronises_only_before_a_real_wait() -> None:
    calls: list[int] = []
    with Prefetcher(iter(range(3)), threaded=True, depth=8, before_wait=lambda: calls.append(1)) as stream:
        deadline = time.monotonic() + 30
        while stream._queue.qsize() < 4 and time.monotonic() < deadline:  # 3 items and the end, all ready
            time.sleep(0.01)
        assert list(stream) == [0, 1, 2]
    assert calls == []  # inputs were ready: the device is never made to wait

    def slow() -> Iterator[int]:
        time.sleep(0.05)
        yield 0

    with Prefetcher(slow(), threaded=True, before_wait=lambda: calls.append(1)) as stream:
        assert list(stream) == [0]
    assert len(calls) >= 1


def test_prefetcher_raises_the_producers_error_and_stops_on_exit() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise RuntimeError("tokenizer broke")

    with pytest.raises(RuntimeError, match="tokenizer broke"):
        with Prefetcher(failing(), threaded=True) as stream:
            list(stream)

    produced: list[int] = []

    def endless() -> Iterator[int]:
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    with Prefetcher(endless(), threaded=True, depth=2) as stream:
        assert next(stream) == 0
    assert not any(t.name == "nlgbench-prefetch" for t in threading.enumerate())  # joined on exit
    count = len(produced)
    time.sleep(0.1)
    assert len(produced) == count  # nothing runs on after the block


# ----------------------------------------------------------------------------- prepared batches


def padded_tokens(batches: Sequence[embedding.PreparedBatch]) -> int:
    return sum(b.ids.numel() for b in batches)


def test_prepared_batches_all_at_once_equal_the_global_length_sort(tiny: Encoder) -> None:
    unique = list(dict.fromkeys(TEXTS))
    lengths = [len(t.ids) for t in tiny.tokenize(unique)]
    batches = list(prepared_batches(tiny, unique, 3))
    assert [b.index for b in batches] == list(length_sorted_batches(lengths, 3))
    for b in batches:
        assert b.mask.sum(1).tolist() == [lengths[i] for i in b.index]
        assert [t.ids for t in b.tokens] == [tiny.tokenize([unique[i]])[0].ids for i in b.index]


@pytest.mark.parametrize("tokens", [None, 24, 5])
def test_sliced_batches_cover_every_text_once_within_the_budget(tiny: Encoder, tokens: int | None) -> None:
    unique = list(dict.fromkeys(TEXTS * 3 + [t + " again" for t in TEXTS]))
    sliced = list(prepared_batches(tiny, unique, 4, tokens, slice_texts=3))
    assert sorted(i for b in sliced for i in b.index) == list(range(len(unique)))
    for b in sliced:
        assert b.ids.shape[0] == len(b.index) and b.mask[:, 0].all()
        if tokens is not None:
            assert b.ids.numel() <= tokens or len(b.index) == 1
        else:
            assert len(b.index) <= 4
    again = list(prepared_batches(tiny, unique, 4, tokens, slice_texts=3))
    assert [b.index for b in again] == [b.index for b in sliced]  # deterministic


def test_slices_hold_about_eight_batches() -> None:
    assert embedding.slice_size(64, None) == embedding.TOKENIZE_SLICE == 512
    assert embedding.slice_size(256, None) == 2048 and embedding.slice_size(64, 8192) == 2048


def test_embed_texts_threaded_equals_inline(tiny: Encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = TEXTS * 40  # several slices' worth of texts, and duplicates
    texts = [f"{t} {i % 60}" for i, t in enumerate(texts)]
    results = {}
    for threaded in (False, True):
        monkeypatch.setattr(embedding, "prefetch_in_thread", lambda device, threaded=threaded: threaded)
        monkeypatch.setattr(embedding, "TOKENIZE_SLICE", 16)
        timer = PhaseTimer()
        results[threaded] = (embed_texts(tiny, texts, [1, 2], 4, timer), timer.seconds)
    (inline, inline_phases), (threaded_out, threaded_phases) = results[False], results[True]
    assert set(inline_phases) == {"tokenize", "encode"}
    assert set(threaded_phases) == {"tokenize", "encode", "tokenize_overlapped"}
    assert list(inline) == list(threaded_out) == list(dict.fromkeys(texts))
    for text in inline:
        (tok_a, h_a), (tok_b, h_b) = inline[text], threaded_out[text]
        assert tok_a.ids == tok_b.ids and h_a.shape == (2, len(tok_a.ids), 32)
        # sliced batches pad differently, so equal to float32 round-off, not bitwise
        torch.testing.assert_close(h_a, h_b, rtol=0, atol=1e-5)


def test_embed_texts_under_a_token_budget_equals_batch_size(tiny: Encoder) -> None:
    plain = embed_texts(tiny, TEXTS, 2, 64, PhaseTimer())
    budget = embed_texts(replace(tiny, context=CellContext(batch_tokens=20)), TEXTS, 2, 64, PhaseTimer())
    for text in plain:
        # padding is masked: the same states up to float32 round-off of other batch shapes
        torch.testing.assert_close(plain[text][1], budget[text][1], rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- tokenisation


def reference_tokenize(
    encoder: Encoder, texts: Sequence[str]
) -> list[tuple[list[int], list[tuple[int, int]], list[bool], list[bool]]]:
    """What `Encoder.tokenize` returned before it read the fast tokenizer's encodings directly."""
    stripped = [t.strip() for t in texts]
    enc = encoder.tokenizer(
        stripped, add_special_tokens=True, truncation=True, max_length=encoder.max_length, return_offsets_mapping=True
    )
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        word_ids = enc.word_ids(i)
        special = [w is None for w in word_ids]
        starts = [(not special[j]) and (j == 0 or word_ids[j] != word_ids[j - 1]) for j in range(len(ids))]
        out.append((list(ids), [tuple(o) for o in enc["offset_mapping"][i]], starts, special))
    return out


def test_tokenize_equals_the_tokenizer_call(tiny: Encoder) -> None:
    texts = [*TEXTS, "  padded  ", "UPPER case and ünïcödé", "word " * 600]  # the last is cut
    got = [(t.ids, t.offsets, t.word_start, t.special) for t in tiny.tokenize(texts)]
    assert got == reference_tokenize(tiny, texts)


@pytest.mark.system
def test_tokenize_equals_the_tokenizer_call_on_minilm_and_wmt16() -> None:
    from nlgbench.data.loaders import load_dataset

    encoder = load_encoder(EncoderRef("all-MiniLM-L6-v2"), "cpu")
    texts = [t for it in load_dataset("wmt16", max_segments=30).items for t in (it.reference, it.hypothesis)]
    got = [(t.ids, t.offsets, t.word_start, t.special) for t in encoder.tokenize(texts)]
    assert got == reference_tokenize(encoder, texts)


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
