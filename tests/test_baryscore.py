"""BaryScore: barycentre and distance mechanics, parity of the batched barycentres with POT's
free_support_barycenter, which idf table meets which text, determinism (repeats, threads)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import ot
import pytest
import torch

from nlgbench.core.spec import parse_spec
from nlgbench.data.items import Item
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.barycentre import free_support_barycentres
from nlgbench.metrics.baryscore import BaryScoreScorer, sinkhorn_divergence, wasserstein_batch
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.common import idf_table
from nlgbench.metrics.embedding import embed_texts

pytestmark = pytest.mark.component

# "cat" is in every hypothesis but in one reference only: its idf differs between the two sides.
ITEMS = [
    Item("xx-en", 0, "", "", "the cat sat on the mat", "a cat sat there", 0.1),
    Item("xx-en", 1, "", "", "dogs bark at night", "the cat barks at night", -0.3),
    Item("xx-en", 2, "", "", "birds sing in the morning", "cat birds sing early", 0.5),
]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert([t for it in ITEMS for t in (it.reference, it.hypothesis)], num_layers=5)


def test_barycentre_of_identical_layers_is_the_cloud_and_distance_zero() -> None:
    rng = np.random.default_rng(0)
    cloud = rng.normal(size=(4, 8))
    (bary,) = free_support_barycentres([torch.from_numpy(np.stack([cloud] * 3))], [np.full(4, 0.25)])
    assert bary.shape == (4, 8)
    # float64 barycentre iterations on |x| < 4: seen 1e-16; 1e-6 leaves room for the solver's stopping rule
    assert np.allclose(np.sort(bary.numpy(), axis=0), np.sort(cloud, axis=0), rtol=0, atol=1e-6)
    t = torch.from_numpy(cloud)
    # squared Euclidean cost (no sqrt): a zero distance keeps only round-off (d + 2) u 4 max|x|^2 ~ 1e-13
    assert wasserstein_batch([bary], [t])[0].item() == pytest.approx(0.0, abs=1e-9)
    w = wasserstein_batch([t], [t + 1.0])[0].item()  # every point moved by the all-ones vector
    assert w == pytest.approx(8.0, rel=1e-12)  # squared Euclidean cost, uniform mass; float64, a few ulps
    assert 0 < sinkhorn_divergence(cloud, cloud + 1.0, 0.5) <= w + 1e-9


def _texts(rng: np.random.Generator, count: int, k: int, dim: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random texts as BaryScore sees them: k layers of 2..14 unit vectors, positive idf-like weights
    with about one token in six at 0 (a token in every text of its side), normalised."""
    layers, weights = [], []
    for _ in range(count):
        n = int(rng.integers(2, 15))
        x = rng.normal(size=(k, n, dim)) + rng.normal(size=(1, n, dim))  # layers of a text resemble each other
        layers.append(x / np.linalg.norm(x, axis=-1, keepdims=True))
        w = rng.random(n) * (rng.random(n) > 1 / 6)
        w[rng.integers(n)] += 0.5
        weights.append(w / w.sum())
    return layers, weights


def pot_barycentre(layers: np.ndarray, w: np.ndarray, max_iter: int = 1000) -> np.ndarray:
    """The published code's call: POT's free-support barycentre from zeros, uniform support weights."""
    k, n, d = layers.shape
    return ot.lp.free_support_barycenter(
        [layers[i] for i in range(k)], [w] * k, np.zeros((n, d)), b=np.full(n, 1.0 / n), numItermax=max_iter
    )


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("use_gram", [True, False])
def test_batched_barycentres_equal_pots_free_support_barycenter(use_gram: bool, device: str) -> None:
    rng = np.random.default_rng(3)
    layers, weights = _texts(rng, 24, k=4, dim=12)
    want = [pot_barycentre(x, w) for x, w in zip(layers, weights, strict=True)]
    got = free_support_barycentres([torch.from_numpy(x).to(device) for x in layers], weights, use_gram=use_gram)
    assert all(g.device.type == device for g in got)
    got = [g.cpu() for g in got]
    assert [g.shape for g in got] == [x.shape for x in want]
    # Same plans at every iteration (a different plan anywhere would move a point by ~1e-2), so what
    # differs is rounding: X_r = (n / k) sum_i sum_j T_i[r, j] L_ij, <= k m terms with |L_ij| = 1, each
    # flow T_i[r, j] a sum of <= n + m marginals (rounding <= (n + m) u), the sum taken in another order:
    # |dX| <= (n / k) k m (n + m) u + k m u = n m (n + m) u + ... = 6e-13 for n, m <= 14 (u = 1.1e-16)
    worst = max(np.abs(g.numpy() - x).max() for g, x in zip(got, want, strict=True))
    assert worst <= 1e-12
    # the same with the texts in another order and other batch mates (other padding)
    order = rng.permutation(len(layers))
    again = free_support_barycentres(
        [torch.from_numpy(layers[i]).to(device) for i in order], [weights[i] for i in order], use_gram=use_gram
    )
    assert max(np.abs(again[j].cpu().numpy() - want[i]).max() for j, i in enumerate(order)) <= 1e-12


