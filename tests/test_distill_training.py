"""`nlgbench distill` training mechanics on a tiny random BERT: checkpoints and --resume (an interrupted
run resumed ends with the uninterrupted run's weights, exactly, on CPU, also from the best checkpoint
where the last is damaged), refusal of a changed configuration or a foreign checkpoint, Ctrl-C inside
a checkpoint write, gradient accumulation's step count, --max-length auto, the curve in distill.json and
its figure. The synthetic task and teacher (chrF) are those of tests/test_distill.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

import test_distill
from nlgbench.cli import main
from nlgbench.cli.distill_parser import add_distill_arguments
from nlgbench.data.training_texts import DISTILL_FILE
from nlgbench.distillation.checkpoint import INDEX, checkpoint_folder
from nlgbench.distillation.curve import CURVE_FILE
from nlgbench.distillation.pipeline import DistillResult, distill
from nlgbench.distillation.steplog import BAR_INTERVAL
from nlgbench.distillation.student import choose_max_length
from nlgbench.foundations.errors import UserError
from test_distill import CHRF, config, own_data, synthetic_rows

pytestmark = [pytest.mark.component, pytest.mark.usefixtures("one_torch_thread")]

PAIRS = 200  # 20 references held out: 180 training pairs, 23 batches of 8, 12 steps of 2 batches per epoch
TRAINING = {"epochs": 3, "batch_size": 8, "accumulate": 2, "evals_per_epoch": 2, "max_length": "auto"}


class Interrupted(Exception):
    """Raised from the log after a given number of checkpoints: the run stops as if killed."""


# the same tiny student as tests/test_distill.py (its fixture, shared); one torch thread from tests/shared_fixtures.py
tiny_dir = test_distill.tiny_dir


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return own_data(tmp_path_factory.mktemp("data") / "train.jsonl", synthetic_rows(PAIRS, seed=3))


def quiet(_message: str) -> None:
    pass


def interrupt_after(checkpoints: int) -> Any:
    """A log that raises `Interrupted` once it has reported `checkpoints` checkpoints."""
    seen: list[str] = []

    def log(message: str) -> None:
        if message.startswith("checkpoint: "):
            seen.append(message)
            if len(seen) == checkpoints:
                raise Interrupted(message)

    return log


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path, data_file: Path) -> DistillResult:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("whole") / "student"
    return distill([str(data_file)], CHRF, config(tiny_dir, **TRAINING), out, checkpoint_every=4, log=quiet)


def weights(result: DistillResult) -> dict[str, torch.Tensor]:
    return load_file(next(result.out.glob("*.safetensors")))


def test_an_interrupted_run_resumed_ends_with_the_uninterrupted_weights(
    tmp_path: Path, tiny_dir: Path, data_file: Path, uninterrupted: DistillResult
) -> None:
    out = tmp_path / "student"
    cfg = config(tiny_dir, **TRAINING)
    # checkpoints at steps 4, 6 (a validation), 8: interrupted after the one at step 8, mid-epoch (16 of 23 batches)
    with pytest.raises(Interrupted, match="step 8 "):
        distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, log=interrupt_after(3))
    partial = checkpoint_folder(out)
    assert partial.name == "student.partial" and not out.exists()
    index = json.loads((partial / INDEX).read_text())
    assert index["last"]["file"] == "step-00000008.pt" and index["best"]["step"] in (0, 6)  # a validation's
    files = sorted(p.name for p in partial.iterdir())
    assert files == sorted({INDEX, index["last"]["file"], index["best"]["file"]})  # the last and the best only
    saved = torch.load(partial / index["last"]["file"], weights_only=True)
    assert saved["fit"]["step"] == 8 and saved["fit"]["epoch"] == 0 and saved["fit"]["batch"] == 16
    seen = saved["fit"]["seen"]
    assert seen == sum(len(b) for b in saved["order"][:16]) and 120 <= seen <= 128  # one batch of 180 has 4 pairs

    # a run without --resume would overwrite it: refused; a changed configuration: refused, naming what changed
    with pytest.raises(UserError, match="add --resume"):
        distill([str(data_file)], CHRF, cfg, out, log=quiet)
    with pytest.raises(UserError, match=r"another configuration \(lr 0.001 -> 0.002\)"):
        distill([str(data_file)], CHRF, config(tiny_dir, **{**TRAINING, "lr": 2e-3}), out, resume=True, log=quiet)
    other_pairs = own_data(tmp_path / "other.jsonl", synthetic_rows(PAIRS, seed=4))
    with pytest.raises(UserError, match="the pairs or their teacher labels"):
        distill([str(other_pairs)], CHRF, cfg, out, resume=True, log=quiet)

    resumed = distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, resume=True, log=quiet)
    # exact equality: on CPU, one thread, the same operations in the same order give the same bits
    whole, again = weights(uninterrupted), weights(resumed)
    assert whole.keys() == again.keys() and all(torch.equal(whole[k], again[k]) for k in whole)

    def curve(result: DistillResult) -> list[dict[str, Any]]:
        return result.record["training"]["curve"]

    assert curve(resumed) == curve(uninterrupted) and len(curve(resumed)) == 1 + 3 * 2
    training = resumed.record["training"]
    assert training["resumed_from"] == [{"step": 8, "pairs_seen": seen}]
    assert uninterrupted.record["training"]["resumed_from"] == []
    assert training["steps"] == uninterrupted.record["training"]["steps"] == 36
    assert not partial.exists()  # removed once the student is written


def test_resume_without_a_checkpoint_starts_afresh(
    tmp_path: Path, tiny_dir: Path, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tiny_dir, **{**TRAINING, "epochs": 1})
    start = time.perf_counter()
    result = distill([str(data_file)], CHRF, cfg, tmp_path / "student", resume=True, log=quiet)
    elapsed = time.perf_counter() - start
    assert result.record["training"]["resumed_from"] == [] and result.record["training"]["steps"] == 12
    # stderr is no terminal here: the progress bar is drawn at the start and the end, again after each
    # validation line written above it, and at most every BAR_INTERVAL seconds besides; not at each of
    # the 12 steps (a log file stays short)
    draws = capsys.readouterr().err.count("student:")
    validations = len(result.record["training"]["curve"]) - 1  # 2: at steps 6 and 12
    assert BAR_INTERVAL == 30.0 and validations == 2
    assert 2 <= draws <= 2 + validations + math.ceil(elapsed / BAR_INTERVAL)


@pytest.mark.parametrize(("patience", "steps", "reason"), [(2, 18, "early stop (patience 2)"), (3, 24, "epochs done")])
def test_patience_stops_early_but_a_run_that_reaches_its_last_step_is_done(
    tmp_path: Path, tiny_dir: Path, data_file: Path, patience: int, steps: int, reason: str
) -> None:
    """A learning rate too small to move float32 weights: every validation after the first epoch is
    stale. 12 steps per epoch, validated every 6: stale at steps 12, 18, 24, so patience 2 stops at
    18 of 24 and patience 3 runs out exactly at the last step, which is the planned end, not a stop."""
    changes = {**TRAINING, "epochs": 2, "lr": 1e-12, "patience": patience}
    training = distill([str(data_file)], CHRF, config(tiny_dir, **changes), tmp_path / "s", log=quiet).record[
        "training"
    ]
    assert [p["step"] for p in training["curve"]] == [0, 6, 12, 18, 24][: steps // 6 + 1]
    assert training["steps"] == steps and training["stop_reason"] == reason


def test_the_last_validation_is_not_repeated_two_steps_before_the_end(
    tmp_path: Path, tiny_dir: Path, data_file: Path
) -> None:
    """180 pairs, batches of 8, no accumulation: 23 steps, validated every 23 // 2 = 11 steps: at 11 and
    23; not at 22 as well (1 step before the end, under half an interval)."""
    changes = {**TRAINING, "epochs": 1, "accumulate": 1, "evals_per_epoch": 2}
    training = distill([str(data_file)], CHRF, config(tiny_dir, **changes), tmp_path / "s", log=quiet).record[
        "training"
    ]
    assert [p["step"] for p in training["curve"]] == [0, 11, 23]


@pytest.mark.parametrize(("accumulate", "steps"), [(1, 23), (3, 8), (30, 1)])
def test_accumulation_counts_optimizer_steps(
    tmp_path: Path, tiny_dir: Path, data_file: Path, accumulate: int, steps: int
) -> None:
    """180 training pairs in batches of 8: 23 batches, ceil(23 / K) optimizer steps per epoch."""
    changes = {**TRAINING, "epochs": 1, "accumulate": accumulate, "evals_per_epoch": 1}
    result = distill([str(data_file)], CHRF, config(tiny_dir, **changes), tmp_path / "s", log=quiet)
    training = result.record["training"]
    assert training["steps"] == training["steps_planned"] == steps == math.ceil(23 / accumulate)
    assert training["pairs_seen"] == result.record["data"]["train_pairs"] == 180
    assert training["effective_batch"] == 8 * accumulate
    # the warm-up and decay run over the optimizer steps: the learning rate is back near 0 at the last one
    assert training["curve"][-1]["lr"] < 1e-3 * 2 / steps + 1e-12


def test_max_length_auto_covers_the_99th_percentile() -> None:
    lengths = list(range(1, 201))  # the 99th percentile lies between 198 and 199 tokens: 199, so 200
    assert choose_max_length(lengths, 512) == {
        "value": 200,
        "chosen": "auto",
        "percentile": 99,
        "percentile_tokens": 199,
        "longest_tokens": 200,
        "model_max": 512,
    }
    assert choose_max_length(lengths, 64)["value"] == 64  # capped by the model's maximum
    assert choose_max_length([17] * 50, 512)["value"] == 24
    assert choose_max_length([16] * 199 + [300], 512)["value"] == 16  # one outlier in 200 is cut
    assert choose_max_length(list(range(1, 101)), 512)["value"] == 104  # 99.01 tokens: 100 needed


def test_distill_json_holds_the_curve_and_the_choices(uninterrupted: DistillResult) -> None:
    record = json.loads((uninterrupted.out / DISTILL_FILE).read_text())
    training = record["training"]
    chosen = training["max_length"]
    assert chosen["chosen"] == "auto" and chosen["value"] % 8 == 0
    assert chosen["value"] == 8 * math.ceil(chosen["percentile_tokens"] / 8) <= chosen["longest_tokens"] + 7
    assert training["truncated_pairs"] <= 0.01 * 180 + 20  # at most 1% of the training pairs (+ validation)
    assert record["hyperparameters"]["max_length"] == "auto" and record["hyperparameters"]["accumulate"] == 2
    assert training["stop_reason"] == "epochs done" and training["epochs_run"] == 3
    assert training["pairs_seen"] == 3 * 180 and training["effective_batch"] == 16
    curve = training["curve"]
    assert [p["step"] for p in curve] == [0, 6, 12, 18, 24, 30, 36]
    assert [p["pairs_seen"] for p in curve][1:] == sorted({p["pairs_seen"] for p in curve[1:]})
    assert curve[-1]["pairs_seen"] == 540 and set(curve[0]) == {"step", "pairs_seen", "val_mse", "val_pearson", "lr"}
    assert curve[-1]["val_mse"] < curve[0]["val_mse"]


def test_the_curve_is_drawn_beside_distill_json(uninterrupted: DistillResult) -> None:
    png = uninterrupted.out / CURVE_FILE
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_the_command_line_takes_the_training_options() -> None:
    parser = argparse.ArgumentParser()
    add_distill_arguments(parser)
    base = ["--teacher-metric", "chrf", "--student", "s", "--pairs", "p", "--out", "o"]
    args = parser.parse_args(base)
    assert (args.max_length, args.accumulate, args.resume, args.checkpoint_every) == ("auto", 2, False, None)
    args = parser.parse_args([*base, "--max-length", "96", "--accumulate", "4", "--resume", "--checkpoint-every", "50"])
    assert (args.max_length, args.accumulate, args.resume, args.checkpoint_every) == (96, 4, True, 50)
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--max-length", "long"])


def interrupted_folder(tmp_path: Path, tiny_dir: Path, data_file: Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoints of a run stopped after its checkpoint at step 8 (as in the first test): the
    student's folder (not written) and the checkpoint index."""
    out = tmp_path / "student"
    with pytest.raises(Interrupted, match="step 8 "):
        distill([str(data_file)], CHRF, config(tiny_dir, **TRAINING), out, checkpoint_every=4, log=interrupt_after(3))
    return out, json.loads((checkpoint_folder(out) / INDEX).read_text())


