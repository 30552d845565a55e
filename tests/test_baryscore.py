"""BaryScore: barycentre and distance mechanics, which idf table meets which text, determinism."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from nlgbench.data import Item
from nlgbench.encoders import EncoderRef
from nlgbench.errors import UserError
from nlgbench.spec import parse_spec
from nlgbench.metrics.baryscore import BaryScoreScorer, barycentre, bary_distances
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.common import idf_table
from tiny import make_tiny_bert

# "cat" is in every hypothesis but in one reference only: its idf differs between the two sides.
ITEMS = [
    Item("xx-en", 0, "", "", "the cat sat on the mat", "a cat sat there", 0.1),
    Item("xx-en", 1, "", "", "dogs bark at night", "the cat barks at night", -0.3),
    Item("xx-en", 2, "", "", "birds sing in the morning", "cat birds sing early", 0.5),
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [t for it in ITEMS for t in (it.reference, it.hypothesis)]
    return make_tiny_bert(tmp_path_factory.mktemp("tiny"), texts, num_layers=5)


def test_barycentre_of_identical_layers_is_the_cloud_and_distance_zero() -> None:
    rng = np.random.default_rng(0)
    cloud = rng.normal(size=(4, 8))
    bary = barycentre(np.stack([cloud] * 3), np.full(4, 0.25))
    assert bary.shape == (4, 8)
    # float64 barycentre iterations on |x| < 4: seen 1e-16; 1e-6 leaves room for the solver's stopping rule
    assert np.allclose(np.sort(bary, axis=0), np.sort(cloud, axis=0), rtol=0, atol=1e-6)
    # squared Euclidean cost (no sqrt): a zero distance keeps only round-off (d + 2) u 4 max|x|^2 ~ 1e-13
    assert bary_distances(bary, cloud, [])["w"] == pytest.approx(0.0, abs=1e-9)
    d = bary_distances(cloud, cloud + 1.0, [0.5])  # every point moved by the all-ones vector
    assert d["w"] == pytest.approx(8.0, rel=1e-12)  # squared Euclidean cost, uniform mass; float64, a few ulps
    assert 0 < d["sd_0.5"] <= d["w"] + 1e-9


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
    assert np.allclose(w_as_hyp, raw_hyp / raw_hyp.sum(), rtol=1e-12) and np.allclose(w_as_ref, raw_ref / raw_ref.sum(), rtol=1e-12)
    position = [tok.ids[j] for j in keep].index(cat)
    assert w_as_hyp[position] == 0.0 and w_as_ref[position] > 0.0  # the swapped convention would weigh "cat"


def test_scores_repeat_exactly_and_lower_is_better(tiny_dir: Path) -> None:
    scorer = BaryScoreScorer(EncoderRef(str(tiny_dir)), {"idf": False, "last_layers": 3, "sinkhorn_regs": [1.0]}, "cpu", 2)
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


def test_options_are_checked_when_the_spec_is_read(tiny_dir: Path) -> None:
    from nlgbench.metrics import get_metric

    assert get_metric("baryscore").higher_is_better is False
    base = {"name": "t", "datasets": ["wmt16"]}
    for options, message in [({"sinkhorn_regs": [0]}, "sinkhorn_regs must be a list of positive numbers"),
                             ({"last_layers": 0}, "last_layers must be >= 1")]:
        spec = {**base, "metrics": [{"metric": "baryscore", "options": options, "encoders": [str(tiny_dir)]}]}
        with pytest.raises(UserError, match=message):
            parse_spec(spec)
    with pytest.raises(UserError, match="last_layers=7 but encoder .* has 6 hidden states"):
        BaryScoreScorer(EncoderRef(str(tiny_dir)), {"last_layers": 7}, "cpu", 2)
