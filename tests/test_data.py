"""Dataset catalogue, fetch cache and loaders (nlgbench.data), on the shared copies via the mirror setting."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import fake_da, write_jsonl
from nlgbench.data.catalogue import MIRROR_ENV, cache_dir, dataset_names, fetch, load_catalogue, sha256_file
from nlgbench.data.items import Dataset, Item, blank_positions, item_name
from nlgbench.data.loaders import load_dataset
from nlgbench.data.userfile import check_user_file
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

PUBLIC_SOURCE = (
    "https://raw.githubusercontent.com/jbgruenwald/efficient-nlg-metrics/"
    "cf31a0d886320dc8a478564aad4b4e825a4704ee/datasets"
)

EXPECTED = {
    "wmt15": (2000, ["cs-en", "de-en", "fi-en", "ru-en"], False),
    "wmt16": (3360, ["cs-en", "de-en", "fi-en", "ro-en", "ru-en", "tr-en"], False),
    "wmt20": (4000, ["zh-en"], True),
    "wmt21": (3250, ["zh-en"], True),
}


def mirror_dir() -> Path:
    """The local folder the test mirror setting points at (a directory or a file:// URL)."""
    value = os.environ[MIRROR_ENV]
    parsed = urllib.parse.urlparse(value)
    return Path(urllib.request.url2pathname(parsed.path)) if parsed.scheme == "file" else Path(value)


def raw_lines(rel: str) -> list[str]:
    """Lines of one file of the mirror, read independently of the loader."""
    return (mirror_dir() / rel).read_text(encoding="utf-8").split("\n")[:-1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def loaded(name: str) -> Dataset:
    """Each catalogue dataset loaded once per test session."""
    return load_dataset(name)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty cache for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NLGBENCH_CACHE", str(cache))
    return cache


# --------------------------------------------------------------------------- catalogue data


def test_dataset_names() -> None:
    assert dataset_names() == ["wmt15", "wmt16", "wmt20", "wmt21"]


def test_catalogue_matches_sha256sums_and_public_source() -> None:
    sums = {}
    for line in (mirror_dir() / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split()
        sums[path.removeprefix("./")] = digest
    catalogue = load_catalogue()
    for name, entry in catalogue["datasets"].items():
        assert entry["source"] == PUBLIC_SOURCE, name
        assert entry["expected_items"] == EXPECTED[name][0]
        assert sorted(entry["language_pairs"]) == EXPECTED[name][1]
        for rel, digest in entry["files"].items():
            assert sums[f"{entry['folder']}/{rel}"] == digest, rel
    assert not any("en-ru" in rel for e in catalogue["datasets"].values() for rel in e["files"])
    assert not any("ende" in rel or "ref-B" in rel for e in catalogue["datasets"].values() for rel in e["files"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_language_pairs_and_order(name: str) -> None:
    count, lps, has_systems = EXPECTED[name]
    dataset = loaded(name)
    assert dataset.name == name
    assert len(dataset.items) == count
    assert dataset.language_pairs == lps
    assert dataset.has_systems is has_systems
    keys = [(item.lp, item.seg_id, item.system) for item in dataset.items]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    entry = load_catalogue()["datasets"][name]
    assert dataset.files == {f"{entry['folder']}/{rel}": sha for rel, sha in entry["files"].items()}


def test_da_per_lp_and_no_systems() -> None:
    per_lp = Counter(item.lp for item in loaded("wmt16").items)
    assert set(per_lp.values()) == {560}
    assert all(item.system == "" for item in loaded("wmt15").items)


def test_mqm_systems_and_dropped_none() -> None:
    wmt21 = loaded("wmt21")
    per_system = Counter(item.system for item in wmt21.items)
    assert per_system == {s: 650 for s in ["DIDI-NLP", "Facebook-AI", "MiSS", "NiuTrans", "SMU"]}
    segs = {s: {i.seg_id for i in wmt21.items if i.system == s} for s in per_system}
    assert len({frozenset(v) for v in segs.values()}) == 1  # the same 650 segments for each system
    assert Counter(item.system for item in loaded("wmt20").items) == {"DeepMind.381": 2000, "WeChat_AI.1525": 2000}


def test_known_da_item_matches_raw_files() -> None:
    item = next(i for i in loaded("wmt16").items if i.lp == "de-en" and i.seg_id == 17)
    prefix = "wmt16-selection/DAseg.newstest2016"
    assert item.source == raw_lines(f"{prefix}.source.de-en")[16]
    assert item.reference == raw_lines(f"{prefix}.reference.de-en")[16]
    assert item.hypothesis == raw_lines(f"{prefix}.mt-system.de-en")[16]
    assert item.human == float(raw_lines(f"{prefix}.human.de-en")[16])


def test_known_mqm_item_matches_raw_files() -> None:
    folder = "wmt21-selection"
    scored = [line.split() for line in raw_lines(f"{folder}/mqm-newstest2021_zhen.avg_seg_scores.tsv")[1:]]
    system, score, seg = next(p for p in scored if p[0] == "SMU" and p[1] != "None")
    seg_id = int(seg)
    item = next(i for i in loaded("wmt21").items if i.system == "SMU" and i.seg_id == seg_id)
    assert item.lp == "zh-en"
    assert item.source == raw_lines(f"{folder}/newstest2021.zh-en.src.zh")[seg_id - 1]
    assert item.reference == raw_lines(f"{folder}/newstest2021.zh-en.ref.ref-A.en")[seg_id - 1]
    assert item.hypothesis == raw_lines(f"{folder}/newstest-zh-en/newstest2021.zh-en.hyp.SMU.en")[seg_id - 1]
    assert item.human == float(score)


def test_max_segments_keeps_first_n_per_lp() -> None:
    small = load_dataset("wmt16", max_segments=5)
    full = loaded("wmt16")
    assert len(small.items) == 30
    for lp in full.language_pairs:
        assert [i for i in small.items if i.lp == lp] == [i for i in full.items if i.lp == lp][:5]
    mqm = load_dataset("wmt21", max_segments=7)
    assert mqm.items == loaded("wmt21").items[:7]  # N items in stable order, not N segments
    assert len(load_dataset("wmt15", max_segments=10_000).items) == 2000


@pytest.mark.parametrize("bad", [0, -3, True, "5", 2.5])
def test_max_segments_must_be_positive_int(bad: Any) -> None:
    with pytest.raises(UserError, match="max_segments must be a positive integer"):
        load_dataset("wmt15", max_segments=bad)


# --------------------------------------------------------------------------- fetch and cache


def test_cache_dir_from_environment(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir() == private_cache
    monkeypatch.delenv("NLGBENCH_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "nlgbench"


def test_fetch_caches_and_refetches_corrupt_file(private_cache: Path) -> None:
    messages: list[str] = []
    folder = fetch("wmt20", messages.append)
    assert folder == private_cache / "datasets" / "wmt20-selection"
    entry = load_catalogue()["datasets"]["wmt20"]
    assert len(messages) == len(entry["files"]) == 5
    for rel, digest in entry["files"].items():
        assert sha256((folder / rel).read_bytes()) == digest
    assert not list(folder.rglob("*.part"))

    messages.clear()
    fetch("wmt20", messages.append)
    assert messages == []  # cached and verified: nothing fetched again

    target = folder / "newstest2020-zhen-ref.en.txt"
    target.write_text("corrupted\n", encoding="utf-8")
    fetch("wmt20", messages.append)
    assert len(messages) == 2 and "wrong sha256" in messages[0] and "fetching" in messages[1]
    assert sha256(target.read_bytes()) == entry["files"]["newstest2020-zhen-ref.en.txt"]
    assert len(load_dataset("wmt20").items) == 4000


def test_load_rechecks_a_file_changed_after_fetch(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fetch("wmt20")
    real_fetch = fetch

    def fetch_then_corrupt(name: str, progress: Any = None, *, catalogue: Any = None) -> Path:
        result = real_fetch(name, progress, catalogue=catalogue)
        (folder / "newstest2020-zhen-src.zh.txt").write_text("changed\n", encoding="utf-8")
        return result

    monkeypatch.setattr("nlgbench.data.loaders.fetch", fetch_then_corrupt)
    with pytest.raises(UserError, match="checksum mismatch for .*newstest2020-zhen-src.zh.txt"):
        load_dataset("wmt20")


def test_mirror_as_file_url(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MIRROR_ENV, mirror_dir().resolve().as_uri())
    messages: list[str] = []
    dataset = load_dataset("wmt21", progress=messages.append)
    assert len(dataset.items) == 3250
    assert len(messages) == 8 and all("fetching" in m for m in messages)


@pytest.fixture
def http_mirror() -> Iterator[str]:
    """A local HTTP server over the mirror folder (tests the URL download path)."""
    handler = functools.partial(QuietHandler, directory=str(mirror_dir()))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_mirror_as_http_url(private_cache: Path, monkeypatch: pytest.MonkeyPatch, http_mirror: str) -> None:
    monkeypatch.setenv(MIRROR_ENV, http_mirror + "/")
    assert len(load_dataset("wmt20").items) == 4000


def test_http_mirror_missing_file(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch, http_mirror: str, tmp_path: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, http_mirror + "/nothing-here")
    with pytest.raises(
        UserError, match=r"cannot fetch http://127\.0\.0\.1:\d+/nothing-here/wmt20-selection/.*HTTP 404"
    ):
        fetch("wmt20")


def test_bad_mirror_setting(private_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "no-such-dir"))
    with pytest.raises(UserError, match="NLGBENCH_DATA_MIRROR=.*no such directory"):
        fetch("wmt15")
    monkeypatch.setenv(MIRROR_ENV, "ftp://example.org/data")
    with pytest.raises(UserError, match="unsupported URL scheme 'ftp'"):
        fetch("wmt15")


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


# --------------------------------------------------------------------------- arguments


def test_unknown_dataset_name() -> None:
    with pytest.raises(
        UserError, match=r"unknown dataset 'wmt61'; did you mean .*'wmt16'.*\(valid: wmt15, wmt16, wmt20, wmt21\)"
    ):
        load_dataset("wmt61")
    with pytest.raises(UserError, match="unknown dataset 'WMT-21'"):
        fetch("WMT-21")


def test_exactly_one_of_name_and_path(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="exactly one of"):
        load_dataset()
    with pytest.raises(UserError, match="exactly one of"):
        load_dataset("wmt15", path=tmp_path / "x.jsonl")
