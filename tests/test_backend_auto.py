"""`backend: auto`: the fastest exact backend, measured once per model and machine, the default of the API,
`nlgbench.bert_score` and `nlgbench score` (not of sweep cells, where it runs only when written).

On tiny random BERTs (mechanics: the choice is made once, cached, keyed, said in one line, named in the
signature, equal to torch's scores; opt-outs and refusals), and the choice rule as a pure function."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tests.tiny import TEXTS

import nlgbench
from nlgbench.cli.parser import BACKEND_CHOICES
from nlgbench.encoders import backendchoice
from nlgbench.encoders.backendchoice import MARGIN, TOLERANCE, fastest
from nlgbench.encoders.registry import AUTO, BACKENDS, EncoderRef, installed_backends, parse_encoder_ref
from nlgbench.encoders.runtime import load_encoder
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.component

pytest.importorskip("onnxruntime", reason="extra `onnx` not installed")
HYPS = ["The cat sat on the mat.", "A dog ran through the park, barking at the birds it saw.", "Yes."]
REFS = ["A cat was sitting on the mat.", "This morning a dog ran through the park.", "Indeed it is."]
LINE = re.compile(r"^nlgbench: backend auto for \S+ on this CPU: (torch|onnxruntime|openvino) \(")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache (choices and exports), and the API's default as users have it (auto)."""
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NLGBENCH_BACKEND", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def tiny(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert([*TEXTS, *HYPS, *REFS, *(t for pair in backendchoice.CALIBRATION_PAIRS for t in pair)], 2)


def choices(cache: Path) -> list[Path]:
    return sorted((cache / backendchoice.CHOICES_FOLDER).glob("*.json"))


def chosen_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("nlgbench: backend auto")]


