"""BERTScore's baseline rescaling: bert_score's baseline file format, the arithmetic, parity with
`bert_score.score(rescale_with_baseline=True, baseline_path=FILE)` on the real MiniLM-L6 and WMT16,
and baselines computed from a corpus (`nlgbench baseline`) against bert_score's scores of the same pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nlgbench
from helpers import assert_one_line
from helpers import cli_subprocess as run_cli
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.baseline_files import Baseline, read_baseline
from nlgbench.metrics.baselines import compute_baseline, random_pairs
from nlgbench.metrics.bertscore import INFO

pytestmark = pytest.mark.unit

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
needs_minilm = pytest.mark.skipif(
    local_snapshot(MINILM) is None, reason="real MiniLM-L6 not in the local HF cache (scripts/get_models.py)"
)
# a baseline file in bert_score's format for MiniLM-L6's layers 0..6 (made-up values, different per output)
TABLE = "LAYER,P,R,F\n" + "".join(f"{k},{0.30 + 0.05 * k},{0.20 + 0.04 * k},{0.25 + 0.045 * k}\n" for k in range(7))


def test_rescale_arithmetic_by_hand() -> None:
    b = Baseline(precision=0.5, recall=0.25, f1=0.2)
    assert b.rescale("precision", [0.75, 0.5, 1.0]) == [0.5, 0.0, 1.0]  # (0.75 - 0.5) / 0.5 = 0.5
    assert b.rescale("recall", [0.0]) == [pytest.approx(-1 / 3)]  # (0 - 0.25) / 0.75
    assert b.rescale("f1", [0.6]) == [pytest.approx(0.5)]  # (0.6 - 0.2) / 0.8


def test_reads_bert_scores_own_baseline_file() -> None:
    """bert_score's packaged roberta-large baselines: the row of layer 17, as its `.iloc[17]` takes it."""
    bert_score = pytest.importorskip("bert_score")
    path = Path(bert_score.__file__).parent / "rescale_baseline" / "en" / "roberta-large.tsv"
    row = path.read_text(encoding="utf-8").splitlines()[1 + 17].split(",")  # header, then layers 0, 1, ...
    assert row[0] == "17"
    assert read_baseline(path, 17) == Baseline(float(row[1]), float(row[2]), float(row[3]))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("layer,p,r\n0,0.1,0.1\n", "first line must be LAYER,P,R,F"),
        ("LAYER,P,R,F\n0,0.1,0.1\n", "line 2: expected LAYER,P,R,F"),
        ("LAYER,P,R,F\n0,0.1,x,0.1\n", "line 2: baseline R 'x' is not a number"),
        ("LAYER,P,R,F\n0,0.1,1.0,0.1\n", r"outside \[-1, 0.999\]"),
        ("LAYER,P,R,F\n0,0.1,0.1,0.1\n", "no baseline for layer 6"),
    ],
)
def test_bad_baseline_file_is_one_line(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "b.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=needle):
        read_baseline(path, 6)
    with pytest.raises(UserError, match="baseline file not found"):
        read_baseline(tmp_path / "missing.tsv", 6)


def test_cells_without_rescaling_keep_their_ids(tmp_path: Path) -> None:
    """The new options join a cell's options (and id) only where set: existing bertscore cells stay."""
    assert INFO.cell_options({}) == INFO.cell_options({"rescale_with_baseline": False}) == {"idf": False, "layer": None}
    path = str(tmp_path / "b.tsv")
    Path(path).write_text(TABLE, encoding="utf-8")  # read and checked with the options
    assert INFO.cell_options({"rescale_with_baseline": True, "baseline_path": path}) == {
        "idf": False, "layer": None, "rescale_with_baseline": True, "baseline_path": path,
    }  # fmt: skip


def test_baseline_path_needs_rescaling() -> None:
    with pytest.raises(UserError, match="rescale_with_baseline is off"):
        INFO.check_options({"baseline_path": "b.tsv"})


def test_random_pairs_are_two_different_lines() -> None:
    texts = [f"line {i}" for i in range(5)]
    pairs = random_pairs(texts, 200, seed=3)
    assert len(pairs) == 200 and all(a != b for a, b in pairs)
    assert pairs == random_pairs(texts, 200, seed=3) and pairs != random_pairs(texts, 200, seed=4)
    with pytest.raises(UserError, match="at least 2 different non-blank lines"):
        random_pairs(["one"], 10, seed=0)


@pytest.mark.system
@needs_minilm
def test_rescaled_equals_bert_score_with_a_baseline_file(tmp_path: Path) -> None:
    """P, R and F rescaled with a baseline file equal bert_score's `rescale_with_baseline=True,
    baseline_path=FILE` on 40 WMT16 segments, layers 6 and 4; Pearson with the human scores is unchanged."""
    bert_score = pytest.importorskip("bert_score")
    path = tmp_path / "minilm.tsv"
    path.write_text(TABLE, encoding="utf-8")
    items = load_dataset("wmt16", max_segments=40).items
    refs, hyps, human = [it.reference for it in items], [it.hypothesis for it in items], [it.human for it in items]
    for layer in (6, 4):
        scorer = nlgbench.Scorer(
            encoder="all-MiniLM-L6-v2", device="cpu", batch_size=16, layer=layer, rescale_with_baseline=True,
            baseline_path=str(path),
        )  # fmt: skip
        ours = scorer.score_prf(hyps, refs)
        theirs = bert_score.score(
            hyps, refs, model_type=MINILM, num_layers=layer, lang="en", rescale_with_baseline=True,
            baseline_path=str(path), batch_size=16, device="cpu", use_fast_tokenizer=True, nthreads=0,
        )  # fmt: skip
        # bert_score's own tests compare at 1e-5; rescaling divides by 1 - b >= 0.47 here, so float32
        # differences of ~1e-7 grow at most about twofold
        for mine, reference in zip(ours, theirs, strict=True):
            assert np.abs(np.array(mine) - reference.numpy()).max() <= 1e-5
        assert f"|L{layer}|" in scorer.signature and "|rescaled:" in scorer.signature
        assert "minilm.tsv" not in scorer.signature  # the baselines' digest, never the file's path
    raw = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", batch_size=16, layer=4).score(hyps, refs)
    # rescaling is linear with a positive slope: Pearson unchanged up to float64 round-off of the z-scores
    assert nlgbench.correlation(ours[2], human) == pytest.approx(nlgbench.correlation(raw, human), abs=1e-9)


@pytest.mark.system
@needs_minilm
def test_computed_baseline_is_bert_scores_mean_over_the_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nlgbench baseline`'s table: per layer the mean of bert_score's P, R, F (idf off, all layers) over
    the same random pairs; stored in the cache, where `rescale_with_baseline` finds it."""
    bert_score = pytest.importorskip("bert_score")
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    texts = [it.reference for it in load_dataset("wmt16", max_segments=20).items]
    with pytest.raises(UserError, match="nlgbench baseline CORPUS --encoder"):
        nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", rescale_with_baseline=True)
    table, stored, _ = compute_baseline(EncoderRef("all-MiniLM-L6-v2"), texts, 60, 7, "cpu", 16)
    assert stored.is_file() and stored.read_text(encoding="utf-8") == table
    cands, refs = zip(*random_pairs(texts, 60, 7), strict=True)
    # batch_size=1: in a padded batch bert_score's greedy match counts a padding position as similarity 0
    # (its mask multiplies), which wins the max where every real similarity of a token is negative, as
    # happens for unrelated sentences at MiniLM-L6's embedding and last layers; one pair per batch has no padding
    p, r, f = bert_score.score(
        list(cands), list(refs), model_type=MINILM, num_layers=6, all_layers=True, batch_size=1, device="cpu",
        use_fast_tokenizer=True, nthreads=0,
    )  # fmt: skip
    means = np.stack([p.mean(dim=1).numpy(), r.mean(dim=1).numpy(), f.mean(dim=1).numpy()], axis=1)  # [7, 3]
    rows = [line.split(",") for line in table.splitlines()[1:]]
    assert [int(row[0]) for row in rows] == list(range(7))
    # means of 60 float32 scores in [-1, 1]: both sums round at ~1e-7
    assert np.abs(np.array([[float(v) for v in row[1:]] for row in rows]) - means).max() <= 1e-5
    cached = nlgbench.Scorer(encoder="all-MiniLM-L6-v2", device="cpu", rescale_with_baseline=True)
    given = nlgbench.Scorer(
        encoder="all-MiniLM-L6-v2", device="cpu", rescale_with_baseline=True, baseline_path=str(stored)
    )
    assert cached.score(texts[:3], texts[3:6]) == given.score(texts[:3], texts[3:6])
    assert cached.signature == given.signature


@pytest.mark.system
@needs_minilm
def test_baseline_command(tmp_path: Path) -> None:
    """`nlgbench baseline CORPUS`: bert_score's file format on stdout and in --out; bad input one line."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{it.reference}\n" for it in load_dataset("wmt16", max_segments=10).items))
    env = {"NLGBENCH_CACHE": str(tmp_path / "cache")}
    proc = run_cli(
        "baseline", str(corpus), "--pairs", "20", "--device", "cpu", "--out", str(tmp_path / "b.tsv"), env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "LAYER,P,R,F" and len(proc.stdout.splitlines()) == 8  # layers 0..6
    assert (tmp_path / "b.tsv").read_text(encoding="utf-8") == proc.stdout
    assert read_baseline(tmp_path / "b.tsv", 6).f1 < 1
    assert len(list((tmp_path / "cache" / "baselines").glob("*.tsv"))) == 1
    assert_one_line(run_cli("baseline", str(tmp_path / "none.txt"), env=env), "corpus file not found")
