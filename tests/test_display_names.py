"""The names a reader sees for encoders and metrics: the author's (a spec's `labels:` map, `--label
FULL=SHORT` on report and compare), else a short form of the variant (L3, int8, ORT); the same in
figures, tables, compare and index.html, while cell ids and CSV files keep the full labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import committed_copy, read_csv, write_spec
from nlgbench.cli import main
from nlgbench.core.labels import Names, label_map, label_option, short_label
from nlgbench.core.spec import parse_spec
from nlgbench.foundations.errors import UserError
from nlgbench.runs.provenance import PUBLISHED_RUN

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("label", "short"),
    [
        ("all-MiniLM-L6-v2[num_layers=3]", "all-MiniLM-L6-v2 L3"),
        ("all-MiniLM-L6-v2[quantize=int8]", "all-MiniLM-L6-v2 int8"),
        ("all-MiniLM-L6-v2[backend=onnxruntime,quantize=int8]", "all-MiniLM-L6-v2 ORT int8"),
        ("all-MiniLM-L6-v2[backend=openvino,dtype=bf16]", "all-MiniLM-L6-v2 OV bf16"),
        ("all-mpnet-base-v2[early_exit=0.5]", "all-mpnet-base-v2 exit 0.5"),
        ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
        ("all-mpnet-base-v2", "all-mpnet-base-v2"),
        ("odd[name", "odd[name"),  # not a variant: as it is
        ("m[unknown=1]", "m[unknown=1]"),
    ],
)
def test_short_label(label: str, short: str) -> None:
    assert short_label(label) == short


def test_label_option_splits_outside_brackets_and_refuses_what_it_cannot_read() -> None:
    assert label_option("all-MiniLM-L6-v2[num_layers=3]=MiniLM-L6 (3 layers)") == (
        "all-MiniLM-L6-v2[num_layers=3]",
        "MiniLM-L6 (3 layers)",
    )
    assert label_option("chrf=chrF") == ("chrf", "chrF")
    for bad in ("chrf", "=chrF", "chrf=", "x[a=1]", "chrf==cmd|x"):
        with pytest.raises(UserError, match="--label"):
            label_option(bad)


def test_names_given_first_then_short_and_one_name_per_label() -> None:
    names = Names({"chrf": "chrF"})
    assert names("chrf") == "chrF" and names("m[num_layers=2]") == "m L2" and names("sentbleu") == "sentbleu"
    with pytest.raises(UserError, match="'a' and 'b' would both be shown as 'x'"):
        Names({"a": "x", "b": "x"}).check(["a", "b"], "--label")
    with pytest.raises(UserError, match="would both be shown as 'm L2'"):
        Names({"m": "m L2"}).check(["m", "m[num_layers=2]"], "--label")


def test_spec_labels_map_is_checked_and_kept_out_of_cells() -> None:
    raw = {
        "name": "s",
        "datasets": ["wmt16"],
        "metrics": [{"metric": "sentbleu"}],
        "labels": {"sentbleu": "sentBLEU"},
    }
    spec = parse_spec(raw)
    assert spec.labels == {"sentbleu": "sentBLEU"}
    assert [c.cell_id for c in spec.cells()] == [c.cell_id for c in parse_spec({**raw, "labels": None}).cells()]
    for bad in (["sentbleu"], {"sentbleu": 3}, {"sentbleu": " "}, {"sentbleu": "=cmd"}):
        with pytest.raises(UserError, match=r"s\.labels|spec\.labels"):
            parse_spec({**raw, "labels": bad}, source="s")
    assert label_map(None, "x") == {}


@pytest.mark.integration
def test_names_reach_tables_figures_page_and_compare_but_not_the_csvs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lexical sweep (no model) with `labels: {chrf: chrF}`: the report shows chrF, sentBLEU from
    `--label`; the CSVs keep `chrf`; run.json keeps the map, so a fresh clone shows it too."""
    spec = {
        "name": "names",
        "datasets": [{"name": "wmt16", "max_segments": 5}],
        "repeats": 1,
        "threads": 1,
        "metrics": [{"metric": "sentbleu"}, {"metric": "chrf"}],
        "labels": {"chrf": "chrF"},
    }
    out = tmp_path / "run"
    assert main(["run", str(write_spec(tmp_path, spec)), "--out", str(out)]) == 0
    assert main(["report", str(out), "--label", "sentbleu=sentBLEU", "--format", "svg"]) == 0
    report = out / "report"
    md = (report / "tradeoff.md").read_text(encoding="utf-8")
    assert "| chrF |" in md and "| sentBLEU |" in md and "| chrf |" not in md
    assert {r["metric"] for r in read_csv(report / "tradeoff.csv")} == {"sentbleu", "chrf"}
    assert "chrF; baseline chrF" in (report / "tradeoff.tex").read_text(encoding="utf-8")  # no model: its own group
    page = (report / "index.html").read_text(encoding="utf-8")
    assert "<td class='t'>chrF</td>" in page or ">chrF<" in page
    svgs = " ".join(p.read_text(encoding="utf-8") for p in report.glob("runtime_*.svg"))
    assert "chrF" in svgs and "sentBLEU" in svgs  # panel titles (text kept as text)
    assert json.loads((report / PUBLISHED_RUN).read_text(encoding="utf-8"))["labels"] == {"chrf": "chrF"}
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, ignore=shutil.ignore_patterns("results.sqlite", "cells"))
    assert main(["report", str(fresh)]) == 0
    assert "| chrF |" in (fresh / "report" / "tradeoff.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(out), "--label", "sentbleu"]) == 2
    assert "--label takes FULL=SHORT" in capsys.readouterr().err


@pytest.mark.integration
def test_compare_prints_the_names_and_its_json_the_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = committed_copy("example", tmp_path)
    args = ["compare", str(example), "--candidate", "all-MiniLM-L6-v2[num_layers=3]", "--baseline", "all-mpnet-base-v2"]
    args += ["--label", "all-mpnet-base-v2=MPNet", "--resamples", "100"]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("candidate all-MiniLM-L6-v2 L3 vs baseline MPNet; quality")
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["candidate"], result["baseline"]) == ("all-MiniLM-L6-v2[num_layers=3]", "all-mpnet-base-v2")


@pytest.mark.integration
def test_compare_takes_the_names_it_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The name compare prints for an encoder (its short form, or the one `--label` gives) names it on
    the next command: copied from the output, it finds the same cells as the full label."""
    example = committed_copy("example", tmp_path)
    full = ["--candidate", "all-MiniLM-L6-v2[num_layers=3]", "--baseline", "all-mpnet-base-v2"]
    shown = ["--candidate", "all-MiniLM-L6-v2 L3", "--baseline", "MPNet", "--label", "all-mpnet-base-v2=MPNet"]
    results = []
    for args in (full, shown):
        assert main(["compare", str(example), *args, "--resamples", "100", "--json"]) == 0
        results.append(json.loads(capsys.readouterr().out))
    assert (results[1]["candidate"], results[1]["baseline"]) == ("all-MiniLM-L6-v2[num_layers=3]", "all-mpnet-base-v2")
    assert results[1]["rows"] == results[0]["rows"]
    assert main(["compare", str(example), "--candidate", "all-MiniLM-L6-v2 L2", "--baseline", "MPNet"]) == 2
    assert "unknown encoder 'all-MiniLM-L6-v2 L2'" in capsys.readouterr().err