def test_a_damaged_last_checkpoint_falls_back_to_the_best_and_ends_with_the_same_weights(
    tmp_path: Path, tiny_dir: Path, data_file: Path, uninterrupted: DistillResult
) -> None:
    """64 bytes flipped in the middle of the last checkpoint: its sha256 no longer matches the index,
    so the run resumes from the best checkpoint (an earlier step of the same run), says so, and still
    ends with the uninterrupted run's weights. With the best damaged too: one line, nothing resumed."""
    out, index = interrupted_folder(tmp_path, tiny_dir, data_file)
    partial = checkpoint_folder(out)
    last = partial / index["last"]["file"]
    data = bytearray(last.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    saved_last = bytes(data)
    last.write_bytes(saved_last)
    assert index["best"]["file"] != index["last"]["file"]

    best = partial / index["best"]["file"]
    saved_best = best.read_bytes()
    best.write_bytes(saved_best[:-10])  # the best one truncated as well: nothing to fall back to
    cfg = config(tiny_dir, **TRAINING)
    with pytest.raises(UserError, match=r"^--resume: the checkpoint .*step-00000008.pt does not match the sha256"):
        distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, resume=True, log=quiet)
    best.write_bytes(saved_best)

    lines: list[str] = []
    resumed = distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, resume=True, log=lines.append)
    step = index["best"]["step"]
    assert (
        f"checkpoint: {last} does not match the sha256 {INDEX} records (damaged or changed since it was written); "
        f"resuming from the best checkpoint instead, at step {step}"
    ) in lines
    assert f"train: resumed from the checkpoint at step {step} of 36" in " ".join(lines)
    whole, again = weights(uninterrupted), weights(resumed)
    assert all(torch.equal(whole[k], again[k]) for k in whole)


