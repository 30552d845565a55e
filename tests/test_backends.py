"""Inference backends: ONNX Runtime and OpenVINO as encoder variants.

Agreement with torch on real MiniLM-L6 (slow), the export cache (a second load exports nothing),
the spec's refusal lines, and cell ids. The backends are optional: without their extras these
tests skip, and the refusal naming the extra is tested by hiding the module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.tiny import TEXTS, make_tiny_bert, same_stat_other_bytes

from nlgbench.core.cell import CellConfig, backend_versions
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef, parse_encoder_ref
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.component

ort = pytest.importorskip("onnxruntime", reason="extra `onnx` not installed")
HAS_OPENVINO = all(m in sys.modules or __import__("importlib").util.find_spec(m) for m in ("openvino", "nncf"))
BACKENDS = ["onnxruntime", *(["openvino"] if HAS_OPENVINO else [])]

MINILM = "all-MiniLM-L6-v2"
HUB_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
HYPS = [
    "The cat sat on the mat.",
    "A dog was running through the park this morning, barking at birds.",
    "Prices rose by 3.5% in October, the statistics office said on Tuesday.",
    "He said nothing.",
]
REFS = [
    "A cat was sitting on the mat.",
    "This morning a dog ran through the park and barked at the birds.",
    "The statistics office said on Tuesday that prices had risen 3.5 percent in October.",
    "He did not say anything at all.",
]


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh export cache for the test."""
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def exports(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "exports").glob("*") if not p.name.startswith("."))


# ----------------------------------------------------------------------------- agreement (real model)


@pytest.mark.system
@pytest.mark.skipif(local_snapshot(HUB_MINILM) is None, reason="real MiniLM-L6 not in the local HF cache")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["bertscore", "moverscore", "baryscore"])
def test_fp32_backend_scores_equal_torch_on_real_minilm(backend: str, metric: str, cache: Path) -> None:
    """fp32 backends run the same arithmetic as torch in another order: hidden states agree to ~4e-6
    (float32 rounding over 6 layers of 384-wide sums), so every score to well within 1e-4."""
    import nlgbench

    torch_out = nlgbench.score_outputs(HYPS, REFS, metric=metric, encoder=MINILM, device="cpu")
    other = nlgbench.score_outputs(
        HYPS, REFS, metric=metric, encoder={"name": MINILM, "backend": backend}, device="cpu"
    )
    assert set(other) == set(torch_out)
    for column, values in torch_out.items():
        diff = np.abs(np.asarray(other[column], dtype=float) - np.asarray(values, dtype=float))
        assert diff.max() <= 1e-4, (column, diff.max())
    assert len(exports(cache)) == 1


@pytest.mark.system
@pytest.mark.skipif(local_snapshot(HUB_MINILM) is None, reason="real MiniLM-L6 not in the local HF cache")
@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_backend_scores_stay_close_but_are_not_the_same(backend: str, cache: Path) -> None:
    """int8 weights change the scores (a variant like torch's int8, its correlation reported as such),
    but by less than 0.05 F1: a loose bound (related and unrelated pairs lie ~0.2 apart in F1), which
    a graph that lost its quantisation scales or layers would break."""
    import nlgbench

    base = np.asarray(nlgbench.score(HYPS, REFS, encoder=MINILM, device="cpu"))
    q = np.asarray(nlgbench.score(HYPS, REFS, encoder={"name": MINILM, "backend": backend, "quantize": "int8"}))
    assert 0 < np.abs(q - base).max() < 0.05


# ----------------------------------------------------------------------------- the export cache (tiny model)


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return make_tiny_bert(tmp_path / "tiny-bert", TEXTS, num_layers=4)


def load(name: str, context: CellContext | None = None, **variant: object):  # noqa: ANN201  (runtime.Encoder)
    """The encoder `name` with the variant options on the CPU; its export recorded in `context` where given."""
    from nlgbench.encoders.runtime import load_encoder

    return load_encoder(parse_encoder_ref({"name": name, **variant}, "test"), "cpu", context=context)


