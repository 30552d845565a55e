"""Encoder variants: early exit (representation change and DeeBERT exit heads), int8, dtype, spec parsing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.encoders.registry import EncoderRef, parse_encoder_ref
from nlgbench.encoders.runtime import load_encoder
from nlgbench.encoders.variants import count_params
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.component

TEXTS = [
    "the cat sat on the mat .",
    "a much longer sentence about the cat , the dog and the mat on which they sat",
    "dog",
    "the dog sat",
]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=6)


def plain_states(folder: Path) -> tuple[list[torch.Tensor], torch.Tensor, list[list[int]]]:
    enc = load_encoder(EncoderRef(str(folder)), "cpu")
    ids = [t.ids for t in enc.tokenize(TEXTS)]
    states, mask = enc.hidden_states(ids, list(range(enc.layers_run + 1)))
    return states, mask, ids


def relative_change(states: list[torch.Tensor], mask: torch.Tensor, layer: int) -> torch.Tensor:
    """Mean relative change of token states from layer-1 to layer, per input (the exit criterion)."""
    m = mask.float()
    change = (states[layer] - states[layer - 1]).norm(dim=-1) / states[layer - 1].norm(dim=-1)
    return (change * m).sum(-1) / m.sum(-1)


def test_spec_accepts_variants_and_rejects_bad_values() -> None:
    ref = parse_encoder_ref({"name": "all-MiniLM-L6-v2", "early_exit": 1, "quantize": "int8"}, "e")
    assert ref.early_exit == 1.0 and ref.quantize == "int8"
    assert ref.label == "all-MiniLM-L6-v2[early_exit=1.0,quantize=int8]"
    assert parse_encoder_ref({"name": "x", "dtype": "bf16"}, "e").dtype == "bf16"
    bad = [
        ({"name": "x", "early_exit": 0}, "early_exit is a threshold > 0"),
        ({"name": "x", "quantize": "int4"}, "quantize must be one of int8"),
        ({"name": "x", "dtype": "float16"}, "dtype must be one of fp32, fp16, bf16"),
        ({"name": "x", "quantize": "int8", "dtype": "fp16"}, "drop dtype"),
        ({"name": "x", "early_exit": "yes"}, "must be float"),
        ({"name": "x", "early_exitt": 0.1}, "did you mean 'early_exit'"),
    ]
    for raw, message in bad:
        with pytest.raises(UserError, match=message):
            parse_encoder_ref(raw, "e")


def test_no_exit_equals_the_plain_model(tiny_dir: Path) -> None:
    states, _, ids = plain_states(tiny_dir)
    enc = load_encoder(EncoderRef(str(tiny_dir), early_exit=1e-12), "cpu")
    got, _ = enc.hidden_states(ids, list(range(7)))
    assert all(torch.equal(a, b) for a, b in zip(states, got, strict=True))
    assert enc.describe()["mean_exit_layer"] == 6.0


def test_each_input_exits_at_its_first_settled_layer_and_is_frozen_after(tiny_dir: Path) -> None:
    states, mask, ids = plain_states(tiny_dir)
    changes = torch.stack([relative_change(states, mask, layer) for layer in range(1, 7)], dim=1)  # [B, 6]
    threshold = float(changes[:, 1:].median())  # some inputs stop early, others run on
    expected = []
    for row in changes.tolist():
        exit_at = next((layer for layer in range(2, 7) if row[layer - 1] < threshold), 6)
        expected.append(exit_at)
    assert len(set(expected)) > 1, "threshold should split the batch"
    enc = load_encoder(EncoderRef(str(tiny_dir), early_exit=threshold), "cpu")
    got, _ = enc.hidden_states(ids, list(range(7)))
    assert [enc.exit_layers[tuple(i)] for i in ids] == expected
    for b, exit_at in enumerate(expected):
        n = len(ids[b])
        for layer in range(7):
            want = states[min(layer, exit_at)][b, :n]
            # float32 states (|h| < 4) of the same layers, possibly on other batch shapes: 1e-5 + 1e-5 |h| > 2e-6 |h|
            assert torch.allclose(got[layer][b, :n], want, atol=1e-5), (b, layer)
    assert enc.describe()["mean_exit_layer"] == pytest.approx(sum(expected) / len(expected))
    assert enc.describe()["exit_criterion"] == "change"


def add_exit_heads(folder: Path, biases: dict[int, list[float]]) -> Path:
    """Rewrite a tiny checkpoint as DeeBERT saves it: `bert.`-prefixed backbone plus highway heads."""
    from safetensors.torch import load_file, save_file

    state = {f"bert.{k}": v for k, v in load_file(str(folder / "model.safetensors")).items()}
    hidden = state["bert.embeddings.word_embeddings.weight"].shape[1]
    for layer in range(6):
        bias = torch.tensor(biases.get(layer + 1, [0.0, 0.0]))
        state[f"bert.encoder.highway.{layer}.pooler.dense.weight"] = torch.zeros(hidden, hidden)
        state[f"bert.encoder.highway.{layer}.pooler.dense.bias"] = torch.zeros(hidden)
        state[f"bert.encoder.highway.{layer}.classifier.weight"] = torch.zeros(2, hidden)
        state[f"bert.encoder.highway.{layer}.classifier.bias"] = bias
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_checkpoint_exit_heads_decide_by_entropy(tiny_dir: Path, tmp_path: Path) -> None:
    import shutil

    deebert = add_exit_heads(Path(shutil.copytree(tiny_dir, tmp_path / "deebert")), {3: [10.0, -10.0]})
    states, _, ids = plain_states(tiny_dir)
    # heads 1, 2, 4.. predict uniformly (entropy log 2 = 0.69); head 3 is certain (entropy ~ 0)
    enc = load_encoder(EncoderRef(str(deebert), early_exit=0.1), "cpu")
    got, _ = enc.hidden_states(ids, [6])
    assert enc.describe()["exit_criterion"] == "entropy"
    assert set(enc.exit_layers.values()) == {3}
    assert torch.allclose(
        got[0][0, : len(ids[0])], states[3][0, : len(ids[0])], atol=1e-5
    )  # backbone loaded (as above)
    enc = load_encoder(EncoderRef(str(deebert), early_exit=0.7), "cpu")  # above log 2: every head is confident
    enc.hidden_states(ids, [6])
    assert set(enc.exit_layers.values()) == {1}


def test_int8_quantises_linear_layers_and_counts_their_weights(tiny_dir: Path) -> None:
    plain = load_encoder(EncoderRef(str(tiny_dir)), "cpu")
    q = load_encoder(EncoderRef(str(tiny_dir), quantize="int8"), "cpu")
    assert not any(isinstance(m, torch.nn.Linear) for m in q.model.modules())
    assert any(type(m).__name__ == "Linear" and hasattr(m, "_packed_params") for m in q.model.modules())
    assert q.params_run == plain.params_run == count_params(plain.model)
    assert q.describe()["weight_bytes"] < plain.describe()["weight_bytes"]
    ids = [t.ids for t in plain.tokenize(TEXTS)]
    (a,), _ = plain.hidden_states(ids, [6])
    (b,), _ = q.hidden_states(ids, [6])
    cos = torch.nn.functional.cosine_similarity(a[0, 1], b[0, 1], dim=0)
    assert cos > 0.9  # quantisation noise, not a different model
    with pytest.raises(UserError, match="int8 is dynamic CPU quantisation"):
        load_encoder(EncoderRef(str(tiny_dir), quantize="int8"), "cuda")


def test_bf16_runs_in_half_precision_and_metrics_get_float32(tiny_dir: Path) -> None:
    from nlgbench.metrics.base import PhaseTimer
    from nlgbench.metrics.embedding import embed_texts

    enc = load_encoder(EncoderRef(str(tiny_dir), dtype="bf16"), "cpu")
    assert next(enc.model.parameters()).dtype == torch.bfloat16
    emb = embed_texts(enc, TEXTS, 6, 8, PhaseTimer())
    assert all(h.dtype == torch.float32 for _, h in emb.values())
    plain = embed_texts(load_encoder(EncoderRef(str(tiny_dir)), "cpu"), TEXTS, 6, 8, PhaseTimer())
    cos = torch.nn.functional.cosine_similarity(emb[TEXTS[0]][1], plain[TEXTS[0]][1], dim=-1)
    assert cos.min() > 0.98


@pytest.mark.integration
def test_variants_run_in_a_sweep(tiny_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "variants",
                "datasets": [{"name": "wmt16", "max_segments": 4}],
                "repeats": 1,
                "batch_size": 8,
                "metrics": [
                    {
                        "metric": "bertscore",
                        "encoders": [
                            str(tiny_dir),
                            {"name": str(tiny_dir), "early_exit": 0.5},
                            {"name": str(tiny_dir), "quantize": "int8"},
                        ],
                    }
                ],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    plain, early, int8 = read_csv(out / "results.csv")
    assert [r["status"] for r in (plain, early, int8)] == ["ok"] * 3
    assert plain["mean_exit_layer"] == "" and int8["mean_exit_layer"] == ""
    assert 2.0 <= float(early["mean_exit_layer"]) <= 6.0
    assert early["encoder"].endswith("[early_exit=0.5]") and int8["encoder"].endswith("[quantize=int8]")
    assert float(int8["weight_mib"]) < float(plain["weight_mib"])
    assert all(r["pearson_global"] != "" for r in (plain, early, int8))
