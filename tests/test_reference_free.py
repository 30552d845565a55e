"""XMoverScore, SentSim and FrugalScore mechanics on tiny random models, checked against direct computations.

No real multilingual encoder, GPT-2 or FrugalScore student can be had here (shared/MODELS.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import min_max_exp_error
from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import align
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.frugalscore import FrugalScoreScorer
from nlgbench.metrics.sentsim import SentSimScorer, combine, min_max
from nlgbench.metrics.xmoverscore import XMoverScoreScorer, lm_log_likelihood, ngrams, remap
from tiny import make_tiny_bert, make_tiny_gpt2

pytestmark = pytest.mark.component

ITEMS = [
    Item("de-en", i, "", src, ref, hyp, float(i))
    for i, (src, ref, hyp) in enumerate(
        [
            ("die katze sitzt auf der matte", "the cat sits on the mat", "a cat is sitting on a mat"),
            ("hunde bellen laut", "dogs bark loudly", "the dogs are barking"),
            ("guten morgen", "good morning", "morning"),
            ("es regnet heute", "it is raining today", "today it rains"),
        ]
    )
]
TEXTS = [t for it in ITEMS for t in (it.source, it.reference, it.hypothesis)]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("bert"), TEXTS, num_layers=4)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_gpt2(tmp_path_factory.mktemp("gpt2"), TEXTS * 3)


# ----------------------------------------------------------------------------- XMoverScore


def test_identity_remapping_and_no_lm_give_exactly_the_aligners_score(bert_dir: Path, tmp_path: Path) -> None:
    dim = 32
    np.save(tmp_path / "de-en.clp.npy", np.eye(dim))
    for aligner in ("wmd", "rwmd", "wcd"):
        plain = XMoverScoreScorer(EncoderRef(str(bert_dir)), {"layer": 3}, "cpu", 2, aligner)
        mapped = XMoverScoreScorer(
            EncoderRef(str(bert_dir)), {"layer": 3, "mapping": "clp", "mapping_dir": str(tmp_path)}, "cpu", 2, aligner
        )
        mapped.prepare(ITEMS)
        a = plain.score(ITEMS, PhaseTimer()).score
        b = mapped.score(ITEMS, PhaseTimer()).score
        assert a == b
        # and that score is 1 - the aligner's distance of the unit token states, computed directly
        enc = plain.encoder
        for it, got in zip(ITEMS, a, strict=True):
            states = []
            for text in (it.source, it.hypothesis):
                (tok,) = enc.tokenize([text])
                (h,), _ = enc.hidden_states([tok.ids], [3])
                x = h[0, [j for j in range(len(tok.ids)) if not tok.special[j]]].double().numpy()
                states.append(x / np.linalg.norm(x, axis=1, keepdims=True))
            want = 1 - align(aligner, states[0], np.ones(len(states[0])), states[1], np.ones(len(states[1])))
            # WMD, RWMD and WCD are 1-Lipschitz in every point, so |d' - d| <= max|dx| + max|dy|; unit token states
            # of float32 passes in another batch shape differ by <= 1e-5 (see the SentSim parts below) -> 2e-5
            assert got == pytest.approx(want, abs=2e-5)


def test_remapping_and_ngrams() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4))
    w = rng.normal(size=(4, 4))
    assert np.allclose(remap(x, "clp", w), x @ w)
    b = np.array([3.0, 0, 0, 0])
    removed = remap(x, "umd", b)
    assert np.allclose(removed[:, 0], 0) and np.allclose(removed[:, 1:], x[:, 1:])
    grams, mass = ngrams(x, 2)
    assert grams.shape == (4, 4) and np.allclose(grams[1], (x[1] + x[2]) / 2) and set(mass) == {2.0}


def test_lm_term_equals_direct_log_likelihood_and_is_combined(bert_dir: Path, gpt2_dir: Path) -> None:
    scorer = XMoverScoreScorer(EncoderRef(str(bert_dir)), {"layer": 3, "lm": str(gpt2_dir), "lm_weight": 0.1}, "cpu", 3)
    out = scorer.score(ITEMS, PhaseTimer())
    model, tok = scorer.lm.model, scorer.lm.tokenizer
    for i, it in enumerate(ITEMS):
        ids = [tok.bos_token_id, *tok(it.hypothesis, add_special_tokens=False)["input_ids"], tok.eos_token_id]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], dim=-1)
        direct = float(sum(logp[t - 1, ids[t]] for t in range(1, len(ids))) / (len(ids) - 1))
        # log p = logit - logsumexp: the logits' float32 error from another batch shape (~2e-6 relative, |logit| < 2)
        # plus u |log p| (|log p| < log 400 = 6): < 5e-6 -> abs 1e-5
        assert out.columns["lm"][i] == pytest.approx(direct, abs=1e-5)
        # the combination in float64 on the scorer's own parts: a + 0.1 b with |a|, |b| < 10 is within a few ulps
        assert out.columns["combined"][i] == pytest.approx(
            out.columns["xmoverscore"][i] + 0.1 * out.columns["lm"][i], abs=1e-12
        )
    assert out.primary == "combined"
    silent = XMoverScoreScorer(EncoderRef(str(bert_dir)), {"layer": 3, "lm": str(gpt2_dir), "lm_weight": 0.0}, "cpu", 3)
    zero = silent.score(ITEMS, PhaseTimer())
    assert zero.score == zero.columns["xmoverscore"] == out.columns["xmoverscore"]  # LM weight 0: the aligner's score
    # batched with padding equals one at a time
    x = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    m = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    both = lm_log_likelihood(model, x, m)
    assert float(both[1]) == pytest.approx(float(lm_log_likelihood(model, x[1:, :2], m[1:, :2])[0]), abs=1e-5)


def test_missing_mapping_file_is_one_clear_error(bert_dir: Path, tmp_path: Path) -> None:
    scorer = XMoverScoreScorer(
        EncoderRef(str(bert_dir)), {"layer": 3, "mapping": "umd", "mapping_dir": str(tmp_path)}, "cpu", 2
    )
    with pytest.raises(UserError, match="no file .*de-en.umd.npy for language pair de-en"):
        scorer.prepare(ITEMS)


# ----------------------------------------------------------------------------- SentSim


def test_sentsim_combines_corpus_normalised_parts(bert_dir: Path) -> None:
    scorer = SentSimScorer(EncoderRef(str(bert_dir)), {"against": "reference"}, "cpu", 2)
    out = scorer.score(ITEMS, PhaseTimer())
    enc = scorer.sentence
    cos, f1 = [], []
    for it in ITEMS:
        (th, tr) = enc.tokenize([it.hypothesis, it.reference])
        (h,), _ = enc.hidden_states([th.ids], [4])
        (r,), _ = enc.hidden_states([tr.ids], [4])
        cos.append(float(torch.nn.functional.cosine_similarity(h[0].mean(0), r[0].mean(0), dim=0)))
        hn = h[0] / h[0].norm(dim=-1, keepdim=True)  # BERTScore F1, no idf: specials weigh 0, stay candidates
        rn = r[0] / r[0].norm(dim=-1, keepdim=True)
        sim = hn @ rn.T
        p, rc = sim[1:-1].max(1).values.mean(), sim[:, 1:-1].max(0).values.mean()
        f1.append(float(2 * p * rc / (p + rc)))
    # float32 forward passes batched vs one at a time sum in another order: ~sqrt(n) u per dot product (n <= 37,
    # u = 6e-8) over 24 matmuls (4 layers x 6) -> sqrt(24 * 37) u = 2e-6 relative on the states; cosines and F1
    # of them lie in [-1, 1] -> abs 1e-5 (5x margin; seen: <= 1 ulp)
    got_c, got_t = np.array(out.columns["sentence_cosine"]), np.array(out.columns["token_bertscore"])
    assert got_c == pytest.approx(cos, abs=1e-5)
    assert got_t == pytest.approx(f1, abs=1e-5)
    # the combination, in float64 on the scorer's own parts: only float64 round-off (2.2e-16) x 1/spread x e
    c, t = got_c, got_t
    want = np.exp((c - c.min()) / (c.max() - c.min())) + np.exp((t - t.min()) / (t.max() - t.min()))
    assert out.score == pytest.approx(want.tolist(), rel=0, abs=1e-12)
    # against the direct parts: min-max normalisation amplifies their float32 differences by e * 4 / spread
    # (helpers.min_max_exp_error); with cosines spread over 0.025 one ulp gives 5e-5, beyond a fixed abs=1e-5
    dc, dt = np.array(cos), np.array(f1)
    direct = np.exp((dc - dc.min()) / np.ptp(dc)) + np.exp((dt - dt.min()) / np.ptp(dt))
    tol = min_max_exp_error(np.abs(c - dc).max(), np.ptp(dc)) + min_max_exp_error(np.abs(t - dt).max(), np.ptp(dt))
    assert out.score == pytest.approx(direct.tolist(), rel=0, abs=tol + 1e-12)
    # corpus-level: a score depends on the other items (normalisation over the whole set)
    drop = int(np.argmax(c))  # removing the item that sets the cosine maximum changes every other score
    rest = [it for k, it in enumerate(ITEMS) if k != drop]
    again = scorer.score(rest, PhaseTimer())
    keep = [k for k in range(len(ITEMS)) if k != drop]
    rc, rt = np.array(again.columns["sentence_cosine"]), np.array(again.columns["token_bertscore"])
    assert rc == pytest.approx(c[keep], abs=1e-5) and rt == pytest.approx(t[keep], abs=1e-5)  # same parts, as above
    # every score moves by more than what part differences of up to 1e-5 could explain
    noise = min_max_exp_error(1e-5, np.ptp(rc)) + min_max_exp_error(1e-5, np.ptp(rt))
    pairs = zip(again.score, np.array(out.score)[keep], strict=True)
    assert all(abs(a - b) > noise for a, b in pairs), (again.score, noise)


def test_sentsim_wmd_part_is_a_distance(bert_dir: Path) -> None:
    assert combine(np.array([0.0, 1.0]), np.array([1.0, 0.0]), True) == pytest.approx([2.0, 2 * np.e])
    scorer = SentSimScorer(EncoderRef(str(bert_dir)), {"against": "source", "token_part": "wmd"}, "cpu", 2)
    out = scorer.score(ITEMS, PhaseTimer())
    assert len(out.columns["token_wmd"]) == len(ITEMS) and min(out.columns["token_wmd"]) > 0
    with pytest.raises(ValueError, match="at least two different scores"):
        min_max([0.3, 0.3])
    blank = [dataclasses.replace(it, source="") for it in ITEMS]
    with pytest.raises(ValueError, match="needs a source text"):
        scorer.score(blank, PhaseTimer())


def test_sentsim_with_all_parts_equal_is_one_clear_error(bert_dir: Path) -> None:
    """Min-max normalisation over a set whose scores are all equal is undefined: a UserError naming the
    rule (one line, exit 2 from the CLI), never a ValueError traceback."""
    scorer = SentSimScorer(EncoderRef(str(bert_dir)), {"against": "source"}, "cpu", 2)
    same = [dataclasses.replace(it, hypothesis=ITEMS[0].source, source=ITEMS[0].source) for it in ITEMS[:3]]
    with pytest.raises(UserError, match="at least two items with different .* scores; these 3 all score"):
        scorer.score(same, PhaseTimer())


# ----------------------------------------------------------------------------- FrugalScore


def make_student(folder: Path) -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    make_tiny_bert(folder, TEXTS, num_layers=2)
    torch.manual_seed(1)
    config = BertConfig.from_pretrained(folder, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("batch_size", [1, 3])
def test_frugalscore_equals_a_direct_forward_pass(tmp_path: Path, batch_size: int) -> None:
    student = make_student(tmp_path / "student")
    scorer = FrugalScoreScorer(EncoderRef(str(student)), {"max_length": 64}, "cpu", batch_size)
    out = scorer.score(ITEMS, PhaseTimer())
    for it, got in zip(ITEMS, out.score, strict=True):
        enc = scorer.lm.tokenizer(it.hypothesis, it.reference, return_tensors="pt")
        with torch.no_grad():
            want = float(scorer.lm.model(**enc).logits[0, 0])
        # a float32 regression logit (|logit| < 1) from a pass in another batch shape: ~2e-6 relative -> abs 1e-5
        assert got == pytest.approx(want, abs=1e-5)


def test_frugalscore_refuses_models_of_another_kind(bert_dir: Path) -> None:
    from nlgbench.core.spec import parse_spec

    spec = {"name": "t", "datasets": ["wmt16"], "metrics": [{"metric": "frugalscore", "encoders": [str(bert_dir)]}]}
    with pytest.raises(UserError, match="needs a cross-encoder or feature-head model; .* is of kind encoder"):
        parse_spec(spec)


@pytest.mark.system
def test_sentsim_runs_for_real_in_a_sweep_with_minilm(tmp_path: Path) -> None:
    import csv
    import json

    from nlgbench.cli import main
    from nlgbench.runs.csvfiles import CSV_COLUMNS

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "sentsim",
                "datasets": [{"name": "wmt16", "max_segments": 20}],
                "repeats": 2,
                "batch_size": 32,
                "metrics": [
                    {"metric": "sentsim", "options": {"against": "reference"}, "encoders": ["all-MiniLM-L6-v2"]}
                ],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    with (out / "results.csv").open(encoding="utf-8", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["status"] == "ok" and row["n_segments"] == "120"
    assert all(row[c] != "" for c in CSV_COLUMNS if c != "error")
    assert "sentence=" in row["phase_ms"] and "token=" in row["phase_ms"]
    assert float(row["pearson_global"]) > 0.2  # real MiniLM, monolingual (hypothesis vs reference)
