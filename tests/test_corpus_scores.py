"""Corpus-level BLEU and chrF beside the segment scores: sacrebleu's `corpus_bleu` / `corpus_chrf` and
their signatures exactly, on real WMT16 segments and on items with several references; in the API
(`Scorer.corpus_score`), `nlgbench score` and a sweep cell's result.json."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import sacrebleu
import yaml
from sacrebleu.metrics import BLEU, CHRF

import nlgbench
from helpers import cli_subprocess as run_cli
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.component


@pytest.fixture(scope="module")
def wmt16() -> list[Item]:
    """The first 20 segments of each WMT16 language pair (120 real MT outputs and references)."""
    return load_dataset("wmt16", max_segments=20).items


def test_corpus_bleu_equals_sacrebleu(wmt16: list[Item]) -> None:
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    corpus = nlgbench.Scorer("sentbleu", device="cpu").corpus_score(hyps, refs)
    library = BLEU()  # what sacrebleu.corpus_bleu builds: its defaults, use_effective_order=False
    assert corpus["score"] == library.corpus_score(hyps, [refs]).score == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert corpus["signature"] == str(library.get_signature())
    assert corpus["signature"] == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    segments = [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs, strict=True)]
    assert corpus["segment_mean"] == pytest.approx(statistics.fmean(segments), rel=1e-12)  # float64 sums
    assert corpus["score"] != pytest.approx(corpus["segment_mean"])  # corpus BLEU is no mean of sentence BLEUs


def test_corpus_chrf_with_options_equals_sacrebleu(wmt16: list[Item]) -> None:
    hyps, refs = [it.hypothesis for it in wmt16], [it.reference for it in wmt16]
    corpus = nlgbench.Scorer("chrf", device="cpu", word_order=2).corpus_score(hyps, refs)  # chrF++
    assert corpus["score"] == sacrebleu.corpus_chrf(hyps, [refs], word_order=2).score
    library = CHRF(word_order=2)
    library.corpus_score(hyps, [refs])
    assert corpus["signature"] == str(library.get_signature())


def test_several_references_as_sacrebleu_streams() -> None:
    """Items with 2 and 1 references: sacrebleu's streams, None where an item has fewer."""
    hyps = ["the cat sat on the mat", "a dog runs in the park", "it is raining today"]
    refs = [["the cat is on the mat", "a cat sat on the mat"], ["the dog runs in a park"], ["today it rains", "rain"]]
    streams = [[r[0] for r in refs], [r[1] if len(r) > 1 else None for r in refs]]
    for metric, function in (("sentbleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)):
        corpus = nlgbench.Scorer(metric, device="cpu").corpus_score(hyps, refs)
        assert corpus["score"] == function(hyps, streams).score


def test_no_corpus_score_for_other_metrics() -> None:
    with pytest.raises(UserError, match="no corpus-level score: sentbleu and chrf have"):
        nlgbench.Scorer("rouge1", device="cpu").corpus_score(["a b"], ["a c"])
    assert nlgbench.Scorer("rouge1", device="cpu").corpus is None


@pytest.mark.integration
def test_cli_and_cell_result_show_the_corpus_score(tmp_path: Path, wmt16: list[Item]) -> None:
    items = wmt16[:6]
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    (tmp_path / "c.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (tmp_path / "r.txt").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    proc = run_cli(
        "score", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"), "--metric", "sentbleu", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["corpus"]["score"] == expected and summary["corpus"]["signature"].startswith("nrefs:1|")
    assert summary["corpus"]["segment_mean"] == summary["mean"]
    assert f"corpus {expected:.6f}" in proc.stderr and "signature nrefs:1|case:mixed|eff:no" in proc.stderr

    spec = tmp_path / "wmt.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"name": "lex", "datasets": [{"name": "wmt16", "max_segments": 1}], "metrics": [{"metric": "sentbleu"}]}
        ),
        encoding="utf-8",
    )
    assert run_cli("run", str(spec), "--out", str(tmp_path / "run")).returncode == 0
    (result_file,) = (tmp_path / "run" / "cells").glob("*/result.json")
    result = json.loads(result_file.read_text(encoding="utf-8"))
    cell_items = load_dataset("wmt16", max_segments=1).items
    cell_hyps, cell_refs = [it.hypothesis for it in cell_items], [it.reference for it in cell_items]
    assert result["scorer"]["corpus"]["score"] == sacrebleu.corpus_bleu(cell_hyps, [cell_refs]).score
    sentence = [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(cell_hyps, cell_refs, strict=True)]
    assert result["scorer"]["corpus"]["segment_mean"] == pytest.approx(statistics.fmean(sentence), rel=1e-12)