@pytest.mark.usefixtures("one_torch_thread")
def test_the_api_chooses_once_says_it_once_and_names_it(
    tiny: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """First Scorer: every installed backend compared, one line, the choice cached and named in the signature,
    scores equal to torch's; second Scorer: the cached choice, no line; backend='torch': no backend field."""
    first = nlgbench.Scorer("bertscore", str(tiny), layer=2)
    (line,) = chosen_lines(capsys.readouterr().err)
    chosen = LINE.match(line)
    assert chosen is not None, line
    (record,) = choices(cache)
    saved = json.loads(record.read_text())
    assert saved["backend"] == chosen.group(1) and set(saved["seconds"]) == set(installed_backends())
    assert all(0 <= d <= TOLERANCE for d in saved["max_abs_df"].values())
    assert f"|L2|backend={chosen.group(1)}|idf:no|" in first.signature
    described = first._scorer.describe()
    assert described["backend_choice"]["chosen"] == chosen.group(1) and described["backend_choice"]["measured_now"]
    auto_scores = first.score(HYPS, REFS)

    second = nlgbench.Scorer("bertscore", str(tiny), layer=2)
    assert chosen_lines(capsys.readouterr().err) == [] and choices(cache) == [record]
    assert second.signature == first.signature and not second._scorer.describe()["backend_choice"]["measured_now"]

    plain = nlgbench.Scorer("bertscore", str(tiny), layer=2, backend="torch")
    assert "backend=" not in plain.signature and chosen_lines(capsys.readouterr().err) == []
    torch_scores = plain.score(HYPS, REFS)
    assert max(abs(a - b) for a, b in zip(auto_scores, torch_scores, strict=True)) <= TOLERANCE


@pytest.mark.usefixtures("one_torch_thread")
def test_the_choice_is_kept_per_model_threads_and_layers_and_remade_when_damaged(
    tiny: Path, tiny_bert: Callable[..., Path], cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another model, other threads or other layers kept: a choice of its own; an unreadable cached choice is
    measured again (and rewritten), not trusted."""
    for layer in (1, 2):
        load_encoder(EncoderRef(str(tiny), backend=AUTO), "cpu", layer)
    assert len(choices(cache)) == 2
    other = tiny_bert([*TEXTS, *HYPS, *REFS, *(t for p in backendchoice.CALIBRATION_PAIRS for t in p)], 2, seed=1)
    load_encoder(EncoderRef(str(other), backend=AUTO), "cpu", 2)
    assert len(choices(cache)) == 3
    torch.set_num_threads(2)
    try:
        load_encoder(EncoderRef(str(tiny), backend=AUTO), "cpu", 2)
    finally:
        torch.set_num_threads(1)
    assert len(choices(cache)) == 4
    capsys.readouterr()
    for record in choices(cache):
        record.write_text("{not json", encoding="utf-8")
    encoder = load_encoder(EncoderRef(str(tiny), backend=AUTO), "cpu", 2)
    assert len(chosen_lines(capsys.readouterr().err)) == 1 and encoder.choice is not None
    assert encoder.choice.measured_now and encoder.ref.backend == AUTO  # the encoder keeps the ref as written


def test_the_rule_keeps_torch_within_the_margin_and_takes_the_fastest_beyond_it() -> None:
    assert fastest({"torch": 1.0, "onnxruntime": 0.5, "openvino": 0.6}) == "onnxruntime"
    assert fastest({"torch": 1.0, "onnxruntime": 0.6, "openvino": 0.5}) == "openvino"
    assert fastest({"torch": 1.0, "openvino": MARGIN + 0.01}) == "torch"  # within timing noise: the reference
    assert fastest({"torch": 1.0, "openvino": MARGIN - 0.01}) == "openvino"
    assert fastest({"torch": 0.4, "onnxruntime": 0.5}) == "torch"
    assert fastest({"torch": 1.0}) == "torch"


@pytest.mark.usefixtures("one_torch_thread")
def test_a_backend_whose_f_differs_is_left_out(tiny: Path) -> None:
    """A backend scoring outside the tolerance is not eligible, however fast: a real torch encoder and a copy
    whose hidden states are offset by 1e-3 (as a wrong export would be) compared by `calibrate`."""
    ref = EncoderRef(str(tiny))
    exact, off = load_encoder(ref, "cpu", 2), load_encoder(ref, "cpu", 2)
    states = off.hidden_states

    def shifted(batch: list[list[int]], layers: list[int], padded: object = None) -> tuple[list[torch.Tensor], object]:
        out, mask = states(batch, layers)
        return [s + 1e-3 * torch.randn_like(s) for s in out], mask

    off.hidden_states = shifted  # type: ignore[method-assign]
    choice = backendchoice.calibrate({"torch": exact, "openvino": off}, 2, {})
    assert choice.backend == "torch" and set(choice.seconds) == {"torch"}
    assert choice.max_abs_df["openvino"] > TOLERANCE and "F differs from torch's" in choice.left_out["openvino"]


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ({"backend": "auto", "quantize": "int8"}, "backend auto chooses among exact float32 backends; with quantize"),
        ({"backend": "auto", "dtype": "bf16"}, "with dtype bf16 name the backend"),
        ({"backend": "auto", "early_exit": 0.5}, "with early_exit 0.5 name the backend"),
        ({"backend": "fastest"}, "backend must be one of torch, onnxruntime, openvino, auto, got 'fastest'"),
    ],
)
def test_auto_with_its_own_arithmetic_is_refused_in_one_line(variant: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        parse_encoder_ref({"name": "all-MiniLM-L6-v2", **variant}, "enc")


def test_the_api_keeps_what_the_caller_named(tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoder naming a backend keeps it (and backend= naming another is refused); a quantised or
    early-exit encoder keeps torch's arithmetic; NLGBENCH_BACKEND sets the default, checked in one line;
    a metric without a token-embedding encoder is left alone; backend=auto for a whole model is refused."""
    from nlgbench.core.recipe import api_encoder

    named = {"name": str(tiny), "backend": "onnxruntime"}
    assert api_encoder("bertscore", named, None) == named
    assert api_encoder("bertscore", str(tiny), None) == {"name": str(tiny), "backend": "auto"}
    assert api_encoder("bertscore", {"name": str(tiny), "quantize": "int8"}, None) == {
        "name": str(tiny),
        "quantize": "int8",
    }
    assert api_encoder("chrf", None, None) is None
    with pytest.raises(UserError, match="encoder names backend 'onnxruntime' and backend='torch' another: give one"):
        api_encoder("bertscore", named, "torch")
    monkeypatch.setenv("NLGBENCH_BACKEND", "torch")
    assert api_encoder("bertscore", str(tiny), None) == str(tiny)
    monkeypatch.setenv("NLGBENCH_BACKEND", "fast")
    with pytest.raises(UserError, match="NLGBENCH_BACKEND='fast': must be one of torch, onnxruntime, openvino, auto"):
        api_encoder("bertscore", str(tiny), None)
    whole = (
        "encoder: backend auto runs token-embedding encoders (bertscore, moverscore, baryscore, sentsim, xmoverscore)"
    )
    with pytest.raises(UserError, match=re.escape(f"{whole}; metric 'bartscore' runs a whole seq2seq model on torch")):
        nlgbench.Scorer("bartscore", "facebook/bart-large-cnn", backend="auto")


def test_the_command_line_offers_the_registrys_backends() -> None:
    assert BACKEND_CHOICES == (AUTO, *BACKENDS)


@pytest.mark.integration
def test_nlgbench_score_chooses_by_default_and_torch_opts_out(
    tiny: Path, cache: Path, tmp_path: Path, cli_subprocess: Callable[..., object]
) -> None:
    """`nlgbench score` in a fresh process: the one line on stderr and the backend in the JSON signature; a
    second run reads the cached choice (no line); `--backend torch` runs torch."""
    hyp, ref = tmp_path / "h.txt", tmp_path / "r.txt"
    hyp.write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    args = ["score", "--encoder", str(tiny), "--option", "layer=2", "-c", str(hyp), "-r", str(ref), "--json"]
    runs = [cli_subprocess(*args), cli_subprocess(*args), cli_subprocess(*args, "--backend", "torch")]
    for run in runs:
        assert run.returncode == 0, run.stderr  # type: ignore[attr-defined]
    signatures = [json.loads(run.stdout)["signature"] for run in runs]  # type: ignore[attr-defined]
    assert len(chosen_lines(runs[0].stderr)) == 1 and chosen_lines(runs[1].stderr) == []  # type: ignore[attr-defined]
    assert re.search(r"\|backend=(torch|onnxruntime|openvino)\|", signatures[0]) and signatures[1] == signatures[0]
    assert "backend=" not in signatures[2]


@pytest.mark.integration
def test_a_sweep_cell_runs_auto_only_where_written(tiny: Path, cache: Path, tmp_path: Path) -> None:
    """In a sweep the plain encoder stays on torch (no choice made); the cell written `backend: auto` records the
    backend chosen, its calibration apart from load (export_s) and its scores equal to torch's."""
    from helpers import read_csv
    from nlgbench.cli import main
    from test_runner import write_spec

    spec = write_spec(tmp_path / "spec.yaml", [str(tiny), {"name": str(tiny), "backend": "auto"}], max_segments=4)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    rows = {r["encoder"]: r for r in read_csv(out / "results.csv")}
    plain, auto = tiny.name, f"{tiny.name}[backend=auto]"
    assert set(rows) == {plain, auto} and len(choices(cache)) == 1
    result = json.loads((out / "cells" / rows[auto]["cell_id"] / "result.json").read_text())
    chosen = result["scorer"]["backend_choice"]["chosen"]
    assert f"backend={chosen}" in result["scorer"]["signature"] and result["timing"]["export_s"] > 0
    scores = {
        k: [float(s["score"]) for s in read_csv(out / "cells" / r["cell_id"] / "scores.csv")] for k, r in rows.items()
    }
    assert max(abs(a - b) for a, b in zip(scores[plain], scores[auto], strict=True)) <= TOLERANCE


def test_without_another_backend_auto_is_torch_at_once(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where neither ONNX Runtime nor OpenVINO is installed (hidden here), auto runs torch with no calibration:
    no line, no cached choice, the extras named in the record."""
    monkeypatch.setattr(backendchoice, "installed_backends", lambda: ["torch"])
    encoder = load_encoder(EncoderRef(str(tiny), backend=AUTO), "cpu", 2)
    assert encoder.runner is None and encoder.choice is not None and encoder.choice.backend == "torch"
    assert "nlgbench[onnx,openvino]" in encoder.choice.left_out["onnxruntime, openvino"]
    assert chosen_lines(capsys.readouterr().err) == [] and choices(cache) == []
    assert encoder.describe()["variant"] == {"backend": "torch"}