def test_a_foreign_or_tampered_checkpoint_is_refused_with_one_line(
    tmp_path: Path, tiny_dir: Path, data_file: Path
) -> None:
    """Checkpoint files that are not what distill writes, even with a matching sha256 (edited on
    purpose): a bare tensor, a fingerprint without hyperparameters, a loop course with a foreign key,
    an index naming a file outside the folder; and a folder of the first format (`last.pt`)."""
    out, index = interrupted_folder(tmp_path, tiny_dir, data_file)
    partial = checkpoint_folder(out)
    original = json.loads(json.dumps(index))
    last = partial / index["last"]["file"]
    state = torch.load(last, weights_only=True)
    cfg = config(tiny_dir, **TRAINING)

    def resume_with(payload: Any) -> str:
        torch.save(payload, last)
        index["last"]["sha256"] = hashlib.sha256(last.read_bytes()).hexdigest()
        (partial / INDEX).write_text(json.dumps(index))
        with pytest.raises(UserError) as caught:
            distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, resume=True, log=quiet)
        message = str(caught.value)
        assert "\n" not in message and message.startswith("--resume: ") and "delete" in message
        return message

    assert "(a Tensor, not a dict)" in resume_with(torch.zeros(3))
    fingerprint = {k: v for k, v in state["fingerprint"].items() if k != "hyperparameters"}
    assert "its fingerprint is not" in resume_with({**state, "fingerprint": fingerprint})
    message = resume_with({**state, "fit": {**state["fit"], "intruder": 1}})
    assert "does not fit this run" in message and "intruder" in message
    message = resume_with({**state, "fit": {**state["fit"], "stale": "0"}})
    assert "does not fit this run" in message and "stale" in message
    assert "says step 8" in resume_with({**state, "fit": {**state["fit"], "step": 7}})

    outside = tmp_path / "outside.pt"
    torch.save(state, outside)
    (partial / INDEX).write_text(json.dumps({**original, "last": {**original["last"], "file": "../../../outside.pt"}}))
    with pytest.raises(UserError, match=r"its 'last' entry is not a state file of this folder"):
        distill([str(data_file)], CHRF, cfg, out, checkpoint_every=4, resume=True, log=quiet)

    shutil.rmtree(partial)
    partial.mkdir()
    (partial / "last.pt").write_bytes(b"a checkpoint of the first format")
    with pytest.raises(UserError, match="add --resume"):
        distill([str(data_file)], CHRF, cfg, out, log=quiet)
    with pytest.raises(UserError, match=r"holds a checkpoint of an older format; delete it"):
        distill([str(data_file)], CHRF, cfg, out, resume=True, log=quiet)


