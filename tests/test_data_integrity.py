"""Data integrity at the edges: catalogue file names that leave the dataset cache, one
verbatim TSV reading rule for the importer and the own-data loader, sampling of rows without a
document, and the smaller promises of "Your own data" (duplicate keys and columns, empty human
scores, unknown carried columns, file names given where a catalogue name is expected)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from helpers import write_jsonl
from nlgbench.cli import main
from nlgbench.data.catalogue import fetch, load_catalogue
from nlgbench.data.importers.summeval import summeval_records
from nlgbench.data.importers.table import import_table
from nlgbench.data.items import HUMAN, sample_items
from nlgbench.data.loaders import load_dataset
from nlgbench.data.text import tsv_table
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

# A reported reproduction, byte for byte: a field that opens a quote it never closes.
QUOTED_TSV = (
    "lp\tseg_id\tsystem\treference\thypothesis\thuman\n"
    'de-en\t1\tA\ta b\t"Hello" he said\t0.5\n'
    'de-en\t2\tA\te f\t"unclosed quote\t0.7\n'
    "de-en\t3\tA\tx y\tz w\t0.9\n"
    'de-en\t4\tA\tq r\tend" of it\t0.1\n'
)
QUOTED_HYPOTHESES = ['"Hello" he said', '"unclosed quote', "z w", 'end" of it']
QUOTED_HUMAN = [0.5, 0.7, 0.9, 0.1]


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI in-process; it must exit 2 with one `nlgbench: error:` line; returns that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nlgbench: error: "), err
    return err


def record(seg_id: int, human: Any = 0.5, **fields: Any) -> dict[str, Any]:
    return {
        "lp": "de-en",
        "seg_id": seg_id,
        "system": "A",
        "reference": f"ref {seg_id}",
        "hypothesis": f"hyp {seg_id}",
        "human": human,
        **fields,
    }


# --------------------------------------------------------------------------- item 3: catalogue paths


def evil_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, rel: str) -> Path:
    """A user catalogue whose one file would land at tmp_path/d7out/evil.txt, with a mirror that serves it."""
    data = b"owned\n"
    mirror = tmp_path / "m1" / "m2" / "m3" / "m4" / "mirror"  # deep enough that the climbing sources stay under m1
    source = mirror / folder / rel
    (mirror / folder).mkdir(parents=True, exist_ok=True)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    entry = {
        "source": "https://example.invalid/x",
        "folder": folder,
        "format": "da",
        "language_pairs": ["xx-en"],
        "pattern": "f.{field}.{lp}",
        "files": {rel: hashlib.sha256(data).hexdigest()},
    }
    catalogue = tmp_path / "evil.yaml"
    catalogue.write_text(json.dumps({"datasets": {"evil": entry}}), encoding="utf-8")
    monkeypatch.setenv("NLGBENCH_CATALOGUE", str(catalogue))
    monkeypatch.setenv("NLGBENCH_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "c1" / "cache"))
    return catalogue


def written_outside(tmp_path: Path) -> list[Path]:
    """Copies of evil.txt other than the mirror's."""
    return [p for p in tmp_path.rglob("evil.txt") if tmp_path / "m1" not in p.parents]


@pytest.mark.parametrize(
    "folder, rel",
    [
        ("f", "../../../d7out/evil.txt"),  # the issue's file name: cache/datasets/f/../../../d7out = tmp/c1/d7out
        ("../../../d7out", "evil.txt"),  # the folder climbs out instead
        ("f", "sub/../../../../d7out/evil.txt"),  # climbs out only after normalisation
    ],
)
def test_catalogue_entry_leaving_the_cache_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], folder: str, rel: str
) -> None:
    evil_catalogue(tmp_path, monkeypatch, folder, rel)
    err = one_error_line(capsys, ["datasets", "fetch", "evil"])
    assert "evil.yaml" in err and "outside" in err
    assert written_outside(tmp_path) == [], "nothing may be written outside the cache"


def test_absolute_catalogue_file_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evil_catalogue(tmp_path, monkeypatch, "f", "x.txt")
    doc = json.loads((tmp_path / "evil.yaml").read_text())
    doc["datasets"]["evil"]["files"] = {str(tmp_path / "abs.txt"): "0" * 64}
    (tmp_path / "evil.yaml").write_text(json.dumps(doc))
    with pytest.raises(UserError, match="outside"):
        load_catalogue()


