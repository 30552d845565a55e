"""`nlgbench distill` mechanics on tiny random models (never a claim about real correlations).

The synthetic task: references are random words of a small vocabulary, candidates are references
cut at a random point, and the teacher is chrF (sacrebleu, no model): a known function of the pair
that a small cross-encoder can learn (it tracks how much of the reference the candidate keeps).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import write_jsonl
from nlgbench.cli import main
from nlgbench.cli.distill import cmd_distill
from nlgbench.cli.distill_parser import add_distill_arguments
from nlgbench.data import training_texts
from nlgbench.data.items import Item
from nlgbench.data.loaders import load_dataset
from nlgbench.distillation import teacher
from nlgbench.distillation.augment import EDITS, synthetic_candidates
from nlgbench.distillation.config import TrainConfig
from nlgbench.distillation.pairs import gather_pairs
from nlgbench.distillation.pipeline import DistillResult, distill
from nlgbench.distillation.teacher import Teacher
from nlgbench.encoders.registry import EncoderRef
from nlgbench.execution import leakage
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.frugalscore import FrugalScoreScorer

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_torch_thread")]

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
MAX_LENGTH = 64


def synthetic_rows(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        ref = rng.sample(WORDS, rng.randint(6, 12))
        rows.append({"reference": " ".join(ref), "candidate": " ".join(ref[: rng.randint(1, len(ref))])})
    return rows


def own_data(path: Path, rows: list[dict[str, str]]) -> Path:
    """Rows as an own-data file (lp, seg_id, reference, hypothesis, human)."""
    return write_jsonl(
        path,
        [
            {
                "lp": "xx-en",
                "seg_id": i + 1,
                "reference": r["reference"],
                "hypothesis": r["candidate"],
                "human": float(i % 7),
            }
            for i, r in enumerate(rows)
        ],
    )


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(WORDS, num_layers=2)


def config(student: Path, **changes: Any) -> TrainConfig:
    base = {
        "student": str(student),
        "epochs": 8,
        "lr": 1e-3,
        "batch_size": 16,
        "max_length": MAX_LENGTH,
        "evals_per_epoch": 2,
        "patience": 20,
    }
    return TrainConfig(**{**base, **changes})


CHRF = Teacher.parse("chrf", None, {})


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> DistillResult:
    """One student distilled from chrF on 400 synthetic pairs, given as an own-data file."""
    tmp = tmp_path_factory.mktemp("distilled")
    data = own_data(tmp / "train.jsonl", synthetic_rows(400, seed=1))
    torch.set_num_threads(1)
    return distill([str(data)], CHRF, config(tiny_dir, student_layers=1), tmp / "student", log=lambda _m: None)


def test_distillation_lowers_the_validation_loss_on_a_learnable_target(trained: DistillResult) -> None:
    record = trained.record
    before, after = record["history"][0]["val_mse"], record["validation"]["mse"]
    assert after < before
    # and it learned the pair, not only the mean: well under the error of predicting the training mean
    assert after < 0.5 * record["validation"]["mse_constant"]
    assert record["validation"]["pearson"] > 0.8
    assert record["validation"]["n"] + record["data"]["train_pairs"] == record["data"]["pairs"] == 400


def test_the_folder_is_a_cut_student_with_its_record(trained: DistillResult, tiny_dir: Path) -> None:
    out = trained.out
    config_json = json.loads((out / "config.json").read_text())
    assert config_json["num_hidden_layers"] == 1 and len(config_json["id2label"]) == 1  # one output
    assert config_json["architectures"] == ["BertForSequenceClassification"]
    assert list(out.glob("*.safetensors")) and (out / "tokenizer.json").is_file()
    record = json.loads((out / training_texts.DISTILL_FILE).read_text())
    assert record["teacher"]["metric"] == "chrf" and record["input_order"] == "candidate [SEP] reference"
    # no path of this machine: the student folder and the data file by their names
    assert record["student"] == {**record["student"], "base": tiny_dir.name, "layers": 1, "base_layers": 2}
    assert record["student"]["source"] == tiny_dir.name
    assert list(record["data"]["sources"][0]["files"]) == ["train.jsonl"]
    text = (out / training_texts.DISTILL_FILE).read_text()
    assert str(tiny_dir) not in text and str(out.parent) not in text and '"/' not in text
    assert record["hyperparameters"]["max_length"] == MAX_LENGTH and record["allow_overlap"] is False
    texts = (out / training_texts.TEXTS_FILE).read_text().split()
    assert len(texts) == record["data"]["texts"] == len(set(texts))
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {"0o644"}  # readable by whoever runs the sweep


def test_the_saved_student_scores_the_held_out_pairs_as_validated(trained: DistillResult) -> None:
    """The frugalscore metric, loading the folder, reproduces the validation predictions: same input
    order (candidate first), head in the teacher's scale."""
    items = [Item("", i + 1, "", "", p.reference, p.candidate, 0.0) for i, p in enumerate(trained.val_pairs)]
    scorer = FrugalScoreScorer(EncoderRef(str(trained.out)), {"max_length": MAX_LENGTH}, "cpu", 7)
    got = scorer.score(items, PhaseTimer()).score
    # float32 logits of the same model over other batch shapes: ~1e-6 relative of |y| <= 100
    assert got == pytest.approx(trained.val_predictions, abs=1e-3)
    mse = sum((g - y) ** 2 for g, y in zip(got, trained.val_targets, strict=True)) / len(got)
    assert mse == pytest.approx(trained.record["validation"]["mse"], rel=1e-4)
    # swapping the inputs gives other scores: the order matters, so the test above checks it
    swapped = [Item("", it.seg_id, "", "", it.hypothesis, it.reference, 0.0) for it in items]
    assert scorer.score(swapped, PhaseTimer()).score != pytest.approx(got, abs=1e-3)


