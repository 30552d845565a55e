"""Distillation pairs at scale (kinds, dedup, determinism, random share, holdout and the leakage
guard) and resumable sharded labelling (a labelling killed mid-way resumes and relabels nothing),
on small own-data files and a tiny random BERT teacher (mechanics only, never real correlations)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import write_jsonl
from nlgbench.cli.parser import build_parser
from nlgbench.data import training_texts
from nlgbench.data.loaders import load_dataset
from nlgbench.distillation.augment import SCALE_EDITS, synthetic_candidates
from nlgbench.distillation.pairs import Pair, gather_pairs
from nlgbench.distillation.pairs import kinds as pair_kinds
from nlgbench.distillation.shards import SHARD_SIZE, plan_shards
from nlgbench.distillation.teacher import Teacher, teacher_labels
from nlgbench.execution import leakage
from nlgbench.foundations.errors import UserError
from tiny import make_tiny_bert

pytestmark = pytest.mark.integration

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
QUIET = {"log": lambda _m: None}


def sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, rng.randint(5, 10)))


def mqm_like(path: Path, segments: int, seed: int, systems: int = 3) -> Path:
    """Several systems per source, two references each (a paraphrase pair per source)."""
    rng = random.Random(seed)
    rows = []
    for seg in range(1, segments + 1):
        refs = [sentence(rng), sentence(rng)]
        for s in range(systems):
            rows.append(
                {
                    "lp": "zh-en",
                    "seg_id": seg,
                    "system": f"sys{s}",
                    "source": f"src {seed} {seg}",
                    "references": refs,
                    "hypothesis": sentence(rng),
                    "human": rng.random(),
                }
            )
    return write_jsonl(path, rows)


def da_like(path: Path, segments: int, seed: int, shared: list[str] = ()) -> Path:  # type: ignore[assignment]
    """One output per source; the first references may be given (`shared`: texts of other data)."""
    rng = random.Random(seed)
    rows = []
    for seg in range(1, segments + 1):
        ref = shared[seg - 1] if seg <= len(shared) else sentence(rng)
        rows.append(
            {"lp": "de-en", "seg_id": seg, "source": f"q {seed} {seg}", "reference": ref, "hypothesis": sentence(rng)}
        )
        rows[-1]["human"] = rng.random()
    return write_jsonl(path, rows)


def student_folder(folder: Path, pairs: list[Pair]) -> Path:
    """What the leakage guard reads of a student: distill.json and the training texts' hashes."""
    folder.mkdir()
    (folder / training_texts.DISTILL_FILE).write_text(json.dumps({"data": {"texts_file": training_texts.TEXTS_FILE}}))
    hashes = training_texts.training_hashes((p.reference, p.candidate) for p in pairs)
    (folder / training_texts.TEXTS_FILE).write_text("".join(h + "\n" for h in hashes))
    return folder


def test_pairs_at_scale_have_every_kind_once_each_and_are_seeded(tmp_path: Path) -> None:
    mqm = mqm_like(tmp_path / "mqm.jsonl", 30, seed=1)
    da = da_like(tmp_path / "da.jsonl", 40, seed=2)
    args: dict[str, Any] = {"max_pairs": None, "augment": 3, "seed": 0, "random_share": 0.2, **QUIET}
    pairs, sources, counts = gather_pairs([str(mqm), str(da)], **args)
    kinds = Counter(p.kind for p in pairs)
    # MQM-like: 30 sources x 3 systems x 2 references, and 2 ordered paraphrase pairs per source; DA-like: 40
    assert [s.pairs for s in sources] == [30 * 3 * 2 + 30 * 2, 40]
    assert kinds["system"] == 30 * 3 * 2 + 40 and kinds["paraphrase"] == 60
    assert kinds["synthetic"] == counts["synthetic"] > 0 and kinds["random"] == counts["random"] > 0
    assert list(pair_kinds(pairs)) == ["system", "paraphrase", "synthetic", "random"]
    # the random pairs are the stated share, and each pairs a reference with another source's candidate
    assert kinds["random"] / len(pairs) == pytest.approx(0.2, abs=0.01)
    partners: dict[str, set[str]] = {}
    for p in pairs:
        if p.kind != "random":
            partners.setdefault(p.reference, set()).add(p.candidate)
    assert all(p.candidate not in partners[p.reference] for p in pairs if p.kind == "random")
    # deduplicated (exact text pairs), deterministic for a seed, another seed another draw
    assert len({(p.reference, p.candidate) for p in pairs}) == len(pairs)
    assert gather_pairs([str(mqm), str(da)], **args)[0] == pairs
    other = gather_pairs([str(mqm), str(da)], **{**args, "seed": 1})[0]
    assert other != pairs and Counter(p.kind for p in other)["system"] == kinds["system"]
    # a duplicated source adds nothing
    again, _, twice = gather_pairs([str(mqm), str(da), str(da)], **{**args, "random_share": 0.0, "augment": 0})
    assert twice["duplicate"] == 40 and len(again) == kinds["system"] + kinds["paraphrase"]
    with pytest.raises(UserError, match="random-share must be between 0 and 0.5"):
        gather_pairs([str(da)], **{**args, "random_share": 0.9})


