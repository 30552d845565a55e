"""`nlgbench.bert_score`, the drop-in for bert_score users: its signatures are bert_score's; the same calls
through both packages on the real MiniLM-L6 and WMT16 return the same (P, R, F) tensors (types, shapes,
values to 1e-5) plain, at another layer, with idf, rescaled with a baseline file, with several references,
from `BERTScorer`; a bert_score script runs with only its import changed; bad arguments are one line."""

from __future__ import annotations

import inspect
import re
import runpy
import warnings
from pathlib import Path
from typing import Any

import pytest

import nlgbench.bert_score as dropin
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
needs_minilm = pytest.mark.skipif(
    local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
)
# bert_score's own tests compare at decimal=5, i.e. 1e-5; both sides are float32 passes of the same model
TOLERANCE = 1e-5
# what the existing parity tests pass bert_score (idf in this process, the fast tokenizer); the drop-in takes them too
SAME = {"batch_size": 16, "device": "cpu", "use_fast_tokenizer": True, "nthreads": 0}
# a baseline file in bert_score's format for MiniLM-L6's layers 0..6 (made-up values, different per output)
TABLE = "LAYER,P,R,F\n" + "".join(f"{k},{0.30 + 0.05 * k},{0.20 + 0.04 * k},{0.25 + 0.045 * k}\n" for k in range(7))


@pytest.fixture
def default_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drop-in as users get it: its default backend (auto), which the test set-up sets to torch elsewhere."""
    monkeypatch.delenv("NLGBENCH_BACKEND", raising=False)


def test_signatures_are_bert_scores() -> None:
    """Every parameter of bert_score's public calls, in its order, with its default; then nlgbench's one
    addition to the two that load a model, `backend` (None: auto)."""
    bert_score = pytest.importorskip("bert_score")

    def parameters(function: Any) -> list[tuple[str, Any]]:
        return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]

    assert parameters(dropin.score) == [*parameters(bert_score.score), ("backend", None)]
    assert parameters(dropin.plot_example) == parameters(bert_score.plot_example)
    assert parameters(dropin.BERTScorer.__init__) == [*parameters(bert_score.BERTScorer.__init__), ("backend", None)]
    assert parameters(dropin.BERTScorer.score) == parameters(bert_score.BERTScorer.score)
    assert parameters(dropin.BERTScorer.plot_example) == parameters(bert_score.BERTScorer.plot_example)
    assert set(dropin.__all__) == {"score", "plot_example", "BERTScorer"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give model_type or lang"),
        ({"model_type": "no-such-model-xyz"}, "num_layers is needed for 'no-such-model-xyz'"),
        ({"model_type": " "}, "model_type must be a registered name, a Hub id or a local folder"),
        ({"model_type": MINILM, "refs": ["a", "b", "c"]}, "cands has 2 items but refs has 3"),
        ({"model_type": MINILM, "all_layers": True}, "all_layers=True is not provided by nlgbench.bert_score"),
        ({"model_type": MINILM, "idf": {101: 1.0}}, "idf as a precomputed dict is not taken"),
        ({"model_type": MINILM, "num_layers": "6"}, "num_layers must be an integer"),
        ({"model_type": MINILM, "return_hash": "yes"}, "return_hash must be True or False"),
        ({"model_type": MINILM, "refs": "one string"}, "refs must be a list of strings"),
        ({"lang": "1x"}, "lang must be a language code"),
    ],
)
def test_bad_arguments_are_one_line_before_any_model(kwargs: dict[str, Any], message: str) -> None:
    arguments = {"cands": ["a b", "c d"], "refs": ["a b", "c d"], **kwargs}
    with pytest.raises(UserError, match=message) as caught:
        dropin.score(**arguments)
    assert "\n" not in str(caught.value)


def test_unknown_model_with_a_layer_and_lang_models_are_one_line() -> None:
    """A model nowhere (offline) is named in one line; `lang` picks bert_score's model for the language."""
    with pytest.raises(UserError, match="no-such-model-xyz") as caught:
        dropin.score(["a b"], ["a b"], model_type="no-such-model-xyz", num_layers=3, device="cpu")
    assert "\n" not in str(caught.value)
    try:
        dropin.BERTScorer(lang="de", device="cpu")
    except UserError as exc:
        assert "(bert-base-multilingual-cased) is not in the local Hugging Face cache" in str(exc)
    else:  # a machine with the model cached
        pass


