"""Several references per item: the harness option `reference_policy`, the
`ReferencePolicy` wrapper (max / mean / first over references), each metric's own rule, the
refusal of a metric without one, and parity with bert_score's multi-reference BERTScore (slow)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlgbench
from nlgbench.core.recipe import Recipe
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import PhaseTimer, ReferencePolicy, Scores, aggregate_references
from nlgbench.metrics.bertscore import BertScoreScorer
from tiny import make_tiny_bert

pytestmark = pytest.mark.component

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
REFUSAL = (
    "{metric} cannot use several references per item (dataset has up to 3); "
    "set the option reference_policy: first|max|mean"
)

# hypothesis, references (1 to 3), source
ROWS = [
    (
        "the cat sat on the mat",
        ["a cat sat on the mat", "the cat is sitting on a mat", "there is a cat on the mat"],
        "die katze sass auf der matte",
    ),
    ("a dog ran in the park", ["the dog runs through the park"], "ein hund lief im park"),
    ("it is raining today", ["today it rains", "rain falls today"], "heute regnet es"),
    ("good morning to you", ["good morning", "morning to you", "hello and good morning"], "guten morgen"),
]
TEXTS = [t for hyp, refs, src in ROWS for t in (hyp, src, *refs)]


def items(rows: list[tuple[str, list[str], str]] = ROWS) -> list[Item]:
    return [
        Item("de-en", i + 1, "", src, refs[0], hyp, float(i), references=tuple(refs))
        for i, (hyp, refs, src) in enumerate(rows)
    ]


def first_only(rows: list[Item]) -> list[Item]:
    """The same items with their first reference only, built as one-reference data is."""
    return [Item(it.lp, it.seg_id, it.system, it.source, it.reference, it.hypothesis, it.human) for it in rows]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=3, name="bert")


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny FrugalScore-like student: a sequence classifier with one output."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    folder = make_tiny_bert(tmp_path_factory.mktemp("student") / "bert", TEXTS, num_layers=2)
    torch.manual_seed(1)
    BertForSequenceClassification(BertConfig.from_pretrained(folder, num_labels=1)).save_pretrained(folder)
    return folder


def pair_scores(make_plain: Any, hyp: str, refs: tuple[str, ...]) -> list[Scores]:
    """Each reference scored alone: a one-item, one-reference dataset per (hypothesis, reference)."""
    out = []
    for ref in refs:
        scorer = make_plain()
        one = [Item("de-en", 1, "", "", ref, hyp, 0.0)]
        scorer.prepare(one)
        out.append(scorer.score(one, PhaseTimer()))
    return out


# ----------------------------------------------------------------------------- aggregation


def test_aggregation_by_hand() -> None:
    values = [1.0, 3.0, 2.0, 5.0, 4.0, 6.0]  # items of 2, 1 and 3 references
    assert aggregate_references(values, [2, 1, 3], "mean", True) == [2.0, 2.0, 5.0]
    assert aggregate_references(values, [2, 1, 3], "max", True) == [3.0, 2.0, 6.0]
    assert aggregate_references(values, [2, 1, 3], "max", False) == [1.0, 2.0, 4.0]  # lower is better: smallest
    nan = aggregate_references([1.0, math.nan, 2.0], [2, 1], "max", True)
    assert math.isnan(nan[0]) and nan[1] == 2.0


# ----------------------------------------------------------------------------- the wrapper on a tiny model


@pytest.mark.parametrize("policy", ["max", "mean"])
def test_bertscore_max_and_mean_equal_each_reference_scored_alone(tiny_dir: Path, policy: str) -> None:
    info = get_metric("bertscore")
    data = items()
    scorer = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": False, "reference_policy": policy}).build("cpu", 2)
    scorer.prepare(data)
    timer = PhaseTimer()
    got = scorer.score(data, timer)
    assert "references" in timer.seconds and "match" in timer.seconds
    assert scorer.describe()["reference_policy"] == policy
    reduce = max if policy == "max" else statistics.fmean
    for i, it in enumerate(data):
        alone = pair_scores(
            lambda: BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": False}, "cpu", 2), it.hypothesis, it.references
        )
        for column in ("precision", "recall", "f1"):  # each column on its own, as bert_score takes P, R, F
            want = reduce([s.columns[column][0] for s in alone])
            # float32 P/R/F in [-1, 1] from passes in another batch shape (padding): ~1e-7; 1e-6 leaves room
            assert got.columns[column][i] == pytest.approx(want, abs=1e-6), (policy, i, column)


def test_bertscore_default_is_max_and_first_uses_the_first_reference_for_idf_too(tiny_dir: Path) -> None:
    info = get_metric("bertscore")
    data = items()
    default = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": False}).build("cpu", 2)
    explicit = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": False, "reference_policy": "max"}).build("cpu", 2)
    for scorer in (default, explicit):
        scorer.prepare(data)
    assert default.score(data, PhaseTimer()).columns == explicit.score(data, PhaseTimer()).columns
    assert default.describe()["reference_policy"] == "max"

    first = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": True, "reference_policy": "first"}).build("cpu", 2)
    first.prepare(data)
    plain = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", 2)
    plain.prepare(first_only(data))  # idf over the first references only
    assert first.score(data, PhaseTimer()).columns == plain.score(first_only(data), PhaseTimer()).columns
    all_refs = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", 2)
    all_refs.prepare([Item("", 1, "", "", ref, "x", 0.0) for it in data for ref in it.references])
    assert all_refs.idf != plain.idf  # so the equality above says idf was not taken over every reference


def test_moverscore_default_is_the_mean_and_its_distance_column_is_best_when_smallest(tiny_dir: Path) -> None:
    info = get_metric("moverscore")
    data = items()
    mean = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": False}, "wmd").build("cpu", 2)
    best = Recipe(info, EncoderRef(str(tiny_dir)), {"idf": False, "reference_policy": "max"}, "wmd").build("cpu", 2)
    for scorer in (mean, best):
        scorer.prepare(data)
    got_mean, got_best = mean.score(data, PhaseTimer()), best.score(data, PhaseTimer())
    assert mean.describe()["reference_policy"] == "mean"

    def plain() -> Any:
        return info.build(EncoderRef(str(tiny_dir)), {"idf": False}, "cpu", 2, aligner="wmd")

    for i, it in enumerate(data):
        alone = pair_scores(plain, it.hypothesis, it.references)
        scores = [s.columns["moverscore"][0] for s in alone]
        distances = [s.columns["distance"][0] for s in alone]
        # 1 - WMD of unit float32 token states (float64 transport); passes in another batch shape: 2e-5
        # (see test_reference_free)
        assert got_mean.columns["moverscore"][i] == pytest.approx(statistics.fmean(scores), abs=2e-5)
        assert got_best.columns["moverscore"][i] == pytest.approx(max(scores), abs=2e-5)
        assert got_best.columns["distance"][i] == pytest.approx(min(distances), abs=2e-5)


def test_baryscore_refuses_several_references_and_max_takes_the_smallest_distance(tiny_dir: Path) -> None:
    info = get_metric("baryscore")
    options = {"idf": False, "last_layers": 2, "sinkhorn_regs": [1.0]}
    data = items()
    refusing = Recipe(info, EncoderRef(str(tiny_dir)), options).build("cpu", 2)
    with pytest.raises(ValueError) as err:
        refusing.prepare(data)
    assert str(err.value) == REFUSAL.format(metric="baryscore")

    best = Recipe(info, EncoderRef(str(tiny_dir)), {**options, "reference_policy": "max"}).build("cpu", 2)
    best.prepare(data)
    got = best.score(data, PhaseTimer())
    assert set(got.columns) == {"w", "sd_1"}
    for i, it in enumerate(data):
        alone = pair_scores(
            lambda: info.build(EncoderRef(str(tiny_dir)), options, "cpu", 2), it.hypothesis, it.references
        )
        for column in got.columns:
            # squared distances of unit float32 states (float64 POT); passes in another batch shape: <= 1e-5
            assert got.columns[column][i] == pytest.approx(min(s.columns[column][0] for s in alone), abs=1e-5)


def test_metrics_without_a_rule_refuse_in_one_line(tiny_dir: Path, student_dir: Path) -> None:
    sentsim = Recipe(get_metric("sentsim"), EncoderRef(str(tiny_dir)), {"against": "reference"}).build("cpu", 2)
    with pytest.raises(ValueError) as err:
        sentsim.prepare(items())
    assert str(err.value) == REFUSAL.format(metric="sentsim")
    frugal = Recipe(get_metric("frugalscore"), EncoderRef(str(student_dir)), {}).build("cpu", 2)
    with pytest.raises(ValueError) as err:
        frugal.prepare(items())
    assert str(err.value) == REFUSAL.format(metric="frugalscore")
    assert len(frugal.score(first_only(items()), PhaseTimer()).score) == len(ROWS)  # one reference each: scored


def test_a_refusing_metric_is_refused_before_any_cell(
    student_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal came from inside the cell, after the model loaded; now
    the sweep's data check refuses it (API and CLI, --dry-run included), and no cell is made."""
    from nlgbench.cli import main

    data = tmp_path / "multi.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "lp": "de-en",
                    "seg_id": i + 1,
                    "system": "s",
                    "source": src,
                    "references": refs,
                    "hypothesis": hyp,
                    "human": float(i),
                }
            )
            + "\n"
            for i, (hyp, refs, src) in enumerate(ROWS)
        ),
        encoding="utf-8",
    )
    spec = {
        "name": "multi",
        "datasets": [{"path": str(data)}],
        "repeats": 1,
        "batch_size": 2,
        "metrics": [{"metric": "frugalscore", "encoders": [str(student_dir)]}],
    }
    with pytest.raises(UserError) as err:
        nlgbench.run(spec, tmp_path / "out", quiet=True)
    assert str(err.value) == "dataset multi: " + REFUSAL.format(metric="frugalscore")
    assert not (tmp_path / "out" / "cells").exists()
    (tmp_path / "multi.yaml").write_text(json.dumps(spec), encoding="utf-8")
    assert main(["run", str(tmp_path / "multi.yaml"), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert capsys.readouterr().err == "nlgbench: error: dataset multi: " + REFUSAL.format(metric="frugalscore") + "\n"
    # with a policy the same spec passes the check
    spec["metrics"][0]["options"] = {"reference_policy": "first"}
    (tmp_path / "multi.yaml").write_text(json.dumps(spec), encoding="utf-8")
    assert main(["run", str(tmp_path / "multi.yaml"), "--out", str(tmp_path / "out"), "--dry-run"]) == 0


# ----------------------------------------------------------------------------- one reference: nothing changes


def test_one_reference_data_is_scored_as_before(tiny_dir: Path) -> None:
    data = first_only(items())
    wrapped = Recipe(get_metric("bertscore"), EncoderRef(str(tiny_dir)), {"idf": True}).build("cpu", 2)
    plain = BertScoreScorer(EncoderRef(str(tiny_dir)), {"idf": True}, "cpu", 2)
    for scorer in (wrapped, plain):
        scorer.prepare(data)
    t_wrapped, t_plain = PhaseTimer(), PhaseTimer()
    assert wrapped.score(data, t_wrapped).columns == plain.score(data, t_plain).columns
    assert set(t_wrapped.seconds) == set(t_plain.seconds) and "references" not in t_wrapped.seconds
    assert wrapped.describe() == plain.describe()  # no reference_policy recorded where none was applied
    lists = nlgbench.score_outputs(
        [it.hypothesis for it in data], [[it.reference] for it in data], encoder=str(tiny_dir)
    )
    texts = nlgbench.score_outputs([it.hypothesis for it in data], [it.reference for it in data], encoder=str(tiny_dir))
    assert lists == texts


def test_reference_free_xmoverscore_ignores_references(tiny_dir: Path) -> None:
    info = get_metric("xmoverscore")
    scorer = Recipe(info, EncoderRef(str(tiny_dir)), {"layer": 2}, "wmd").build("cpu", 2)
    assert not isinstance(scorer, ReferencePolicy)
    many, one = items(), first_only(items())
    assert scorer.score(many, PhaseTimer()).columns == scorer.score(one, PhaseTimer()).columns


# ----------------------------------------------------------------------------- the option


def test_reference_policy_is_checked_in_one_line() -> None:
    cases = [
        (
            "xmoverscore",
            {"reference_policy": "max"},
            "metric xmoverscore reads no references, so reference_policy does not apply",
        ),
        ("sentsim", {"reference_policy": "max"}, "metric sentsim reads no references with these options"),
        ("bertscore", {"reference_policy": "median"}, "reference_policy must be one of first, max, mean, got 'median'"),
        ("bertscore", {"reference_policy": 1}, "reference_policy must be str, got 1"),
    ]
    for metric, options, message in cases:
        with pytest.raises(UserError) as err:
            get_metric(metric).check_options(options, "metrics[0].options")
        assert message in str(err.value) and "\n" not in str(err.value)
    get_metric("sentsim").check_options({"against": "reference", "reference_policy": "mean"})
    get_metric("baryscore").check_options({"reference_policy": "first"})


def test_cell_options_hold_reference_policy_only_where_given() -> None:
    info = get_metric("bertscore")
    assert info.cell_options({}) == {"idf": False, "layer": None}  # so the ids of existing cells stay
    assert info.cell_options({"reference_policy": "mean"}) == {"idf": False, "layer": None, "reference_policy": "mean"}
    with pytest.raises(UserError, match="has no option 'reference_polcy'"):
        info.cell_options({"reference_polcy": "mean"})


def test_api_takes_lists_of_references_and_the_option(tiny_dir: Path) -> None:
    data = items()
    hyps, refs = [it.hypothesis for it in data], [list(it.references) for it in data]
    with pytest.raises(UserError) as err:
        nlgbench.score(hyps, refs, metric="baryscore", encoder=str(tiny_dir), idf=False, last_layers=2)
    assert str(err.value) == REFUSAL.format(metric="baryscore")
    lifted = nlgbench.score(
        hyps, refs, metric="baryscore", encoder=str(tiny_dir), idf=False, last_layers=2, reference_policy="first"
    )
    firsts = nlgbench.score(
        hyps, [r[0] for r in refs], metric="baryscore", encoder=str(tiny_dir), idf=False, last_layers=2
    )
    assert lifted == firsts
    with pytest.raises(UserError, match="reads no references, so reference_policy does not apply"):
        nlgbench.score(
            hyps,
            metric="xmoverscore",
            encoder=str(tiny_dir),
            sources=[it.source for it in data],
            layer=2,
            reference_policy="max",
        )
    for bad, message in [
        ([["a"], [], ["b"], ["c"]], "references line 2 is an empty list"),
        ([["a"], ["b", 3], ["c"], ["d"]], "references line 2 is list, not a string or a list of strings"),
    ]:
        with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
            nlgbench.score(hyps, bad, encoder=str(tiny_dir))


# ----------------------------------------------------------------------------- parity with bert_score (real model)


@pytest.mark.system
@pytest.mark.skipif(
    local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
)
@pytest.mark.parametrize("idf", [False, True])
def test_several_references_equal_bert_score_package(idf: bool) -> None:
    """P, R and F1 equal bert_score.score(cands, [[ref1, ref2, ...], ...]) on real MiniLM-L6 (layer 6),
    1 to 3 references per hypothesis; with idf, bert_score's idf over every reference of every pair."""
    bert_score = pytest.importorskip("bert_score")
    rows = load_dataset("wmt16", max_segments=20).items
    hyps = [it.hypothesis for it in rows]
    # the item's own reference last, after 0 to 2 references of other segments (so max differs from the first)
    refs = [[rows[(i + k) % len(rows)].reference for k in range(1 + i % 3)][::-1] for i in range(len(rows))]
    ours = nlgbench.score_outputs(hyps, refs, encoder="all-MiniLM-L6-v2", idf=idf, batch_size=16)
    p, r, f = bert_score.score(
        hyps,
        refs,
        model_type=MINILM,
        num_layers=6,
        idf=idf,
        batch_size=16,
        device="cpu",
        use_fast_tokenizer=True,
        nthreads=0,
    )
    # bert_score's own tests compare at decimal=5, i.e. 1e-5 (tests/custom_assertions.py); both are float32 passes
    assert np.abs(np.array(ours["score"]) - f.numpy()).max() <= 1e-5
    assert np.abs(np.array(ours["precision"]) - p.numpy()).max() <= 1e-5
    assert np.abs(np.array(ours["recall"]) - r.numpy()).max() <= 1e-5
    single = nlgbench.score(hyps, [group[0] for group in refs], encoder="all-MiniLM-L6-v2", idf=idf, batch_size=16)
    # the own reference is found
    assert sum(a > b + 1e-3 for a, b in zip(ours["score"], single, strict=True)) >= len(rows) // 2