def test_scale_edits_include_span_deletions_and_corpus_insertions() -> None:
    refs = [" ".join(random.Random(i).sample(WORDS, 10)) for i in range(30)]
    made = synthetic_candidates(refs, len(SCALE_EDITS), seed=0, edits=SCALE_EDITS)
    assert {s.edit for s in made} == set(SCALE_EDITS)
    vocabulary = set(WORDS)
    for s in made:
        ref, cand = s.reference.split(), s.candidate.split()
        if s.edit == "delete":  # one contiguous span gone
            cut = len(ref) - len(cand)
            assert 0 < cut and any(ref[:i] + ref[i + cut :] == cand for i in range(len(ref)))
        if s.edit == "insert":  # the reference's words in order, with corpus words among them
            assert len(cand) > len(ref) and set(cand) <= vocabulary
            rest = iter(cand)
            assert all(w in rest for w in ref)


def test_holdout_removes_every_evaluation_text_and_the_leakage_guard_passes(tmp_path: Path) -> None:
    evaluation = mqm_like(tmp_path / "eval.jsonl", 10, seed=7)
    eval_data = load_dataset(path=evaluation)
    eval_refs = list(dict.fromkeys(r for it in eval_data.items for r in it.references))
    # training data sharing 8 references with the evaluation data (and a source text used as a reference)
    train = da_like(tmp_path / "train.jsonl", 50, seed=3, shared=[*eval_refs[:8], eval_data.items[0].source])
    args: dict[str, Any] = {"max_pairs": None, "augment": 2, "seed": 0, "random_share": 0.1, **QUIET}

    leaky, _, _ = gather_pairs([str(train)], **args)
    guard = leakage.check_leakage(student_folder(tmp_path / "leaky", leaky), [eval_data])
    assert len(guard) == 1 and "evaluation dataset 'eval'" in guard[0]  # without holdout the guard fires

    pairs, _, counts = gather_pairs([str(train)], **args, holdout=[str(evaluation)])
    held = {training_texts.text_hash(t) for it in eval_data.items for t in (it.source, *it.references)}
    assert all(training_texts.text_hash(t) not in held for p in pairs for t in (p.reference, p.candidate))
    assert counts["held_out"]["pairs"] == counts["held_out"]["by_dataset"]["eval"] == 9  # 9 system pairs
    assert counts["held_out"]["texts"] == len(held)
    assert leakage.check_leakage(student_folder(tmp_path / "clean", pairs), [eval_data]) == []
    with pytest.raises(UserError, match="both a --pairs source and held out"):
        gather_pairs([str(train)], **args, holdout=[f"x,{train}"])


# --- labelling in shards --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_teacher(tmp_path_factory: pytest.TempPathFactory) -> Teacher:
    folder = make_tiny_bert(tmp_path_factory.mktemp("teacher"), WORDS, num_layers=2)
    return Teacher.parse("bertscore", str(folder), {})