def test_plot_example_is_refused_in_one_line() -> None:
    with pytest.raises(UserError, match="plot_example is not provided by nlgbench.bert_score") as caught:
        dropin.plot_example("a cat", "the cat", model_type=MINILM)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- the real model against bert_score


@pytest.fixture(scope="module")
def wmt16() -> list[Item]:
    return load_dataset("wmt16", max_segments=5).items  # 30 segments, 6 language pairs


def assert_same(ours: Any, theirs: Any, n: int) -> None:
    """Both are (P, R, F): three float32 tensors of shape (n,), equal to TOLERANCE."""
    import torch

    assert isinstance(ours, tuple) and len(ours) == 3 and isinstance(theirs, tuple) and len(theirs) == 3
    for mine, reference in zip(ours, theirs, strict=True):
        assert isinstance(mine, torch.Tensor) and mine.dtype == reference.dtype == torch.float32
        assert mine.shape == reference.shape == (n,)
        assert (mine - reference).abs().max().item() <= TOLERANCE


@pytest.mark.system
@needs_minilm
@pytest.mark.usefixtures("default_backend")
def test_the_same_calls_return_the_same_tensors(wmt16: list[Item], tmp_path: Path) -> None:
    """score(...) through both packages: plain, layer 4, idf over the references, a baseline file (bert_score
    wants lang for it), lang beside model_type (model_type wins), several references with and without idf."""
    bert_score = pytest.importorskip("bert_score")
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    # the item's own reference last, after 0 to 2 references of other segments (so the max differs from the first)
    several = [[refs[(i + k) % len(refs)] for k in range(1 + i % 3)][::-1] for i in range(len(refs))]
    baseline = tmp_path / "minilm.tsv"
    baseline.write_text(TABLE, encoding="utf-8")
    calls: list[tuple[list[Any], dict[str, Any]]] = [
        ([hyps, refs], {"num_layers": 6}),
        ([hyps, refs], {"num_layers": 4}),
        ([hyps, refs], {"num_layers": 6, "idf": True}),
        ([hyps, refs], {"num_layers": 6, "lang": "en", "rescale_with_baseline": True, "baseline_path": str(baseline)}),
        ([hyps, refs], {"num_layers": 6, "lang": "en"}),
        ([hyps, several], {"num_layers": 6}),
        ([hyps, several], {"num_layers": 6, "idf": True}),
    ]
    for args, kwargs in calls:
        ours = dropin.score(*args, model_type=MINILM, **kwargs, **SAME)
        theirs = bert_score.score(*args, model_type=MINILM, **kwargs, **SAME)
        assert_same(ours, theirs, len(hyps))
    (ours, signature), (theirs, their_hash) = (
        package.score(hyps, refs, model_type=MINILM, num_layers=6, return_hash=True, **SAME)
        for package in (dropin, bert_score)
    )
    assert_same(ours, theirs, len(hyps))
    assert their_hash.startswith(f"{MINILM}_L6_no-idf_version=")
    assert signature.startswith("bertscore|enc:sentence-transformers/all-MiniLM-L6-v2@")
    assert re.search(r"\|L6\|backend=(torch|onnxruntime|openvino)\|idf:no\|", signature)  # the backend chosen


