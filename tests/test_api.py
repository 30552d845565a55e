"""The Python API (`nlgbench.score`, `run`, `load_run`, `load_scores`) and `nlgbench score`:
bad input, equality with the bert_score package and with a sweep cell's scores.csv."""

from __future__ import annotations

import csv
import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlgbench
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.foundations.errors import UserError
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
HYPS = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]
REFS = ["a cat sat on the mat", "the dog runs through the park", "today it rains"]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(HYPS + REFS, num_layers=2, name="bert")


def test_version_is_one_number_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"nlgbench {nlgbench.__version__}"
    assert importlib.metadata.version("nlgbench") == nlgbench.__version__


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nlgbench.score(HYPS, REFS[:2], encoder="x"), "references has 2 items but hypotheses has 3"),
        (lambda: nlgbench.score("one string", REFS), "hypotheses must be a list of strings"),
        (lambda: nlgbench.score(HYPS, None), "metric 'bertscore' needs references"),
        (lambda: nlgbench.score(HYPS, REFS, metric="bertscor"), "bertscore"),
        (lambda: nlgbench.score(HYPS, REFS, idf="yes"), "idf must be bool"),
        (lambda: nlgbench.score(HYPS, REFS, nonsense=1), "nonsense"),
        (lambda: nlgbench.score(HYPS, ["", "b", "c"], metric="moverscore"), "blank reference (references line 1)"),
        (lambda: nlgbench.score(HYPS, REFS, device="gpu"), "unknown device 'gpu'"),
        (lambda: nlgbench.score(HYPS, REFS, batch_size=0), "batch_size must be an integer >= 1"),
        (lambda: nlgbench.load_run("/nonexistent/run"), "no results.csv"),
    ],
)
def test_bad_input_is_one_clear_error(call, message: str) -> None:
    with pytest.raises(UserError) as err:
        call()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_score_outputs_and_options_on_a_tiny_model(tiny_dir: Path) -> None:
    """Primary score first, the metric's other outputs after; options and variants reach the scorer."""
    out = nlgbench.score_outputs(HYPS, REFS, encoder=str(tiny_dir))
    assert list(out) == ["score", "precision", "recall"]
    p, r, f = (np.array(out[k]) for k in ("precision", "recall", "score"))
    assert np.allclose(f, 2 * p * r / (p + r), rtol=0, atol=1e-6)  # float32 F of float32 P, R in [0, 1]: <= 3 u = 2e-7
    assert nlgbench.score(HYPS, REFS, encoder=str(tiny_dir)) == out["score"]
    layer1 = nlgbench.score(HYPS, REFS, encoder=str(tiny_dir), layer=1)
    cut = nlgbench.score(HYPS, REFS, encoder={"name": str(tiny_dir), "num_layers": 1})
    assert layer1 != out["score"]
    # layer 1 of the full model = the 1-layer cut: the same float32 operations on the same shapes (seen: identical);
    # atol 1e-6 = 8 float32 eps on F1 in [0, 1] allows a different kernel choice
    assert np.allclose(layer1, cut, rtol=0, atol=1e-6)
    wcd = nlgbench.score(HYPS, REFS, metric="moverscore", encoder=str(tiny_dir), aligner="wcd")
    wmd = nlgbench.score(HYPS, REFS, metric="moverscore", encoder=str(tiny_dir), aligner="wmd")
    assert len(wcd) == 3 and wcd != wmd


