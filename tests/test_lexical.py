"""Lexical baselines: sentbleu and chrf (sacrebleu), rouge1/rouge2/rougeL (rouge-score).

Their scores are the libraries' own, exactly: on real WMT16 segments (through the data mirror)
and on multi-reference items built here. They take no encoder (`none`), and a real sweep runs
them end to end with correlations equal to SciPy's on the cells' scores.csv.
"""

from __future__ import annotations

import csv
import dataclasses
import inspect
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
import yaml
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF
from scipy import stats

from helpers import minimal_spec
from nlgbench.api import load_run
from nlgbench.cli import main
from nlgbench.core.recipe import Recipe
from nlgbench.core.spec import parse_spec
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.registry import NO_ENCODER, EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.metrics.rouge import ROUGE_TYPES, RougeOptions
from nlgbench.metrics.sacrebleu_metrics import ChrfOptions, SentBleuOptions

pytestmark = pytest.mark.component

LEXICAL = ("sentbleu", "chrf", *ROUGE_TYPES)
NONE = EncoderRef(NO_ENCODER)


def run_metric(name: str, items: list[Item], **options: Any) -> tuple[Scores, dict[str, Any]]:
    """Score `items` as a sweep cell does (the spec's option defaults filled in); (scores, describe())."""
    entry = parse_spec(minimal_spec(metrics=[{"metric": name, "options": options}])).metrics[0]
    scorer = Recipe(get_metric(name), entry.encoders[0], entry.options).build("cpu", 64)
    timer = PhaseTimer()
    scores = scorer.score(items, timer)
    assert list(timer.seconds) == ["score"]
    return scores, scorer.describe()


@pytest.fixture(scope="module")
def wmt16() -> list[Item]:
    """The first 5 segments of each WMT16 language pair (real MT output and references)."""
    items = load_dataset("wmt16", max_segments=5).items
    assert len(items) == 30 and len({it.lp for it in items}) == 6
    return items


def multi_reference_items() -> list[Item]:
    """Items with one to three references, where the best reference is not always the first."""
    rows = [
        ("The cat sat on the mat.", ("A dog lay on the rug.", "The cat sat on the mat.")),
        (
            "He went to the market yesterday.",
            ("Yesterday he went to market.", "He walked to the shop.", "He went to the market yesterday morning."),
        ),
        ("Stocks fell sharply on Monday.", ("Shares dropped steeply on Monday.",)),
        ("The committee approved the budget.", ("The budget was rejected.", "The committee approved the new budget.")),
    ]
    return [
        Item(
            lp="xx-en",
            seg_id=i + 1,
            system="s",
            source="",
            reference=refs[0],
            hypothesis=hyp,
            human=float(i),
            references=refs,
        )
        for i, (hyp, refs) in enumerate(rows)
    ]


# --------------------------------------------------------------------------- parity with the libraries