def test_barycentres_stop_after_max_iter_as_pot() -> None:
    rng = np.random.default_rng(8)
    layers, weights = _texts(rng, 6, k=3, dim=8)
    for max_iter in (1, 2):
        got = free_support_barycentres([torch.from_numpy(x) for x in layers], weights, max_iter=max_iter)
        want = [pot_barycentre(x, w, max_iter) for x, w in zip(layers, weights, strict=True)]
        # as above: <= n m (n + m) u = 6e-13 with n, m <= 14
        assert max(np.abs(g.numpy() - x).max() for g, x in zip(got, want, strict=True)) <= 1e-12
    one = free_support_barycentres([torch.from_numpy(x) for x in layers], weights, max_iter=1)
    full = free_support_barycentres([torch.from_numpy(x) for x in layers], weights)
    # one step is not the end
    assert max(np.abs(a.numpy() - b.numpy()).max() for a, b in zip(one, full, strict=True)) > 1e-3


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_wasserstein_batch_equals_emd2_per_pair(device: str) -> None:
    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(int(rng.integers(1, 10)), 6)) for _ in range(20)]
    ys = [rng.normal(size=(int(rng.integers(1, 10)), 6)) for _ in range(20)]
    want = [
        ot.emd2(np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y)), ot.dist(x, y))
        for x, y in zip(xs, ys, strict=True)
    ]
    for batch_pairs in (32, 3):  # all pairs in one batch; sorted by size into 7 batches (scattered back)
        got = wasserstein_batch(
            [torch.from_numpy(x).to(device) for x in xs],
            [torch.from_numpy(y).to(device) for y in ys],
            threads=2,
            batch_pairs=batch_pairs,
        )
        # squared costs from torch's product instead of NumPy's: |x|^2, |y|^2 < 40 (d = 6), each cost moves by
        # <= (d + 2) u 2 * 40 = 1.4e-13, and W (a mean of costs) by as much
        assert np.allclose(got.numpy(), want, rtol=0, atol=1e-12)


def test_idf_over_hypotheses_meets_hypotheses_and_idf_over_references_meets_references(tiny_dir: Path) -> None:
    scorer = BaryScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", 8)
    scorer.prepare(ITEMS)
    enc = scorer.encoder
    ref_idf, ref_unseen = idf_table([t.ids for t in enc.tokenize([it.reference for it in ITEMS])])
    hyp_idf, hyp_unseen = idf_table([t.ids for t in enc.tokenize([it.hypothesis for it in ITEMS])])
    cat = enc.tokenize(["cat"])[0].ids[1]
    assert hyp_idf[cat] == pytest.approx(np.log(4 / 4)) and ref_idf.get(cat, ref_unseen) == pytest.approx(np.log(4 / 2))

    (tok,) = enc.tokenize([ITEMS[0].hypothesis])  # "a cat sat there"
    keep, w_as_hyp = scorer.weights(tok, "hypothesis")
    _, w_as_ref = scorer.weights(tok, "reference")
    raw_hyp = np.array([hyp_idf.get(tok.ids[j], hyp_unseen) for j in keep])
    raw_ref = np.array([ref_idf.get(tok.ids[j], ref_unseen) for j in keep])
    # float64 normalisation of a few idf weights, the same operations: a few ulps
    assert np.allclose(w_as_hyp, raw_hyp / raw_hyp.sum(), rtol=1e-12) and np.allclose(
        w_as_ref, raw_ref / raw_ref.sum(), rtol=1e-12
    )
    position = [tok.ids[j] for j in keep].index(cat)
    assert w_as_hyp[position] == 0.0 and w_as_ref[position] > 0.0  # the swapped convention would weigh "cat"