def synthetic_pairs(n: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    return [Pair(sentence(rng), sentence(rng), "test", "given") for _ in range(n)]


def test_shards_cover_the_pairs_and_an_insertion_changes_only_its_own() -> None:
    pairs = synthetic_pairs(400, seed=1)
    shards = plan_shards(pairs, 16)
    assert shards[0].start == 0 and shards[-1].end == 400
    assert all(a.end == b.start for a, b in zip(shards, shards[1:], strict=False))
    assert all(0 < s.size <= 32 for s in shards) and 10 < len(shards) < 50
    changed = plan_shards([*pairs[:200], *synthetic_pairs(1, seed=9), *pairs[200:]], 16)
    assert len({s.key for s in shards} - {s.key for s in changed}) <= 2
    with pytest.raises(UserError, match="label-shard-size must be >= 1"):
        plan_shards(pairs, 0)


KILLED = textwrap.dedent(
    """
    import json, os, signal, sys
    from nlgbench.distillation.pairs import Pair
    from nlgbench.distillation.teacher import Teacher, teacher_labels

    pairs = [Pair(r, c, "test", "given") for r, c in json.load(open(sys.argv[1]))]
    teacher = Teacher.parse("bertscore", sys.argv[2], {})

    def die(labelled):
        if labelled == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)  # a real kill, right after that shard's file is written

    teacher_labels(pairs, teacher, device="cpu", batch_size=8, shard_size=8, log=print, on_shard=die)
    """
)


def test_a_killed_labelling_resumes_from_its_shards(
    tmp_path: Path, tiny_teacher: Teacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = synthetic_pairs(80, seed=4)
    n_shards = len(plan_shards(pairs, 8))
    assert n_shards >= 5
    # uninterrupted, in a cache of its own
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "whole"))
    whole = teacher_labels(pairs, tiny_teacher, device="cpu", batch_size=8, shard_size=8, **QUIET)
    assert whole.shards == whole.shards_labelled == n_shards and not whole.cached

    # killed (SIGKILL) after its third shard
    cache = tmp_path / "killed"
    data = tmp_path / "pairs.json"
    data.write_text(json.dumps([[p.reference, p.candidate] for p in pairs]))
    env = {**os.environ, "NLGBENCH_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-c", KILLED, str(data), tiny_teacher.encoder.name, "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert "0 shards (0 pairs) already labelled" in run.stdout
    written = list((cache / "distill" / "shards").glob("*/*.json"))
    assert len(written) == 3

    # resumed: only the missing shards are scored, and the labels equal the uninterrupted run's exactly
    monkeypatch.setenv("NLGBENCH_CACHE", str(cache))
    lines: list[str] = []
    resumed = teacher_labels(pairs, tiny_teacher, device="cpu", batch_size=8, shard_size=8, log=lines.append)
    assert resumed.shards == n_shards and resumed.shards_labelled == n_shards - 3 and not resumed.cached
    assert resumed.scores == whole.scores
    assert any("3 shards" in line and "already labelled" in line for line in lines)
    assert any(f"labels: 80/80 pairs ({n_shards}/{n_shards} shards)" in line for line in lines)
    assert any("pairs/s, ETA" in line for line in lines)

    # run again: the whole list from the cache; a changed list reuses the shards whose pairs are unchanged
    again = teacher_labels(pairs, tiny_teacher, device="cpu", batch_size=8, shard_size=8, **QUIET)
    assert again.cached and again.scores == whole.scores
    grown = [*pairs[:40], *synthetic_pairs(1, seed=99), *pairs[40:]]
    changed = teacher_labels(grown, tiny_teacher, device="cpu", batch_size=8, shard_size=8, **QUIET)
    assert 1 <= changed.shards_labelled <= 2 and changed.scores[:40] == whole.scores[:40]
    assert changed.scores[41:] == pytest.approx(whole.scores[40:], abs=1e-6)


def test_the_command_line_takes_the_pair_and_labelling_options(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["distill", "--teacher-metric", "bertscore", "--student", "s", "--pairs", "wmt20", "--out", "o"]
    args = build_parser().parse_args(
        [*base, "--holdout", "wmt15,wmt16", "wmt21", "--teacher-encoder", "{name: m, backend: onnxruntime}"]
    )
    assert args.holdout == ["wmt15,wmt16", "wmt21"] and args.random_share == 0.1
    assert args.label_shard_size is None and args.teacher_encoder == {"name": "m", "backend": "onnxruntime"}
    assert build_parser().parse_args([*base, "--teacher-encoder", "all-MiniLM-L6-v2"]).teacher_encoder == (
        "all-MiniLM-L6-v2"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["distill", "--help"])
    assert f"default {SHARD_SIZE}:" in " ".join(capsys.readouterr().out.split())
