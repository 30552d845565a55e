"""The `nlgbench` CLI on bad input: one line on stderr naming the problem, exit code 2, no model loaded.

Every test calls `nlgbench.cli.main([...])` in-process. Specs and data files are written to
tmp_path; the spec's encoder is a registry name, which validation accepts without touching
the model, and an autouse fixture fails the test if anything tries to load a model or start
a worker.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import nlgbench.encoders.registry
import nlgbench.encoders.runtime
import nlgbench.execution.local
import nlgbench.metrics.bertscore
from helpers import fake_da, minimal_spec, write_jsonl, write_spec
from nlgbench.cli import main
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.metrics import get_metric, metric_names

pytestmark = pytest.mark.integration

PREFIX = "nlgbench: error: "


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def no_model_loading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bad input must be rejected before any model is loaded or any worker started.

    Also runs each test from an empty folder, so names like `all-MiniLM-L6-v3` are never a
    local folder by accident.
    """

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded / a worker started for bad input")

    for name in metric_names():  # import every metric module first: one imported while the patch is on
        get_metric(name)  # would keep the stub as its `load_encoder` for the rest of the session
    monkeypatch.setattr(nlgbench.encoders.runtime, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.metrics.bertscore, "load_encoder", forbidden)
    monkeypatch.setattr(nlgbench.execution.local, "execute", forbidden)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)


def with_metric(**changes: Any) -> dict[str, Any]:
    """A valid spec whose single metric entry gets `changes`."""
    entry = {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"], **changes}
    return minimal_spec(metrics=[entry])


def user_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI, check it failed as bad input (exit 2, one stderr line), return the message."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 2, (code, captured.out, captured.err)
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(PREFIX), captured.err
    assert captured.out == ""
    return lines[0][len(PREFIX) :]


def run_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: dict[str, Any] | str) -> str:
    """`nlgbench run SPEC --out DIR` must fail as bad input and write no results."""
    out = tmp_path / "out"
    message = user_error(capsys, "run", str(write_spec(tmp_path, spec)), "--out", str(out))
    assert not (out / "results.sqlite").exists()
    assert not (out / "cells").exists()
    return message


ROWS = [
    {"lp": "de-en", "seg_id": 1, "source": "Hallo", "reference": "Hello", "hypothesis": "Hi", "human": 0.5},
    {"lp": "de-en", "seg_id": 2, "source": "Welt", "reference": "World", "hypothesis": "Earth", "human": -0.1},
    {"lp": "fr-en", "seg_id": 7, "source": "Oui", "reference": "Yes", "hypothesis": "Yeah", "human": 1.0},
]


# --------------------------------------------------------------------------- 1. unknown names


def test_unknown_metric_names_closest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = minimal_spec(metrics=[{"metric": "bertscor", "encoders": ["all-MiniLM-L6-v2"]}])
    message = run_error(capsys, tmp_path, spec)
    assert "unknown metric 'bertscor'" in message
    assert "did you mean 'bertscore'" in message


def test_unknown_encoder_names_closest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert local_snapshot("all-MiniLM-L6-v3") is None
    message = run_error(capsys, tmp_path, with_metric(encoders=["all-MiniLM-L6-v2", "all-MiniLM-L6-v3"]))
    assert "metrics[0].encoders[1]" in message
    assert "unknown encoder 'all-MiniLM-L6-v3'" in message
    assert re.search(r"did you mean 'all-MiniLM-L6-v2'", message)


def test_unknown_encoder_in_variant_mapping(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    message = run_error(capsys, tmp_path, with_metric(encoders=[{"name": "all-MiniLM-L6-v3", "num_layers": 3}]))
    assert "metrics[0].encoders[0]" in message
    assert "unknown encoder 'all-MiniLM-L6-v3'" in message
    assert "did you mean 'all-MiniLM-L6-v2'" in message


@pytest.mark.parametrize("name", ["wmt61", "wmt1б"])
def test_unknown_dataset_names_closest(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[name]))
    assert f"unknown dataset {name!r}" in message
    hint = re.search(r"did you mean ([^?]*)\?", message)
    assert hint and "'wmt16'" in hint.group(1), message