def test_fetch_checks_the_destination_just_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalogue handed to fetch directly (not through load_catalogue) is checked again."""
    catalogue = evil_catalogue(tmp_path, monkeypatch, "f", "../../../d7out/evil.txt")
    monkeypatch.delenv("NLGBENCH_CATALOGUE")
    with pytest.raises(UserError, match="outside"):
        fetch("evil", catalogue=json.loads(catalogue.read_text()))
    assert written_outside(tmp_path) == []


def test_fetch_refuses_a_destination_that_resolves_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that is fine as text but leads through a symlink in the cache out of it."""
    evil_catalogue(tmp_path, monkeypatch, "f", "link/evil.txt")
    (tmp_path / "d7out").mkdir()
    (tmp_path / "c1" / "cache" / "datasets" / "f").mkdir(parents=True)
    (tmp_path / "c1" / "cache" / "datasets" / "f" / "link").symlink_to(tmp_path / "d7out")
    with pytest.raises(UserError, match="outside the dataset cache"):
        fetch("evil")
    assert list((tmp_path / "d7out").iterdir()) == []


def test_catalogue_subfolder_inside_the_cache_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evil_catalogue(tmp_path, monkeypatch, "f", "sub/../inner/ok.txt")
    local = fetch("evil")
    assert (local / "inner" / "ok.txt").read_bytes() == b"owned\n"


# --------------------------------------------------------------------------- item 5: one TSV rule


