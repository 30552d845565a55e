"""Dataset files a test writes: fake catalogue datasets (DA and MQM: line counts, scores, checksums,
missing or unlisted files, expected items) and user files (JSONL and TSV, malformed, missing columns,
bad values, duplicates, blank positions).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import pytest

from helpers import fake_da, write_jsonl
from nlgbench.data.catalogue import MIRROR_ENV, sha256_file
from nlgbench.data.items import Dataset, Item, blank_positions, item_name
from nlgbench.data.loaders import load_dataset
from nlgbench.data.userfile import check_user_file
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def loaded(name: str) -> Dataset:
    """Each catalogue dataset loaded once per test session."""
    return load_dataset(name)


# --------------------------------------------------------------------------- fake catalogue datasets


DA_COLUMNS = {
    "source": ["s1", "s2", "s3"],
    "reference": ["r1", "r2", "r3"],
    "mt-system": ["h1", "h2", "h3"],
    "human": ["0.5", "-1", "2e-1"],
}


def test_fake_da_dataset_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, DA_COLUMNS)
    dataset = load_dataset("fake", catalogue=catalogue)
    assert dataset.items == [
        Item("xx-en", 1, "", "s1", "r1", "h1", 0.5),
        Item("xx-en", 2, "", "s2", "r2", "h2", -1.0),
        Item("xx-en", 3, "", "s3", "r3", "h3", 0.2),
    ]


def test_unequal_line_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    columns = dict(DA_COLUMNS, reference=["r1", "r2"])
    catalogue = fake_da(tmp_path, monkeypatch, columns)
    with pytest.raises(UserError, match=r"'fake', xx-en: files have unequal line counts .*fake\.reference\.xx-en: 2"):
        load_dataset("fake", catalogue=catalogue)


def test_bad_human_score_in_da_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, dict(DA_COLUMNS, human=["0.5", "n/a", "1"]))
    with pytest.raises(UserError, match=r"fake-da/fake\.human\.xx-en line 2: human score 'n/a' is not a number"):
        load_dataset("fake", catalogue=catalogue)


def test_checksum_mismatch_from_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, DA_COLUMNS)
    catalogue["datasets"]["fake"]["files"]["fake.source.xx-en"] = "f" * 64
    with pytest.raises(
        UserError, match=r"checksum mismatch for fake-da/fake\.source\.xx-en .*expected sha256 f{64}, got"
    ):
        load_dataset("fake", catalogue=catalogue)
    cached = tmp_path / "cache" / "datasets" / "fake-da"
    assert not (cached / "fake.source.xx-en").exists()
    assert not list(cached.glob(".*part"))  # nothing half-written left


def test_missing_file_in_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, DA_COLUMNS)
    (tmp_path / "mirror" / "fake-da" / "fake.human.xx-en").unlink()
    with pytest.raises(UserError, match=r"missing file .*fake-da/fake\.human\.xx-en in the dataset mirror"):
        load_dataset("fake", catalogue=catalogue)


def test_catalogue_entry_file_not_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, DA_COLUMNS)
    del catalogue["datasets"]["fake"]["files"]["fake.human.xx-en"]
    with pytest.raises(UserError, match="uses 'fake.human.xx-en' but does not list it"):
        load_dataset("fake", catalogue=catalogue)


def test_expected_items_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = fake_da(tmp_path, monkeypatch, DA_COLUMNS)
    catalogue["datasets"]["fake"]["expected_items"] = 4
    with pytest.raises(UserError, match=r"'fake': expected 4 items \(catalogue\), got 3"):
        load_dataset("fake", catalogue=catalogue)


def fake_mqm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, score_lines: list[str]) -> dict[str, Any]:
    """A one-pair MQM dataset (systems A, B; 3 segments) in a fake mirror; returns its catalogue."""
    mirror = tmp_path / "mirror" / "fake-mqm"
    (mirror / "out").mkdir(parents=True)
    contents = {
        "src.txt": ["s1", "s2", "s3"],
        "ref.txt": ["r1", "r2", "r3"],
        "out/A.txt": ["a1", "a2", "a3"],
        "out/B.txt": ["b1", "b2", "b3"],
        "scores.tsv": ["system mqm_avg_score seg_id", *score_lines],
    }
    files = {}
    for rel, lines in contents.items():
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        (mirror / rel).write_bytes(data)
        files[rel] = sha256(data)
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "mirror"))
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    layout = {
        "source": "src.txt",
        "reference": "ref.txt",
        "scores": "scores.tsv",
        "systems": {"B": "out/B.txt", "A": "out/A.txt"},
    }
    entry = {
        "source": "https://example.invalid",
        "folder": "fake-mqm",
        "format": "mqm",
        "language_pairs": ["zz-en"],
        "layout": {"zz-en": layout},
        "files": files,
    }
    return {"datasets": {"fake": entry}}


def test_fake_mqm_drops_none_and_sorts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scores = ["B\t-1.5 2", "A\tNone 1", "A -2 2", "B\tNone 1", "A\t0 3", "B\t-25 3"]
    dataset = load_dataset("fake", catalogue=fake_mqm(tmp_path, monkeypatch, scores))
    assert dataset.has_systems
    assert dataset.items == [
        Item("zz-en", 2, "A", "s2", "r2", "a2", -2.0),
        Item("zz-en", 2, "B", "s2", "r2", "b2", -1.5),
        Item("zz-en", 3, "A", "s3", "r3", "a3", 0.0),
        Item("zz-en", 3, "B", "s3", "r3", "b3", -25.0),
    ]


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        (["A 1 1", "A 2 1"], "line 3: duplicate score for system 'A' seg_id 1"),
        (["A 1 4"], r"line 2: seg_id 4 is outside 1\.\.3"),
        (["C 1 1"], "line 2: system 'C' has no output file in the catalogue"),
        (["A 1"], "line 2: expected 'system score seg_id'"),
        (["A x 1"], "line 2: human score 'x' is not a number"),
        (["A 1 one"], "line 2: seg_id 'one' is not an integer"),
    ],
)
def test_fake_mqm_bad_score_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scores: list[str], message: str
) -> None:
    with pytest.raises(UserError, match=r"fake-mqm/scores\.tsv " + message):
        load_dataset("fake", catalogue=fake_mqm(tmp_path, monkeypatch, scores))


# --------------------------------------------------------------------------- user files

USER_ROWS = [
    {
        "lp": "en-de",
        "seg_id": 2,
        "system": "sysB",
        "source": "Hallo",
        "reference": "r2",
        "hypothesis": "h2b",
        "human": 0.25,
    },
    {"lp": "de-en", "seg_id": 10, "system": "", "source": "", "reference": "r10", "hypothesis": "h10", "human": -1},
    {
        "lp": "en-de",
        "seg_id": 2,
        "system": "sysA",
        "source": "Hallo",
        "reference": "r2",
        "hypothesis": "h2a",
        "human": 1.5,
    },
    {"lp": "de-en", "seg_id": 3, "system": "", "source": "s3", "reference": "r3", "hypothesis": "h3", "human": 0},
]
USER_KEYS = [("de-en", 3, ""), ("de-en", 10, ""), ("en-de", 2, "sysA"), ("en-de", 2, "sysB")]


def write_tsv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> Path:
    lines = ["\t".join(columns)] + ["\t".join(str(row[c]) for c in columns) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_user_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "my-data.jsonl", USER_ROWS, ensure_ascii=False)
    dataset = load_dataset(path=str(path))
    assert dataset.name == "my-data"
    assert [i.key for i in dataset.items] == USER_KEYS
    assert dataset.items[2] == Item("en-de", 2, "sysA", "Hallo", "r2", "h2a", 1.5)
    assert isinstance(dataset.items[0].human, float)
    assert dataset.has_systems
    assert dataset.files == {str(path): sha256(path.read_bytes())}
    assert [i.key for i in load_dataset(path=path, max_segments=1).items] == [USER_KEYS[0], USER_KEYS[2]]


def test_user_tsv_with_optional_columns_left_out(tmp_path: Path) -> None:
    columns = ["lp", "seg_id", "reference", "hypothesis", "human"]
    rows = [r for r in USER_ROWS if r["lp"] == "de-en"]
    dataset = load_dataset(path=write_tsv(tmp_path / "d.tsv", rows, columns))
    assert dataset.items == [
        Item("de-en", 3, "", "", "r3", "h3", 0.0),
        Item("de-en", 10, "", "", "r10", "h10", -1.0),
    ]
    assert not dataset.has_systems


def test_user_tsv_all_columns(tmp_path: Path) -> None:
    dataset = load_dataset(path=write_tsv(tmp_path / "d.tsv", USER_ROWS, list(USER_ROWS[0])))
    assert [i.key for i in dataset.items] == USER_KEYS
    assert dataset.items[3].hypothesis == "h2b"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("d.jsonl", '{"lp": "de-en"\n', r"d\.jsonl line 1: invalid JSON"),
        ("d.jsonl", "[1, 2]\n", r"d\.jsonl line 1: expected a JSON object, got list"),
        ("d.jsonl", "\n\n", r"d\.jsonl has no items"),
        ("d.tsv", "", r"d\.tsv is empty"),
        (
            "d.tsv",
            "lp\tseg_id\treference\thypothesis\thuman\nde-en\t1\tr\th\n",
            r"d\.tsv line 2: 4 tab-separated fields, header has 5",
        ),
        ("d.tsv", "lp\tseg_id\tlp\treference\thypothesis\thuman\n", r"duplicate column\(s\) lp"),
        ("d.csv", "lp,seg_id\n", r"unsupported type '\.csv'; use \.jsonl or \.tsv"),
    ],
)
def test_malformed_user_file(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        load_dataset(path=path)


def test_user_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"lp": "\xff"}\n')
    with pytest.raises(UserError, match=r"d\.jsonl is not UTF-8 text"):
        load_dataset(path=path)


def test_user_file_missing_or_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"missing file .*nope\.jsonl"):
        load_dataset(path=tmp_path / "nope.jsonl")
    (tmp_path / "dir.tsv").mkdir()
    with pytest.raises(UserError, match="is a directory"):
        load_dataset(path=tmp_path / "dir.tsv")


def test_check_user_file_and_sha256(tmp_path: Path) -> None:
    """What a spec checks before anything runs, and the content hash in a cell id."""
    (tmp_path / "d.csv").write_text("lp\n", encoding="utf-8")
    (tmp_path / "folder.jsonl").mkdir()
    for path, message in [
        (tmp_path / "d.csv", "unsupported type '.csv'"),
        (tmp_path / "folder.jsonl", "is a directory"),
        (tmp_path / "nope.tsv", "missing file"),
    ]:
        with pytest.raises(UserError, match=message):
            check_user_file(path)
    good = tmp_path / "d.jsonl"
    good.write_bytes(b"x" * 3_000_000)  # several read chunks
    check_user_file(good)
    assert sha256_file(good) == hashlib.sha256(good.read_bytes()).hexdigest()
    with pytest.raises(UserError, match="cannot read .*nope.tsv"):
        sha256_file(tmp_path / "nope.tsv")


def test_user_missing_column(tmp_path: Path) -> None:
    rows = [{k: v for k, v in USER_ROWS[0].items() if k != "hypothesis"}]
    with pytest.raises(UserError, match=r"d\.jsonl line 1: missing column\(s\) hypothesis"):
        load_dataset(path=write_jsonl(tmp_path / "d.jsonl", rows, ensure_ascii=False))
    with pytest.raises(UserError, match=r"d\.tsv: missing column\(s\) human \(header has: lp, seg_id"):
        load_dataset(path=write_tsv(tmp_path / "d.tsv", USER_ROWS, ["lp", "seg_id", "reference", "hypothesis"]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seg_id": " "}, "seg_id must be an integer or a non-empty text, got ' '"),
        ({"seg_id": 1.5}, "seg_id must be an integer or a non-empty text, got 1.5"),
        ({"human": "good"}, "human score 'good' is not a number"),
        ({"human": True}, "human must be a number or a mapping of dimension -> number, got True"),
        ({"human": {}}, "human is an empty mapping"),
        ({"human": {"relevance": "high"}}, "human.relevance: human score 'high' is not a number"),
        ({"references": []}, "give 'reference' \\(one\\) or 'references' \\(a list\\), not both"),
        ({"human": "nan"}, "human score 'nan' is not a finite number"),
        ({"human": "1_5"}, "human score '1_5' is not a number"),
        ({"human": 1e200}, "human score '1e\\+200' is beyond"),
        ({"reference": 5}, "column 'reference' must be text, got 5"),
        ({"lp": " "}, "column 'lp' is empty"),
    ],
)
def test_user_bad_values(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = [USER_ROWS[0], dict(USER_ROWS[1], **change)]
    with pytest.raises(UserError, match=r"d\.jsonl line 2: " + message):
        load_dataset(path=write_jsonl(tmp_path / "d.jsonl", rows, ensure_ascii=False))


def test_user_duplicate_items(tmp_path: Path) -> None:
    rows = [*USER_ROWS, dict(USER_ROWS[0], hypothesis="other")]
    with pytest.raises(
        UserError, match=r"line 5: duplicate item lp='en-de' seg_id=2 system='sysB' \(first at .*line 1\)"
    ):
        load_dataset(path=write_jsonl(tmp_path / "d.jsonl", rows, ensure_ascii=False))


def test_blank_positions(tmp_path: Path) -> None:
    """Blank texts are found (what a metric does with them is its own rule: tests/test_blank_texts.py)."""
    rows = [dict(USER_ROWS[0], hypothesis=" \t")]
    dataset = load_dataset(path=write_jsonl(tmp_path / "blank.jsonl", [*USER_ROWS[1:], *rows], ensure_ascii=False))
    assert blank_positions(dataset.items, "reference") == []
    (source,) = blank_positions(dataset.items, "source")
    assert item_name(dataset.items[source]) == "lp='de-en' seg_id=10 system=''"
    (hypothesis,) = blank_positions(dataset.items, "hypothesis")
    assert item_name(dataset.items[hypothesis]) == "lp='en-de' seg_id=2 system='sysB'"
    with pytest.raises(UserError, match="unknown item field 'hypothesys'; did you mean 'hypothesis'"):
        blank_positions(dataset.items, "hypothesys")
    wmt21 = loaded("wmt21").items
    assert not any(blank_positions(wmt21, field) for field in ("source", "reference", "hypothesis"))