def test_cli_score_writes_what_the_api_returns(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "refs.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (tmp_path / "hyps.txt").write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    out = tmp_path / "scores.csv"
    code = main(
        [
            "score",
            "--encoder",
            str(tiny_dir),
            "-r",
            str(tmp_path / "refs.txt"),
            "-c",
            str(tmp_path / "hyps.txt"),
            "--option",
            "idf=true",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["line"]) for r in rows] == [1, 2, 3]
    expected = nlgbench.score(HYPS, REFS, encoder=str(tiny_dir), idf=True)
    assert [float(r["score"]) for r in rows] == expected
    assert "3 scores" in capsys.readouterr().err
    (tmp_path / "short.txt").write_text("one line\n", encoding="utf-8")
    assert (
        main(["score", "--encoder", str(tiny_dir), "-r", str(tmp_path / "short.txt"), "-c", str(tmp_path / "hyps.txt")])
        == 2
    )
    assert "short.txt has 1 lines but candidates file" in capsys.readouterr().err
    assert main(["score", "-c", str(tmp_path / "missing.txt"), "-r", str(tmp_path / "refs.txt")]) == 2
    assert "candidates file not found" in capsys.readouterr().err


def test_cli_score_takes_several_reference_files(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-r a b` and `-r a -r b` both score each line against both references, as the API does with a
    list per hypothesis (never the last file alone); a file of another length is refused by name."""
    others = [HYPS[2], REFS[0], HYPS[0]]  # a second reference per line
    (tmp_path / "a.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(others) + "\n", encoding="utf-8")
    (tmp_path / "hyps.txt").write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    a, b, hyps = (str(tmp_path / name) for name in ("a.txt", "b.txt", "hyps.txt"))
    both = nlgbench.score(HYPS, [[r, o] for r, o in zip(REFS, others, strict=True)], encoder=str(tiny_dir))
    assert both != nlgbench.score(HYPS, others, encoder=str(tiny_dir))
    for refs in (["-r", a, b], ["-r", a, "-r", b]):
        out = tmp_path / "scores.csv"
        assert main(["score", "--encoder", str(tiny_dir), *refs, "-c", hyps, "--out", str(out)]) == 0
        with out.open(encoding="utf-8") as fh:
            assert [float(r["score"]) for r in csv.DictReader(fh)] == both
        out.unlink()
    capsys.readouterr()
    (tmp_path / "short.txt").write_text("one line\n", encoding="utf-8")
    assert main(["score", "--encoder", str(tiny_dir), "-r", a, "-r", str(tmp_path / "short.txt"), "-c", hyps]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nlgbench: error: references file") and "short.txt has 1 lines" in err


needs_minilm = pytest.mark.skipif(
    local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
)


@pytest.mark.system
@needs_minilm
def test_score_equals_bert_score_package() -> None:
    """`nlgbench.score` F1 equals bert_score.score F1 on 120 real WMT16 segments, MiniLM-L6 (layer 6)."""
    bert_score = pytest.importorskip("bert_score")
    items = load_dataset("wmt16", max_segments=20).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    ours = nlgbench.score(hyps, refs, metric="bertscore", encoder="all-MiniLM-L6-v2", batch_size=32)
    _, _, f1 = bert_score.score(
        hyps, refs, model_type=MINILM, num_layers=6, batch_size=32, device="cpu", use_fast_tokenizer=True, nthreads=0
    )
    assert np.abs(np.array(ours) - f1.numpy()).max() <= 1e-5  # bert_score's own tests: decimal=5 (custom_assertions.py)


@pytest.mark.system
@needs_minilm
def test_score_equals_the_sweep_cells_scores(tmp_path: Path) -> None:
    """The same items through `nlgbench.run` (a worker process) and `nlgbench.score` give the same
    scores: BERTScore with idf (corpus state over all items) and MoverScore-RWMD."""
    spec = {
        "name": "api",
        "datasets": [{"name": "wmt16", "max_segments": 8}],
        "repeats": 1,
        "batch_size": 16,
        "metrics": [
            {"metric": "bertscore", "options": {"idf": True}, "encoders": ["all-MiniLM-L6-v2"]},
            {"metric": "moverscore", "encoders": ["all-MiniLM-L6-v2"], "aligners": ["rwmd"]},
        ],
    }
    cells = nlgbench.run(spec, out=tmp_path / "run", quiet=True)
    assert list(cells["status"]) == ["ok", "ok"], list(cells["error"])
    items = load_dataset("wmt16", max_segments=8).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    for _, row in cells.iterrows():
        seg = nlgbench.load_scores(tmp_path / "run", row["cell_id"])
        assert list(seg["seg_id"]) == [it.seg_id for it in items] and list(seg["lp"]) == [it.lp for it in items]
        options = {"idf": True} if row["metric"] == "bertscore" else {}
        aligner = "rwmd" if row["metric"] == "moverscore" else None
        direct = nlgbench.score(
            hyps, refs, metric=row["metric"], encoder="all-MiniLM-L6-v2", aligner=aligner, batch_size=16, **options
        )
        # float32 encoders in two processes, same model and batch size: only the thread count can reorder sums;
        # F1 is a mean of max cosines in [-1, 1] of dot products of 384 terms, sqrt(384) u = 1.2e-6 -> 1e-6
        assert np.abs(np.array(direct) - seg["score"].to_numpy()).max() <= 1e-6


@pytest.mark.system
@needs_minilm
def test_scorer_loads_once_and_equals_score_and_bert_score(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `Scorer.score` calls load the model once and give what `nlgbench.score` and
    `bert_score.score` give (1e-5, bert_score's own tolerance) on real WMT16 segments, MiniLM-L6."""
    import transformers

    bert_score = pytest.importorskip("bert_score")
    loads = []
    original = transformers.AutoModel.from_pretrained.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, *args: Any, **kwargs: Any) -> Any:
        loads.append(args[0] if args else kwargs)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", classmethod(counting))
    items = load_dataset("wmt16", max_segments=10).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    scorer = nlgbench.Scorer("bertscore", encoder="all-MiniLM-L6-v2", device="auto", batch_size=32)
    first, second = scorer.score(hyps[:30], refs[:30]), scorer.score(hyps[30:], refs[30:])
    assert len(loads) == 1 and scorer.device == "cpu"  # this machine has no GPU
    assert first + second == nlgbench.score(hyps[:30], refs[:30], batch_size=32) + nlgbench.score(
        hyps[30:], refs[30:], batch_size=32
    )
    assert len(loads) == 3  # nlgbench.score loads on every call
    _, _, f1 = bert_score.score(
        hyps, refs, model_type=MINILM, num_layers=6, batch_size=32, device="cpu", use_fast_tokenizer=True, nthreads=0
    )
    assert np.abs(np.array(first + second) - f1.numpy()).max() <= 1e-5
    fields = scorer.signature.split("|")
    assert fields[0] == "bertscore" and fields[1].startswith(f"enc:{MINILM}@") and len(fields[1]) == len(MINILM) + 12
    assert fields[2:5] == ["L6", "idf:no", "refs:max"] and fields[5] == f"nlgbench:{nlgbench.__version__}"
    assert [f.split(":")[0] for f in fields[6:]] == ["torch", "tf"]


def test_signature_names_aligner_variant_and_reference_use(tmp_path: Path) -> None:
    """The signature of a tiny random model in a local folder: a weights fingerprint as revision,
    the variant, the options in name order, the aligner."""
    from nlgbench.core.signature import encoder_revision, signature

    folder = make_tiny_bert(tmp_path / "tiny", ["a b c"], num_layers=2)
    revision = encoder_revision(str(folder))
    assert len(revision) == 7 and int(revision, 16) >= 0
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:-1] + b"\x00")
    assert encoder_revision(str(folder)) != revision  # other weights, other fingerprint
    described = {"source": str(folder), "layer": 1, "variant": {"num_layers": 1}}
    sig = signature("moverscore", {"idf": True, "aligner": "rwmd", "n_gram": 1}, described, "mean")
    assert sig.split("|")[:7] == [
        "moverscore",
        f"enc:{folder.name}@{encoder_revision(str(folder))}",  # a local folder by its name
        "L1",
        "num_layers=1",
        "aligner:rwmd",
        "idf:yes",
        "n_gram:1",
    ]
    assert sig.split("|")[7] == "refs:mean"