def test_importer_reads_the_issue_tsv_verbatim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "q.tsv"
    src.write_text(QUOTED_TSV, encoding="utf-8")
    out = tmp_path / "q.jsonl"
    assert main(["datasets", "import", "table", str(src), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["hypothesis"] for r in rows] == QUOTED_HYPOTHESES
    assert [r["human"] for r in rows] == QUOTED_HUMAN
    assert [r["seg_id"] for r in rows] == [1, 2, 3, 4]


def test_tsv_table_keeps_quotes_and_splits_only_on_newlines(tmp_path: Path) -> None:
    text = (
        "a\tb\n"
        '"quoted"\tx "embedded" y\r\n'  # CRLF ends a line too
        '"unclosed\tline\u2028sep\x0bvt\n'  # Unicode line separator and VT are text, not line ends
        "\n"
        'last\t""\n'
    )
    header, rows = tsv_table(tmp_path / "t.tsv", text)
    assert header == ["a", "b"]
    assert rows == [(2, ['"quoted"', 'x "embedded" y']), (3, ['"unclosed', "line\u2028sep\x0bvt"]), (5, ["last", '""'])]


@pytest.mark.parametrize("row, fields", [("de-en\t2\tr\th\t0.5\tn\textra", 7), ("de-en\t2\tr\th\t0.5", 5)])
def test_tsv_row_with_wrong_field_count_names_its_line(tmp_path: Path, row: str, fields: int) -> None:
    src = tmp_path / "bad.tsv"
    src.write_text(
        "lp\tseg_id\treference\thypothesis\thuman\tnote\nde-en\t1\tr\th\t0.5\tn\n" + row + "\n", encoding="utf-8"
    )
    for read in (lambda: import_table(src, tmp_path / "o.jsonl"), lambda: load_dataset(path=src)):
        with pytest.raises(UserError, match=rf"bad\.tsv line 3: {fields} tab-separated fields, header has 6"):
            read()


def test_importer_and_loader_give_identical_texts(tmp_path: Path) -> None:
    src = tmp_path / "wmt.tsv"
    rows = [
        ("de-en", 1, '"Quoted source," she said', 'a "b" c', '"open', "0.25"),
        ("de-en", 2, "plain", "ref\u2028with separator", 'close"', "-1.5"),
        ("fi-en", 1, " leading space ", '""', "x", "3"),
    ]
    src.write_text(
        "lp\tseg_id\tsource\treference\thypothesis\thuman\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    out = tmp_path / "wmt.jsonl"
    import_table(src, out)
    direct, imported = load_dataset(path=src), load_dataset(path=out)

    def texts(ds: Any) -> list[tuple]:
        return [(it.key, it.source, it.references, it.hypothesis, it.human) for it in ds.items]

    assert texts(direct) == texts(imported)
    assert [it.source for it in direct.items] == [r[2] for r in rows]


# --------------------------------------------------------------------------- item 9: sample without doc_id


def test_sample_draws_rows_without_doc_id_as_single_item_documents(tmp_path: Path) -> None:
    records = [record(i, doc_id="d1") for i in (1, 2, 3)] + [record(i, doc_id="d2") for i in (4, 5, 6)]
    records += [record(i) for i in (7, 8, 9, 10)]  # no doc_id
    items = load_dataset(path=write_jsonl(tmp_path / "mixed.jsonl", records)).items
    units = {"d1": {1, 2, 3}, "d2": {4, 5, 6}, **{f"row{i}": {i} for i in (7, 8, 9, 10)}}  # 6 units
    drawn_docless = 0
    for seed in range(30):
        for n in (1, 2, 5):
            kept = {it.seg_id for it in sample_items(items, n, seed)}
            chosen = [u for u, ids in units.items() if ids <= kept]
            assert set().union(*(units[u] for u in chosen)) == kept, (seed, n, kept)  # whole units only
            assert len(chosen) == n, (seed, n, kept)  # n units: a doc-less row is one
            drawn_docless += sum(u.startswith("row") for u in chosen)
    assert drawn_docless > 0


# --------------------------------------------------------------------------- lower-severity items


@pytest.mark.parametrize(
    "human, line, key",
    [
        (0.5, '{"lp": "de-en", "seg_id": 2, "reference": "r", "hypothesis": "h", "human": 0.1, "human": 0.9}', "human"),
        (
            {"flu": 1},
            '{"lp": "de-en", "seg_id": 2, "reference": "r", "hypothesis": "h", "human": {"flu": 1, "flu": 2}}',
            "flu",
        ),
    ],
)
def test_duplicate_jsonl_key_is_refused_with_its_line(tmp_path: Path, human: Any, line: str, key: str) -> None:
    src = tmp_path / "dup.jsonl"
    src.write_text(json.dumps(record(1, human=human)) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"dup\.jsonl line 2: duplicate key '{key}'"):
        load_dataset(path=src)


def test_summeval_duplicate_key_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "se.jsonl"
    src.write_text(
        '{"id": "d", "model_id": "M1", "model_id": "M2", "decoded": "x", "references": ["r"], '
        '"expert_annotations": [{"fluency": 3}]}\n',
        encoding="utf-8",
    )
    with pytest.raises(UserError, match=r"se\.jsonl line 1: duplicate key 'model_id'"):
        summeval_records(src)


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".tsv", "\t")])
def test_table_with_two_same_named_columns_is_refused(tmp_path: Path, suffix: str, sep: str) -> None:
    src = tmp_path / f"t{suffix}"
    src.write_text(
        sep.join(["lp", "seg_id", "reference", "hypothesis", "human", "human"])
        + "\n"
        + sep.join(["de-en", "1", "r", "h", "0.1", "0.9"])
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError, match="duplicate column.*human"):
        import_table(src, tmp_path / "o.jsonl")


def test_upper_case_data_file_name_is_a_path_for_import_scores(tmp_path: Path) -> None:
    from nlgbench.runs.importscores import import_scores

    data = write_jsonl(tmp_path / "BASE.JSONL", [record(i, human=float(i)) for i in range(1, 5)])
    scores = tmp_path / "s.csv"
    scores.write_text("lp,seg_id,system,score\n" + "".join(f"de-en,{i},A,{i * 2}\n" for i in range(1, 5)))
    result = import_scores(scores, str(data), "mine", "none", tmp_path / "run")
    assert result.status == "ok"


def test_upper_case_data_file_name_as_catalogue_name_says_use_path(tmp_path: Path) -> None:
    from nlgbench.core.spec import parse_spec

    with pytest.raises(UserError, match="path"):
        parse_spec(
            {"name": "t", "datasets": [{"name": "BASE.JSONL"}], "metrics": [{"metric": "sentbleu"}]}, base=tmp_path
        )


def test_sample_larger_than_the_data_warns_and_says_what_was_drawn(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "seven.jsonl", [record(i) for i in range(1, 8)])
    ds = load_dataset(path=src, sample=(100000, 3))
    assert len(ds.items) == 7 and ds.drawn_whole
    assert any("100000" in w and "7" in w for w in ds.warnings), ds.warnings
    assert not load_dataset(path=src, sample=(3, 3)).drawn_whole


