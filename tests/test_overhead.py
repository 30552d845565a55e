"""The per-segment work outside the model: BERTScore's packed, vectorised path (one gather per match
batch, one weight lookup per chunk, lazily read token flags, padding without per-row lists) gives
the scores of the per-text path it replaced, on a tiny random BERT; the ids-only tokenisation (the
backend's `encode_batch_fast`) gives the ids of transformers' own call, cut at the same length, on
the tiny BERT and on MiniLM-L6 over all of WMT16."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder, pad_ids
from nlgbench.metrics import embedding
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.bertscore import BertScoreScorer
from nlgbench.metrics.common import greedy_match, idf_table, pad_tensors, token_weights, weight_table
from nlgbench.metrics.embedding import embed_flat, embed_texts

pytestmark = pytest.mark.component

BLANK = "   "  # stripped to "": [CLS] [SEP] only, an empty text (P = R = F1 = 0, as bert_score)


@pytest.fixture(scope="module")
def items() -> list[Item]:
    wmt = load_dataset("wmt16", max_segments=12).items
    # a blank hypothesis and a blank reference, and a repeated reference (deduplicated before the model)
    blank_hyp = replace(wmt[0], seg_id=900, hypothesis=BLANK)
    blank_ref = replace(wmt[1], seg_id=901, reference=BLANK, references=())
    return [*wmt, blank_hyp, blank_ref, wmt[2]]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert([it.reference for it in load_dataset("wmt16", max_segments=12).items], num_layers=2)


def per_text_scores(encoder: Encoder, items: list[Item], idf: dict[int, float] | None, unseen: float) -> np.ndarray:
    """F1 as the scorer computed it before it packed its states: each text's states sliced out of
    `embed_texts`, normalised and weighed one by one (`token_weights`), each pair padded with
    `pad_tensors`, padding found as all-zero rows, emptiness from the per-token special flags."""
    emb = embed_texts(
        encoder, [t for it in items for t in (it.reference, it.hypothesis)], encoder.layers_run, 4, PhaseTimer()
    )
    f1 = []
    for it in items:
        (tok_h, h), (tok_r, r) = emb[it.hypothesis], emb[it.reference]
        _, _, f = greedy_match(
            pad_tensors([h / h.norm(dim=-1, keepdim=True)]),
            pad_tensors([token_weights(tok_h.ids, encoder.special_ids, idf, unseen)]),
            pad_tensors([r / r.norm(dim=-1, keepdim=True)]),
            pad_tensors([token_weights(tok_r.ids, encoder.special_ids, idf, unseen)]),
            hyp_empty=torch.tensor([all(tok_h.special)]),
            ref_empty=torch.tensor([all(tok_r.special)]),
        )
        f1.append(f.item())
    return np.array(f1)


@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize(("batch_size", "chunk"), [(1, 2048), (5, 4), (64, 2048)])
def test_packed_bertscore_equals_the_per_text_path(
    tiny_dir: Path, items: list[Item], idf: bool, batch_size: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chunks of 4 items: the workspace is reused by each chunk, and grows where a chunk has more tokens
    monkeypatch.setattr(embedding, "CHUNK_ITEMS", chunk)
    scorer = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": idf}, "cpu", batch_size)
    scorer.prepare(items)
    got = np.array(scorer.score(items, PhaseTimer()).score)
    assert got.tolist() == scorer.score(items, PhaseTimer()).score  # a second pass over the same workspace
    table = idf_table([t.ids for t in scorer.encoder.tokenize([it.reference for it in items])]) if idf else (None, 1.0)
    want = per_text_scores(scorer.encoder, items, *table)
    assert got[-3] == 0.0 and got[-2] == 0.0  # the blank hypothesis, the blank reference
    assert got[0] > 0.3  # a real pair (not everything zero)
    # float32 passes over other batch shapes (model batches of 4 vs batch_size, match batches of one pair vs
    # length-sorted ones): round-off of dot products of 32 terms on unit vectors, < 1e-6 on F1 in [0, 1]
    assert np.abs(got - want).max() <= 1e-6


def test_flat_embedding_holds_each_texts_states(tiny_dir: Path, items: list[Item]) -> None:
    scorer = BertScoreScorer(EncoderRef(str(tiny_dir)), {}, "cpu", 3)
    texts = [t for it in items for t in (it.reference, it.hypothesis)]
    flat = embed_flat(scorer.encoder, texts, 2, 3, PhaseTimer())
    sliced = embed_texts(scorer.encoder, texts, 2, 3, PhaseTimer())
    assert list(flat.texts) == list(sliced) and int(flat.length.sum()) == len(flat.states) == len(flat.ids)
    for text, i in flat.texts.items():
        tok, states = sliced[text]
        rows = slice(int(flat.start[i]), int(flat.start[i] + flat.length[i]))
        assert flat.ids[rows].tolist() == tok.ids
        assert torch.equal(flat.states[rows], states)  # the same batches: the same numbers
    index, mask = flat.batch_index(torch.tensor([0, flat.texts[BLANK]]))
    assert mask.sum(1).tolist() == [len(sliced[texts[0]][0].ids), 2]  # [CLS] [SEP] only
    assert index.shape == mask.shape and bool((index < len(flat.states)).all())


def test_weight_table_equals_token_weights() -> None:
    idf, unseen = idf_table([[5, 6, 6, 7], [5, 8]])  # idf(5) = log(3/3) = 0, idf(6) = idf(7) = idf(8) = log(3/2)
    ids = [1, 5, 6, 7, 8, 9, 2]  # 1, 2 special; 9 unseen: log 3
    special = frozenset({1, 2})
    for table, unseen_value in ((idf, unseen), (None, 0.0)):
        lookup = weight_table(10, special, table, unseen_value)[torch.tensor(ids)]
        assert torch.equal(lookup, token_weights(ids, special, table, unseen_value))
    assert weight_table(10, special, idf, unseen)[torch.tensor(ids)].tolist() == pytest.approx(
        [0.0, 0.0, np.log(1.5), np.log(1.5), np.log(1.5), np.log(3), 0.0]
    )


def test_pad_ids_by_hand() -> None:
    ids, mask = pad_ids([[5, 6, 7], [8], [9, 4]], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1], [9, 4, 1]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]] and ids.dtype == mask.dtype == torch.long


def test_bertscore_with_inputs_prepared_in_a_thread_equals_inline(
    tiny_dir: Path, items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlap CUDA uses (tokenising and padding batch k+1 in a background thread while batch k runs),
    run on the CPU: the same scores as inline, and the hidden tokenisation recorded apart."""
    many = [replace(it, seg_id=1000 + i, hypothesis=f"{it.hypothesis} {i}") for i, it in enumerate(items * 4)]
    scores, phases = {}, {}
    for threaded in (False, True):
        monkeypatch.setattr(embedding, "prefetch_in_thread", lambda device, threaded=threaded: threaded)
        monkeypatch.setattr(embedding, "TOKENIZE_SLICE", 8)  # several slices: batches made while others run
        scorer = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", 4)
        scorer.prepare(many)
        timer = PhaseTimer()
        scores[threaded] = np.array(scorer.score(many, timer).score)
        phases[threaded] = set(timer.seconds)
    assert phases[False] == {"tokenize", "encode", "match"}
    assert phases[True] == {"tokenize", "encode", "match", "tokenize_overlapped"}
    # sliced batches group texts differently: float32 round-off of other batch shapes only
    assert np.abs(scores[True] - scores[False]).max() <= 1e-6 and scores[False].min() >= 0.0


