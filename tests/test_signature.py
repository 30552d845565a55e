"""The reproducibility signature: one line naming metric, encoder@revision, layer,
variant, options, use of several references and versions; the same for `nlgbench.Scorer`,
`nlgbench score` and a sweep cell (result.json, results.csv, the report page)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import nlgbench
from nlgbench.cli import main
from nlgbench.core.signature import encoder_revision
from nlgbench.data.loaders import load_dataset
from nlgbench.runs.resultfile import read_result
from tiny import make_tiny_bert

pytestmark = pytest.mark.component


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("signature")
    items = load_dataset("wmt16", max_segments=3).items
    model = make_tiny_bert(root / "tiny", [t for it in items for t in (it.reference, it.hypothesis)], num_layers=2)
    spec = {
        "name": "signature",
        "datasets": [{"name": "wmt16", "max_segments": 3}],
        "repeats": 1,
        "warmup": 0,
        "batch_size": 4,
        "threads": 1,
        "metrics": [
            {
                "metric": "bertscore",
                "options": {"idf": True},
                "encoders": [str(model), {"name": str(model), "num_layers": 1}],
            }
        ],
    }
    (root / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    assert main(["run", str(root / "spec.yaml"), "--out", str(out)]) == 0
    return out, model


def test_a_cell_records_the_scorers_signature(sweep: tuple[Path, Path]) -> None:
    out, model = sweep
    revision = encoder_revision(str(model))
    cells = {read_result(folder).config.encoder.num_layers: read_result(folder) for folder in (out / "cells").iterdir()}
    whole, cut = cells[None].scorer or {}, cells[1].scorer or {}
    tail = f"idf:yes|refs:max|nlgbench:{nlgbench.__version__}"
    assert whole["signature"].startswith(f"bertscore|enc:{model.name}@{revision}|L2|{tail}|torch:")
    assert cut["signature"].startswith(f"bertscore|enc:{model.name}@{revision}|L1|num_layers=1|{tail}|torch:")
    # the API's scorer with the same settings has the same signature
    assert nlgbench.Scorer("bertscore", encoder=str(model), device="cpu", idf=True).signature == whole["signature"]
    with (out / "results.csv").open(encoding="utf-8", newline="") as fh:
        column = {row["cell_id"]: row["signature"] for row in csv.DictReader(fh)}
    assert sorted(column.values()) == sorted([whole["signature"], cut["signature"]])
    assert main(["report", str(out)]) == 0
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert "<h2>Signatures</h2>" in page and cut["signature"] in page


def test_score_prints_the_signature(
    sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, model = sweep
    (tmp_path / "h.txt").write_text("a cat sat\nthe dog ran\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("a cat was sitting\na dog runs\n", encoding="utf-8")
    argv = ["score", "-c", str(tmp_path / "h.txt"), "-r", str(tmp_path / "r.txt"), "--encoder", str(model)]
    assert main([*argv, "--json", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed["n"] == 2 and len(printed["outputs"]["score"]) == 2
    assert printed["signature"] == nlgbench.Scorer("bertscore", encoder=str(model), device="cpu").signature
    assert f"signature: {printed['signature']}" in captured.err