def test_unknown_dataset_in_mapping(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"name": "wmt61", "max_segments": 5}]))
    assert "unknown dataset 'wmt61'" in message and "'wmt16'" in message


def test_datasets_fetch_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    message = user_error(capsys, "datasets", "fetch", "wmt61")
    assert "unknown dataset 'wmt61'" in message and "'wmt16'" in message


# --------------------------------------------------------------------------- 2. malformed specs


def test_malformed_yaml_unclosed_bracket(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "name: t\ndatasets: [wmt16\nmetrics:\n  - metric: bertscore\n    encoders: [all-MiniLM-L6-v2]\n"
    message = run_error(capsys, tmp_path, text)
    assert message.startswith("malformed YAML in ")
    assert "spec.yaml" in message
    assert re.search(r"\bline \d+, column \d+", message), message


def test_malformed_yaml_tab_names_its_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "name: t\ndatasets: [wmt16]\nmetrics:\n  - metric: bertscore\n\tencoders: [all-MiniLM-L6-v2]\n"
    message = run_error(capsys, tmp_path, text)
    assert "malformed YAML" in message
    assert "line 5" in message


@pytest.mark.parametrize(
    ("text", "kind"),
    [("- wmt16\n- bertscore\n", "list"), ("just a sentence\n", "str"), ("", None)],
    ids=["list", "scalar", "empty"],
)
def test_spec_not_a_mapping(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, kind: str | None) -> None:
    message = run_error(capsys, tmp_path, text)
    if kind:
        assert "spec must be a YAML mapping" in message and kind in message
    else:
        assert "the spec is empty" in message


def test_wrong_top_level_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = minimal_spec()
    spec["dataset"] = spec.pop("datasets")
    message = run_error(capsys, tmp_path, spec)
    assert "unknown key 'dataset'" in message
    assert "did you mean 'datasets'" in message


@pytest.mark.parametrize(("bad", "good"), [("encoder", "encoders"), ("option", "options"), ("metrics", "metric")])
def test_wrong_key_in_metric_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: str, good: str) -> None:
    entry: dict[str, Any] = {"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"], "options": {}}
    entry[bad] = entry.pop(good)
    message = run_error(capsys, tmp_path, minimal_spec(metrics=[entry]))
    assert "metrics[0]" in message
    assert f"unknown key {bad!r}" in message
    assert f"did you mean {good!r}" in message


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (minimal_spec(repeats="three"), ["repeats", "integer >= 1", "'three'"]),
        (minimal_spec(repeats=0), ["repeats", "integer >= 1", "got 0"]),
        (minimal_spec(batch_size=0), ["batch_size", "integer >= 1", "got 0"]),
        (minimal_spec(batch_size=[64, 0]), ["batch_size", "integer >= 1", "got 0"]),
        (minimal_spec(batch_size=True), ["batch_size", "integer >= 1", "True"]),
        (minimal_spec(warmup=-1), ["warmup", "integer >= 0", "got -1"]),
        (minimal_spec(threads=0), ["threads", "integer >= 1", "got 0"]),
        (minimal_spec(datasets=[{"name": "wmt16", "max_segments": 0}]), ["max_segments", "integer >= 1", "got 0"]),
        (
            minimal_spec(datasets=[{"name": "wmt16", "max_segment": 5}]),
            ["unknown key 'max_segment'", "did you mean 'max_segments'"],
        ),
        (minimal_spec(datasets=[{"name": "wmt16", "path": "x.jsonl"}]), ["exactly one of 'name' or 'path'"]),
        (minimal_spec(datasets=[]), ["datasets must not be empty"]),
        (with_metric(options={"idf": "yes"}), ["metrics[0].options.idf", "must be bool", "'yes'"]),
        (with_metric(options={"layer": "9"}), ["metrics[0].options.layer", "must be int", "'9'"]),
        (with_metric(options={"idff": True}), ["metrics[0].options", "unknown key 'idff'", "did you mean 'idf'"]),
        (with_metric(options=[True]), ["metrics[0].options must be a mapping"]),
        (
            with_metric(encoders=[{"name": "all-MiniLM-L6-v2", "num_layer": 3}]),
            ["metrics[0].encoders[0]", "unknown encoder option 'num_layer'", "did you mean 'num_layers'"],
        ),
        (
            with_metric(encoders=[{"name": "all-MiniLM-L6-v2", "num_layers": -1}]),
            ["metrics[0].encoders[0]", "num_layers must be >= 1", "got -1"],
        ),
        (
            with_metric(encoders=[{"name": "all-MiniLM-L6-v2", "num_layers": "3"}]),
            ["metrics[0].encoders[0]", "'num_layers' must be int", "'3'"],
        ),
        (with_metric(encoders=[{"num_layers": 3}]), ["metrics[0].encoders[0]", "mapping with 'name'"]),
        (with_metric(encoders=[]), ["metrics[0].encoders must not be empty"]),
        (with_metric(aligners=["wmd"]), ["metrics[0].aligners", "'bertscore' takes no aligner"]),
        (minimal_spec(metrics=[{"encoders": ["all-MiniLM-L6-v2"]}]), ["metrics[0].metric is required", "bertscore"]),
        (minimal_spec(metrics=[{"metric": "bertscore"}]), ["metrics[0].encoders is required"]),
        (minimal_spec(name=""), ["name must be a non-empty string"]),
    ],
    ids=[
        "repeats-three",
        "repeats-0",
        "batch_size-0",
        "batch_size-list-0",
        "batch_size-bool",
        "warmup-neg",
        "threads-0",
        "max_segments-0",
        "max_segment-key",
        "name-and-path",
        "no-datasets",
        "idf-yes",
        "layer-str",
        "option-idff",
        "options-list",
        "num_layer",
        "num_layers-neg",
        "num_layers-str",
        "encoder-no-name",
        "no-encoders",
        "aligner-for-bertscore",
        "no-metric-name",
        "no-encoders-key",
        "empty-name",
    ],
)
def test_wrong_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: dict[str, Any], expected: list[str]
) -> None:
    message = run_error(capsys, tmp_path, spec)
    for part in expected:
        assert part in message, (part, message)


