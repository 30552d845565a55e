"""BERTScore: the functional core on hand-made embeddings, mechanics on a tiny random BERT,
and parity with the `bert_score` package on the real MiniLM-L6 and WMT16 (slow)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import load_encoder
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.bertscore import BertScoreScorer
from nlgbench.metrics.common import greedy_match, idf_table

pytestmark = pytest.mark.component

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def test_greedy_match_by_hand() -> None:
    # hypothesis tokens e1, e2; reference tokens e1, (e1+e2)/sqrt2, e3
    e1, e2, e3 = torch.eye(3)
    hyp = torch.stack([e1, e2]).unsqueeze(0)
    ref = _unit(torch.stack([e1, e1 + e2, e3])).unsqueeze(0)
    p, r, f = greedy_match(hyp, torch.ones(1, 2), ref, torch.ones(1, 3))
    s = 1 / math.sqrt(2)
    # float32: a few roundings (normalise, dot, mean) of O(1) values -> rel 1e-6 = 8 float32 eps
    assert p.item() == pytest.approx((1 + s) / 2, rel=1e-6)  # e1 -> 1, e2 -> 1/sqrt2
    assert r.item() == pytest.approx((1 + s + 0) / 3, rel=1e-6)  # e1 -> 1, mid -> 1/sqrt2, e3 -> 0
    assert f.item() == pytest.approx(2 * p.item() * r.item() / (p.item() + r.item()), rel=1e-6)


def test_greedy_match_weights_and_padding() -> None:
    gen = torch.Generator().manual_seed(0)
    hyp, ref = _unit(torch.randn(4, 8, generator=gen)), _unit(torch.randn(5, 8, generator=gen))
    hw, rw = torch.tensor([0.0, 1.0, 2.0, 0.5]), torch.tensor([1.0, 0.0, 3.0, 1.0, 1.0])
    p, r, _ = greedy_match(hyp[None], hw[None], ref[None], rw[None])
    sim = hyp @ ref.T
    # float32 cosines of unit vectors (dot products of 8 terms, <= 8 u = 5e-7) and weighted means of <= 5 of them
    # in another order (<= 5 u = 3e-7): <= 8e-7 -> abs 1e-6; padding adds exact zeros
    assert p.item() == pytest.approx(float((sim.max(1).values * hw).sum() / hw.sum()), abs=1e-6)
    assert r.item() == pytest.approx(float((sim.max(0).values * rw).sum() / rw.sum()), abs=1e-6)
    # the same pair padded inside a batch with a longer pair gives the same scores
    pad_h = torch.cat([hyp, torch.zeros(3, 8)])[None]
    pad_r = torch.cat([ref, torch.zeros(2, 8)])[None]
    long_h, long_r = _unit(torch.randn(1, 7, 8, generator=gen)), _unit(torch.randn(1, 7, 8, generator=gen))
    p2, r2, _ = greedy_match(
        torch.cat([pad_h, long_h]),
        torch.cat([torch.cat([hw, torch.zeros(3)])[None], torch.ones(1, 7)]),
        torch.cat([pad_r, long_r]),
        torch.cat([torch.cat([rw, torch.zeros(2)])[None], torch.ones(1, 7)]),
    )
    assert p2[0].item() == pytest.approx(p.item(), abs=1e-6)
    assert r2[0].item() == pytest.approx(r.item(), abs=1e-6)


def test_greedy_match_negative_similarities_ignore_padding() -> None:
    # every real similarity is negative: padding must not win the max with 0
    hyp = torch.tensor([[[1.0, 0.0]], [[1.0, 0.0]]])
    ref = torch.tensor([[[-1.0, 0.0], [0.0, 0.0]], [[-1.0, 0.0], [-1.0, 0.0]]])
    p, _, _ = greedy_match(hyp, torch.ones(2, 1), ref, torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    assert p.tolist() == pytest.approx([-1.0, -1.0])


def test_idf_table() -> None:
    idf, unseen = idf_table([[1, 2, 2, 3], [1, 4], [1, 2]])
    assert idf[1] == pytest.approx(math.log(4 / 4))
    assert idf[2] == pytest.approx(math.log(4 / 3))
    assert idf[4] == pytest.approx(math.log(4 / 2))
    assert unseen == pytest.approx(math.log(4))


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    items = load_dataset("wmt16", max_segments=10).items
    return tiny_bert([t for it in items for t in (it.reference, it.hypothesis)])


def test_truncation_equals_hidden_state_of_full_model(tiny_dir: Path) -> None:
    full = load_encoder(EncoderRef(str(tiny_dir)), "cpu")
    cut = load_encoder(EncoderRef(str(tiny_dir), num_layers=2), "cpu")
    assert (full.layers_run, cut.layers_run, cut.total_layers) == (4, 2, 4)
    assert cut.params_run < full.params_run
    ids = [t.ids for t in full.tokenize(["a test sentence .", "another one"])]
    (h_full,), mask = full.hidden_states(ids, [2])
    (h_cut,), _ = cut.hidden_states(ids, [2])
    m = mask.bool()
    # the same float32 operations on the same shapes (seen: identical); states |h| < 4: 1e-5 + 1e-5 |h| > 2e-6 |h|
    assert torch.allclose(h_full[m], h_cut[m], atol=1e-5)


def test_params_exclude_pooler_and_count_truncated_layers(tiny_dir: Path) -> None:
    from transformers import BertModel

    reference = BertModel.from_pretrained(tiny_dir, add_pooling_layer=False)
    per_layer = sum(p.numel() for p in reference.encoder.layer[0].parameters())
    total = sum(p.numel() for p in reference.parameters())
    assert load_encoder(EncoderRef(str(tiny_dir)), "cpu").params_run == total
    assert load_encoder(EncoderRef(str(tiny_dir), num_layers=1), "cpu").params_run == total - 3 * per_layer


def test_batch_size_does_not_change_scores(tiny_dir: Path) -> None:
    items = load_dataset("wmt16", max_segments=10).items
    runs = []
    for bs in (1, 7, 64):
        scorer = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", bs)
        scorer.prepare(items)
        runs.append(np.array(scorer.score(items, PhaseTimer()).score))
    # batch size changes padding and summation order of the float32 forward pass: ~sqrt(n) u per dot product
    # (n <= 37, u = 6e-8) over 24 matmuls -> 2e-6 on unit states, so on F1 in [0, 1]: 1e-5 (5x margin)
    assert np.abs(runs[0] - runs[1]).max() < 1e-5
    assert np.abs(runs[0] - runs[2]).max() < 1e-5


def test_special_tokens_weighted_zero_by_id(tiny_dir: Path) -> None:
    scorer = BertScoreScorer(EncoderRef(str(tiny_dir)), {}, "cpu", 4)
    tok = scorer.encoder.tokenizer
    assert {tok.cls_token_id, tok.sep_token_id} <= scorer.encoder.special_ids
    assert tok.unk_token_id not in scorer.encoder.special_ids
    flat, weights, empty = scorer.embed(["a test", " "], PhaseTimer())
    i, blank = flat.texts["a test"], flat.texts[" "]
    start, length = int(flat.start[i]), int(flat.length[i])
    assert length == len(tok("a test")["input_ids"])
    w = weights[start : start + length]
    assert w[0].item() == 0 and w[-1].item() == 0 and w[1:-1].min().item() == 1
    # a blank text: special tokens only, so P = R = F1 = 0 (bert_score)
    assert not empty[i] and empty[blank] and int(flat.length[blank]) == 2


@pytest.mark.system
@pytest.mark.skipif(
    local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
)
@pytest.mark.parametrize("idf", [False, True])
def test_parity_with_bert_score_package_on_wmt16(idf: bool) -> None:
    """Our F1 (and P, R) equal bert_score's on 240 real WMT16 segments, MiniLM-L6, layer 6 and 4."""
    bert_score = pytest.importorskip("bert_score")
    items = load_dataset("wmt16", max_segments=40).items
    refs, hyps = [it.reference for it in items], [it.hypothesis for it in items]
    for layer in (6, 4):
        scorer = BertScoreScorer(EncoderRef("all-MiniLM-L6-v2"), {"idf": idf, "layer": layer}, "cpu", 16)
        scorer.prepare(items)
        ours = scorer.score(items, PhaseTimer())
        p, r, f = bert_score.score(
            hyps,
            refs,
            model_type=MINILM,
            num_layers=layer,
            idf=idf,
            batch_size=16,
            device="cpu",
            use_fast_tokenizer=True,
            nthreads=0,
        )
        # bert_score's own tests compare at decimal=5, i.e. 1e-5 (tests/custom_assertions.py); both are float32
        # passes of the same model, batch size and layer; P, R, F1 in [-1, 1]
        assert np.abs(np.array(ours.columns["f1"]) - f.numpy()).max() <= 1e-5
        assert np.abs(np.array(ours.columns["precision"]) - p.numpy()).max() <= 1e-5
        assert np.abs(np.array(ours.columns["recall"]) - r.numpy()).max() <= 1e-5
