"""The `nlgbench` CLI on bad data: missing or unreadable data files, unequal line counts, blank
segments give one line on stderr and exit code 2, no model loaded; and the `list` commands.

Every test calls `nlgbench.cli.main([...])` in-process, from an empty folder; an autouse fixture
fails the test if anything tries to load a model or start a worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import nlgbench.encoders.registry
import nlgbench.encoders.runtime
import nlgbench.execution.local
import nlgbench.metrics.bertscore
from clikit import PREFIX, ROWS, refuse_model_loading, run_error
from helpers import fake_da, minimal_spec, write_jsonl, write_spec
from nlgbench.cli import main
from nlgbench.encoders.hfcache import local_snapshot

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def no_model_loading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model loaded, no worker started, the test run from an empty folder (`clikit.refuse_model_loading`)."""
    refuse_model_loading(monkeypatch, tmp_path)


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