def states(encoder, layers: list[int]) -> list[np.ndarray]:  # noqa: ANN001
    ids = [t.ids for t in encoder.tokenize(TEXTS)]
    out, mask = encoder.hidden_states(ids, layers)
    keep = mask.bool().numpy()
    return [o.numpy()[keep] for o in out]


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_load_reuses_the_export_and_reads_no_weights(backend: str, tiny: Path, cache: Path) -> None:
    from nlgbench.encoders import backends

    made, reused = CellContext(), CellContext()
    first = load(str(tiny), made, backend=backend)
    [folder] = exports(cache)
    stamp = (folder / backends.MODEL_FILE).stat().st_mtime_ns
    second = load(str(tiny), reused, backend=backend)
    assert exports(cache) == [folder]  # no second export folder
    assert (folder / backends.MODEL_FILE).stat().st_mtime_ns == stamp  # nor a rewritten one
    assert len(made.exports) == 1 and made.exports[0] > 0 and reused.exports == [0.0]
    assert reused.export_seconds == 0.0 and CellContext().export_seconds is None  # a torch cell: no export_s
    # torch's module of a backend cell is a skeleton (configuration, parameter count), exported or not
    assert first.model.device.type == second.model.device.type == "meta"
    assert first.params_run == second.params_run == load(str(tiny)).params_run
    torch_states = states(load(str(tiny)), [0, 2, 4])
    for got in (states(first, [0, 2, 4]), states(second, [0, 2, 4])):
        for a, b in zip(got, torch_states, strict=True):
            assert np.abs(a - b).max() <= 1e-5  # float32 over 4 tiny layers
    assert first.describe()["backend"] == backend


def test_layers_kept_and_quantisation_are_separate_exports(tiny: Path, cache: Path) -> None:
    full = load(str(tiny), backend="onnxruntime")
    cut = load(str(tiny), backend="onnxruntime", num_layers=2)
    q = load(str(tiny), backend="onnxruntime", quantize="int8")
    assert len(exports(cache)) == 3
    assert (full.layers_run, cut.layers_run) == (4, 2)
    assert cut.params_run < full.params_run == q.params_run
    assert q.describe()["weight_bytes"] < full.describe()["weight_bytes"]  # int8 weights on disk
    with pytest.raises(ValueError, match="out of range"):
        cut.hidden_states([[2, 3]], [3])