@pytest.mark.integration
def test_a_sample_that_draws_everything_is_labelled_as_the_whole_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sample: {n: 100000}` on 7 items was labelled `seven[~100000,seed=3]`: a label of what was not
    drawn. The cells are the whole dataset's (same items, same order), labelled and identified so,
    in a dry run as in a run; a sample that draws fewer items keeps its `[~n]` label."""
    import nlgbench

    src = write_jsonl(tmp_path / "seven.jsonl", [record(i) for i in range(1, 8)])
    metrics = [{"metric": "sentbleu", "encoders": ["none"]}]
    for sample, label in (({"n": 100000, "seed": 3}, "seven"), ({"n": 3, "seed": 3}, "seven[~3,seed=3]")):
        spec = {"name": "s", "datasets": [{"path": str(src), "sample": sample}], "metrics": metrics, "repeats": 1}
        (tmp_path / "s.yaml").write_text(json.dumps(spec), encoding="utf-8")
        assert main(["run", str(tmp_path / "s.yaml"), "--dry-run"]) == 0
        (dry,) = [line for line in capsys.readouterr().out.splitlines() if " | " in line]
        frame = nlgbench.run(spec, tmp_path / f"run{sample['n']}", quiet=True)
        assert list(frame.dataset) == [label]
        assert dry.split()[0] == frame.cell_id[0] and f" | {label} | " in dry  # the dry run shows the same cell
        assert int(frame.n_segments[0]) == (7 if sample["n"] > 7 else 3)
    whole = nlgbench.run(
        {"name": "w", "datasets": [{"path": str(src)}], "metrics": metrics, "repeats": 1},
        tmp_path / "whole",
        quiet=True,
    )
    assert list(whole.cell_id) == list(nlgbench.load_run(tmp_path / "run100000").cell_id)


def test_unknown_carried_column_is_refused_with_a_hint(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "c.jsonl", [record(1, domain="news"), record(2, domain="web")])
    with pytest.raises(UserError, match=r"'domian'.*did you mean 'domain'"):
        load_dataset(path=src, columns=["domian"])
    assert [it.extra for it in load_dataset(path=src, columns=["domain"]).items] == [
        {"domain": "news"},
        {"domain": "web"},
    ]


def test_missing_pyarrow_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    def no_engine(*args: Any, **kwargs: Any) -> None:  # pandas' message when neither engine is installed
        raise ImportError(
            "Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.\n"
            "A suitable version of pyarrow or fastparquet is required for parquet support.\n"
            "Trying to import the above resulted in these errors:\n"
            " - Missing optional dependency 'pyarrow'. Use pip or conda to install pyarrow.\n"
            " - Missing optional dependency 'fastparquet'. Use pip or conda to install fastparquet."
        )

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    with pytest.raises(UserError) as info:
        import_table(tmp_path / "t.parquet", tmp_path / "o.jsonl")
    assert "\n" not in str(info.value) and "pyarrow" in str(info.value)


def test_empty_or_null_human_is_a_missing_score(tmp_path: Path) -> None:
    """README: `human` null / absent / empty means missing; the item stays, without a score."""
    tsv = tmp_path / "h.tsv"
    tsv.write_text(
        "lp\tseg_id\treference\thypothesis\thuman\nde-en\t1\tr\th\t0.5\nde-en\t2\tr\th\t\nde-en\t3\tr\th\t0.25\n",
        encoding="utf-8",
    )
    jsonl = write_jsonl(tmp_path / "h.jsonl", [record(1, 0.5), record(2, None), record(3, 0.25)])
    table_out = tmp_path / "imported.jsonl"
    import_table(tsv, table_out)
    for path in (tsv, jsonl, table_out):
        ds = load_dataset(path=path)
        assert ds.human_dims == [HUMAN] and len(ds.items) == 3
        assert ds.missing_human(HUMAN) == 1
        assert math.isnan(ds.items[1].human) and ds.items[1].humans == {}
        assert [it.human for it in ds.items if it.humans] == [0.5, 0.25]


def test_all_human_scores_missing_is_refused(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "none.jsonl", [record(1, None), record(2, None)])
    with pytest.raises(UserError, match="no item has a human score"):
        load_dataset(path=src)
