"""What a bert_score user reaches for in the API, against bert_score on the real MiniLM-L6 and WMT16:
idf from a fixed corpus (`idf_sents`, as `BERTScorer`), P, R and F (`return_all`, `Scorer.score_prf`),
the scorer's repr, a progress bar on request (`verbose`), the warning on idf from too few texts."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import nlgbench
from helpers import cli_subprocess as run_cli
from nlgbench.api import MIN_IDF_TEXTS, IdfWarning
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.foundations.errors import UserError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
    ),
]
# bert_score's own tests compare at decimal=5, i.e. 1e-5; both sides are float32 passes of the same model
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def wmt16() -> list[Item]:
    return load_dataset("wmt16", max_segments=5).items  # 30 segments, 6 language pairs


@pytest.fixture(scope="module")
def scorer() -> nlgbench.Scorer:
    return nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", batch_size=16)


def test_idf_from_a_fixed_corpus_equals_bert_scorer(wmt16: list[Item]) -> None:
    """idf from `idf_sents` (other WMT16 references), fixed for the scorer's life: the same numbers in one
    call, one pair at a time, and from bert_score's `BERTScorer(idf=True, idf_sents=...)`."""
    bert_score = pytest.importorskip("bert_score")
    corpus = [it.reference for it in load_dataset("wmt15", max_segments=20).items]  # 80 texts, none scored here
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    ours = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", batch_size=16, idf=True, idf_sents=corpus)
    together = ours.score_prf(hyps, refs)
    one_by_one = [ours.score([h], [r])[0] for h, r in zip(hyps[:4], refs[:4], strict=True)]
    assert one_by_one == pytest.approx(together[2][:4], abs=1e-6)  # other batches: float32 padding round-off
    theirs = bert_score.BERTScorer(
        model_type=MINILM, num_layers=6, idf=True, idf_sents=corpus, batch_size=16, device="cpu",
        use_fast_tokenizer=True, nthreads=0,
    ).score(hyps, refs)  # fmt: skip
    for mine, reference in zip(together, theirs, strict=True):
        assert np.abs(np.array(mine) - reference.numpy()).max() <= TOLERANCE
    digest = hashlib.sha256("\n".join(corpus).encode()).hexdigest()[:7]
    assert f"|idf:sents@{digest}|" in ours.signature
    # per call (no idf_sents) the same pair scores otherwise: idf over that call's references
    per_call = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", batch_size=16, idf=True)
    assert abs(per_call.score(hyps, refs)[0] - together[2][0]) > 1e-4
    assert "|idf:yes|" in per_call.signature


def test_idf_from_few_texts_warns_once() -> None:
    """One pair with idf per call: idf over one reference (every token log(2/2) = 0) gives 0.0; warned once."""
    scorer = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", idf=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert scorer.score(["The cat sat."], ["A cat sat."]) == [0.0]
        scorer.score(["The dog ran."], ["A dog ran."])
    idf = [w for w in caught if issubclass(w.category, IdfWarning)]
    assert len(idf) == 1 and "from 1 text (" in str(idf[0].message) and "idf_sents" in str(idf[0].message)
    with pytest.warns(IdfWarning, match=f"from 3 texts \\(idf_sents; fewer than {MIN_IDF_TEXTS}\\)"):
        nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", idf=True, idf_sents=["a", "b c", "d"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"idf_sents": ["a text"]}, "idf_sents is given but idf is off"),
        ({"idf": True, "idf_sents": "one string"}, "idf_sents must be a list of strings, not one string"),
        ({"idf": True, "idf_sents": ["a", 3]}, "idf_sents line 2 is int"),
        ({"idf": True, "idf_sents": [" ", ""]}, "idf_sents holds no text"),
    ],
)
def test_idf_sents_refusals(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", **kwargs)


def test_p_r_f_equal_bert_score(wmt16: list[Item], scorer: nlgbench.Scorer) -> None:
    """`P, R, F = nlgbench.score(..., return_all=True)` and `Scorer.score_prf`, as bert_score's `score(...)`."""
    bert_score = pytest.importorskip("bert_score")
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    p, r, f = nlgbench.score(hyps, refs, device="cpu", batch_size=16, return_all=True)
    assert (p, r, f) == scorer.score_prf(hyps, refs)
    theirs = bert_score.score(
        hyps, refs, model_type=MINILM, num_layers=6, batch_size=16, device="cpu", use_fast_tokenizer=True, nthreads=0
    )
    for mine, reference in zip((p, r, f), theirs, strict=True):
        assert np.abs(np.array(mine) - reference.numpy()).max() <= TOLERANCE
    assert f == nlgbench.score(hyps, refs, device="cpu", batch_size=16)
    with pytest.raises(UserError, match="has no precision and recall"):
        nlgbench.score(hyps, refs, metric="sentbleu", return_all=True)


def test_repr_names_metric_encoder_layer_options_device(scorer: nlgbench.Scorer) -> None:
    assert repr(scorer) == (
        "Scorer(metric='bertscore', encoder='all-MiniLM-L6-v2', layer=6, options={'idf': False, 'layer': None}, "
        "device='cpu')"
    )
    assert "layer=4" in repr(nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", layer=4))


def test_progress_bar_only_when_asked(wmt16: list[Item], capsys: pytest.CaptureFixture[str]) -> None:
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    quiet = nlgbench.score(hyps, refs, device="cpu", batch_size=8)
    assert capsys.readouterr().err == ""
    loud = nlgbench.score(hyps, refs, device="cpu", batch_size=8, verbose=True)
    err = capsys.readouterr().err
    assert "texts encoded" in err and f"/{len(set(hyps + refs))}" in err  # tqdm's n/total of the unique texts
    assert loud == quiet


def test_cli_idf_sents_and_the_warning_line(tmp_path: Path) -> None:
    """`nlgbench score --idf-sents FILE`: one line scores as the API with the same corpus; without it a
    one-line warning (no traceback, no file path) and the 0.0 of idf over one reference."""
    corpus = [it.reference for it in load_dataset("wmt15", max_segments=5).items]
    (tmp_path / "corpus.txt").write_text("".join(t + "\n" for t in corpus), encoding="utf-8")
    (tmp_path / "c.txt").write_text("The cat sat on the mat.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("A cat was sitting on the mat.\n", encoding="utf-8")
    files = ["-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"), "--option", "idf=true", "--device", "cpu"]
    fixed = run_cli("score", *files, "--idf-sents", str(tmp_path / "corpus.txt"), "--json")
    assert fixed.returncode == 0, fixed.stderr
    api = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", idf=True, idf_sents=corpus)
    assert json.loads(fixed.stdout)["outputs"]["score"] == api.score(
        ["The cat sat on the mat."], ["A cat was sitting on the mat."]
    )
    assert "warning" not in fixed.stderr
    per_call = run_cli("score", *files)
    assert per_call.returncode == 0 and per_call.stdout.splitlines()[1].startswith("1,0.0,")
    (line,) = [x for x in per_call.stderr.splitlines() if x.startswith("warning:")]
    assert "idf is computed from 1 text" in line and "--idf-sents FILE" in line and "Traceback" not in per_call.stderr