def test_negative_layer_option_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    message = run_error(capsys, tmp_path, with_metric(options={"layer": -1}))
    assert "layer" in message and "-1" in message


def test_num_layers_above_registered_depth_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    message = run_error(capsys, tmp_path, with_metric(encoders=[{"name": "all-MiniLM-L6-v2", "num_layers": 12}]))
    assert "num_layers" in message and "12" in message and "6" in message


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "CPU"])
def test_unknown_device(capsys: pytest.CaptureFixture[str], tmp_path: Path, device: str) -> None:
    message = run_error(capsys, tmp_path, minimal_spec(devices=["cpu", device]))
    assert f"unknown device {device!r}" in message
    assert "cpu, cuda or cuda:N" in message


@pytest.mark.parametrize("key", ["metrics", "datasets"])
def test_missing_required_key(capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str) -> None:
    spec = minimal_spec()
    del spec[key]
    message = run_error(capsys, tmp_path, spec)
    assert f"missing required key {key!r}" in message


def test_missing_spec_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    message = user_error(capsys, "run", str(missing), "--out", str(tmp_path / "out"))
    assert "spec file not found" in message
    assert str(missing) in message
    assert not (tmp_path / "out").exists()


def test_spec_file_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: t\ndatasets: [wmt16\xff]\n")
    message = user_error(capsys, "run", str(path), "--out", str(tmp_path / "out"))
    assert "cannot read spec file" in message and "spec.yaml" in message