@pytest.mark.system
@needs_minilm
@pytest.mark.usefixtures("default_backend")
def test_bert_scorer_returns_bert_scorers_tensors(wmt16: list[Item], capsys: pytest.CaptureFixture[str]) -> None:
    """BERTScorer: idf from idf_sents, then from compute_idf (bert_score's warning when it replaces them),
    return_hash; scoring with idf and no weights, and plot_example, refused in one line."""
    bert_score = pytest.importorskip("bert_score")
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    corpus = [it.reference for it in load_dataset("wmt15", max_segments=20).items]  # 80 texts, none scored here
    options = {"model_type": MINILM, "num_layers": 6, "idf": True, **SAME}
    ours, theirs = dropin.BERTScorer(idf_sents=corpus, **options), bert_score.BERTScorer(idf_sents=corpus, **options)
    assert_same(ours.score(hyps, refs), theirs.score(hyps, refs), len(hyps))
    assert "|idf:sents@" in ours.hash and repr(ours).startswith(f"BERTScorer(hash={ours.hash}, batch_size=16")
    with pytest.warns(UserWarning, match="Overwriting the previous importance weights"):
        ours.compute_idf(refs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs.compute_idf(refs)
    (p_r_f, hash_), their_p_r_f = ours.score(hyps, refs, return_hash=True), theirs.score(hyps, refs)
    assert_same(p_r_f, their_p_r_f, len(hyps))
    assert hash_ == ours.hash
    ours.score(hyps[:2], refs[:2], verbose=True)  # bert_score's two lines on stdout
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "calculating scores..." and re.fullmatch(
        r"done in [0-9.]+ seconds, [0-9.]+ sentences/sec", printed[1]
    )
    assert (ours.model_type, ours.num_layers, ours.idf, ours.lang) == (MINILM, 6, True, None)
    unweighted = dropin.BERTScorer(**options)
    with pytest.raises(UserError, match="idf=True but no idf weights: give idf_sents"):
        unweighted.score(hyps, refs)
    with pytest.raises(UserError, match="plot_example is not provided"):
        unweighted.plot_example(hyps[0], refs[0])
    plain = dropin.BERTScorer(model_type=MINILM, **SAME)  # num_layers from the registry: bert_score's layer 6
    assert plain.num_layers == 6
    assert_same(
        plain.score(hyps, refs), bert_score.score(hyps, refs, model_type=MINILM, num_layers=6, **SAME), len(hyps)
    )


SCRIPT = """\
from bert_score import BERTScorer, score

with open("hyps.txt") as f:
    cands = [line.strip() for line in f]
with open("refs.txt") as f:
    refs = [line.strip() for line in f]

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
P, R, F1 = score(cands, refs, model_type=MODEL, num_layers=6, batch_size=16, use_fast_tokenizer=True, nthreads=0)
print(f"System level F1 score: {F1.mean():.3f}")

scorer = BERTScorer(model_type=MODEL, num_layers=6, idf=True, idf_sents=refs, use_fast_tokenizer=True, nthreads=0)
P_idf, R_idf, F_idf = scorer.score(cands, refs)
print(f"idf-weighted F1: {F_idf.mean():.3f}; best line {int(F_idf.argmax()) + 1}, worst {int(F_idf.argmin()) + 1}")
"""


@pytest.mark.system
@needs_minilm
@pytest.mark.usefixtures("default_backend")
def test_a_bert_score_script_runs_with_its_import_changed(
    wmt16: list[Item], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """bert_score's README usage, run as it is and with `from nlgbench.bert_score import`: one line changed,
    the same printed lines and the same tensors."""
    pytest.importorskip("bert_score")
    converted = SCRIPT.replace("from bert_score import", "from nlgbench.bert_score import")
    changed = [(a, b) for a, b in zip(SCRIPT.splitlines(), converted.splitlines(), strict=True) if a != b]
    assert changed == [
        ("from bert_score import BERTScorer, score", "from nlgbench.bert_score import BERTScorer, score")
    ]
    (tmp_path / "hyps.txt").write_text("".join(it.hypothesis + "\n" for it in wmt16), encoding="utf-8")
    (tmp_path / "refs.txt").write_text("".join(it.reference + "\n" for it in wmt16), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    results = []
    for name, text in (("original.py", SCRIPT), ("converted.py", converted)):
        (tmp_path / name).write_text(text, encoding="utf-8")
        results.append(runpy.run_path(str(tmp_path / name), run_name="__main__"))
        results[-1]["printed"] = capsys.readouterr().out
    theirs, ours = results
    assert ours["printed"] == theirs["printed"] and ours["printed"].startswith("System level F1 score: 0.")
    for names in (("P", "R", "F1"), ("P_idf", "R_idf", "F_idf")):
        assert_same(tuple(ours[n] for n in names), tuple(theirs[n] for n in names), len(wmt16))