def test_the_student_scores_through_a_sweep_by_path(trained: DistillResult, tmp_path: Path) -> None:
    rows = synthetic_rows(12, seed=99)  # other texts than the training pairs
    data = own_data(tmp_path / "eval.jsonl", rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "distilled",
                "datasets": [{"path": str(data)}],
                "repeats": 1,
                "batch_size": 4,
                "metrics": [
                    {"metric": "frugalscore", "options": {"max_length": MAX_LENGTH}, "encoders": [str(trained.out)]}
                ],
            }
        ),
        encoding="utf-8",
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "run", str(spec), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with (tmp_path / "run" / "results.csv").open(newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["status"] == "ok" and row["metric"] == "frugalscore" and row["n_segments"] == "12"
    with (tmp_path / "run" / "cells" / row["cell_id"] / "scores.csv").open(newline="") as fh:
        scores = [float(r["score"]) for r in csv.DictReader(fh)]
    items = load_dataset(path=data).items
    direct = FrugalScoreScorer(EncoderRef(str(trained.out)), {"max_length": MAX_LENGTH}, "cpu", 1).score(
        items, PhaseTimer()
    )
    assert scores == pytest.approx(direct.score, abs=1e-3)
    # the published report data (report/cells.jsonl) names the student folder by its last part, as
    # labels do: a committed report carries no path of this machine for it (the data file's path stays:
    # reading the report again re-reads the human scores from that file)
    assert main(["report", str(tmp_path / "run")]) == 0
    published = (tmp_path / "run" / "report" / "cells.jsonl").read_text(encoding="utf-8")
    assert str(trained.out) not in published
    (cell,) = [json.loads(line) for line in published.splitlines()]
    assert cell["config"]["encoder"]["name"] == trained.out.name and cell["cell_id"] == row["cell_id"]
    assert cell["config"]["dataset"]["path"] == str(data)


def test_labels_are_read_from_the_cache_on_a_rerun(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    pairs = write_jsonl(tmp_path / "pairs.jsonl", synthetic_rows(40, seed=2))
    cfg = config(tiny_dir, epochs=1)
    calls: list[int] = []
    real = teacher._run_teacher

    def counting(pairs: Any, *args: Any) -> Any:
        calls.append(len(pairs))
        return real(pairs, *args)

    monkeypatch.setattr(teacher, "_run_teacher", counting)
    first = distill([str(pairs)], CHRF, cfg, tmp_path / "a", log=lambda _m: None)
    assert calls == [40] and first.record["labels"]["cached"] is False
    assert list((tmp_path / "cache" / "distill" / "shards").glob("*/*.json"))
    assert not list((tmp_path / "cache" / "distill").glob("labels-*.json"))  # the shards alone hold the labels
    second = distill([str(pairs)], CHRF, cfg, tmp_path / "b", log=lambda _m: None)
    assert calls == [40] and second.record["labels"]["cached"] is True  # the teacher did not run again
    assert second.record["data"]["pairs_sha256"] == first.record["data"]["pairs_sha256"]
    # another teacher config (chrF++), or other pairs, is labelled afresh
    distill([str(pairs)], Teacher.parse("chrf", None, {"word_order": 2}), cfg, tmp_path / "c", log=lambda _m: None)
    assert calls == [40, 40]
    distill([str(pairs)], CHRF, cfg, tmp_path / "d", augment=1, log=lambda _m: None)
    assert len(calls) == 3 and calls[2] > 40


def test_leakage_guard_fires_on_overlap_and_allow_overlap_lifts_it(
    trained: DistillResult, tmp_path: Path, tiny_dir: Path
) -> None:
    train_file = trained.out.parent / next(iter(trained.record["data"]["sources"][0]["files"]))  # its name
    overlapping = load_dataset(path=train_file)
    disjoint = load_dataset(path=own_data(tmp_path / "other.jsonl", synthetic_rows(10, seed=123)))
    (line,) = leakage.check_leakage(trained.out, [disjoint, overlapping])
    assert f"{len(overlapping.items)} of {len(overlapping.items)} items" in line and "'train'" in line
    assert "--allow-overlap" in line and "\n" not in line
    assert leakage.check_leakage(trained.out, [disjoint]) == []
    # a spec naming the student and the training data is refused, line by line
    from nlgbench.core.spec import parse_spec

    spec = parse_spec(
        {
            "name": "t",
            "datasets": [{"path": str(train_file)}],
            "metrics": [{"metric": "frugalscore", "encoders": [str(trained.out)]}],
        }
    )
    assert leakage.check_spec_leakage(spec) == [line]
    # --allow-overlap is recorded and lifts the guard (the overlap itself is still reported by `overlaps`)
    parser = argparse.ArgumentParser()
    add_distill_arguments(parser)
    args = parser.parse_args(
        [
            "--teacher-metric",
            "chrf",
            "--student",
            str(tiny_dir),
            "--pairs",
            str(train_file),
            "--max-pairs",
            "60",
            "--epochs",
            "1",
            "--max-length",
            str(MAX_LENGTH),
            "--out",
            str(tmp_path / "allowed"),
            "--allow-overlap",
        ]
    )
    assert cmd_distill(args) == 0
    assert json.loads((tmp_path / "allowed" / training_texts.DISTILL_FILE).read_text())["allow_overlap"] is True
    assert leakage.check_leakage(tmp_path / "allowed", [overlapping]) == []
    assert len(leakage.overlaps(tmp_path / "allowed", [overlapping])) == 1


def test_pairs_from_files_and_datasets(tmp_path: Path) -> None:
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text(
        "reference\tcandidate\tnote\nthe cat sat\ta cat sat\tx\nthe cat sat\ta cat sat\ty\na dog ran\t \tz\n",
        encoding="utf-8",
    )
    data = own_data(tmp_path / "data.jsonl", [{"reference": "one two three", "candidate": "one two"}])
    pairs, sources, counts = gather_pairs([str(tsv), str(data)], max_pairs=None, augment=0, seed=0, log=lambda _m: None)
    assert [(p.reference, p.candidate, p.origin) for p in pairs] == [
        ("the cat sat", "a cat sat", "pairs"),
        ("one two three", "one two", "data"),
    ]
    assert counts == {"read": 4, "blank": 1, "duplicate": 1, "kept": 2}
    assert [(s.kind, s.pairs) for s in sources] == [("pairs file", 3), ("own data file", 1)]
    wmt, _, _ = gather_pairs(["wmt16"], max_pairs=50, augment=0, seed=0, log=lambda _m: None)
    again, _, _ = gather_pairs(["wmt16"], max_pairs=50, augment=0, seed=0, log=lambda _m: None)
    other, _, _ = gather_pairs(["wmt16"], max_pairs=50, augment=0, seed=1, log=lambda _m: None)
    assert len(wmt) == 50 and wmt == again and wmt != other


def test_augmentation_is_seeded_and_edits_each_reference() -> None:
    refs = [" ".join(random.Random(i).sample(WORDS, 10)) for i in range(20)] + ["too short"]
    made = synthetic_candidates(refs, 4, seed=0)
    assert made == synthetic_candidates(refs, 4, seed=0) and made != synthetic_candidates(refs, 4, seed=1)
    assert {s.reference for s in made} == set(refs[:20])  # two words: too short to edit
    assert {s.edit for s in made} == set(EDITS)
    vocabulary = {w for r in refs for w in r.split()}
    for s in made:
        ref, cand = s.reference.split(), s.candidate.split()
        assert cand and cand != ref and set(cand) <= vocabulary
        if s.edit == "truncate":
            assert cand == ref[: len(cand)] and len(cand) < len(ref)
        elif s.edit == "drop":
            assert len(cand) < len(ref) and all(w in ref for w in cand)
        elif s.edit == "swap":
            assert sorted(cand) == sorted(ref)
        else:
            assert len(cand) == len(ref)
    # a reference's candidates depend on the others only through the vocabulary of substitutions
    alone = synthetic_candidates(refs[:1], 4, seed=0)
    among = [s for s in made if s.reference == refs[0]]
    assert [s.edit for s in alone] == [s.edit for s in among]
    assert [s for s in alone if s.edit != "substitute"] == [s for s in among if s.edit != "substitute"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--teacher-metric", "bertscor"], "unknown metric 'bertscor'; did you mean 'bertscore'"),
        (["--teacher-metric", "chrf", "--student-layers", "3"], "--student-layers 3, but .* has only 2 layers"),
        (["--teacher-metric", "chrf", "--teacher-options", "nope=1"], "teacher.options: unknown key 'nope'"),
        (["--teacher-metric", "xmoverscore"], "reads sources"),
        (["--teacher-metric", "chrf", "--pairs", "wmt99"], "unknown dataset 'wmt99'"),
        (["--teacher-metric", "chrf", "--val-fraction", "1.5"], "val-fraction must be between 0 and 1"),
    ],
)
def test_bad_input_is_one_line_before_any_labelling(
    argv: list[str], message: str, tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(teacher, "_run_teacher", lambda *a: pytest.fail("the teacher ran before the input was checked"))
    parser = argparse.ArgumentParser()
    add_distill_arguments(parser)
    pairs = write_jsonl(tmp_path / "p.jsonl", synthetic_rows(10, seed=3))
    base = ["--student", str(tiny_dir), "--pairs", str(pairs), "--out", str(tmp_path / "out"), "--epochs", "1"]
    with pytest.raises(UserError, match=message) as err:
        cmd_distill(parser.parse_args(base + argv))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_not_a_student_is_not_replaced(tmp_path: Path, tiny_dir: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    pairs = write_jsonl(tmp_path / "p.jsonl", synthetic_rows(10, seed=4))
    with pytest.raises(UserError, match="non-empty folder without distill.json"):
        distill([str(pairs)], CHRF, config(tiny_dir), tmp_path / "out", log=lambda _m: None)
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_module_entry_point_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nlgbench.cli",
            "distill",
            "--teacher-metric",
            "nope",
            "--student",
            "x",
            "--pairs",
            "wmt16",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("nlgbench: error: unknown metric 'nope'")


def test_length_batches_cover_each_pair_once_with_little_padding() -> None:
    from nlgbench.distillation.student import length_batches

    lengths = [random.Random(i).randint(5, 120) for i in range(203)]
    batches = length_batches(lengths, 8, torch.Generator().manual_seed(0), pool=5)
    assert sorted(i for b in batches for i in b) == list(range(203)) and max(map(len, batches)) == 8
    assert batches == length_batches(lengths, 8, torch.Generator().manual_seed(0), pool=5)
    assert batches != length_batches(lengths, 8, torch.Generator().manual_seed(1), pool=5)
    # padding (sum over batches of max length - length) is well under a random cut's
    padding = sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)
    order = torch.randperm(203, generator=torch.Generator().manual_seed(0)).tolist()
    plain = [order[s : s + 8] for s in range(0, 203, 8)]
    assert padding < 0.5 * sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in plain)


def leak_spec(train_file: Path, encoder: str, name: str = "leak") -> dict[str, Any]:
    return {
        "name": name,
        "datasets": [{"path": str(train_file)}],
        "repeats": 1,
        "batch_size": 4,
        "warmup": 0,
        "devices": ["cpu"],
        "threads": 1,
        "metrics": [{"metric": "frugalscore", "encoders": [encoder], "options": {"max_length": MAX_LENGTH}}],
    }


def test_the_leakage_guard_holds_at_every_entry_point_and_under_any_name(
    trained: DistillResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leakage guard was only in the CLI's `run` and only looked for distill.json in a local
    folder of the encoder's name. Now the API, the CLI and an imported student (a Hub-style id whose
    snapshot holds the copied distill.json) are all refused, before any cell."""
    import nlgbench
    from nlgbench.encoders.hfcache import import_model

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    train_file = trained.out.parent / next(iter(trained.record["data"]["sources"][0]["files"]))  # its name
    # the API, by path
    with pytest.raises(UserError, match="was distilled on texts of evaluation dataset"):
        nlgbench.run(leak_spec(train_file, str(trained.out)), tmp_path / "api-run", quiet=True)
    assert not (tmp_path / "api-run" / "cells").exists()  # refused before any cell
    # imported under a Hub-style id: the snapshot is a copy, found through the cache
    snapshot = import_model(trained.out, "me/student")
    assert (snapshot / training_texts.DISTILL_FILE).is_file()
    assert leakage.student_folder("me/student") == snapshot
    with pytest.raises(UserError, match=r"student me/student \(.*\) was distilled"):
        nlgbench.run(leak_spec(train_file, "me/student"), tmp_path / "api-import", quiet=True)
    spec = tmp_path / "leak.yaml"
    spec.write_text(json.dumps(leak_spec(train_file, "me/student")), encoding="utf-8")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub")}
    for extra in ([], ["--dry-run"]):
        proc = subprocess.run(
            [sys.executable, "-m", "nlgbench.cli", "run", str(spec), "--out", str(tmp_path / "cli"), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("nlgbench: error: student me/student (") and "--allow-overlap" in line
    assert not (tmp_path / "cli" / "cells").exists()


def test_each_cell_checks_again_and_records_that_it_did(trained: DistillResult, tmp_path: Path) -> None:
    """A cell folder prepared by hand (or a Slurm task whose spec checks were skipped) still refuses the
    leak: the worker checks the data it loaded; an ok cell records the check in result.json."""
    from nlgbench.core.spec import parse_spec
    from nlgbench.execution.local import execute

    train_file = trained.out.parent / next(iter(trained.record["data"]["sources"][0]["files"]))  # its name
    (leaking,) = parse_spec(leak_spec(train_file, str(trained.out))).cells()
    result = execute(leaking, tmp_path / "leaking")
    assert not result.ok and result.error is not None and "was distilled on texts of evaluation dataset" in result.error
    fresh = own_data(tmp_path / "fresh.jsonl", synthetic_rows(6, seed=7))
    (clean,) = parse_spec(leak_spec(fresh, str(trained.out))).cells()
    result = execute(clean, tmp_path / "clean")
    assert result.ok, result.error
    recorded = json.loads((tmp_path / "clean" / "result.json").read_text())["scorer"]["leakage_guard"]
    assert (
        recorded == f"{trained.out}: distilled student, no overlap with {result.dataset.name if result.dataset else ''}"
    )


def test_pairs_files_follow_the_data_loaders_reading_rules(tmp_path: Path) -> None:
    """One reading rule for every data file: TSV fields verbatim (a `"` is text, no
    quoting swallows tabs or lines), lines end at \\n only (U+2028 stays inside its text), and a JSONL
    key given twice is refused, not silently the last."""
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text('reference\tcandidate\n"quoted start\tend" here\nsecond\u2028line\tc2\n', encoding="utf-8")
    pairs, _, _ = gather_pairs([str(tsv)], max_pairs=None, augment=0, seed=0, log=lambda _m: None)
    assert [(p.reference, p.candidate) for p in pairs] == [('"quoted start', 'end" here'), ("second\u2028line", "c2")]
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text('{"reference": "a", "candidate": "b", "candidate": "c"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"pairs.jsonl line 1: duplicate key 'candidate'"):
        gather_pairs([str(jsonl)], max_pairs=None, augment=0, seed=0, log=lambda _m: None)


def test_distill_checks_the_device_as_score_does(tmp_path: Path, tiny_dir: Path) -> None:
    """One device check (`nlgbench.measurement.devices.check_device`) for score and distill: a bad or missing
    device is one line before any pair is read or model loaded."""
    from nlgbench.measurement.devices import check_device

    pairs = write_jsonl(tmp_path / "pairs.jsonl", synthetic_rows(20, seed=3))
    for device in ("gpu", "cuda:99" if torch.cuda.is_available() else "cuda"):
        with pytest.raises(UserError) as info:
            distill([str(pairs)], CHRF, config(tiny_dir), tmp_path / "out", device=device, log=lambda _m: None)
        with pytest.raises(UserError) as direct:
            check_device(device)
        assert str(info.value) == str(direct.value)
    assert not (tmp_path / "out").exists()