def test_defaults_are_the_library_functions_defaults() -> None:
    for options_class, function in (
        (SentBleuOptions, sacrebleu.sentence_bleu),
        (ChrfOptions, sacrebleu.sentence_chrf),
        (RougeOptions, rouge_scorer.RougeScorer),
    ):
        library = {
            k: p.default
            for k, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        ours = {f.name: f.default for f in dataclasses.fields(options_class)}
        assert ours == {k: library[k] for k in ours}, function


@pytest.mark.parametrize(
    "options", [{}, {"tokenize": "intl", "lowercase": True, "smooth_method": "floor", "smooth_value": 0.2}]
)
def test_sentbleu_equals_sacrebleu_sentence_bleu(wmt16: list[Item], options: dict[str, Any]) -> None:
    for items in (wmt16, multi_reference_items()):
        scores, _ = run_metric("sentbleu", items, **options)
        assert scores.primary == "bleu"
        assert scores.score == [
            sacrebleu.sentence_bleu(it.hypothesis, list(it.references), **options).score for it in items
        ]


@pytest.mark.parametrize("options", [{}, {"word_order": 2, "beta": 3, "char_order": 4, "eps_smoothing": True}])
def test_chrf_equals_sacrebleu_sentence_chrf(wmt16: list[Item], options: dict[str, Any]) -> None:
    for items in (wmt16, multi_reference_items()):
        scores, _ = run_metric("chrf", items, **options)
        assert scores.primary == "chrf"
        assert scores.score == [
            sacrebleu.sentence_chrf(it.hypothesis, list(it.references), **options).score for it in items
        ]


@pytest.mark.parametrize("rouge_type", ROUGE_TYPES)
@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_equals_rouge_score(wmt16: list[Item], rouge_type: str, use_stemmer: bool) -> None:
    library = rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer)
    single, _ = run_metric(rouge_type, wmt16, use_stemmer=use_stemmer)
    expected = [library.score(it.reference, it.hypothesis)[rouge_type] for it in wmt16]
    assert single.primary == "fmeasure"
    assert single.columns == {
        "precision": [s.precision for s in expected],
        "recall": [s.recall for s in expected],
        "fmeasure": [s.fmeasure for s in expected],
    }
    items = multi_reference_items()
    multi, _ = run_metric(rouge_type, items, use_stemmer=use_stemmer)
    expected = [library.score_multi(list(it.references), it.hypothesis)[rouge_type] for it in items]
    assert multi.columns == {
        "precision": [s.precision for s in expected],
        "recall": [s.recall for s in expected],
        "fmeasure": [s.fmeasure for s in expected],
    }


def test_stemming_changes_rouge() -> None:
    items = [
        Item(
            lp="xx-en",
            seg_id=1,
            system="",
            source="",
            reference="the players were running fast",
            hypothesis="the player runs fast",
            human=0.0,
        )
    ]
    plain, _ = run_metric("rouge1", items)
    stemmed, _ = run_metric("rouge1", items, use_stemmer=True)
    assert plain.score == [pytest.approx(4 / 9)]  # "the", "fast" of 4 and 5 tokens: F = 2PR/(P+R)
    assert stemmed.score == [pytest.approx(8 / 9)]  # player(s), run(s/ning) match too: 4 of 4 and 4 of 5


@pytest.mark.parametrize("name", LEXICAL)
def test_every_reference_counts(name: str) -> None:
    """Where a later reference is the closer one, all references score higher than the first alone."""
    items = multi_reference_items()[:2]
    first_only = [dataclasses.replace(it, references=(it.reference,)) for it in items]
    all_refs, _ = run_metric(name, items)
    first, _ = run_metric(name, first_only)
    assert all_refs.score[0] > first.score[0] and all_refs.score[1] > first.score[1]


# --------------------------------------------------------------------------- describe(): sizes, versions, signature


def test_describe_records_the_sacrebleu_signature(wmt16: list[Item]) -> None:
    for name, library in (("sentbleu", BLEU(effective_order=True)), ("chrf", CHRF())):
        library.sentence_score(wmt16[0].hypothesis, [wmt16[0].reference])  # sacrebleu's signature needs a scored call
        _, described = run_metric(name, wmt16)
        assert described["sacrebleu_signature"] == str(library.get_signature())
        assert (
            described["sacrebleu_signature"].startswith("nrefs:1|")
            and f"version:{sacrebleu.__version__}" in described["sacrebleu_signature"]
        )
        assert {k: described[k] for k in ("params", "disk_bytes", "weight_bytes", "runs_on")} == {
            "params": 0,
            "disk_bytes": 0,
            "weight_bytes": 0,
            "runs_on": "cpu",
        }
        assert described["library"] == {"sacrebleu": sacrebleu.__version__}
    _, mixed = run_metric("sentbleu", multi_reference_items())  # 2, 3, 1, 2 references
    assert mixed["sacrebleu_signature"].startswith("nrefs:var|")
    two = [it for it in multi_reference_items() if len(it.references) == 2]
    _, described = run_metric("chrf", two, word_order=2)
    assert described["sacrebleu_signature"].startswith("nrefs:2|") and "|nw:2|" in described["sacrebleu_signature"]
    _, described = run_metric("sentbleu", wmt16, tokenize="intl", lowercase=True)
    assert "|case:lc|" in described["sacrebleu_signature"] and "|tok:intl|" in described["sacrebleu_signature"]