def test_spec_file_is_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").mkdir()
    message = user_error(capsys, "run", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"))
    assert "cannot read spec file" in message and "spec.yaml" in message


def alias_bomb(levels: int) -> str:
    """YAML anchors each naming the one before nine times: a few hundred bytes, 9**levels values."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_in_a_spec_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Aliases expanding a small spec into half a million values are refused as the spec is read."""
    bomb = alias_bomb(6)
    text = (
        yaml.safe_dump(minimal_spec(), sort_keys=False) + "x:\n" + "".join(f"  {line}\n" for line in bomb.splitlines())
    )
    text += "description: *a6\n"
    assert len(text) < 1000
    message = run_error(capsys, tmp_path, text)
    assert message.startswith("malformed YAML in ") and "expands to more than 200,000 values" in message


@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, "a: &a [b, *a]\n"], ids=["brackets", "self"])
def test_yaml_nested_too_deep_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    """Thousands of nested brackets (or an alias inside its own anchor) are refused, never a RecursionError."""
    message = run_error(capsys, tmp_path, text)
    assert message.startswith("malformed YAML in ") and "nested deeper than 64 levels" in message


def test_yaml_alias_bomb_in_a_user_registry_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The spec's own encoder registry file is read with the same bounds."""
    (tmp_path / "mine.yaml").write_text(alias_bomb(6) + "encoders: {mine: {hub_id: *a6}}\n", encoding="utf-8")
    message = run_error(capsys, tmp_path, minimal_spec(encoders_file="mine.yaml"))
    assert "encoder registry" in message and "expands to more than 200,000 values" in message


