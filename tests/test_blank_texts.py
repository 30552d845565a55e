"""Blank texts: an empty system output or reference is scored where the metric's
definition or reference code gives it a value (BERTScore as bert_score: P = R = F1 = 0; the lexical
metrics as their libraries), with one warning naming the 1-based lines, and refused otherwise with one
line naming the metric and the line; the same through the API, `nlgbench score` and sweeps, whose
cells record the warning as a data warning."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlgbench
import nlgbench.api
from clikit import user_error
from nlgbench.api import BlankTextWarning
from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric, metric_names
from nlgbench.metrics.base import READ_FIELDS
from nlgbench.runs.resultfile import read_result
from tiny import TEXTS, make_tiny_bart, make_tiny_bert, make_tiny_gpt2

pytestmark = pytest.mark.component

REPO = Path(__file__).resolve().parents[1]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
ARGUMENT = {"hypothesis": "hypotheses", "reference": "references", "source": "sources"}

# The decisions (docs/reference/metrics.md, "Empty texts"): at each metric's default options, the fields whose
# blank text it scores and those it refuses; the others it does not read.
DECISIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "bertscore": (("hypothesis", "reference"), ()),
    "moverscore": ((), ("hypothesis", "reference")),
    "baryscore": ((), ("hypothesis", "reference")),
    "bartscore": (("hypothesis", "reference"), ()),
    "xmoverscore": ((), ("hypothesis", "source")),
    "sentsim": (("hypothesis",), ("source",)),
    "frugalscore": (("hypothesis", "reference"), ()),
    **{name: (("hypothesis", "reference"), ()) for name in ("sentbleu", "chrf", "rouge1", "rouge2", "rougeL")},
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tiny random models (mechanics only) for every metric that runs one."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    root = tmp_path_factory.mktemp("blank")
    student = make_tiny_bert(root / "student", TEXTS, num_layers=2)
    torch.manual_seed(1)
    BertForSequenceClassification(BertConfig.from_pretrained(student, num_labels=1)).save_pretrained(student)
    return {
        "bert": str(make_tiny_bert(root / "bert", TEXTS, num_layers=2)),
        "bart": str(make_tiny_bart(root / "bart", TEXTS)),
        "gpt2": str(make_tiny_gpt2(root / "gpt2", TEXTS)),
        "student": str(student),
    }


def setup(metric: str, models: dict[str, str]) -> dict[str, Any]:
    """The encoder and options each metric runs with on the tiny models."""
    bert = {"encoder": models["bert"]}
    return {
        "bertscore": bert,
        "moverscore": bert,
        "baryscore": {**bert, "last_layers": 2},
        "bartscore": {"encoder": models["bart"]},
        "xmoverscore": {**bert, "layer": 2, "lm": models["gpt2"]},
        "sentsim": bert,
        "frugalscore": {"encoder": models["student"]},
    }.get(metric, {})


def texts(blank: str | None) -> dict[str, list[str]]:
    """Four lines of hypotheses, references and sources; `blank` names the field whose line 2 is empty
    and line 4 whitespace only."""
    out = {"hypothesis": TEXTS[0:4], "reference": TEXTS[4:8], "source": [TEXTS[(i + 3) % 8] for i in range(4)]}
    if blank is not None:
        out[blank] = [t if i not in (1, 3) else ("" if i == 1 else " \t") for i, t in enumerate(out[blank])]
    return out


def score_with(metric: str, blank: str | None, options: dict[str, Any]) -> tuple[dict[str, list[float]], list[str]]:
    """`nlgbench.score_outputs` with `blank`'s lines 2 and 4 blank: the outputs and the BlankTextWarnings."""
    given = texts(blank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = nlgbench.score_outputs(
            given["hypothesis"], given["reference"], metric=metric, sources=given["source"], device="cpu", **options
        )
    return out, [str(w.message) for w in caught if issubclass(w.category, BlankTextWarning)]


# ----------------------------------------------------------------------------- the rule, one place per metric


def test_every_metric_declares_what_a_blank_text_gets() -> None:
    """Each packaged metric decides (no fallback to the default rule), as DECISIONS and the docs say."""
    assert sorted(DECISIONS) == sorted(metric_names())
    for name, (scored, refused) in DECISIONS.items():
        info = get_metric(name)
        assert info.blank_texts is not None or info.options_decide("blank_texts"), name
        rule = info.blank_rule(info.cell_options({}))
        assert (rule.scored, rule.refused) == (scored, refused), name


def test_options_change_the_rule_where_the_metric_reads_other_texts() -> None:
    sentsim, bart = get_metric("sentsim"), get_metric("bartscore")
    by_reference = sentsim.blank_rule({"against": "reference"})
    assert (by_reference.scored, by_reference.refused) == (("hypothesis", "reference"), ())
    transport = sentsim.blank_rule({"token_part": "rwmd"})  # no mass to move in an empty text
    assert (transport.scored, transport.refused) == ((), ("hypothesis", "source"))
    faithful = bart.blank_rule({"faithfulness": True})
    assert (faithful.scored, faithful.refused) == (("hypothesis", "reference"), ("source",))


def test_docs_table_says_what_each_metric_does() -> None:
    """The "Empty texts" table of docs/reference/metrics.md has a row per metric whose cells say scored /
    refused / not read as the metric's rule at its default options."""
    page = (REPO / "docs" / "reference" / "metrics.md").read_text(encoding="utf-8")
    section = page[page.index("## Empty texts") :].split("\n\n")
    (lines,) = [part.splitlines() for part in section[:4] if part.startswith("| metric")]
    table = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        table.update({name: cells[1:4] for name in re.findall(r"`([^`]+)`", cells[0])})
    assert sorted(table) == sorted(metric_names())
    for name, cells in table.items():
        info = get_metric(name)
        rule = info.blank_rule(info.cell_options({}))
        for field, cell in zip(READ_FIELDS, cells, strict=True):
            word = "scored" if field in rule.scored else "refused" if field in rule.refused else "not read"
            assert cell.startswith(word), (name, field, cell)


# ----------------------------------------------------------------------------- every metric, through the API


CASES = [
    *[(name, {}) for name in DECISIONS],
    ("sentsim", {"against": "reference"}),
    ("sentsim", {"token_part": "wmd"}),
    ("bartscore", {"faithfulness": True}),
]


@pytest.mark.parametrize(("metric", "options"), CASES, ids=[f"{m}{o or ''}" for m, o in CASES])
@pytest.mark.parametrize("field", READ_FIELDS)
def test_each_metric_scores_or_refuses_a_blank_text(
    models: dict[str, str], metric: str, options: dict[str, Any], field: str
) -> None:
    """Scored: every output finite (never NaN), one warning naming lines 2 and 4 (1-based). Refused: one
    line naming the metric, the field and line 2. Not read: as without the blank."""
    info = get_metric(metric)
    rule = info.blank_rule(options)
    run = {**setup(metric, models), **options}
    if field in rule.refused:
        with pytest.raises(UserError) as err:
            score_with(metric, field, run)
        message = str(err.value)
        assert message.startswith(f"{metric} cannot score a blank {field} ({ARGUMENT[field]} line 2, 2 blank in all): ")
        assert rule.reason in message and "\n" not in message
        return
    out, warned = score_with(metric, field, run)
    assert all(math.isfinite(v) for values in out.values() for v in values), out
    if field in rule.scored:
        assert warned == [
            f"2 of 4 lines hold a blank text ({ARGUMENT[field]} lines 2, 4); {metric} scores a blank text: {rule.value}"
        ]
    else:
        assert warned == []
        assert out == score_with(metric, None, run)[0]


def test_bertscore_blank_pairs_are_zero_and_leave_the_others_alone(models: dict[str, str]) -> None:
    """P = R = F1 = 0 exactly for a pair with an empty side; without idf the other lines are as scored
    without the blank lines."""
    given = texts(None)
    hyps, refs = list(given["hypothesis"]), list(given["reference"])
    hyps[1], refs[2] = "", "   "
    with pytest.warns(BlankTextWarning, match=r"hypotheses line 2; references line 3\); bertscore"):
        out = nlgbench.score_outputs(hyps, refs, encoder=models["bert"], device="cpu")
    for key in ("score", "precision", "recall"):
        assert out[key][1] == out[key][2] == 0.0
    alone = nlgbench.score_outputs([hyps[i] for i in (0, 3)], [refs[i] for i in (0, 3)], encoder=models["bert"])
    assert [out["score"][i] for i in (0, 3)] == alone["score"]
    with pytest.warns(BlankTextWarning):  # idf counts the blank reference as a document, as bert_score: finite
        idf = nlgbench.score(hyps, refs, encoder=models["bert"], idf=True)
    assert all(math.isfinite(v) for v in idf) and idf[1] == idf[2] == 0.0


def test_lexical_blank_texts_score_as_their_libraries() -> None:
    import sacrebleu
    from rouge_score import rouge_scorer

    hyps, refs = ["a cat sat", "", "  ", "the dog"], [["a cat sat"], ["a dog"], [""], ["", "the dog ran"]]
    with pytest.warns(BlankTextWarning):
        bleu = nlgbench.score(hyps, refs, metric="sentbleu")
    with pytest.warns(BlankTextWarning):
        chrf = nlgbench.score(hyps, refs, metric="chrf")
    with pytest.warns(BlankTextWarning):
        rouge = nlgbench.score(hyps, refs, metric="rougeL")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    assert bleu == [sacrebleu.sentence_bleu(h, r).score for h, r in zip(hyps, refs, strict=True)]
    assert chrf == [sacrebleu.sentence_chrf(h, r).score for h, r in zip(hyps, refs, strict=True)]
    assert rouge == [scorer.score_multi(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs, strict=True)]
    assert bleu[1] == bleu[2] == chrf[1] == rouge[1] == 0.0 and bleu[3] > 0  # the blank among two counts as one


def test_the_api_warns_once_per_call_and_refuses_before_any_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nlgbench.score(["a", ""], ["a", "b"], metric="chrf")  # the texts are checked twice: warned once
    assert [str(w.message) for w in caught if w.category is BlankTextWarning] == [
        "1 of 2 lines hold a blank text (hypotheses line 2); chrf scores a blank text: "
        + get_metric("chrf").blank_rule({}).value
    ]

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a model loaded before the texts were checked")

    monkeypatch.setattr(nlgbench.api.Scorer, "__init__", no_model)
    refused = r"^moverscore cannot score a blank reference \(references line 2, reference 2\)"
    with pytest.raises(UserError, match=refused):
        nlgbench.score(["a", "b"], [["a"], ["b", " "]], metric="moverscore")
    with pytest.raises(UserError, match=r"^bartscore cannot score a blank source \(sources line 1\)"):
        nlgbench.score(["a", "b"], ["a", "b"], metric="bartscore", sources=[" ", "s"], faithfulness=True)
    with pytest.raises(UserError, match="metric 'bartscore' needs sources: pass sources="):
        nlgbench.score(["a", "b"], ["a", "b"], metric="bartscore", faithfulness=True)


# ----------------------------------------------------------------------------- BERTScore equals bert_score (real)


@pytest.mark.system
@pytest.mark.skipif(local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache")
@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_with_blank_texts_equals_bert_score(
    idf: bool, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real WMT16 segments with a blank candidate, a blank reference, a whitespace-only one and a pair
    blank on both sides, MiniLM-L6: P, R, F equal bert_score.score's (which prints its own warnings)
    to 1e-5, bert_score's published tolerance; with a blank among several references too (max).

    One line of bert_score adapted to the installed transformers, nothing else: `sent_encode` encodes
    an empty text with `tokenizer.build_inputs_with_special_tokens([])`, gone from transformers 5
    (AttributeError); the tokenizer's own encoding of "" is the same ids ([CLS] [SEP])."""
    bert_score = pytest.importorskip("bert_score")
    utils = pytest.importorskip("bert_score.utils")
    published = utils.sent_encode

    def sent_encode(tokenizer: Any, sent: str) -> Any:
        if sent.strip() == "" and not hasattr(tokenizer, "build_inputs_with_special_tokens"):
            return tokenizer("", add_special_tokens=True)["input_ids"]
        return published(tokenizer, sent)

    monkeypatch.setattr(utils, "sent_encode", sent_encode)
    items = load_dataset("wmt16", max_segments=4).items
    hyps, refs = [it.hypothesis for it in items], [it.reference for it in items]
    hyps[2], refs[5], hyps[9], refs[11], hyps[13], refs[13] = "", "", "  \t", " ", "", ""
    groups: list[Any] = [[r] for r in refs]
    groups[17] = ["", refs[17]]

    def ours_and_theirs(references: list[Any]) -> tuple[dict[str, list[float]], Any]:
        with pytest.warns(BlankTextWarning, match="bertscore scores a blank text: P = R = F1 = 0"):
            ours = nlgbench.score_outputs(hyps, references, encoder="all-MiniLM-L6-v2", batch_size=8, idf=idf)
        theirs = bert_score.score(
            hyps,
            references,
            model_type=MINILM,
            num_layers=6,
            batch_size=8,
            device="cpu",
            use_fast_tokenizer=True,
            nthreads=0,
            idf=idf,
        )
        return ours, theirs

    for references in (refs, groups):
        ours, (p, r, f) = ours_and_theirs(references)
        for key, theirs in (("precision", p), ("recall", r), ("score", f)):
            assert np.abs(np.array(ours[key]) - theirs.numpy()).max() <= 1e-5, key
        assert [ours["score"][i] for i in (2, 5, 9, 11, 13)] == [0.0] * 5 and ours["score"][17] > 0
    err = capfd.readouterr().err
    assert "Empty candidate sentence detected" in err and "Empty reference sentence detected" in err


# ----------------------------------------------------------------------------- nlgbench score


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_cli_score_with_an_empty_candidate_line_warns_and_exits_0(
    models: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = write_lines(tmp_path / "r.txt", TEXTS[:3])
    hyps = write_lines(tmp_path / "h.txt", [TEXTS[3], "", TEXTS[5]])
    out = tmp_path / "scores.csv"
    argv = ["score", "-r", str(refs), "-c", str(hyps), "--encoder", models["bert"], "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warned == [
        "warning: 1 of 3 lines hold a blank text (hypotheses line 2); bertscore scores a blank text: "
        + get_metric("bertscore").blank_rule({}).value
    ]
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["line"], float(r["score"])) for r in rows][1] == ("2", 0.0)
    assert all(math.isfinite(float(r["score"])) for r in rows)
    message = user_error(capsys, "score", "--metric", "moverscore", "-r", str(refs), "-c", str(hyps))
    assert message.startswith("moverscore cannot score a blank hypothesis (hypotheses line 2): ")


# ----------------------------------------------------------------------------- a sweep over a user CSV file


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A user CSV table (six outputs, the third empty) imported as own data (`datasets import table`):
    the JSONL file and what the import printed."""
    root = tmp_path_factory.mktemp("sweep")
    table = root / "outputs.csv"
    with table.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["lp", "seg_id", "reference", "hypothesis", "human"])
        for i in range(6):
            w.writerow(["en-en", i + 1, TEXTS[i], "" if i == 2 else TEXTS[(i + 1) % 8], i * 0.7 % 2])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        assert main(["datasets", "import", "table", str(table), "--out", str(root / "outputs.jsonl")]) == 0
    return root / "outputs.jsonl", printed.getvalue()


@pytest.fixture(scope="module")
def blank_csv(imported: tuple[Path, str]) -> Path:
    return imported[0]


def test_the_import_keeps_an_empty_output_and_says_so(imported: tuple[Path, str]) -> None:
    """An empty output cell is an empty hypothesis (it used to stop the import: `column ... is empty`)."""
    path, printed = imported
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["hypothesis"] for r in rows] == [TEXTS[(i + 1) % 8] if i != 2 else "" for i in range(6)]
    assert "note: 1 of 6 items have a blank hypothesis (each metric scores or refuses it" in printed


@pytest.mark.integration
def test_a_sweep_records_the_blank_text_warning(
    blank_csv: Path, models: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BERTScore and chrF score the empty output; each cell keeps the data warning in result.json,
    results.csv and the report; MoverScore on the same data is refused before any cell."""
    spec = {
        "name": "blank",
        "datasets": [{"path": str(blank_csv)}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "encoders": [models["bert"]]}, {"metric": "chrf"}],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    expected = {
        name: "1 of 6 items have a blank hypothesis (lp='en-en' seg_id=3 system=''), scored as the metric defines "
        f"it: {get_metric(name).blank_rule({}).value}"
        for name in ("bertscore", "chrf")
    }
    for name, warning in expected.items():
        assert f"warning: {name}: {warning}" in err
    cells = [read_result(folder) for folder in sorted((out / "cells").iterdir())]
    assert sorted(c.metric.name for c in cells if c.metric) == ["bertscore", "chrf"]
    for cell in cells:
        assert cell.ok and cell.metric is not None and expected[cell.metric.name] in (cell.warnings or [])
    with (out / "results.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all(expected[row["metric"]] in row["warnings"] for row in rows)
    assert main(["report", str(out)]) == 0
    capsys.readouterr()
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert all(html.escape(w) in page for w in expected.values())
    spec["metrics"] = [{"metric": "moverscore", "encoders": [models["bert"]]}]
    path.write_text(json.dumps(spec), encoding="utf-8")
    message = user_error(capsys, "run", str(path), "--out", str(tmp_path / "refused"))
    assert message.startswith(
        "dataset outputs: moverscore cannot score a blank hypothesis (item lp='en-en' seg_id=3 system=''): "
    )
    assert not (tmp_path / "refused" / "cells").exists()
