"""The `nlgbench` CLI on a bad spec: one line on stderr naming the problem, exit code 2, no model loaded.
Unknown metric, encoder and dataset names, malformed YAML, wrong keys and values, missing files.

Every test calls `nlgbench.cli.main([...])` in-process. Specs are written to tmp_path; the spec's
encoder is a registry name, which validation accepts without touching the model, and an autouse
fixture fails the test if anything tries to load a model or start a worker.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from clikit import PREFIX, refuse_model_loading, run_error, user_error, with_metric
from helpers import minimal_spec, write_spec
from nlgbench.cli import main
from nlgbench.encoders.hfcache import local_snapshot

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def no_model_loading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model loaded, no worker started, the test run from an empty folder (`clikit.refuse_model_loading`)."""
    refuse_model_loading(monkeypatch, tmp_path)


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