def test_yaml_alias_bomb_in_an_option_value_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--option KEY=VALUE` reads VALUE as YAML with the same bounds as a spec."""
    (tmp_path / "c.txt").write_text("a\n", encoding="utf-8")
    value = "{" + ", ".join(alias_bomb(6).splitlines()) + "}"
    message = user_error(
        capsys, "score", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "c.txt"), "--option", f"idf={value}"
    )
    assert message.startswith("--option idf: cannot read the value") and "expands to more than 200,000" in message


def test_every_spec_error_is_named_in_one_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Independent errors (a dataset, a setting, two uncached models, a missing folder) are each one
    error line of one run, in the spec's order, not the first alone; --dry-run says the same."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    spec = minimal_spec(
        datasets=["wmt16", "wmt61"],
        repeats=0,
        metrics=[
            {"metric": "bertscore", "encoders": ["roberta-large", "org/not-cached"]},
            {"metric": "moverscore", "encoders": ["./no-such-folder"]},
        ],
    )
    path = write_spec(tmp_path, spec)
    for extra in (["--dry-run"], ["--out", str(tmp_path / "out")]):
        assert main(["run", str(path), *extra]) == 2
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert captured.out == "" and all(line.startswith(PREFIX) for line in lines), captured.err
        assert [line[len(PREFIX) :].split(":")[0].split(";")[0] for line in lines] == [
            "unknown dataset 'wmt61'",
            "spec.yaml.repeats must be an integer >= 1, got 0",
            "spec.yaml.metrics[0].encoders[0]",
            "spec.yaml.metrics[0].encoders[1]",
            "spec.yaml.metrics[1].encoders[0]",
        ]
        assert "'roberta-large'" in lines[2] and "'org/not-cached'" in lines[3] and "does not exist" in lines[4]
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- 3. missing / unreadable data


def test_missing_user_data_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"path": "missing.jsonl"}]))
    assert "missing file" in message
    assert str(tmp_path / "missing.jsonl") in message  # resolved next to the spec file


def test_user_data_file_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_bytes(b'{"lp": "de-en", "reference": "caf\xe9"}\n')
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"path": "bad.jsonl"}]))
    assert "bad.jsonl" in message
    assert "not UTF-8" in message


def test_user_data_file_is_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").mkdir()
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}]))
    assert "data.jsonl" in message
    assert "is a directory" in message


def test_user_data_file_invalid_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_text(json.dumps(ROWS[0]) + "\n{not json\n", encoding="utf-8")
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}]))
    assert "data.jsonl line 2" in message and "invalid JSON" in message


def test_catalogue_dataset_mirror_lacks_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, cache = tmp_path / "empty-mirror", tmp_path / "empty-cache"
    mirror.mkdir()
    cache.mkdir()
    monkeypatch.setenv("NLGBENCH_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("NLGBENCH_CACHE", str(cache))
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"name": "wmt16", "max_segments": 5}]))
    assert "missing file" in message
    assert str(mirror / "wmt16-selection") in message
    assert "NLGBENCH_DATA_MIRROR" in message
    assert not list(cache.rglob("*.part"))


# --------------------------------------------------------------------------- 4. unequal line counts


def fake_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: dict[str, list[str]]) -> None:
    """A one-pair DA dataset 'fake' in a mirror under tmp_path; the packaged catalogue is replaced."""
    path = tmp_path / "catalogue.yaml"
    path.write_text(yaml.safe_dump(fake_da(tmp_path, monkeypatch, columns)), encoding="utf-8")
    monkeypatch.setattr("nlgbench.data.catalogue.catalogue_path", lambda: path)


DA_COLUMNS = {
    "source": ["s1", "s2", "s3"],
    "reference": ["r1", "r2", "r3"],
    "mt-system": ["h1", "h2", "h3"],
    "human": ["0.5", "-1", "0.2"],
}


def test_unequal_line_counts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_catalogue(tmp_path, monkeypatch, dict(DA_COLUMNS, reference=["r1", "r2"]))
    message = run_error(capsys, tmp_path, minimal_spec(datasets=["fake"]))
    assert "'fake'" in message and "xx-en" in message
    assert "unequal line counts" in message
    assert "fake.reference.xx-en: 2" in message
    for rel in ("fake.source.xx-en", "fake.mt-system.xx-en", "fake.human.xx-en"):
        assert f"{rel}: 3" in message


def test_fake_catalogue_is_used_by_validation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fake catalogue the packaged names are unknown: both validation and loading read it."""
    fake_catalogue(tmp_path, monkeypatch, DA_COLUMNS)
    message = run_error(capsys, tmp_path, minimal_spec(datasets=["wmt16"]))
    assert "unknown dataset 'wmt16'" in message and "valid: fake" in message


# --------------------------------------------------------------------------- 5. blank segments


@pytest.mark.parametrize("fld", ["hypothesis", "reference"])
@pytest.mark.parametrize("blank", ["   ", "", "\t\n"])
def test_blank_segment_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path, fld: str, blank: str) -> None:
    """A blank text where the metric defines no value (MoverScore) is refused before any cell; where it
    does (BERTScore), it is scored: tests/test_blank_texts.py."""
    rows = [dict(r) for r in ROWS]
    rows[2][fld] = blank
    write_jsonl(tmp_path / "data.jsonl", rows, ensure_ascii=False)
    metrics = [{"metric": "moverscore", "encoders": ["all-MiniLM-L6-v2"]}]
    message = run_error(capsys, tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}], metrics=metrics))
    assert f"dataset data: moverscore cannot score a blank {fld} (item lp='fr-en' seg_id=7 system='')" in message


def test_blank_source_is_fine_for_bertscore(tmp_path: Path) -> None:
    """BERTScore does not read the source, so a blank source passes the pre-check (and reaches the cells)."""
    rows = [dict(r) for r in ROWS]
    rows[0]["source"] = " "
    write_jsonl(tmp_path / "data.jsonl", rows, ensure_ascii=False)
    from nlgbench.core.spec import load_spec
    from nlgbench.execution.preflight import check_datasets

    spec = load_spec(write_spec(tmp_path, minimal_spec(datasets=[{"path": "data.jsonl"}])))
    assert check_datasets(spec) == (spec, {"data": 3})


# --------------------------------------------------------------------------- list


def test_list_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "metrics"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["name", "needs", "better"]
    row = next(line for line in lines if line.startswith("bertscore"))
    assert "reference" in row and "higher" in row and "idf=False" in row and "encoder|seq2seq" in row
    names = [line.split()[0] for line in lines[1:]]
    assert names == [
        "bartscore",
        "baryscore",
        "bertscore",
        "chrf",
        "frugalscore",
        "moverscore",
        "rouge1",
        "rouge2",
        "rougeL",
        "sentbleu",
        "sentsim",
        "xmoverscore",
    ]
    bary = next(line for line in lines if line.startswith("baryscore")).split()
    assert bary[2] == "lower"
    frugal = next(line for line in lines if line.startswith("frugalscore")).split()
    assert frugal[4] == "cross-encoder|feature-head"


def test_full_study_dry_run_lists_cells_and_missing_models(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the Hub on, a dry run lists what the sweep would download; with it off, every model it
    could not load is refused (a line each, exit 2), not left to fail inside its cells."""
    spec = Path(__file__).resolve().parents[1] / "examples" / "full-study.yaml"
    assert main(["run", str(spec), "--dry-run"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert all(
        line.startswith(PREFIX) and "in the local Hugging Face cache and the Hub is off" in line for line in lines
    )
    named = {line.rsplit("--as ", 1)[1].rstrip("`") for line in lines}
    assert {"roberta-large", "gpt2", "moussaKam/frugalscore_tiny_bert-base_bert-score"} <= named, named
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    if not __import__("torch").cuda.is_available():  # its cuda cells: refused here, listed on a GPU machine
        assert main(["run", str(spec), "--dry-run"]) == 2
        assert "spec devices: device 'cuda': CUDA is not available" in capsys.readouterr().err
        monkeypatch.setattr("nlgbench.cli.run.check_devices", lambda spec: None)  # as on a machine with CUDA
    assert main(["run", str(spec), "--dry-run"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    count, missing = last.split("; models not in the local cache: ")
    assert int(count.split()[0]) > 300
    names = missing.split(", ")
    for model in (
        "roberta-large",
        "facebook/bart-large-cnn",
        "gpt2",
        "moussaKam/frugalscore_tiny_bert-base_bert-score",
    ):
        assert model in names
    assert "sentence-transformers/all-MiniLM-L6-v2" not in names  # imported by scripts/get_models.py


def test_list_datasets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "datasets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["wmt15", "wmt16", "wmt20", "wmt21"]
    wmt16 = lines[2].split()
    assert wmt16[1] == "da" and "3360" in wmt16 and "de-en" in wmt16


def test_list_aligners(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "aligners"]) == 0
    captured = capsys.readouterr()
    names = [line.split()[0] for line in captured.out.splitlines()[1:]]
    assert names == ["rwmd", "wcd", "wmd"] and captured.err == ""


def test_list_encoders(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "encoders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header == ["name", "hub_id", "family", "kind", "layers", "local", "params", "disk_mib"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == set(nlgbench.encoders.registry.registry())
    mini = rows["all-MiniLM-L6-v2"]
    assert mini[1] == "sentence-transformers/all-MiniLM-L6-v2" and mini[4] == "6"
    local = header.index("local")
    assert all(r[local] in {"yes", "no"} for r in rows.values())
    if local_snapshot("sentence-transformers/all-MiniLM-L6-v2") is not None:
        assert mini[local] == "yes"
        assert mini[header.index("params")].endswith("M")
    else:
        assert mini[local] == "no"


def test_list_unknown_choice_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["list", "encoder"])
    assert exc.value.code == 2
    assert "invalid choice: 'encoder'" in capsys.readouterr().err
