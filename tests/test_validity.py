"""Validity of the figures: unbiased subsets (`sample`), the warning on sorted heads,
one speed-up definition, dataset identity, extra columns carried through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import write_jsonl
from nlgbench.core.cell import DatasetRef
from nlgbench.core.spec import parse_spec
from nlgbench.data.items import sample_items
from nlgbench.data.loaders import load_dataset
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.integration

METRICS = [{"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}]


def rows(lps: dict[str, int], human=lambda lp, i: float(i % 7), doc=None) -> list[dict]:
    return [
        {
            "lp": lp,
            "seg_id": i + 1,
            "reference": f"r {lp} {i}",
            "hypothesis": f"h {lp} {i}",
            "human": human(lp, i),
            **({"doc_id": doc(lp, i)} if doc else {}),
        }
        for lp, n in lps.items()
        for i in range(n)
    ]


# ----------------------------------------------------------------------------- sample


def test_sample_is_seeded_stratified_and_independent_per_language_pair(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", rows({"de-en": 50, "fi-en": 30, "ro-en": 4}))
    a = load_dataset(path=path, sample=(10, 3))
    counts = {lp: sum(it.lp == lp for it in a.items) for lp in a.language_pairs}
    assert counts == {"de-en": 10, "fi-en": 10, "ro-en": 4}  # a pair smaller than n is kept whole
    assert [it.key for it in a.items] == sorted(it.key for it in a.items)  # stable order kept
    assert [it.key for it in load_dataset(path=path, sample=(10, 3)).items] == [it.key for it in a.items]
    other_seed = load_dataset(path=path, sample=(10, 4))
    assert [it.key for it in other_seed.items] != [it.key for it in a.items]
    # the draw of a pair depends only on (seed, lp): dropping another pair does not change it
    only_de = write_jsonl(tmp_path / "de.jsonl", rows({"de-en": 50}))
    assert [it.key for it in load_dataset(path=only_de, sample=(10, 3)).items] == [
        it.key for it in a.items if it.lp == "de-en"
    ]
    head = [it.seg_id for it in load_dataset(path=path, max_segments=10).items if it.lp == "de-en"]
    assert [it.seg_id for it in a.items if it.lp == "de-en"] != head  # not the head


def test_sample_keeps_whole_documents(tmp_path: Path) -> None:
    data = rows({"en": 40}, doc=lambda lp, i: f"doc{i // 4}")  # 10 documents x 4 systems' outputs
    items = load_dataset(path=write_jsonl(tmp_path / "d.jsonl", data)).items
    kept = sample_items(items, 3, 0)
    docs = {it.doc_id for it in kept}
    assert len(docs) == 3 and len(kept) == 12 and all(sum(it.doc_id == d for it in kept) == 4 for d in docs)


def test_sample_in_spec_label_and_cell_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", rows({"de-en": 20}))
    spec = parse_spec(
        {"datasets": [{"path": str(path), "sample": {"n": 5, "seed": 1}}, {"path": str(path)}], "metrics": METRICS}
    )
    sampled, whole = spec.datasets
    assert sampled.sample == (5, 1) and sampled.label == "d[~5,seed=1]" and whole.sample is None
    assert "sample" not in whole.to_dict() and sampled.to_dict()["sample"] == {"n": 5, "seed": 1}
    assert DatasetRef(**json.loads(json.dumps(sampled.to_dict()))) == sampled  # config.json round trip
    assert len(sampled.load().items) == 5
    assert parse_spec({"datasets": [{"path": str(path), "sample": {"n": 5}}], "metrics": METRICS}).datasets[
        0
    ].sample == (5, 0)
    for bad, message in (
        ({"n": 0}, r"sample\.n must be"),
        ({"seed": 1}, "needs n"),
        (5, "must be a mapping"),
        ({"n": 5, "size": 3}, "size"),
    ):
        with pytest.raises(UserError, match=message):
            parse_spec({"datasets": [{"path": str(path), "sample": bad}], "metrics": METRICS})
    with pytest.raises(UserError, match="max_segments .* or sample .*, not both"):
        parse_spec({"datasets": [{"path": str(path), "sample": {"n": 5}, "max_segments": 3}], "metrics": METRICS})


def test_sorted_head_warns_unsorted_head_does_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file sorted by human score (as WMT17's DA files): its head is the worst items; warn."""
    sorted_file = write_jsonl(
        tmp_path / "sorted.jsonl",
        rows({"de-en": 200, "fi-en": 200}, human=lambda lp, i: i / 10 if lp == "de-en" else (i * 37) % 11),
    )
    ds = load_dataset(path=sorted_file, max_segments=100)
    assert len(ds.warnings) == 1 and "de-en" in ds.warnings[0] and "Spearman +1.00" in ds.warnings[0]
    assert "sample: {n: 100, seed: 0}" in ds.warnings[0]
    assert load_dataset(path=sorted_file, sample=(100, 0)).warnings == []
    assert load_dataset(path=sorted_file).warnings == []  # the whole file is no subset

    from nlgbench.execution.preflight import check_datasets

    spec = parse_spec({"datasets": [{"path": str(sorted_file), "max_segments": 100}], "metrics": METRICS})
    check_datasets(spec)
    err = capsys.readouterr().err
    assert err.count("warning: dataset 'sorted', de-en: the first 100 items are ordered by human score") == 1


# ----------------------------------------------------------------------------- one speed-up