def test_an_interrupted_export_is_never_used(tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nlgbench.encoders import backends

    def broken(src: Path, dst: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(backends, "_quantize_ort", broken)
    with pytest.raises(KeyboardInterrupt):
        load(str(tiny), backend="onnxruntime", quantize="int8")
    assert exports(cache) == [] and not any((cache / "exports").iterdir())  # the temporary folder went too
    monkeypatch.undo()
    os.environ["NLGBENCH_CACHE"] = str(cache)
    load(str(tiny), backend="onnxruntime", quantize="int8")
    assert len(exports(cache)) == 1


def test_same_names_sizes_and_mtimes_but_other_weights_get_their_own_export(
    tiny: Path, cache: Path, tmp_path: Path
) -> None:
    """A copy of a model folder with its weight bytes changed and its times put back is exported anew:
    the export cache is keyed by the weights' contents, so the copy's states are its own."""

    other = same_stat_other_bytes(tiny, tmp_path / "other")
    first = load(str(tiny), backend="onnxruntime")
    context = CellContext()
    second = load(str(other), context, backend="onnxruntime")
    assert len(exports(cache)) == 2 and context.exports[0] > 0  # exported, not reused
    for got, want in zip(states(second, [4]), states(load(str(other)), [4]), strict=True):
        assert np.abs(got - want).max() <= 1e-5  # the copy's own weights
    assert np.abs(states(first, [4])[0] - states(second, [4])[0]).max() > 1e-3


def test_a_damaged_cached_export_is_made_again(tiny: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cached export cut short (a full disk, a killed copy) is found by its recorded digests, said in one
    line and exported again, instead of failing every later cell with ONNX Runtime's INVALID_PROTOBUF."""
    from nlgbench.encoders import backends

    load(str(tiny), backend="onnxruntime")
    [folder] = exports(cache)
    model = folder / backends.MODEL_FILE
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    capsys.readouterr()
    context = CellContext()
    again = load(str(tiny), context, backend="onnxruntime")
    err = capsys.readouterr().err
    assert f"cached export {folder} is damaged ({backends.MODEL_FILE} differs from the file written)" in err
    assert len(err.strip().splitlines()) == 1
    assert exports(cache) == [folder] and context.exports[0] > 0
    for a, b in zip(states(again, [0, 2, 4]), states(load(str(tiny)), [0, 2, 4]), strict=True):
        assert np.abs(a - b).max() <= 1e-5
    reused = CellContext()
    load(str(tiny), reused, backend="onnxruntime")  # and the new export is reused as it is
    assert reused.exports == [0.0] and "damaged" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- refusals and ids


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ({"backend": "onnx"}, "backend must be one of torch, onnxruntime, openvino, auto, got 'onnx'"),
        ({"backend": "onnxruntime", "dtype": "bf16"}, "no bf16 CPU kernels"),
        ({"backend": "openvino", "dtype": "fp16"}, "dtype fp16 is not offered on CPU"),
        ({"backend": "onnxruntime", "early_exit": 0.1}, "early_exit needs torch"),
        ({"backend": "openvino", "dtype": "bf16", "quantize": "int8"}, "int8 runs float32 activations"),
    ],
)
def test_bad_backend_combinations_are_one_line(variant: dict, message: str) -> None:
    with pytest.raises(UserError, match=message) as err:
        parse_encoder_ref({"name": MINILM, **variant}, "spec.metrics[0].encoders[0]")
    assert str(err.value).startswith("spec.metrics[0].encoders[0]: ") and "\n" not in str(err.value)


def test_whole_model_metrics_refuse_a_backend_at_spec_time(tmp_path: Path) -> None:
    """BARTScore reads a seq2seq model's log-likelihoods (its decoder): no backend, one line at spec time."""
    from nlgbench.core.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: b\ndatasets: [wmt16]\nmetrics:\n"
        "  - {metric: bartscore, encoders: [{name: bart-large-cnn, backend: openvino}]}\n"
    )
    with pytest.raises(UserError, match=r"metrics\[0\]\.encoders\[0\]: backend openvino runs token-embedding") as err:
        load_spec(spec)
    assert "cross-encoders (frugalscore)" in str(err.value) and "\n" not in str(err.value)


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch, tiny: Path) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(UserError, match=r"pip install 'nlgbench\[onnx\]'"):
        load(str(tiny), backend="onnxruntime")