def tokenizer_call_ids(encoder: Encoder, texts: list[str]) -> list[list[int]]:
    """transformers' own call, as bert_score makes it (stripped texts, special tokens, cut at the model's length)."""
    call = encoder.tokenizer(
        [t.strip() for t in texts], add_special_tokens=True, truncation=True, max_length=encoder.max_length
    )
    return [list(ids) for ids in call["input_ids"]]


def test_ids_only_tokenisation_gives_the_tokenizer_calls_ids(tiny_dir: Path, items: list[Item]) -> None:
    encoder = load_encoder(EncoderRef(str(tiny_dir)), "cpu")
    long = "word " * 600  # longer than the tiny model's 512 positions: cut, and recorded as cut
    texts = [t for it in items for t in (it.reference, it.hypothesis)] + ["  UPPER case and ünïcödé  ", long]
    fast = encoder.tokenize(texts, ids_only=True)
    assert [t.ids for t in fast] == tokenizer_call_ids(encoder, texts) == [t.ids for t in encoder.tokenize(texts)]
    assert len(fast[-1].ids) == encoder.max_length == 512 and encoder.context.truncated == {long.strip()}
    with pytest.raises(RuntimeError, match="ids only"):
        _ = fast[0].special  # no word ids were tracked: a flag read from them would be wrong, not just slow


@pytest.mark.system
@pytest.mark.skipif(local_snapshot("sentence-transformers/all-MiniLM-L6-v2") is None, reason="MiniLM-L6 not cached")
def test_ids_only_tokenisation_equals_the_tokenizer_call_on_minilm_and_all_of_wmt16() -> None:
    encoder = load_encoder(EncoderRef("all-MiniLM-L6-v2"), "cpu")
    texts = list(dict.fromkeys(t for it in load_dataset("wmt16").items for t in (it.reference, it.hypothesis)))
    long = " ".join(texts[:40])  # about 1,100 tokens: cut at MiniLM's 512
    texts.append(long)
    fast = [t.ids for t in encoder.tokenize(texts, ids_only=True)]
    assert len(fast) == 5876 and fast == tokenizer_call_ids(encoder, texts)
    assert len(fast[-1]) == encoder.max_length == 512 and long in encoder.context.truncated


def test_greedy_match_without_masks_where_padding_repeats_a_real_token() -> None:
    """Padding that copies a real token of its own text (as `FlatEmbedding.batch_index` pads) cannot change
    a maximum, so nothing needs masking: the same P, R, F as zero padding masked out."""
    gen = torch.Generator().manual_seed(0)
    lengths = [(3, 5), (5, 2), (1, 4)]  # (hypothesis, reference) tokens of 3 pairs, padded to 5 each
    unit = [[torch.nn.functional.normalize(torch.randn(n, 8, generator=gen), dim=-1) for n in pair] for pair in lengths]
    zero_padded = [pad_tensors([pair[k] for pair in unit] + [torch.zeros(5, 8)])[:3] for k in (0, 1)]
    repeated = [
        torch.stack([torch.cat([x, x[-1:].expand(5 - len(x), 8)]) for x in (p[k] for p in unit)]) for k in (0, 1)
    ]
    masks = [torch.arange(5) < torch.tensor([pair[k] for pair in lengths]).unsqueeze(1) for k in (0, 1)]
    weights = [torch.rand(3, 5, generator=gen) * m for m in masks]
    masked = greedy_match(zero_padded[0], weights[0], zero_padded[1], weights[1], hyp_mask=masks[0], ref_mask=masks[1])
    unmasked = greedy_match(repeated[0], weights[0], repeated[1], weights[1], padding_repeats=True)
    for a, b in zip(masked, unmasked, strict=True):
        assert torch.equal(a, b)
