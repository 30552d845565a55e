"""A local model folder's content fingerprint covers every file its loading reads (the tokenizer's
files, sentencepiece models, generation and shard-index files, not only config.json and the weights):
editing one gives another fingerprint, cell id, scorer signature and cached-baseline key; a file the
loading does not read (a README) changes none of them. Old run folders, whose cells hold fingerprints
of the weights alone, still open."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import nlgbench
from nlgbench.core.signature import encoder_revision
from nlgbench.core.spec import load_spec
from nlgbench.encoders.hfcache import LOADED_FILES, content_fingerprint, loaded_files
from nlgbench.encoders.registry import resolve_encoder
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.baseline_files import cached_baseline_file
from nlgbench.runs.rundata import RunData
from tiny import TEXTS

pytestmark = pytest.mark.component

REPO = Path(__file__).resolve().parents[1]


def edit_json(path: Path, **changes: object) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **changes}), encoding="utf-8")


def lower_casing_off(folder: Path) -> None:
    """The tokenizer no longer lower-cases: tokenizer_config.json's flag and tokenizer.json's normaliser."""
    edit_json(folder / "tokenizer_config.json", do_lower_case=False)
    fast = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    fast["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(fast), encoding="utf-8")


# Each edit of a file the loading reads: the tiny BERT's own files edited, the others added.
EDITS: dict[str, Callable[[Path], None]] = {
    "tokenizer_config.json": lambda f: edit_json(f / "tokenizer_config.json", do_lower_case=False),
    "tokenizer.json": lambda f: edit_json(f / "tokenizer.json", truncation={"max_length": 8}),
    "vocab.txt": lambda f: (f / "vocab.txt").write_text(
        "\n".join(reversed((f / "vocab.txt").read_text(encoding="utf-8").split("\n"))), encoding="utf-8"
    ),
    "special_tokens_map.json": lambda f: (f / "special_tokens_map.json").write_text('{"unk_token": "[MASK]"}'),
    "added_tokens.json": lambda f: (f / "added_tokens.json").write_text('{"zebra": 999}'),
    "vocab.json": lambda f: (f / "vocab.json").write_text('{"a": 0}'),
    "merges.txt": lambda f: (f / "merges.txt").write_text("#version: 0.2\na b\n"),
    "spiece.model": lambda f: (f / "spiece.model").write_bytes(b"\x0a\x03abc"),
    "sentencepiece.bpe.model": lambda f: (f / "sentencepiece.bpe.model").write_bytes(b"\x0a\x03abc"),
    "tokenizer.model": lambda f: (f / "tokenizer.model").write_bytes(b"\x0a\x03abc"),
    "generation_config.json": lambda f: (f / "generation_config.json").write_text('{"num_beams": 4}'),
    "model.safetensors.index.json": lambda f: (f / "model.safetensors.index.json").write_text('{"weight_map": {}}'),
    "head.json": lambda f: (f / "head.json").write_text('{"format": 1}'),
    "distill.json": lambda f: (f / "distill.json").write_text('{"teacher": "bertscore"}'),
}


@pytest.fixture
def folder(tiny_bert: Callable[..., Path], tmp_path: Path) -> Path:
    """A copy of a tiny BERT (config, weights, tokenizer.json, tokenizer_config.json, vocab.txt) to edit."""
    copy = tmp_path / "model"
    shutil.copytree(tiny_bert(TEXTS, num_layers=2), copy)
    return copy


def keys(folder: Path, tmp_path: Path, *, cell: bool = True) -> dict[str, str]:
    """What is keyed by the folder's content: fingerprint, cell id, `inputs`, signature revision, baseline key."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"name": "t", "datasets": ["wmt16"], "metrics": [{"metric": "bertscore", "encoders": [str(folder)]}]}
        ),
        encoding="utf-8",
    )
    out = {
        "fingerprint": str(resolve_encoder(str(folder)).fingerprint()),
        "revision": encoder_revision(str(folder)),
        "baseline key": cached_baseline_file(str(folder)).name,
    }
    if cell:  # a BERTScore cell over the folder (a folder with a fitted head is a FrugalScore student instead)
        [config] = load_spec(spec).cells()
        out |= {"cell id": config.cell_id, "inputs": config.inputs[str(folder)]}
    return out


@pytest.mark.parametrize("name", sorted(EDITS))
def test_every_loaded_file_is_in_the_fingerprint(folder: Path, tmp_path: Path, name: str) -> None:
    cell = name != "head.json"
    before = keys(folder, tmp_path, cell=cell)
    EDITS[name](folder)
    after = keys(folder, tmp_path, cell=cell)
    assert [k for k in before if before[k] == after[k]] == []  # every key moved
    assert name in [p.name for p in loaded_files(folder)]


def test_a_file_the_loading_does_not_read_changes_nothing(folder: Path, tmp_path: Path) -> None:
    before = keys(folder, tmp_path)
    (folder / "README.md").write_text("# a model card, edited\n", encoding="utf-8")
    (folder / "training_log.txt").write_text("step 1\n", encoding="utf-8")
    assert keys(folder, tmp_path) == before


def test_the_scorer_signature_follows_the_tokenizer(folder: Path, tmp_path: Path) -> None:
    """Two folders with the same config and weights, one whose tokenizer no longer lower-cases: their
    scores differ, and so do their signatures (they were equal while the weights alone were hashed)."""
    other = tmp_path / "other" / "model"
    shutil.copytree(folder, other)
    lower_casing_off(other)
    hyps, refs = ["The Cat sat on the Mat", "A Dog ran"], ["the cat sat on the mat", "a dog ran in the park"]
    a = nlgbench.Scorer(encoder=str(folder), device="cpu")
    b = nlgbench.Scorer(encoder=str(other), device="cpu")
    assert a.score(hyps, refs) != b.score(hyps, refs)
    assert a.signature != b.signature


def test_a_loaded_name_that_is_no_file_is_refused(folder: Path) -> None:
    (folder / "special_tokens_map.json").mkdir()
    with pytest.raises(UserError, match=r"special_tokens_map.json is not a regular file"):
        resolve_encoder(str(folder)).fingerprint()


def test_the_list_names_the_tokenizer_files() -> None:
    """The names the loading is known to read (transformers' tokenizer files, the generation config)."""
    expected = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}
    assert expected | {"vocab.txt", "vocab.json", "merges.txt", "generation_config.json"} <= LOADED_FILES


def test_old_run_folders_still_open(tmp_path: Path) -> None:
    """The committed distillation report's cells hold `weights:` fingerprints of config and weights alone:
    the run opens, every cell with the id it was recorded under."""
    run = tmp_path / "distill"
    (run / "report").mkdir(parents=True)
    for name in ("cells.jsonl", "metric_scores.csv", "run.json"):
        shutil.copyfile(REPO / "reports" / "distill" / "report" / name, run / "report" / name)
    recorded = [json.loads(line)["cell_id"] for line in (run / "report" / "cells.jsonl").read_text().splitlines()]
    opened = RunData.open(run)
    assert sorted(opened.results) == sorted(recorded)
    local = [r for r in opened.results.values() if r.config.inputs]
    assert len(local) == 8 and all(v.startswith("weights:") for r in local for v in r.config.inputs.values())
    assert {r.config.encoder.label for r in local} == {"minilm-l3-mpnet-bertscore", "minilm-l6-mpnet-bertscore"}


def test_fingerprint_is_stable(folder: Path) -> None:
    assert content_fingerprint(folder) == content_fingerprint(folder) and len(content_fingerprint(folder)) == 16
