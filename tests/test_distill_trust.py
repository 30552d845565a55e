"""`nlgbench distill` at its edges: the leakage guard and the holdout compare Unicode-equivalent texts
as one; labels, losses and validations that are not finite stop a run before a student is written;
checkpoints are checked (digest, shape, the files they name) before a run resumes from them, and an
interrupted save leaves the previous one intact. Tiny students as in tests/test_distill.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import unicodedata
from pathlib import Path

import pytest

import test_distill
from nlgbench.cli import main
from nlgbench.data import training_texts
from nlgbench.data.catalogue import cache_dir
from nlgbench.data.loaders import load_dataset
from nlgbench.distillation.holdout import Holdout
from nlgbench.distillation.pairs import Pair, gather_pairs
from nlgbench.distillation.pipeline import DistillResult, distill
from nlgbench.distillation.shards import SHARD_SIZE, plan_shards
from nlgbench.execution import leakage
from nlgbench.foundations.errors import UserError
from test_distill import CHRF, config, own_data

pytestmark = [pytest.mark.component, pytest.mark.usefixtures("one_torch_thread")]

tiny_dir = test_distill.tiny_dir

# words with accents, each written in NFC (one code point per accented letter)
ACCENTED = "café naïve résumé über façade señor jalapeño crème brûlée déjà vu piñata fiancée".split()


def accented_rows(n: int) -> list[dict[str, str]]:
    """`n` distinct (reference, candidate) pairs of accented words, in NFC."""
    rows = []
    for i in range(n):
        words = [ACCENTED[(i + k) % len(ACCENTED)] for k in range(4 + i % 5)] + [str(i)]
        rows.append({"reference": " ".join(words), "candidate": " ".join(words[: 2 + i % 3])})
    return rows


def in_form(rows: list[dict[str, str]], form: str) -> list[dict[str, str]]:
    return [{k: unicodedata.normalize(form, v) for k, v in row.items()} for row in rows]


def quiet(_message: str) -> None:
    pass


@pytest.fixture(scope="module")
def accented_student(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> DistillResult:
    """A student distilled (one epoch) on 40 pairs of NFC texts."""
    tmp = tmp_path_factory.mktemp("accented")
    data = own_data(tmp / "nfc.jsonl", accented_rows(40))
    return distill([str(data)], CHRF, config(tiny_dir, epochs=1, batch_size=8), tmp / "student", log=quiet)


def test_the_guard_refuses_the_training_data_in_any_unicode_normal_form(
    accented_student: DistillResult, tmp_path: Path
) -> None:
    rows = accented_rows(40)
    nfd = in_form(rows, "NFD")
    assert nfd != rows  # the same texts, encoded otherwise
    for name, form_rows in (("nfc", rows), ("nfd", nfd)):
        dataset = load_dataset(path=own_data(tmp_path / f"{name}.jsonl", form_rows))
        (line,) = leakage.check_leakage(accented_student.out, [dataset])
        assert "40 of 40 items" in line, name
    assert accented_student.record["data"]["texts_form"] == "NFC"


def test_a_student_recorded_before_normalisation_is_still_recognised(
    accented_student: DistillResult, tmp_path: Path
) -> None:
    """A distill.json without `data.texts_form` holds hashes of the texts as written: an NFC or ASCII
    text hashes as before (NFC leaves it as it is), and a student trained on NFD texts is refused on
    the same data in NFC too (its evaluation texts are hashed as NFC, NFD and as written)."""
    ascii_text = "the cat  sat\ton the mat"
    old_formula = hashlib.sha256(" ".join(ascii_text.split()).encode("utf-8")).hexdigest()[:16]
    assert training_texts.text_hash(ascii_text) == old_formula
    assert training_texts.text_hash("café") == hashlib.sha256("café".encode()).hexdigest()[:16]

    old = tmp_path / "old-student"
    shutil.copytree(accented_student.out, old)
    record = json.loads((old / training_texts.DISTILL_FILE).read_text(encoding="utf-8"))
    record["data"].pop("texts_form", None)
    (old / training_texts.DISTILL_FILE).write_text(json.dumps(record), encoding="utf-8")
    nfd_pairs = [(r["reference"], r["candidate"]) for r in in_form(accented_rows(40), "NFD")]
    old_units = [f"r:{hashlib.sha256(ref.encode()).hexdigest()[:16]}" for ref, _ in nfd_pairs]
    (old / training_texts.TEXTS_FILE).write_text("".join(u + "\n" for u in old_units), encoding="utf-8")
    nfc = load_dataset(path=own_data(tmp_path / "nfc.jsonl", accented_rows(40)))
    (line,) = leakage.check_leakage(old, [nfc])
    assert "40 of 40 items" in line


def test_a_record_of_a_newer_format_is_one_line_and_one_without_a_format_reads_as_format_1(
    accented_student: DistillResult, tmp_path: Path
) -> None:
    """distill.json says its format like a run folder's files: a newer one is refused in one line naming
    both formats; a record written before the field existed reads as format 1."""
    assert accented_student.record["format"] == training_texts.DISTILL_FORMAT
    nfc = load_dataset(path=own_data(tmp_path / "nfc.jsonl", accented_rows(40)))
    for name, found in (("newer", training_texts.DISTILL_FORMAT + 1), ("unmarked", None)):
        student = shutil.copytree(accented_student.out, tmp_path / name)
        path = student / training_texts.DISTILL_FILE
        record = json.loads(path.read_text(encoding="utf-8"))
        record.pop("format")
        path.write_text(json.dumps(record if found is None else {"format": found, **record}), encoding="utf-8")
        if found is None:
            (line,) = leakage.check_leakage(student, [nfc])
            assert "40 of 40 items" in line
            continue
        with pytest.raises(UserError) as refused:
            leakage.check_leakage(student, [nfc])
        message = str(refused.value)
        assert "\n" not in message and str(path) in message, message
        assert f"format {found}, newer than" in message and f"(format {training_texts.DISTILL_FORMAT})" in message


def test_the_holdout_removes_pairs_of_a_held_out_text_in_another_normal_form(tmp_path: Path) -> None:
    rows = accented_rows(6)
    held = own_data(tmp_path / "held.jsonl", in_form(rows[:3], "NFD"))
    holdout = Holdout.load([str(held)])
    pairs = [Pair(r["reference"], r["candidate"], "pairs") for r in rows]  # NFC
    kept = holdout.remove(pairs)
    assert kept == pairs[3:] and holdout.removed_total == 3
    holdout.check(kept)  # the guard's own test agrees: nothing of the held-out data is left


@pytest.mark.parametrize("bad", ["1e300", "Infinity", "NaN", '"0.5"'])
def test_a_cached_label_that_is_no_finite_score_is_labelled_again(
    accented_student: DistillResult, tmp_path: Path, tiny_dir: Path, bad: str
) -> None:
    """A label shard edited in the cache (a huge number, JSON's Infinity / NaN, a string) is not
    trained on: the shard is labelled again, and the student is the one the true labels give."""
    data = accented_student.out.parent / "nfc.jsonl"
    pairs, _, _ = gather_pairs([str(data)], max_pairs=None, augment=0, seed=0, log=quiet)
    (planned,) = plan_shards(pairs, SHARD_SIZE)  # 40 pairs: one shard
    shard = cache_dir() / accented_student.record["labels"]["shard_folder"] / f"{planned.key}.json"
    text = shard.read_text(encoding="utf-8")
    labels = json.loads(text)["labels"]
    shard.write_text(text.replace(json.dumps(labels[7]), bad, 1), encoding="utf-8")
    lines: list[str] = []
    again = distill([str(data)], CHRF, config(tiny_dir, epochs=1, batch_size=8), tmp_path / "s", log=lines.append)
    assert any(line.startswith(f"labels: ignoring the unreadable shard {shard}") for line in lines)
    assert again.record["labels"]["shards_labelled"] == 1 and json.loads(shard.read_text())["labels"] == labels
    assert again.record["validation"] == accented_student.record["validation"]


def test_a_diverging_training_stops_with_one_line_and_writes_no_student(
    accented_student: DistillResult, tmp_path: Path, tiny_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A learning rate of 1e30 blows the weights up at the first step: the validation after it (3 steps
    an epoch, validated at each) is NaN and training stops there (exit 2, one line); with one validation
    an epoch, the training loss of the next step stops it. No student is written, so none scores NaN."""
    data = accented_student.out.parent / "nfc.jsonl"
    out = tmp_path / "student"
    argv = ["distill", "--teacher-metric", "chrf", "--student", str(tiny_dir), "--pairs", str(data)]
    argv += ["--epochs", "1", "--batch-size", "8", "--max-length", "64", "--lr", "1e30", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "nlgbench: error: training stopped: the validation MSE at step 1 is nan; no student written: "
        f"lower --lr (and delete {out}.partial, its checkpoints), or check the teacher's labels"
    )
    assert not out.exists()
    cfg = config(tiny_dir, epochs=1, batch_size=8, lr=1e30, evals_per_epoch=1)
    with pytest.raises(UserError, match=r"^training stopped: the training loss at step 2 is nan; no student written"):
        distill([str(data)], CHRF, cfg, tmp_path / "other", log=quiet)
    assert not (tmp_path / "other").exists()
