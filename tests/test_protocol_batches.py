"""How a cell's texts reach the encoder: batches under a token budget, the prefetcher (same items,
hidden producer time, errors raised), prepared batches and tokenisation equal to the tokenizer's.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest
import torch

from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.metrics import embedding
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.common import group_sorted, length_sorted_batches, length_sorted_map
from nlgbench.metrics.embedding import Prefetcher, embed_texts, prepared_batches
from protocolkit import TEXTS
from tiny import make_tiny_bert

pytestmark = pytest.mark.component


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    folder = make_tiny_bert(tmp_path_factory.mktemp("protocol") / "bert", TEXTS, num_layers=2)
    return load_encoder(EncoderRef(str(folder)), "cpu")


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
