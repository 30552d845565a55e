"""Importers of public human-judgment releases, on tiny synthetic files in the
releases' layouts (tests/data/importers/), plus the real WMT16 DA folder through the data mirror."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from helpers import write_jsonl
from nlgbench.cli.assets import cmd_import
from nlgbench.cli.parser import add_import_arguments
from nlgbench.data.importers.summeval import import_summeval
from nlgbench.data.importers.table import import_table
from nlgbench.data.importers.wmt_da import import_wmt_da
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent / "data" / "importers"
SUMMEVAL = DATA / "summeval" / "model_annotations.aligned.paired.jsonl"
DA_FOLDER = DATA / "DAseg-wmt99"
DIMS = ["coherence", "consistency", "fluency", "relevance"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_cli(argv: list[str]) -> int:
    """`datasets import ...` through a parser built with add_import_arguments, errors as the CLI prints them."""
    parser = argparse.ArgumentParser(prog="nlgbench datasets import")
    add_import_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return cmd_import(args)
    except UserError as exc:
        print(f"nlgbench: error: {exc}", file=sys.stderr)
        return 2


# --------------------------------------------------------------------------- SummEval


def test_summeval_expert_means_by_hand(tmp_path: Path) -> None:
    out = tmp_path / "summeval.jsonl"
    summary = import_summeval(SUMMEVAL, out)
    items = read_jsonl(out)
    assert len(items) == 12 and summary.items == 12
    first, second = items[0], items[1]
    # line 1: experts coherence 1,3,4; consistency 5,3,3; fluency 5,3,4; relevance 2,1,4
    assert first == {
        "lp": "en",
        "seg_id": "dm-test-0a1b",
        "system": "M0",
        "doc_id": "dm-test-0a1b",
        "source": 'Article 0: the story\'s text, with "quotes" and ünïcode.',
        "references": ["doc 0 highlight.", "doc 0 crowd ref one.", "doc 0 crowd ref two."],
        "hypothesis": "summary of doc 0 by M0.",
        "human": {
            "coherence": pytest.approx(8 / 3),
            "consistency": pytest.approx(11 / 3),
            "fluency": pytest.approx(4.0),
            "relevance": pytest.approx(7 / 3),
        },
    }
    # line 2: experts coherence 1,4,1; consistency 3,5,1; fluency 2,4,5; relevance 4,5,5
    assert (second["system"], second["seg_id"]) == ("M11", "dm-test-0a1b")
    assert second["human"] == pytest.approx(
        {"coherence": 2.0, "consistency": 3.0, "fluency": 11 / 3, "relevance": 14 / 3}
    )
    assert (summary.systems, summary.documents, summary.references_min, summary.references_max) == (3, 4, 3, 3)
    assert summary.dimensions == tuple(DIMS) and dict(summary.missing) == {d: 0 for d in DIMS}


def test_summeval_turker_means_by_hand(tmp_path: Path) -> None:
    out = tmp_path / "summeval.jsonl"
    import_summeval(SUMMEVAL, out, annotators="turker")
    first = read_jsonl(out)[0]
    # line 1: turkers coherence 4,3,5,3,1; consistency 1,3,2,2,5; fluency 3,3,2,1,3; relevance 2,3,5,1,1
    assert first["human"] == pytest.approx({"coherence": 3.2, "consistency": 2.6, "fluency": 2.4, "relevance": 2.4})


def test_summeval_every_line_field_by_field(tmp_path: Path) -> None:
    out = tmp_path / "summeval.jsonl"
    import_summeval(SUMMEVAL, out)
    raw = read_jsonl(SUMMEVAL)
    items = read_jsonl(out)
    assert len(items) == len(raw)
    for line, item in zip(raw, items, strict=True):
        assert (item["seg_id"], item["doc_id"], item["system"]) == (line["id"], line["id"], line["model_id"])
        assert (item["source"], item["references"], item["hypothesis"]) == (
            line["text"],
            line["references"],
            line["decoded"],
        )
        for dim in DIMS:
            assert item["human"][dim] == pytest.approx(statistics.mean(a[dim] for a in line["expert_annotations"]))
    assert len({(i["lp"], i["seg_id"], i["system"]) for i in items}) == 12  # items are unique


def test_summeval_unpaired_file_and_a_missing_dimension(tmp_path: Path) -> None:
    lines = read_jsonl(SUMMEVAL)
    for line in lines:
        del line["text"]  # the unpaired release, model_annotations.aligned.jsonl
    for annotation in lines[3]["expert_annotations"]:
        del annotation["fluency"]
    lines[4]["expert_annotations"][0]["relevance"] = None  # one expert's missing score: the mean of the other two
    src = tmp_path / "model_annotations.aligned.jsonl"
    write_jsonl(src, lines)
    out = tmp_path / "out.jsonl"
    summary = import_summeval(src, out)
    items = read_jsonl(out)
    assert all(item["source"] == "" for item in items)
    assert items[3]["human"]["fluency"] is None and items[3]["human"]["coherence"] is not None
    expected = statistics.mean(a["relevance"] for a in lines[4]["expert_annotations"][1:])
    assert items[4]["human"]["relevance"] == pytest.approx(expected)
    assert dict(summary.missing) == {"coherence": 0, "consistency": 0, "fluency": 1, "relevance": 0}
    assert any("pair_data.py" in note for note in summary.notes)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ls: ls[2].pop("decoded"), "line 3: missing field(s) decoded"),
        (
            lambda ls: ls[1].update(model_id="M0"),
            "line 2: duplicate summary id='dm-test-0a1b' model_id='M0' (first at line 1)",
        ),
        (
            lambda ls: ls[0]["expert_annotations"][1].update(coherence="high"),
            "line 1: expert_annotations[1].coherence: score 'high'",
        ),
        (lambda ls: ls[5].update(references=[]), "line 6: field 'references' must be a non-empty list of texts"),
    ],
)
def test_summeval_bad_lines_are_one_line_errors(tmp_path: Path, change: Any, message: str) -> None:
    lines = read_jsonl(SUMMEVAL)
    change(lines)
    src = tmp_path / "bad.jsonl"
    write_jsonl(src, lines)
    with pytest.raises(UserError) as err:
        import_summeval(src, tmp_path / "out.jsonl")
    assert message in str(err.value) and str(src) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out.jsonl").exists()


def test_summeval_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    src = tmp_path / "model_annotations.aligned.paired.jsonl"
    src.write_bytes(SUMMEVAL.read_bytes())
    with pytest.raises(UserError, match="is the input file"):
        import_summeval(src, src)
    assert src.read_bytes() == SUMMEVAL.read_bytes()


# --------------------------------------------------------------------------- WMT DA


def test_wmt_da_synthetic_folder(tmp_path: Path) -> None:
    out = tmp_path / "da.jsonl"
    summary = import_wmt_da(DA_FOLDER, out)
    items = read_jsonl(out)
    assert [(i["lp"], i["seg_id"]) for i in items] == [
        ("de-en", 1),
        ("de-en", 2),
        ("de-en", 3),
        ("fi-en", 1),
        ("fi-en", 2),
    ]
    assert items[1] == {
        "lp": "de-en",
        "seg_id": 2,
        "system": "",
        "source": "Ein Haus.",
        "references": ["A house."],
        "hypothesis": "One house.",
        "human": -1.25,
    }
    assert items[3] == {
        "lp": "fi-en",
        "seg_id": 1,
        "system": "",
        "source": "Hyvää päivää.",
        "references": ["Good day."],
        "hypothesis": "Good day.",
        "human": 1.4,
    }
    assert [i["human"] for i in items] == [0.512, -1.25, 0.03, 1.4, -0.2]
    assert (summary.items, summary.systems, summary.documents, summary.dimensions) == (5, 0, 0, ())
    assert import_wmt_da(DA_FOLDER, out, lps=["fi-en"]).items == 2
    assert {i["lp"] for i in read_jsonl(out)} == {"fi-en"}


def _copy_da(tmp_path: Path) -> Path:
    folder = tmp_path / "DAseg-wmt99"
    folder.mkdir()
    for path in DA_FOLDER.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_wmt_da_unequal_lines_and_bad_number(tmp_path: Path) -> None:
    folder = _copy_da(tmp_path)
    ref = folder / "DAseg.newstest2099.reference.de-en"
    ref.write_text("That is good.\nA house.\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        import_wmt_da(folder, tmp_path / "out.jsonl")
    assert "line 3: no matching line in DAseg.newstest2099.reference.de-en (3 lines vs 2)" in str(err.value)
    ref.write_text("That is good.\nA house.\nGood morning!\n", encoding="utf-8")
    (folder / "DAseg.newstest2099.human.fi-en").write_text("1.4\nabc\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"DAseg\.newstest2099\.human\.fi-en line 2: human score 'abc' is not a number"):
        import_wmt_da(folder, tmp_path / "out.jsonl")
    with pytest.raises(UserError, match="unknown language pair 'de-fr'"):
        import_wmt_da(folder, tmp_path / "out.jsonl", lps=["de-fr"])
    (folder / "DAseg.newstest2099.source.fi-en").unlink()
    with pytest.raises(UserError, match="language pair fi-en lacks DAseg.newstest2099.source.fi-en"):
        import_wmt_da(folder, tmp_path / "out.jsonl", lps=["fi-en"])
    assert not (tmp_path / "out.jsonl").exists()


def _mirror_folder(name: str) -> Path:
    mirror = os.environ.get("NLGBENCH_DATA_MIRROR", "").strip()
    if not mirror or not (Path(mirror) / name).is_dir():
        pytest.skip(f"NLGBENCH_DATA_MIRROR has no {name}/")
    return Path(mirror) / name


def test_wmt_da_real_wmt16_folder(tmp_path: Path) -> None:
    folder = _mirror_folder("wmt16-selection")
    to_english = ["cs-en", "de-en", "fi-en", "ro-en", "ru-en", "tr-en"]
    out = tmp_path / "wmt16.jsonl"
    assert import_wmt_da(folder, out, lps=to_english).items == 3360
    items = read_jsonl(out)
    assert {lp: sum(1 for i in items if i["lp"] == lp) for lp in to_english} == {lp: 560 for lp in to_english}
    for lp, line in [("cs-en", 1), ("de-en", 281), ("tr-en", 560)]:
        item = next(i for i in items if i["lp"] == lp and i["seg_id"] == line)
        raw = {
            f: (folder / f"DAseg.newstest2016.{f}.{lp}").read_text(encoding="utf-8").split("\n")[line - 1]
            for f in ("source", "reference", "mt-system", "human")
        }
        assert (item["source"], item["references"], item["hypothesis"]) == (
            raw["source"],
            [raw["reference"]],
            raw["mt-system"],
        )
        assert item["human"] == float(raw["human"]) and item["system"] == ""
    everything = import_wmt_da(folder, tmp_path / "all.jsonl")
    has_en_ru = (folder / "DAseg.newstest2016.human.en-ru").is_file()
    assert everything.items == 3360 + (560 if has_en_ru else 0)


# --------------------------------------------------------------------------- tables


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doc": ["d1", "d1", "d2", "d2"],
            "model": ["A", "B", "A", "B"],
            "input": ["table one", "table one", "table two", "table two"],
            "output": ["out 1A", "out 1B", "out 2A", "NA"],  # "NA" is a text, not a missing value
            "ref_a": ["r1a", "r1a", "r2a", "r2a"],
            "ref_b": ["r1b", "r1b", "r2b", "r2b"],
            "fluency": [4.5, 3.0, None, 2.0],
            "adequacy": [1.0, 2.5, 3.5, 4.0],
        }
    )


MAPPING = {
    "seg_id": "doc",
    "doc_id": "doc",
    "system": "model",
    "source": "input",
    "hypothesis": "output",
    "references": "ref_a, ref_b",
}


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".tsv"])
def test_table_csv_parquet_tsv(tmp_path: Path, suffix: str) -> None:
    src = tmp_path / f"d2t{suffix}"
    frame = _frame()
    if suffix == ".parquet":
        frame.to_parquet(src)
    else:
        frame.to_csv(src, index=False, sep="," if suffix == ".csv" else "\t")
    out = tmp_path / "d2t.jsonl"
    summary = import_table(
        src, out, columns=MAPPING, human={"fluency": "fluency", "adequacy": "adequacy"}, lp="data2text"
    )
    items = read_jsonl(out)
    assert items[0] == {
        "lp": "data2text",
        "seg_id": "d1",
        "system": "A",
        "doc_id": "d1",
        "source": "table one",
        "references": ["r1a", "r1b"],
        "hypothesis": "out 1A",
        "human": {"fluency": 4.5, "adequacy": 1.0},
    }
    assert items[2]["human"] == {"fluency": None, "adequacy": 3.5}
    assert items[3]["hypothesis"] == "NA" and items[3]["references"] == ["r2a", "r2b"]
    assert [(i["seg_id"], i["system"]) for i in items] == [("d1", "A"), ("d1", "B"), ("d2", "A"), ("d2", "B")]
    assert (summary.items, summary.systems, summary.documents, summary.references_max) == (4, 2, 2, 2)
    assert dict(summary.missing) == {"adequacy": 0, "fluency": 1}


def test_table_defaults_by_column_name_and_integer_seg_ids(tmp_path: Path) -> None:
    src = tmp_path / "mt.csv"
    pd.DataFrame(
        {
            "lp": ["de-en", "de-en"],
            "seg_id": ["2", "10"],
            "hypothesis": ["h2", "h10"],
            "reference": ["r2", "r10"],
            "human": ["0.5", "-1"],
        }
    ).to_csv(src, index=False)
    out = tmp_path / "mt.jsonl"
    import_table(src, out)
    assert read_jsonl(out) == [
        {
            "lp": "de-en",
            "seg_id": 2,
            "system": "",
            "source": "",
            "references": ["r2"],
            "hypothesis": "h2",
            "human": 0.5,
        },
        {
            "lp": "de-en",
            "seg_id": 10,
            "system": "",
            "source": "",
            "references": ["r10"],
            "hypothesis": "h10",
            "human": -1.0,
        },
    ]


@pytest.mark.parametrize(
    ("edit", "kwargs", "message"),
    [
        (lambda f: f.assign(model=["A", None, "A", "B"]), {}, "row 2: column 'model' is empty"),
        (
            lambda f: f.assign(adequacy=[1, "good", 2, 3]),
            {},
            "row 2: column 'adequacy': human score 'good' is not a number",
        ),
        (
            lambda f: f.assign(model=["A", "A", "A", "B"]),
            {},
            "row 2: duplicate item lp='x' seg_id='d1' system='A' (first at row 1)",
        ),
        (lambda f: f, {"columns": {**MAPPING, "hypothesis": "outptu"}}, "no column 'outptu'; did you mean 'output'?"),
        (lambda f: f, {"columns": {**MAPPING, "hyp": "output"}}, "unknown item field 'hyp'"),
        (lambda f: f, {"lp": None}, "no column for lp"),
    ],
)
def test_table_bad_input_is_one_line(tmp_path: Path, edit: Any, kwargs: dict[str, Any], message: str) -> None:
    src = tmp_path / "bad.csv"
    edit(_frame()).to_csv(src, index=False)
    arguments: dict[str, Any] = {"columns": MAPPING, "human": {"adequacy": "adequacy"}, "lp": "x"} | kwargs
    with pytest.raises(UserError) as err:
        import_table(src, tmp_path / "out.jsonl", **arguments)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out.jsonl").exists()


def test_table_single_human_column_empty_cell_is_missing(tmp_path: Path) -> None:
    """An empty cell of the one human column is a missing score (null), as in the loader;
    a column empty in every row is refused."""
    src = tmp_path / "scores.parquet"
    _frame().to_parquet(src)
    summary = import_table(src, tmp_path / "out.jsonl", columns={**MAPPING, "human": "fluency"}, lp="x")
    assert [r["human"] for r in read_jsonl(tmp_path / "out.jsonl")] == [4.5, 3.0, None, 2.0]
    assert summary.missing == {"human": 1} and "(missing: 1)" in summary.line("table")
    _frame().assign(fluency=[None] * 4).to_parquet(src)
    with pytest.raises(UserError, match="column 'fluency' \\(human\\) is empty in every row"):
        import_table(src, tmp_path / "out.jsonl", columns={**MAPPING, "human": "fluency"}, lp="x")


# --------------------------------------------------------------------------- command line


def test_cli_import_writes_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.jsonl"
    assert run_cli(["summeval", str(SUMMEVAL), "--out", str(out), "--annotators", "turker"]) == 0
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"summeval: wrote 12 items to {out} (3 systems, 4 documents, 3 references per item")
    assert read_jsonl(out)[0]["human"]["coherence"] == pytest.approx(3.2)
    assert run_cli(["wmt-da", str(DA_FOLDER), "--out", str(out), "--lp", "de-en,fi-en"]) == 0
    assert len(read_jsonl(out)) == 5
    src = tmp_path / "t.csv"
    _frame().to_csv(src, index=False)
    argv = ["table", str(src), "--out", str(out), "--lp", "d2t", "--human", "adequacy=adequacy"]
    argv += [arg for field, col in MAPPING.items() for arg in ("--column", f"{field}={col}")]
    assert run_cli(argv) == 0
    assert read_jsonl(out)[3]["human"] == {"adequacy": 4.0}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["wmt-da", str(DA_FOLDER), "--out", "x.jsonl", "--annotators", "expert"],
            "--annotators applies to summeval only",
        ),
        (["summeval", str(SUMMEVAL), "--out", "x.jsonl", "--column", "lp=a"], "--column applies to table only"),
        (["summeval", str(SUMMEVAL), "--out", "x.txt"], "must end in .jsonl"),
        (["table", "t.csv", "--out", "x.jsonl", "--human", "fluency"], "--human 'fluency': expected NAME=COLUMN"),
        (["wmt-da", str(SUMMEVAL), "--out", "x.jsonl"], "not a folder"),
    ],
)
def test_cli_bad_options_exit_2_with_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.jsonl").exists()


# --------------------------------------------------------------------------- round trip through the loader


def test_imported_files_load_as_own_data(tmp_path: Path) -> None:
    """What the importers write is what nlgbench.data.loaders reads: references, dimensions, documents, ids."""
    from nlgbench.data.loaders import load_dataset

    out = tmp_path / "summeval.jsonl"
    import_summeval(SUMMEVAL, out)
    raw = {(r["lp"], r["seg_id"], r["system"]): r for r in read_jsonl(out)}
    ds = load_dataset(path=out)
    assert ds.human_dims == DIMS and ds.has_docs and ds.has_systems and len(ds.items) == len(raw)
    for it in ds.items:
        r = raw[it.key]
        assert list(it.references) == r["references"] and it.doc_id == r["doc_id"] and it.hypothesis == r["hypothesis"]
        assert it.humans == {d: v for d, v in r["human"].items() if v is not None}
    out = tmp_path / "da.jsonl"
    import_wmt_da(DA_FOLDER, out)
    ds = load_dataset(path=out)
    assert (
        ds.human_dims == ["human"]
        and not ds.has_docs
        and [it.seg_id for it in ds.items if it.lp == "de-en"] == [1, 2, 3]
    )
    out = tmp_path / "table.jsonl"
    frame = _frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    import_table(
        tmp_path / "t.csv", out, columns=MAPPING, human={"fluency": "fluency", "adequacy": "adequacy"}, lp="en"
    )
    ds = load_dataset(path=out, human="fluency")
    assert ds.human_dims == ["fluency"] and ds.missing_human("fluency") == 1
    assert {it.references for it in ds.items} == {("r1a", "r1b"), ("r2a", "r2b")}