def test_scores_repeat_exactly_and_lower_is_better(tiny_dir: Path) -> None:
    scorer = BaryScoreScorer(
        EncoderRef(str(tiny_dir)), {"idf": False, "last_layers": 3, "sinkhorn_regs": [1.0]}, "cpu", 2
    )
    scorer.prepare(ITEMS)
    first = scorer.score(ITEMS, PhaseTimer())
    second = scorer.score(ITEMS, PhaseTimer())
    assert first.columns == second.columns and first.primary == "w"
    assert scorer.describe()["layers"] == [3, 4, 5]
    same = [dataclasses.replace(it, hypothesis=it.reference) for it in ITEMS]
    timer = PhaseTimer()
    # identical texts: squared costs of identical states (|h|^2 < 40, d = 32) leave (d + 2) u 4 |h|^2 = 6e-13, no sqrt
    assert max(scorer.score(same, timer).score) == pytest.approx(0.0, abs=1e-9)
    assert {"encode", "barycentre", "transport"} <= set(timer.seconds)
    assert min(first.score) > 1e-6
    # batches of texts run one per thread, each single-threaded: the thread count changes no bit
    # (of the barycentres: the encoder's own float32 sums do depend on torch's thread count)
    texts = [(it.reference, "reference") for it in ITEMS] + [(it.hypothesis, "hypothesis") for it in ITEMS]
    emb = embed_texts(scorer.encoder, [text for text, _ in texts], scorer.layers, 2, PhaseTimer())
    todo = {key: emb[key[0]] for key in texts}
    one = scorer.barycentres(todo, threads=1)
    for threads in (2, 5):
        assert all(torch.equal(bary, one[key]) for key, bary in scorer.barycentres(todo, threads).items())


def test_options_are_checked_when_the_spec_is_read(tiny_dir: Path) -> None:
    from nlgbench.metrics import get_metric

    assert get_metric("baryscore").higher_is_better is False
    base = {"name": "t", "datasets": ["wmt16"]}
    for options, message in [
        ({"sinkhorn_regs": [0]}, "sinkhorn_regs must be a list of positive numbers"),
        ({"last_layers": 0}, "last_layers must be >= 1"),
    ]:
        spec = {**base, "metrics": [{"metric": "baryscore", "options": options, "encoders": [str(tiny_dir)]}]}
        with pytest.raises(UserError, match=message):
            parse_spec(spec)
    with pytest.raises(UserError, match="last_layers=7 but encoder .* has 6 hidden states"):
        BaryScoreScorer(EncoderRef(str(tiny_dir)), {"last_layers": 7}, "cpu", 2)


@pytest.mark.system
@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
def test_scores_equal_pot_per_text_on_wmt16(model: str) -> None:
    """The scorer (batched barycentres, references shared by items computed once, batched transport)
    against the published code's POT calls per text, on real WMT16 states of MiniLM-L6 (384
    dimensions) and MPNet-base (768)."""
    from nlgbench.data.loaders import load_dataset

    if local_snapshot(f"sentence-transformers/{model}") is None:
        pytest.skip(f"real {model} not in the local HF cache")
    items = load_dataset("wmt16", max_segments=5).items
    scorer = BaryScoreScorer(EncoderRef(model), {"idf": True}, "cpu", 16)
    scorer.prepare(items)
    got = scorer.score(items, PhaseTimer()).score
    emb = embed_texts(
        scorer.encoder, [t for it in items for t in (it.reference, it.hypothesis)], scorer.layers, 16, PhaseTimer()
    )

    def pot(text: str, side: str) -> np.ndarray:
        layers, w = scorer.measure(*emb[text], side)
        return pot_barycentre(layers.numpy(), w)

    want = []
    for it in items:
        x, y = pot(it.reference, "reference"), pot(it.hypothesis, "hypothesis")
        want.append(ot.emd2(np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y)), ot.dist(x, y)))
    # barycentres within ~1e-12 of POT's (same plans, see above) and costs <= 4 from another product:
    # W moves by <= 4 * 2 * 1e-12 + (D + 2) u 4 ~ 1e-11
    assert len(got) == len(want) == 30
    assert np.allclose(got, want, rtol=0, atol=1e-10)
    assert min(want) > 1e-3  # real distances, not all zero
