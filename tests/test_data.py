"""The catalogue's datasets: counts, language pairs and items against the raw files, max_segments, the
download cache (fetch, re-check, file and HTTP mirrors), and the loader's arguments.
"""

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

from nlgbench.data.catalogue import MIRROR_ENV, cache_dir, dataset_names, fetch, load_catalogue
from nlgbench.data.items import Dataset
from nlgbench.data.loaders import load_dataset
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