CTRL_C_PROBE = """
import json, signal, sys
from pathlib import Path
from nlgbench.cli import main
from nlgbench.distillation.checkpoint import INDEX, checkpoint_folder

argv = json.loads(sys.argv[1])
partial = checkpoint_folder(Path(argv[argv.index("--out") + 1]))
writes = []

def profile(frame, event, _arg):
    code = frame.f_code
    if event == "call" and code.co_name == "write" and code.co_filename.endswith("checkpoint.py"):
        if (partial / INDEX).is_file() and json.loads((partial / INDEX).read_text())["last"]["step"] == 2:
            writes.append(1)
            if len(writes) == 3:
                sys.setprofile(None)
                signal.raise_signal(signal.SIGINT)

sys.setprofile(profile)
code = main(argv)
sys.setprofile(None)
print(json.dumps({"code": code, "writes": len(writes)}))
"""


@pytest.mark.integration  # a process of its own: a profile hook and a real SIGINT
def test_ctrl_c_inside_a_checkpoint_write_is_held_until_it_is_whole_then_exits_130(
    tmp_path: Path, tiny_dir: Path, data_file: Path
) -> None:
    """A real SIGINT raised while torch's writer is writing a checkpoint's bytes (the third write call
    of the second checkpoint of training) is held until that checkpoint is whole: exit 130 with the line
    saying how to resume, no temporary file, the index naming the new checkpoint and every file it
    names matching its sha256; then --resume finishes."""
    out = tmp_path / "student"
    argv = ["distill", "--teacher-metric", "chrf", "--student", str(tiny_dir), "--pairs", str(data_file)]
    argv += ["--epochs", "1", "--batch-size", "8", "--max-length", "64", "--checkpoint-every", "2", "--out", str(out)]
    partial = checkpoint_folder(out)
    probe = subprocess.run(
        [sys.executable, "-c", CTRL_C_PROBE, json.dumps(argv)], capture_output=True, text=True, timeout=600
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == {"code": 130, "writes": 3}
    assert probe.stderr.strip().splitlines()[-1] == (
        "nlgbench: interrupted; run the same command again with --resume to continue from where it stopped"
    )
    index = json.loads((partial / INDEX).read_text())
    assert index["last"]["step"] > 2  # the checkpoint being written when Ctrl-C came, finished first
    named = {index["last"]["file"], index["best"]["file"]}
    assert sorted(p.name for p in partial.iterdir()) == sorted({INDEX, *named})  # no temporary file left
    for entry in (index["last"], index["best"]):
        assert hashlib.sha256((partial / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    assert main([*argv, "--resume"]) == 0 and not partial.exists()
