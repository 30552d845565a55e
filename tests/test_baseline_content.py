"""BERTScore's rescaling baselines keyed by content and bounded: a cell's id follows the baseline file's
bytes (`baseline_path`, or the cached baseline of its model), the cached table's digest is recorded and
checked, `nlgbench baseline` says when it replaces one; baselines are finite and within [-1, 0.999], one
row a layer, numbers and layers in the data loader's plain forms; a folder or FIFO given as the file, and a
degenerate corpus, are refused in one line before anything is written."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import nlgbench
from helpers import read_csv
from nlgbench.cli import main
from nlgbench.core.spec import load_spec
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import baselines, bertscore
from nlgbench.metrics.baseline_files import (
    Baseline,
    cached_baseline_file,
    find_baseline,
    read_baseline,
    record_file,
    store_baseline,
)
from tiny import TEXTS

pytestmark = pytest.mark.unit

HEADER = "LAYER,P,R,F\n"


def table(value: float, layers: int = 3) -> str:
    return HEADER + "".join(f"{k},{value},{value},{value}\n" for k in range(layers))


def write(tmp_path: Path, text: str, name: str = "b.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- values (unit)


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ("2,0.9999999999999999,0.5,0.5\n", r"baseline P 0.9999999999999999 is outside \[-1, 0.999\]"),
        ("2,0.5,0.9995,0.5\n", r"baseline R 0.9995 is outside \[-1, 0.999\]"),
        ("2,0.5,0.5,-1e308\n", r"baseline F '-1e308' is beyond"),
        ("2,0.5,0.5,-2e5\n", r"baseline F -200000.0 is outside \[-1, 0.999\]"),
        ("2,-1.5,0.5,0.5\n", r"baseline P -1.5 is outside"),
        ("2,0.5,0.5,1e400\n", "is not a finite number"),
        ("2,0.5,nan,0.5\n", "is not a finite number"),
        ("2,0.4_5,0.5,0.5\n", r"baseline P '0.4_5' is not a number \(plain decimal digits"),
        ("2,٠.٥,0.5,0.5\n", "is not a number"),
        ("2,0x1p-1,0.5,0.5\n", "is not a number"),
        ("٦,0.5,0.5,0.5\n", r"layer '٦' is not a plain integer >= 0"),
        ("+2,0.5,0.5,0.5\n", "layer '\\+2' is not a plain integer"),
        ("02,0.5,0.5,0.5\n", "layer '02' is not a plain integer"),
        ("-2,0.5,0.5,0.5\n", "layer '-2' is not a plain integer >= 0"),
        ("2.0,0.5,0.5,0.5\n", "layer '2.0' is not a plain integer"),
        ("2,0.5,0.5,0.5,0.5\n", "expected LAYER,P,R,F .*got 5 fields"),
        ("2,0.5,0.5,0.5\n2,0.2,0.2,0.2\n", "line 3: a second row for layer 2 \\(the first is line 2\\)"),
    ],
)
def test_a_bad_baseline_row_is_one_line_naming_it(tmp_path: Path, rows: str, needle: str) -> None:
    path = write(tmp_path, HEADER + rows)
    with pytest.raises(UserError, match=needle) as caught:
        read_baseline(path, 2)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


@pytest.mark.parametrize("value", ["0.999", "-1", "0.9844347", "0", "-0.25", "5e-1"])
def test_baselines_within_the_bounds_are_read(tmp_path: Path, value: str) -> None:
    """The bounds' ends, bert_score's highest packaged baseline (xlm-roberta-base, Spanish, layer 12) and others."""
    path = write(tmp_path, HEADER + f"0,{value},{value},{value}\n")
    assert read_baseline(path, 0) == Baseline(float(value), float(value), float(value))


def test_a_folder_a_fifo_and_a_missing_file_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "dir.tsv").mkdir()
    with pytest.raises(UserError, match="is a folder: give the file itself"):
        read_baseline(tmp_path / "dir.tsv", 0)
    os.mkfifo(tmp_path / "fifo.tsv")
    with pytest.raises(UserError, match="is not a regular file"):
        read_baseline(tmp_path / "fifo.tsv", 0)  # refused before it is opened: opening would block
    with pytest.raises(UserError, match="baseline file not found"):
        read_baseline(tmp_path / "missing.tsv", 0)


@pytest.mark.component  # the Scorer checks the model folder's files (their headers), not the weights
def test_the_scorer_refuses_a_bad_baseline_file_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(bertscore, "load_encoder", no_model)
    path = write(tmp_path, HEADER + "6,0.5,0.5,0.5\n6,0.4,0.4,0.4\n")
    with pytest.raises(UserError, match="a second row for layer 6"):
        nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", rescale_with_baseline=True, baseline_path=str(path))


# ----------------------------------------------------------------------------- the cache (unit: no model read)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A model folder as far as the cache key reads it (config.json, a tokenizer file), no weights."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    return folder


def test_the_cached_table_records_its_digest_and_a_tampered_one_is_refused(cache: Path, model_dir: Path) -> None:
    source = str(model_dir)
    stored, replaced = store_baseline(source, table(0.5), {"corpus_sha256": "ab" * 32, "pairs": 10, "seed": 0})
    assert replaced is None and stored == cached_baseline_file(source)
    assert json.loads(record_file(stored).read_text())["table_sha256"]
    assert find_baseline(source, 1, None) == Baseline(0.5, 0.5, 0.5)
    stored.write_text(table(0.2), encoding="utf-8")  # edited by hand: a valid table, not the one computed
    with pytest.raises(UserError, match="does not match the sha256 its record .* compute it again: nlgbench baseline"):
        find_baseline(source, 1, None)
    record_file(stored).unlink()  # a table without its record
    with pytest.raises(UserError, match="has no readable record .* compute it again"):
        find_baseline(source, 1, None)


def test_storing_again_returns_the_record_replaced(cache: Path, model_dir: Path) -> None:
    source = str(model_dir)
    store_baseline(source, table(0.5), {"corpus_sha256": "ab" * 32, "pairs": 10, "seed": 0})
    _, replaced = store_baseline(source, table(0.4), {"corpus_sha256": "cd" * 32, "pairs": 20, "seed": 1})
    assert replaced is not None and replaced["corpus_sha256"] == "ab" * 32 and replaced["seed"] == 0
    assert find_baseline(source, 0, None) == Baseline(0.4, 0.4, 0.4)


class FakeEncoder:
    source = ""


def fake_compute(monkeypatch: pytest.MonkeyPatch, source: str, value: float | None) -> list[str]:
    """`compute_baseline` with the model replaced: every pair scores `value` (None: loading must not happen)."""
    loaded: list[str] = []

    def load(ref: EncoderRef, device: str) -> FakeEncoder:
        assert value is not None, "the model was loaded"
        loaded.append(ref.name)
        encoder = FakeEncoder()
        encoder.source = source
        return encoder

    def scores(encoder: Any, pairs: list[tuple[str, str]], batch_size: int, progress: Any = None) -> torch.Tensor:
        return torch.full((3, len(pairs), 3), float(value or 0))

    monkeypatch.setattr(baselines, "load_encoder", load)
    monkeypatch.setattr(baselines, "pair_scores", scores)
    return loaded


@pytest.mark.parametrize("lines", [["same line", "same line"], ["one", "  one  ", "", "one"], ["only"]])
def test_a_corpus_of_fewer_than_two_different_lines_is_refused_before_the_model_loads(
    cache: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> None:
    fake_compute(monkeypatch, str(model_dir), None)
    with pytest.raises(UserError, match="at least 2 different non-blank lines"):
        baselines.compute_baseline(EncoderRef(str(model_dir)), lines, 10, 0, "cpu", 4)
    assert not (cache / "baselines").exists()


@pytest.mark.parametrize("value", [0.9995, 1.0000001, float("nan")])
def test_a_baseline_out_of_bounds_is_refused_before_anything_is_written(
    cache: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch, value: float
) -> None:
    """Pairs too alike (two near-identical sentences) give a mean at or above the bound: refused, no cache file."""
    loaded = fake_compute(monkeypatch, str(model_dir), value)
    with pytest.raises(UserError, match=r"the corpus gives layer 0 a baseline P of .*outside \[-1, 0.999\].*nothing"):
        baselines.compute_baseline(EncoderRef(str(model_dir)), ["a cat", "a cat."], 10, 0, "cpu", 4)
    assert loaded and not (cache / "baselines").exists()


def test_the_command_says_when_it_replaces_a_cached_baseline(
    cache: Path, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_compute(monkeypatch, str(model_dir), 0.3)
    corpus = write(tmp_path, "a cat\na dog\na bird\n", "corpus.txt")
    argv = ["baseline", str(corpus), "--encoder", str(model_dir), "--pairs", "10", "--device", "cpu"]
    assert main(argv) == 0
    assert "replaced" not in capsys.readouterr().err
    assert main([*argv, "--seed", "5"]) == 0
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if "replaced" in line]
    assert "cached baseline of" in line and "10 pairs, seed 0" in line


def test_the_command_refuses_a_folder_as_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


# ----------------------------------------------------------------------------- cell ids (component: a tiny model)


def spec_file(tmp_path: Path, encoder: Path, options: dict[str, Any]) -> Path:
    spec = {
        "name": "rescaled",
        "datasets": [{"name": "wmt16", "max_segments": 3}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 1,
        "metrics": [{"metric": "bertscore", "options": {"layer": 2, **options}, "encoders": [str(encoder)]}],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.mark.component
def test_the_cell_id_follows_the_baseline_files_content(tiny_bert: Callable[..., Path], tmp_path: Path) -> None:
    model = tiny_bert(TEXTS, num_layers=2)
    baseline = write(tmp_path, table(0.5))
    spec = spec_file(tmp_path, model, {"rescale_with_baseline": True, "baseline_path": str(baseline)})
    [before] = load_spec(spec).cells()
    assert before.inputs[str(baseline)].startswith("sha256:")
    baseline.write_text(table(0.2), encoding="utf-8")
    [after] = load_spec(spec).cells()
    assert after.cell_id != before.cell_id
    baseline.write_text(table(0.5), encoding="utf-8")
    assert load_spec(spec).cells()[0].cell_id == before.cell_id  # the same bytes: the same cell
    baseline.write_text(table(0.9999999999999999), encoding="utf-8")
    with pytest.raises(UserError, match="outside"):  # before any model loads
        load_spec(spec).cells()


@pytest.mark.component
def test_the_cell_id_follows_the_cached_baseline(
    tiny_bert: Callable[..., Path], tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "tiny"
    shutil.copytree(tiny_bert(TEXTS, num_layers=2), model)
    spec = spec_file(tmp_path, model, {"rescale_with_baseline": True})
    with pytest.raises(UserError, match="no baseline for .*nlgbench baseline CORPUS --encoder"):
        load_spec(spec).cells()
    store_baseline(str(model), table(0.5), {})
    [before] = load_spec(spec).cells()
    [key] = [k for k in before.inputs if k.startswith("cache:baselines/")]
    store_baseline(str(model), table(0.2), {})
    [after] = load_spec(spec).cells()
    assert after.cell_id != before.cell_id and after.inputs[key] != before.inputs[key]
    cached_baseline_file(str(model)).write_text(table(0.5), encoding="utf-8")  # tampered
    with pytest.raises(UserError, match="does not match the sha256"):
        load_spec(spec).cells()


@pytest.mark.integration
def test_a_rerun_after_the_baseline_changed_measures_again(tiny_bert: Callable[..., Path], tmp_path: Path) -> None:
    """The sweep the issue ran: a rescaled cell, its baseline file edited (0.5 -> 0.2), the sweep run again:
    a new cell with the new scores and `rescaled:` signature, not "done already"."""
    model = tiny_bert(TEXTS, num_layers=2)
    baseline = write(tmp_path, table(0.5))
    spec = spec_file(tmp_path, model, {"rescale_with_baseline": True, "baseline_path": str(baseline)})
    out = tmp_path / "run"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    baseline.write_text(table(0.2), encoding="utf-8")
    assert main(["run", str(spec), "--out", str(out)]) == 0
    rows = read_csv(out / "results.csv")
    assert len(rows) == 2 and all(row["status"] == "ok" for row in rows)
    signatures = {json.loads((p / "result.json").read_text())["scorer"]["signature"] for p in (out / "cells").iterdir()}
    assert len(signatures) == 2
    scorer = nlgbench.Scorer(
        encoder=str(model), device="cpu", layer=2, rescale_with_baseline=True, baseline_path=str(baseline)
    )
    assert scorer.signature in signatures


# ----------------------------------------------------------------------------- progress (component: a tiny model)


@pytest.mark.component
def test_the_command_reports_its_progress_with_an_eta(
    tiny_bert: Callable[..., Path],
    tmp_path: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`nlgbench baseline` says what it does while it scores: not on a terminal (captured, as in a log), a
    line when the model loads, then `baseline: DONE/TOTAL pairs scored, R pairs/s, ETA T` per tenth of the
    pairs and a closing `done in` line; on a terminal (NLGBENCH_PROGRESS=1) a tqdm bar with its ETA.
    stdout keeps only the table."""
    model = tiny_bert(TEXTS, num_layers=2)
    corpus = write(tmp_path, "".join(f"{text}\n" for text in TEXTS), "corpus.txt")
    pairs = 10 * baselines.PAIRS_PER_CHUNK
    argv = ["baseline", str(corpus), "--encoder", str(model), "--pairs", str(pairs), "--device", "cpu"]
    monkeypatch.setenv("NLGBENCH_PROGRESS", "0")
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.startswith("LAYER,P,R,F\n") and "pairs scored" not in out
    lines = err.splitlines()
    assert lines[0] == f"baseline of {model}: loading the model on cpu"
    steps = [line for line in lines if line.startswith("baseline: ")]
    assert steps[0] == f"baseline: 0/{pairs} pairs scored"
    assert [int(line.split()[1].split("/")[0]) for line in steps] == [k * baselines.PAIRS_PER_CHUNK for k in range(11)]
    assert all(", ETA " in line for line in steps[1:-1])
    assert steps[-1].startswith(f"baseline: {pairs}/{pairs} pairs scored, ") and ", done in " in steps[-1]
    monkeypatch.setenv("NLGBENCH_PROGRESS", "1")
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.startswith("LAYER,P,R,F\n")
    assert "baseline pairs scored" in err and f"/{pairs} [" in err and "<" in err  # tqdm: [elapsed<remaining, rate]
