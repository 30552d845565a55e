"""BARTScore on a tiny random BART: every direction equals a direct per-pair computation from the logits.

No real BART weights can be had here (shared/MODELS.md), so this tests the mechanics only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.bartscore import BartScoreScorer
from nlgbench.metrics.base import PhaseTimer
from tiny import make_tiny_bart, make_tiny_bert

pytestmark = pytest.mark.component

ITEMS = [
    Item("de-en", i, "", src, ref, hyp, 0.0)
    for i, (src, ref, hyp) in enumerate(
        [
            ("Die Katze sitzt.", "the cat sits on the mat", "a cat is sitting on a mat"),
            ("Hunde bellen.", "dogs bark", "the dogs are barking loudly at the postman every single morning"),
            ("Guten Morgen.", "good morning to you all", "morning"),
            ("Es regnet.", "it is raining", "it rains"),
            ("Ja.", "yes", "yes"),
        ]
    )
]


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [t for it in ITEMS for t in (it.source, it.reference, it.hypothesis)] * 3
    return make_tiny_bart(tmp_path_factory.mktemp("bart"), texts)


def direct(model: torch.nn.Module, tokenizer, src: str, tgt: str) -> float:
    """Mean log p of tgt's tokens given src, one pair, no padding, decoder inputs built by hand."""
    s = torch.tensor([tokenizer(src)["input_ids"]])
    t = tokenizer(tgt)["input_ids"]
    dec = torch.tensor([[model.config.decoder_start_token_id] + t[:-1]])
    with torch.no_grad():
        logits = model(input_ids=s, decoder_input_ids=dec).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    return float(sum(logp[i, tok] for i, tok in enumerate(t)) / len(t))


@pytest.mark.parametrize("batch_size", [1, 8])
def test_every_direction_equals_direct_log_likelihood(bart_dir: Path, batch_size: int) -> None:
    scorer = BartScoreScorer(EncoderRef(str(bart_dir)), {"faithfulness": True}, "cpu", batch_size)
    timer = PhaseTimer()
    out = scorer.score(ITEMS, timer)
    model, tok = scorer.lm.model, scorer.lm.tokenizer
    for i, it in enumerate(ITEMS):
        p = direct(model, tok, it.reference, it.hypothesis)
        r = direct(model, tok, it.hypothesis, it.reference)
        # log p = logit - logsumexp: the logits' float32 error from another batch shape (~2e-6 relative, |logit| < 2)
        # plus u |log p| (|log p| < log 400 = 6): < 5e-6 -> abs 1e-5
        assert out.columns["precision"][i] == pytest.approx(p, abs=1e-5)
        assert out.columns["recall"][i] == pytest.approx(r, abs=1e-5)
        assert out.columns["f"][i] == pytest.approx((p + r) / 2, abs=1e-5)
        assert out.columns["faithfulness"][i] == pytest.approx(direct(model, tok, it.source, it.hypothesis), abs=1e-5)
    assert out.primary == "f" and {"precision", "recall", "faithfulness"} <= set(timer.seconds)


def test_prompt_goes_to_the_source_or_the_target(bart_dir: Path) -> None:
    for position, src, tgt in [
        ("source_suffix", "the cat sits on the mat Such as,", "a cat is sitting on a mat"),
        ("target_prefix", "the cat sits on the mat", "Such as, a cat is sitting on a mat"),
    ]:
        scorer = BartScoreScorer(
            EncoderRef(str(bart_dir)), {"prompt": "Such as", "prompt_position": position}, "cpu", 4
        )
        got = scorer.score(ITEMS[:1], PhaseTimer()).columns["precision"][0]
        assert got == pytest.approx(direct(scorer.lm.model, scorer.lm.tokenizer, src, tgt), abs=1e-5)  # as above


def test_fine_tuned_state_dict_is_loaded_on_top(bart_dir: Path, tmp_path: Path) -> None:
    base = BartScoreScorer(EncoderRef(str(bart_dir)), {}, "cpu", 4)
    # perturb the transformer layers (the embeddings are tied: one tensor under several names)
    state = {k: v + 0.01 * torch.randn_like(v) if ".layers." in k else v for k, v in base.lm.model.state_dict().items()}
    torch.save(state, tmp_path / "bart.pth")
    tuned = BartScoreScorer(EncoderRef(str(bart_dir)), {"state_dict": str(tmp_path / "bart.pth")}, "cpu", 4)
    assert torch.equal(
        tuned.lm.model.state_dict()["model.encoder.layers.0.fc1.weight"], state["model.encoder.layers.0.fc1.weight"]
    )
    a = base.score(ITEMS, PhaseTimer()).score
    b = tuned.score(ITEMS, PhaseTimer()).score
    assert a != b
    assert tuned.describe()["disk_bytes"] > base.describe()["disk_bytes"]
    torch.save({"nonsense": torch.zeros(1)}, tmp_path / "bad.pth")
    with pytest.raises(UserError, match="cannot load onto"):
        BartScoreScorer(EncoderRef(str(bart_dir)), {"state_dict": str(tmp_path / "bad.pth")}, "cpu", 4)


def test_an_encoder_only_model_is_refused_in_one_line(tmp_path: Path) -> None:
    from nlgbench.core.spec import parse_spec

    bert = make_tiny_bert(tmp_path / "bert", ["a b c"])
    spec = {"name": "t", "datasets": ["wmt16"], "metrics": [{"metric": "bartscore", "encoders": [str(bert)]}]}
    with pytest.raises(UserError, match=r"metric 'bartscore' needs a seq2seq model; .* is of kind encoder"):
        parse_spec(spec)
    spec["metrics"][0]["encoders"] = ["all-MiniLM-L6-v2"]
    with pytest.raises(UserError, match="needs a seq2seq model"):
        parse_spec(spec)