@pytest.mark.parametrize(
    ("backend", "module", "extra"), [("onnxruntime", "onnxruntime", "onnx"), ("openvino", "nncf", "openvino")]
)
def test_a_missing_extra_is_refused_at_spec_time(
    backend: str,
    module: str,
    extra: str,
    monkeypatch: pytest.MonkeyPatch,
    tiny: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A backend whose package is not installed stops the spec (and --dry-run) in one line naming the
    extra, before any cell, not in each cell after the sweep has started."""
    from nlgbench.cli import main

    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: import and find_spec both fail
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: b\ndatasets: [wmt16]\nmetrics:\n"
        f"  - {{metric: bertscore, encoders: [{{name: {tiny}, backend: {backend}}}]}}\n"
    )
    for extra_args in (["--dry-run"], ["--out", str(tmp_path / "run")]):
        assert main(["run", str(spec), *extra_args]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"nlgbench: error: s.yaml.metrics[0].encoders[0]: backend {backend} needs the package {module!r}: "
            f"pip install 'nlgbench[{extra}]'\n"
        )
    assert not (tmp_path / "run").exists()


def test_backend_torch_is_the_default_cell_and_others_change_the_id() -> None:
    def cell(encoder: EncoderRef) -> CellConfig:
        raw = {
            "metric": "bertscore",
            "options": {},
            "encoder": encoder.to_dict(),
            "aligner": "none",
            "dataset": {"name": "wmt16"},
            "device": "cpu",
            "batch_size": 64,
            "repeats": 3,
            "warmup": 1,
            "threads": None,
        }
        return CellConfig.from_dict(raw)

    plain = cell(parse_encoder_ref(MINILM, "x"))
    same = cell(parse_encoder_ref({"name": MINILM, "backend": "torch"}, "x"))
    onnx = cell(parse_encoder_ref({"name": MINILM, "backend": "onnxruntime"}, "x"))
    assert plain.cell_id == same.cell_id and same.encoder.label == MINILM
    assert onnx.cell_id != plain.cell_id
    assert onnx.encoder.label == f"{MINILM}[backend=onnxruntime]"
    assert backend_versions(onnx.encoder) == {"onnxruntime": ".".join(ort.__version__.split(".")[:2])}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("metric", "options"), [("sentsim", {"against": "source"}), ("xmoverscore", {"layer": 3})])
def test_reference_free_metrics_run_on_a_backend(
    backend: str, metric: str, options: dict, tiny: Path, cache: Path
) -> None:
    """SentSim's parts and XMoverScore's encoder read token embeddings through the same encoder:
    on a backend they give torch's scores (float32 on a tiny model: ~1e-6)."""
    import nlgbench

    sources, hyps = TEXTS[:4], TEXTS[4:]
    base = nlgbench.score_outputs(hyps, sources=sources, metric=metric, encoder=str(tiny), device="cpu", **options)
    other = nlgbench.score_outputs(
        hyps, sources=sources, metric=metric, encoder={"name": str(tiny), "backend": backend}, device="cpu", **options
    )
    for column, values in base.items():
        assert np.abs(np.asarray(other[column]) - np.asarray(values)).max() <= 1e-4, column
    assert exports(cache)


# ----------------------------------------------------------------------------- FrugalScore's cross-encoder


@pytest.fixture()
def student(tmp_path: Path) -> Path:
    """A tiny random FrugalScore-style student (BERT sequence classifier, one output): mechanics only."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    folder = make_tiny_bert(tmp_path / "student", TEXTS, num_layers=2)
    torch.manual_seed(1)
    BertForSequenceClassification(BertConfig.from_pretrained(folder, num_labels=1)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_frugalscore_cross_encoder_runs_on_a_backend(backend: str, student: Path, cache: Path) -> None:
    """The student's export takes BERT's token type ids (the pair's second segment: without them the
    random type embeddings would move every score) and gives torch's scores in float32 (a 2-layer
    32-wide model: rounding ~1e-7, so 1e-5 is loose); a second load reuses the export and reads no
    weights (its torch module a meta skeleton); int8 is its own export, close but not the same."""
    import nlgbench
    from nlgbench.encoders.models import load_model

    hyps, refs = TEXTS[:4], TEXTS[4:]
    base = np.asarray(nlgbench.score(hyps, refs, metric="frugalscore", encoder=str(student), device="cpu"))
    variant = {"name": str(student), "backend": backend}
    got = np.asarray(nlgbench.score(hyps, refs, metric="frugalscore", encoder=variant, device="cpu"))
    assert np.abs(got - base).max() <= 1e-5
    [folder] = exports(cache)
    context = CellContext()
    again = load_model(parse_encoder_ref(variant, "test"), "cross-encoder", "cpu", context=context)
    assert exports(cache) == [folder] and context.exports == [0.0]
    assert again.runner is not None and again.runner.inputs == ["input_ids", "attention_mask", "token_type_ids"]
    assert again.model.device.type == "meta"
    described = again.describe()
    assert (
        described["backend"] == backend
        and described["params"]
        == load_model(parse_encoder_ref(str(student), "test"), "cross-encoder", "cpu").describe()["params"]
    )
    q = np.asarray(
        nlgbench.score(hyps, refs, metric="frugalscore", encoder={**variant, "quantize": "int8"}, device="cpu")
    )
    assert len(exports(cache)) == 2 and np.isfinite(q).all() and not np.array_equal(q, got)


def test_an_encoder_export_is_not_a_cross_encoder(tiny: Path, cache: Path) -> None:
    encoder = load(str(tiny), backend="onnxruntime")
    assert encoder.runner is not None
    with pytest.raises(ValueError, match="an encoder's export"):
        encoder.runner.logits({"input_ids": np.zeros((1, 2)), "attention_mask": np.ones((1, 2))})


# ----------------------------------------------------------------------------- in a sweep


@pytest.mark.integration
def test_sweep_cells_record_export_apart_and_the_second_cell_reuses_it(tmp_path: Path, cache: Path) -> None:
    """Two cells on one backend export: the first exports (export_s > 0, not in load_s), the second
    finds the export cached (export_s 0) and reads no torch weights; the torch cell has no export_s.
    Their scores equal the torch cell's (float32 on a tiny model)."""
    import json

    from helpers import read_csv
    from nlgbench.cli import main
    from nlgbench.data.loaders import load_dataset
    from test_runner import write_spec

    items = load_dataset("wmt16", max_segments=4).items
    tiny = make_tiny_bert(tmp_path / "tiny", [t for it in items for t in (it.reference, it.hypothesis)])
    onnx = {"name": str(tiny), "backend": "onnxruntime"}
    spec = write_spec(tmp_path / "spec.yaml", [str(tiny), onnx, {**onnx, "label": "again"}], max_segments=4)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    rows = {r["encoder"]: r for r in read_csv(out / "results.csv")}
    assert set(rows) == {"tiny", "tiny[backend=onnxruntime]", "again[backend=onnxruntime]"}
    timing = {
        k: json.loads((out / "cells" / r["cell_id"] / "result.json").read_text())["timing"] for k, r in rows.items()
    }
    assert "export_s" not in timing["tiny"] and rows["tiny"]["export_s"] == ""
    assert timing["tiny[backend=onnxruntime]"]["export_s"] > 0 and timing["again[backend=onnxruntime]"]["export_s"] == 0
    assert len(exports(cache)) == 1
    for row in rows.values():
        assert float(row["startup_s"]) >= 0
    scores = {
        k: [float(s["score"]) for s in read_csv(out / "cells" / r["cell_id"] / "scores.csv")] for k, r in rows.items()
    }
    for k in ("tiny[backend=onnxruntime]", "again[backend=onnxruntime]"):
        assert np.abs(np.asarray(scores[k]) - np.asarray(scores["tiny"])).max() <= 1e-5


def test_onnxruntime_runs_on_the_cells_device() -> None:
    """A CUDA cell's ONNX Runtime session asks for that GPU's CUDA provider first (before this, every
    session was built on the CPU provider, so a cuda cell on onnxruntime-gpu would have run on the
    CPU under a cuda label); where the provider is absent the cell is refused with one line."""
    from nlgbench.encoders import backends

    assert backends.ort_providers("cpu") == ["CPUExecutionProvider"]
    assert backends.ort_providers("cuda") == [("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]
    assert backends.ort_providers("cuda:1")[0] == ("CUDAExecutionProvider", {"device_id": 1})
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(UserError, match=r"^backend onnxruntime on cuda: this onnxruntime has no CUDA provider"):
            backends.check_backend_device("onnxruntime", "cuda")