def test_one_speedup_definition_in_compare_and_report() -> None:
    """Compare's and the relative table's speed-up are the same number, the ratio of
    the medians; with an even number of repeats that differs from the median of pair ratios."""
    import pandas as pd

    from nlgbench.reporting.relative_table import relative_table
    from nlgbench.statistics.speedup import speedup

    base, cand = [10.0, 12.0, 30.0, 11.0], [2.0, 2.5, 1.0, 3.0]
    s = speedup(base, cand)
    assert s.value == pytest.approx(11.5 / 2.25, rel=1e-15)  # medians 11.5 and 2.25
    pairs = sorted(b / c for b in base for c in cand)
    assert (s.low, s.high) == (pairs[0], pairs[-1])
    assert s.value != pytest.approx((pairs[7] + pairs[8]) / 2)  # not the median of the 16 pair ratios
    df = pd.DataFrame(
        [
            {
                "metric": "m",
                "device": "cpu",
                "dataset": "d",
                "encoder": e,
                "quality": 0.5,
                "ms_per_segment": float(pd.Series(r).median()),
                "ms_per_segment_repeats": r,
            }
            for e, r in (("big", base), ("small", cand))
        ]
    )
    table = relative_table(df, {"m": "big"})
    row = table[(table["encoder"] == "small") & (table["dataset"] == "d")].iloc[0]
    assert row["speedup"] == s.value
    import math

    assert math.isnan(speedup([], cand).value) and math.isnan(speedup(base, [0.0]).value)


# ----------------------------------------------------------------------------- dataset identity


def test_same_stem_different_files_are_told_apart(tmp_path: Path) -> None:
    """Two different `summeval.jsonl` files give distinct dataset labels (stem plus
    a short content hash) in results.csv and in report/compare; the full path and sha256 are stored."""
    import csv
    import hashlib

    from nlgbench.runs.importscores import import_scores
    from nlgbench.runs.rundata import RunData

    paths = []
    for k, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        paths.append(
            write_jsonl(
                tmp_path / folder / "summeval.jsonl", rows({"en": 6}, human=lambda lp, i, k=k: float((i + k) % 4))
            )
        )
    scores = tmp_path / "s.csv"
    scores.write_text(
        "lp,seg_id,system,score\n" + "".join(f"en,{i + 1},,{i * 0.1}\n" for i in range(6)), encoding="utf-8"
    )
    for path in paths:
        import_scores(scores, str(path), "m", "e", tmp_path / "run")
    with (tmp_path / "run" / "results.csv").open(encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    shas = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert [r["dataset"] for r in table] == [f"summeval@{sha[:8]}" for sha in shas]
    # imported cells store the data path relative to the run folder (no machine path in a published run)
    assert [(r["dataset_path"], r["dataset_sha256"]) for r in table] == [
        (os.path.relpath(p, tmp_path / "run"), sha) for p, sha in zip(paths, shas, strict=True)
    ]
    assert sorted(RunData.open(tmp_path / "run").cells["dataset"]) == sorted(r["dataset"] for r in table)
    # one file only: the plain stem
    import_scores(scores, str(paths[0]), "m", "e", tmp_path / "one")
    with (tmp_path / "one" / "results.csv").open(encoding="utf-8", newline="") as fh:
        assert [r["dataset"] for r in csv.DictReader(fh)] == ["summeval"]


# ----------------------------------------------------------------------------- text ids and carried columns


def test_text_seg_ids_and_listed_columns_reach_scores_csv(tmp_path: Path) -> None:
    """Text seg_ids keep the stable order rule, and the columns a spec lists
    (`columns: [domain, rating_round]`) are carried into scores.csv as item.<name>; doc_id always is."""
    import csv
    import os
    import subprocess
    import sys

    data = [
        {
            "lp": "en",
            "seg_id": f"dm-test-{k}",
            "system": s,
            "doc_id": f"dm-test-{k}",
            "reference": f"the cat {k} sat",
            "hypothesis": f"the cat {k} {'sat' if s == 'A' else 'ran'}",
            "human": float(k + (s == "A")),
            "domain": "news" if k % 2 else "blog",
            "rating_round": k,
        }
        for k in range(4)
        for s in ("B", "A")
    ]
    path = write_jsonl(tmp_path / "d.jsonl", data)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"name: carry\ndatasets: [{{path: {path}, columns: [domain, rating_round]}}]\nrepeats: 1\n"
        "warmup: 0\nmetrics:\n  - metric: sentbleu\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", "run", str(spec), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (cell,) = list((tmp_path / "run" / "cells").iterdir())
    with (cell / "scores.csv").open(encoding="utf-8", newline="") as fh:
        out = list(csv.DictReader(fh))
    assert [(r["seg_id"], r["system"]) for r in out] == sorted((d["seg_id"], d["system"]) for d in data)
    by_key = {(d["seg_id"], d["system"]): d for d in data}
    for r in out:
        d = by_key[(r["seg_id"], r["system"])]
        assert (r["doc_id"], r["item.domain"], r["item.rating_round"]) == (
            d["doc_id"],
            d["domain"],
            str(d["rating_round"]),
        )
    with pytest.raises(UserError, match="columns: further columns are carried from own data files"):
        parse_spec({"datasets": [{"name": "wmt16", "columns": ["x"]}], "metrics": METRICS})
    with pytest.raises(UserError, match="columns hypothesis are item fields"):
        load_dataset(path=path, columns=["hypothesis"])