def test_rouge_describe(wmt16: list[Item]) -> None:
    from importlib.metadata import version

    _, described = run_metric("rouge2", wmt16, use_stemmer=True)
    assert described == {
        "params": 0,
        "disk_bytes": 0,
        "weight_bytes": 0,
        "runs_on": "cpu",
        "library": {"rouge-score": version("rouge-score")},
        "rouge_type": "rouge2",
        "use_stemmer": True,
    }


# --------------------------------------------------------------------------- spec: no encoder


@pytest.mark.parametrize("encoders", [None, [NO_ENCODER], NO_ENCODER])
def test_no_encoder_omitted_or_none(encoders: Any) -> None:
    entry: dict[str, Any] = {"metric": "sentbleu"}
    if encoders is not None:
        entry["encoders"] = encoders
    spec = parse_spec(minimal_spec(metrics=[entry, {"metric": "rougeL"}], devices=["cpu", "cuda"]))
    assert [m.encoders for m in spec.metrics] == [[NONE], [NONE]]
    cells = spec.cells()
    assert [c.label for c in cells] == [
        f"{m} | none | wmt16 | {d} | bs64" for m in ("sentbleu", "rougeL") for d in ("cpu", "cuda")
    ]
    assert spec.model_names() == []  # nothing to find in the cache, nothing for --dry-run to ask for


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"metric": "sentbleu", "encoders": ["all-MiniLM-L6-v2"]},
            "t.metrics[0].encoders[0]: metric 'sentbleu' runs no model; write 'encoders: [none]' or leave the key out, "
            "got 'all-MiniLM-L6-v2'",
        ),
        (
            {"metric": "rouge1", "encoders": [NO_ENCODER, "sentence-transformers/all-MiniLM-L6-v2"]},
            "t.metrics[0].encoders[1]: metric 'rouge1' runs no model",
        ),
        (
            {"metric": "chrf", "encoders": [{"name": NO_ENCODER, "num_layers": 2}]},
            "t.metrics[0].encoders[0]: 'none' (no model) takes no encoder options, got num_layers",
        ),
        (
            {"metric": "bertscore", "encoders": [NO_ENCODER]},
            "t.metrics[0].encoders[0]: metric 'bertscore' needs a encoder or seq2seq model; 'none' is for metrics that "
            "run no model",
        ),
        ({"metric": "bertscore"}, "t.metrics[0].encoders is required"),
        ({"metric": "sentbleu", "options": {"tokenize": "moses"}}, "t.metrics[0].options: tokenize must be one of "),
        (
            {"metric": "sentbleu", "options": {"smooth_method": "add-one"}},
            "t.metrics[0].options: smooth_method must be one of ",
        ),
        (
            {"metric": "chrf", "options": {"char_order": 0, "word_order": 0}},
            "t.metrics[0].options: char_order and word_order are both 0",
        ),
        ({"metric": "chrf", "options": {"beta": -1}}, "t.metrics[0].options: beta must be >= 0, got -1"),
        ({"metric": "rougeL", "options": {"stemmer": True}}, "t.metrics[0].options: unknown key 'stemmer'"),
    ],
)
def test_spec_errors_name_the_entry(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_spec(minimal_spec(metrics=[entry]), source="t")
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_dry_run_asks_for_no_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(minimal_spec(metrics=[{"metric": "sentbleu"}, {"metric": "chrf"}])), encoding="utf-8"
    )
    assert main(["run", str(spec), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ", 1)[1] for line in lines[:-1]] == [
        "sentbleu | none | wmt16 | cpu | bs64",
        "chrf | none | wmt16 | cpu | bs64",
    ]
    assert lines[-1] == "2 cells; models not in the local cache: none"


def test_list_metrics_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "metrics"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    for name in LEXICAL:
        assert rows[name][1:5] == ["reference", "higher", "no", "none"]


# --------------------------------------------------------------------------- nlgbench score


def test_cli_score_needs_no_encoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hyps = ["The cat sat on the mat.", "He went to the market yesterday."]
    refs = ["The cat is on the mat.", "Yesterday he went to market."]
    (tmp_path / "h.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    args = ["score", "-c", str(tmp_path / "h.txt"), "-r", str(tmp_path / "r.txt")]
    assert main([*args, "--metric", "sentbleu", "--out", str(tmp_path / "out.csv")]) == 0
    assert "2 scores (sentbleu, none)" in capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8")))
    assert [float(r["score"]) for r in rows] == [
        sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs, strict=True)
    ]
    assert main([*args, "--metric", "rouge2", "--out", str(tmp_path / "rouge.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "rouge.csv").open(encoding="utf-8")))
    expected = [rouge_scorer.RougeScorer(["rouge2"]).score(r, h)["rouge2"] for h, r in zip(hyps, refs, strict=True)]
    assert [(float(r["score"]), float(r["precision"]), float(r["recall"])) for r in rows] == [
        (s.fmeasure, s.precision, s.recall) for s in expected
    ]
    capsys.readouterr()
    assert main([*args, "--metric", "chrf", "--encoder", "all-MiniLM-L6-v2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nlgbench: error: encoder: metric 'chrf' runs no model") and err.count("\n") == 1


# --------------------------------------------------------------------------- a real sweep


def check_correlations(run_dir: Path) -> list[dict[str, str]]:
    """Every ok cell's results.csv row against SciPy on its scores.csv: per-lp mean and pooled
    Pearson and Kendall tau-b. Returns the rows."""
    rows = list(csv.DictReader((run_dir / "results.csv").open(encoding="utf-8")))
    for row in rows:
        assert row["status"] == "ok" and row["encoder"] == NO_ENCODER and row["params"] == "0", row
        segs = list(csv.DictReader((run_dir / "cells" / row["cell_id"] / "scores.csv").open(encoding="utf-8")))
        score, human = [float(s["score"]) for s in segs], [float(s["human"]) for s in segs]
        by_lp: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for s in segs:
            by_lp[s["lp"]].append((float(s["score"]), float(s["human"])))
        pearson = statistics.fmean(stats.pearsonr(*zip(*pairs, strict=True))[0] for pairs in by_lp.values())
        kendall = statistics.fmean(stats.kendalltau(*zip(*pairs, strict=True))[0] for pairs in by_lp.values())
        assert float(row["pearson_segment"]) == pytest.approx(pearson, rel=1e-12, abs=1e-12)
        assert float(row["kendall_segment"]) == pytest.approx(kendall, rel=1e-12, abs=1e-12)
        assert float(row["pearson_global"]) == pytest.approx(stats.pearsonr(score, human)[0], rel=1e-12, abs=1e-12)
        assert float(row["kendall_global"]) == pytest.approx(stats.kendalltau(score, human)[0], rel=1e-12, abs=1e-12)
    return rows


def scores_csv(run_dir: Path, cell_id: str) -> list[dict[str, str]]:
    return list(csv.DictReader((run_dir / "cells" / cell_id / "scores.csv").open(encoding="utf-8")))


MULTI_ROWS = [  # hypothesis, references, human
    ("The cat sat on the mat.", ["A cat was sitting on the mat.", "The cat sat on the mat."], 92.0),
    ("The cat on mat sat.", ["A cat was sitting on the mat.", "The cat sat on the mat."], 55.0),
    ("Dog.", ["A cat was sitting on the mat.", "The cat sat on the mat."], 8.0),
    ("He went to the market yesterday.", ["Yesterday he went to market.", "He went to the market yesterday."], 88.0),
    ("He goes market.", ["Yesterday he went to market."], 35.0),
    (
        "Stocks fell sharply on Monday.",
        ["Shares dropped steeply on Monday.", "Stocks fell sharply Monday.", "On Monday, stock prices fell sharply."],
        81.0,
    ),
    ("Monday stocks.", ["Shares dropped steeply on Monday."], 20.0),
    ("The committee approved the budget.", ["The committee approved the new budget."], 77.0),
    ("Budget committee the.", ["The committee approved the new budget.", "The budget was approved."], 12.0),
    (
        "Rain is expected tomorrow in the north.",
        ["Tomorrow rain is expected in the north.", "Rain is forecast in the north tomorrow."],
        70.0,
    ),
]


@pytest.mark.integration
def test_sweep_runs_lexical_cells_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # wmt16 (real data, one reference) with sentbleu and no `encoders` key
    spec = tmp_path / "wmt.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "lex",
                "datasets": [{"name": "wmt16", "max_segments": 6}],
                "repeats": 2,
                "metrics": [{"metric": "sentbleu"}],
            }
        ),
        encoding="utf-8",
    )
    assert main(["run", str(spec), "--out", str(tmp_path / "wmt")]) == 0
    (row,) = check_correlations(tmp_path / "wmt")
    items = load_dataset("wmt16", max_segments=6).items
    segs = scores_csv(tmp_path / "wmt", row["cell_id"])
    assert [(s["lp"], s["seg_id"]) for s in segs] == [(it.lp, str(it.seg_id)) for it in items]
    assert [float(s["score"]) for s in segs] == [
        sacrebleu.sentence_bleu(it.hypothesis, [it.reference]).score for it in items
    ]
    result = json.loads((tmp_path / "wmt" / "cells" / row["cell_id"] / "result.json").read_text(encoding="utf-8"))
    assert (
        result["scorer"]["sacrebleu_signature"]
        == f"nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert result["repeat_agreement"]["max_abs_diff"] == 0.0

    # an own JSONL with several references per item: chrf and rougeL, `encoders: [none]` spelled out
    data = tmp_path / "multi.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "lp": "xx-en",
                    "seg_id": i + 1,
                    "system": f"s{i % 3}",
                    "hypothesis": hyp,
                    "references": refs,
                    "human": human,
                }
            )
            + "\n"
            for i, (hyp, refs, human) in enumerate(MULTI_ROWS)
        ),
        encoding="utf-8",
    )
    spec = tmp_path / "multi.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "lexmulti",
                "datasets": [{"path": str(data)}],
                "repeats": 1,
                "metrics": [
                    {"metric": "chrf", "encoders": [NO_ENCODER]},
                    {"metric": "rougeL", "options": {"use_stemmer": True}},
                ],
            }
        ),
        encoding="utf-8",
    )
    assert main(["run", str(spec), "--out", str(tmp_path / "multi")]) == 0
    rows = check_correlations(tmp_path / "multi")
    assert [r["metric"] for r in rows] == ["chrf", "rougeL"]
    frame = load_run(tmp_path / "multi")
    assert list(frame["encoder"]) == [NO_ENCODER, NO_ENCODER]
    items = load_dataset(None, path=str(data)).items
    chrf = scores_csv(tmp_path / "multi", rows[0]["cell_id"])
    assert [float(s["score"]) for s in chrf] == [
        sacrebleu.sentence_chrf(it.hypothesis, list(it.references)).score for it in items
    ]
    library = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rouge = scores_csv(tmp_path / "multi", rows[1]["cell_id"])
    assert [(float(s["score"]), float(s["precision"]), float(s["recall"])) for s in rouge] == [
        (r.fmeasure, r.precision, r.recall)
        for r in (library.score_multi(list(it.references), it.hypothesis)["rougeL"] for it in items)
    ]
    result = json.loads((tmp_path / "multi" / "cells" / rows[0]["cell_id"] / "result.json").read_text(encoding="utf-8"))
    assert result["scorer"]["sacrebleu_signature"].startswith("nrefs:var|")
