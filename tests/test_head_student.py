"""Human-label feature-head students (`nlgbench distill --teacher-metric human --student-kind head`).

The head's fit on synthetic numpy features (leave-one-language-pair-out folds, determinism, its one
line for too few pairs), its head.json record (round trip, corrupted files), and, on a tiny random
BERT, the whole path: distil through the CLI, score the folder in a sweep and through the API, the
leakage guard, the command line's refusals. Mechanics only: a tiny random encoder's correlations mean
nothing.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlgbench
from helpers import assert_one_line, read_csv, write_jsonl, write_spec
from helpers import cli_subprocess as run_cli
from nlgbench.cli import main
from nlgbench.distillation import headfit
from nlgbench.distillation.headfit import cross_validate, fit_head, layer_sets
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.featurehead import BASE_FEATURES, PROJECTED, FeatureHead, PairFeatures, family, read_head

pytestmark = [pytest.mark.component, pytest.mark.usefixtures("one_torch_thread")]

# ----------------------------------------------------------------------------- synthetic features

GROUPS = {"wmt:de-en": 12, "wmt:fr-en": 15, "own:zh-en": 18}  # distinct sizes: a fold's rows tell its group
LAYERS = [1, 2]
WIDTH = 6  # each projected family's width


@dataclass
class Synthetic:
    features: PairFeatures
    targets: np.ndarray
    groups: list[str]
    rows: dict[str, np.ndarray]  # each group's row numbers


def synthetic(seed: int = 0) -> Synthetic:
    """Features of three language pairs, each with its own data (its own offset and noise). Every
    family's column 0 and each layer's first base column hold the row number, so what a fit step
    receives tells which rows it was given; the targets are distinct, so a held-out target vector
    tells its rows too."""
    rng = np.random.default_rng(seed)
    groups = [name for name, size in GROUPS.items() for _ in range(size)]
    n = len(groups)
    ids = np.arange(n, dtype=np.float64)
    base = rng.normal(size=(n, len(BASE_FEATURES) * len(LAYERS)))
    for j in range(len(LAYERS)):
        base[:, j * len(BASE_FEATURES)] = ids
    families = {}
    for layer in LAYERS:
        for name in PROJECTED:
            values = rng.normal(size=(n, WIDTH))
            values[:, 0] = ids
            families[family(layer, name)] = values
    offsets = {name: 3.0 * i for i, name in enumerate(GROUPS)}
    targets = base[:, 1] + 0.5 * base[:, 8] + np.array([offsets[g] for g in groups]) + 0.1 * rng.normal(size=n)
    assert len(set(targets.tolist())) == n  # distinct: a held-out target vector names its rows
    rows = {name: np.flatnonzero(np.array(groups) == name) for name in GROUPS}
    return Synthetic(PairFeatures(list(LAYERS), base, families), targets, groups, rows)


def test_each_fold_is_fitted_without_its_held_out_language_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step of a fold (principal axes, standardisation, ridge) sees exactly the rows of the other
    pairs, every held-out Pearson r exactly one pair's rows; the final fit alone sees every row."""
    data = synthetic()
    n = len(data.groups)
    everything = np.arange(n)

    def rows_of(ids: np.ndarray) -> str:
        """'all', or 'not G' where `ids` are exactly the rows outside group G (in order)."""
        ids = np.asarray(ids)
        if np.array_equal(ids, everything):
            return "all"
        matches = [g for g, own in data.rows.items() if np.array_equal(ids, np.setdiff1d(everything, own))]
        assert len(matches) == 1, f"a fit step saw rows {ids.tolist()}: not all but one pair's"
        return f"not {matches[0]}"

    def held_of(values: np.ndarray) -> str:
        """'all', or the group G whose targets (in order) `values` are."""
        if np.array_equal(values, data.targets):
            return "all"
        matches = [g for g, own in data.rows.items() if np.array_equal(values, data.targets[own])]
        assert len(matches) == 1, "a Pearson r was taken against targets that are not one pair's"
        return matches[0]

    seen: dict[str, list[str]] = {"axes": [], "standardisation": [], "ridge": [], "pearson": []}
    real_axes, real_standard, real_ridge, real_pearson = (
        headfit._principal_axes,
        headfit._standardisation,
        headfit._ridge,
        headfit._pearson,
    )

    def axes(values: np.ndarray) -> Any:
        seen["axes"].append(rows_of(values[:, 0]))  # column 0 of every family: the row number
        return real_axes(values)

    def standardisation(design: np.ndarray) -> Any:
        seen["standardisation"].append(rows_of(design[:, 0]))  # the first base column: the row number
        return real_standard(design)

    def ridge(z: np.ndarray, y: np.ndarray, alpha: float) -> Any:
        label = [
            name
            for name, ids in [("all", everything)]
            + [(f"not {g}", np.setdiff1d(everything, own)) for g, own in data.rows.items()]
            if len(ids) == len(y) and np.allclose(y, data.targets[ids] - data.targets[ids].mean(), rtol=0, atol=1e-12)
        ]
        assert len(label) == 1, "the ridge was fitted on targets that are not all but one pair's"
        seen["ridge"].append(label[0])
        return real_ridge(z, y, alpha)

    def pearson(x: np.ndarray, y: np.ndarray) -> float:
        seen["pearson"].append(held_of(y))
        return real_pearson(x, y)

    monkeypatch.setattr(headfit, "_principal_axes", axes)
    monkeypatch.setattr(headfit, "_standardisation", standardisation)
    monkeypatch.setattr(headfit, "_ridge", ridge)
    monkeypatch.setattr(headfit, "_pearson", pearson)
    alphas, components = (0.1, 10.0, 1000.0), (2, 4)
    fit = fit_head(data.features, data.targets, data.groups, alphas=alphas, components=components)

    sets = layer_sets(max(LAYERS))
    families_per_set = [len(s) * len(PROJECTED) for s in sets]
    chosen = fit.record["chosen"]["layers"]
    # each pair held out once per layer set (axes: once per family; standardisation: once per k; ridge
    # and Pearson: once per k and alpha); the final fit on every row (axes: one per family of the chosen set)
    assert Counter(seen["axes"]) == {
        **{f"not {g}": sum(families_per_set) for g in GROUPS},
        "all": len(chosen) * len(PROJECTED),
    }
    assert Counter(seen["standardisation"]) == {
        **{f"not {g}": len(sets) * len(components) for g in GROUPS},
        "all": 1,
    }
    assert Counter(seen["ridge"]) == {
        **{f"not {g}": len(sets) * len(components) * len(alphas) for g in GROUPS},
        "all": 1,
    }
    # the held-out Pearson r of each fold against its own pair's targets; `all` once: the record's train_pearson
    assert Counter(seen["pearson"]) == {**{g: len(sets) * len(components) * len(alphas) for g in GROUPS}, "all": 1}
    assert fit.record["groups"] == GROUPS


def test_the_cv_curve_is_the_mean_held_out_r_of_heads_fitted_on_the_other_pairs() -> None:
    """Behaviourally: each value of `cross_validate` equals the mean over pairs of the Pearson r (numpy's)
    on the held-out pair of a head fitted (`_fit`, the final fit) on the other pairs' rows alone."""
    data = synthetic(seed=3)
    chosen = data.features.select([2])
    alphas, components = (0.1, 10.0), (3,)
    curve = cross_validate(chosen, data.targets, np.asarray(data.groups), alphas, components)
    for i, alpha in enumerate(alphas):
        rs = []
        for own in data.rows.values():
            train = np.setdiff1d(np.arange(len(data.groups)), own)
            head = headfit._fit(chosen.take(train), data.targets[train], components[0], alpha)
            rs.append(np.corrcoef(head.predict(chosen.take(own)), data.targets[own])[0, 1])
        assert curve[components[0]][i] == pytest.approx(float(np.mean(rs)), rel=1e-9, abs=1e-12)
    # and it depends on the grouping: folds that mixed the pairs would give another curve
    mixed = np.array(["x", "y", "z"] * (len(data.groups) // 3))
    assert cross_validate(chosen, data.targets, mixed, alphas, components) != curve


@pytest.mark.parametrize("groups", [["wmt:de-en"], []], ids=["one pair", "no pair"])
def test_fewer_than_two_language_pairs_is_one_line(groups: list[str]) -> None:
    data = synthetic()
    n = len(groups) and len(data.groups)
    rows = np.arange(n)
    with pytest.raises(UserError, match="at least two language pairs") as err:
        fit_head(data.features.take(rows), data.targets[rows], groups * n)
    assert "\n" not in str(err.value)
    assert ("wmt:de-en" in str(err.value)) == bool(groups)


def test_the_fit_is_deterministic() -> None:
    data = synthetic(seed=5)
    first = fit_head(data.features, data.targets, data.groups)
    again = synthetic(seed=5)  # fresh arrays of the same values
    second = fit_head(again.features, again.targets, again.groups)
    assert json.dumps(first.head.to_dict()) == json.dumps(second.head.to_dict())
    assert json.dumps(first.record, sort_keys=True) == json.dumps(second.record, sort_keys=True)
    # and the inputs are left as they were
    untouched = synthetic(seed=5)
    assert np.array_equal(data.features.base, untouched.features.base)
    assert np.array_equal(data.targets, untouched.targets)


# ----------------------------------------------------------------------------- head.json


@pytest.fixture(scope="module")
def fitted() -> tuple[FeatureHead, PairFeatures]:
    data = synthetic(seed=7)
    return fit_head(data.features, data.targets, data.groups).head, data.features


def write_head(folder: Path, head: dict[str, Any] | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = head if isinstance(head, str) else json.dumps(head, indent=1)  # allow_nan: NaN written as NaN
    (folder / "head.json").write_text(text, encoding="utf-8")
    return folder


def test_the_head_record_round_trips(fitted: tuple[FeatureHead, PairFeatures], tmp_path: Path) -> None:
    head, features = fitted
    read = read_head(write_head(tmp_path / "student", head.to_dict()))
    # JSON writes each float64 as its shortest repr, which reads back to the same float: equal exactly
    assert np.array_equal(read.predict(features), head.predict(features))
    assert read.to_dict() == head.to_dict() and read.params == head.params
    assert head.to_dict()["feature_names"] == head.feature_names
    assert len(head.feature_names) == len(head.coef)


def _corrupt(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(raw: dict[str, Any]) -> dict[str, Any]:
        raw = copy.deepcopy(raw)
        change(raw)
        return raw

    return apply


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return _corrupt(lambda raw: raw.__setitem__(key, value))


def _coef(index: int, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return _corrupt(lambda raw: raw["coef"].__setitem__(index, value))


CORRUPTIONS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]] | str, str]] = {
    "not JSON": ('{"format": 1, "coef": [0.1,', "is not valid JSON"),
    "not UTF-8": ("\udcff", "is not valid JSON"),  # written with surrogateescape below: a lone 0xff byte
    "a list": ("[1, 2]", "must hold a JSON object"),
    "format 2": (_set("format", 2), "format 2"),
    "another kind": (_set("kind", "mlp"), "kind 'mlp'"),
    "NaN in coef": (_coef(0, float("nan")), "not a finite number"),
    "infinity in coef": (_coef(1, float("inf")), "not a finite number"),
    "a string in coef": (_coef(0, "0.5"), "not a finite number"),
    "true in coef": (_coef(0, True), "not a finite number"),
    "coef too short": (_corrupt(lambda raw: raw["coef"].pop()), "must have"),
    "mean too long": (_corrupt(lambda raw: raw["mean"].append(0.0)), "must have"),
    "a zero scale": (_corrupt(lambda raw: raw["scale"].__setitem__(0, 0.0)), "a scale is not positive"),
    "an axis too short": (_corrupt(lambda raw: raw["axes"]["L2.product"][0].pop()), "do not agree in size"),
    "an axis missing": (_corrupt(lambda raw: raw["axes"]["L2.product"].pop()), "do not agree in size"),
    "no axes": (_corrupt(lambda raw: [v.clear() for v in raw["axes"].values()]), "do not agree in size"),
    "missing intercept": (_corrupt(lambda raw: raw.pop("intercept")), "'intercept'"),
    "missing coef": (_corrupt(lambda raw: raw.pop("coef")), "'coef'"),
    "missing family": (_corrupt(lambda raw: raw["centres"].pop("L2.abs_difference")), "'L2.abs_difference'"),
    "coef a number": (_set("coef", 1.0), "not a list of numbers"),
    "layers a number": (_set("layers", 2), "missing or malformed"),
    "layer zero": (_set("layers", [0]), "not a positive integer"),
    "layers repeated": (_set("layers", [2, 2]), "distinct layers"),
    "no layers": (_set("layers", []), "distinct layers"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_corrupted_head_is_one_line_naming_head_json(
    case: str, fitted: tuple[FeatureHead, PairFeatures], tmp_path: Path
) -> None:
    head, _ = fitted
    change, needle = CORRUPTIONS[case]
    folder = tmp_path / "student"
    if isinstance(change, str):
        folder.mkdir()
        (folder / "head.json").write_bytes(change.encode("utf-8", "surrogateescape"))
    else:
        write_head(folder, change(head.to_dict()))
    with pytest.raises(UserError) as err:
        read_head(folder)
    message = str(err.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith("feature head student/head.json"), message
    assert needle in message, message


def test_a_missing_head_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "student").mkdir()
    with pytest.raises(UserError, match=r"^feature head student/head.json: cannot read it") as err:
        read_head(tmp_path / "student")
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- the command line's refusals


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--teacher-metric", "human"], "--teacher-metric human with --student-kind head"),
        (["--teacher-metric", "human", "--student-kind", "cross-encoder"], "--student-kind head"),
        (["--teacher-metric", "chrf", "--student-kind", "head"], "--teacher-metric human with --student-kind head"),
        (
            ["--teacher-metric", "human", "--student-kind", "head", "--teacher-options", "word_order=2"],
            "runs no teacher",
        ),
    ],
    ids=["human, no kind", "human, cross-encoder", "head, metric teacher", "human with teacher options"],
)
def test_a_human_teacher_and_a_head_student_go_together(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = write_jsonl(
        tmp_path / "train.jsonl",
        [{"lp": "de-en", "seg_id": 1, "reference": "alpha bravo", "hypothesis": "alpha", "human": 0.5}],
    )
    out = tmp_path / "out"
    code = main(["distill", *argv, "--pairs", str(pairs), "--student", str(tmp_path / "no-model"), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nlgbench: error: "), captured.err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists()


# ----------------------------------------------------------------------------- end to end on a tiny encoder

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def own_rows(n: int, seed: int, lps: list[str]) -> list[dict[str, Any]]:
    """Own-data rows (each language pair in turn): a reference of random words; the hypothesis a cut of
    it, often with a word replaced or one added, so that every feature varies (a feature constant on the
    training pairs up to float32 noise would be standardised by that noise); the human score the share
    of the reference's words kept, plus noise."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ref = rng.sample(WORDS, rng.randint(5, 9))
        hyp = ref[: rng.randint(2, len(ref))]
        if rng.random() < 0.5:
            hyp[rng.randrange(len(hyp))] = rng.choice(WORDS)
        if rng.random() < 0.3:
            hyp.append(rng.choice(WORDS))
        kept = len(set(hyp) & set(ref)) / len(ref)
        rows.append(
            {
                "lp": lps[i % len(lps)],
                "seg_id": i + 1,
                "system": "sys",
                "reference": " ".join(ref),
                "hypothesis": " ".join(hyp),
                "human": round(kept + rng.uniform(-0.1, 0.1), 4),
            }
        )
    return rows


@dataclass
class Distilled:
    proc: Any  # the CLI's CompletedProcess
    student: Path
    base: Path
    train: Path
    train_rows: list[dict[str, Any]]


@pytest.fixture(scope="module")
def distilled(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Callable[..., Path]) -> Distilled:
    """A head student of a 2-layer tiny BERT fitted on 40 items of two language pairs, through the CLI."""
    tmp = tmp_path_factory.mktemp("head-student")
    base = tiny_bert(WORDS, num_layers=2)
    rows = own_rows(40, seed=1, lps=["de-en", "fr-en"])
    train = write_jsonl(tmp / "train.jsonl", rows)
    student = tmp / "student"
    proc = run_cli(
        "distill",
        "--teacher-metric",
        "human",
        "--pairs",
        str(train),
        "--student",
        str(base),
        "--student-kind",
        "head",
        "--threads",
        "1",
        "--out",
        str(student),
        env={"OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    return Distilled(proc, student, base, train, rows)


def sweep_spec(data: Path, student: Path, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "datasets": [{"path": str(data)}],
        "repeats": 1,
        "warmup": 0,
        "devices": ["cpu"],
        "threads": 1,
        "batch_size": 4,
        "metrics": [{"metric": "frugalscore", "encoders": [str(student)]}],
    }


@pytest.mark.integration
def test_a_head_student_is_distilled_and_scored_by_a_sweep_as_by_the_api(distilled: Distilled, tmp_path: Path) -> None:
    proc = distilled.proc
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("fitted a feature head on 40 human scores into "), proc.stdout
    student = distilled.student
    assert {"head.json", "distill.json", "training_texts.sha256", "config.json", "model.safetensors"} <= {
        p.name for p in student.iterdir()
    }
    record = json.loads((student / "distill.json").read_text(encoding="utf-8"))
    assert record["teacher"]["metric"] == "human" and record["student"]["kind"] == "head"
    assert record["metric"] == "frugalscore" and record["data"]["pairs"] == 40
    # the folds: one per language pair of the training file, named dataset:lp
    assert record["head"]["groups"] == {"train:de-en": 20, "train:fr-en": 20}
    assert [tuple(s) for s in record["head"]["layer_sets"]] == layer_sets(2)
    head = read_head(student)
    assert head.layers == record["head"]["chosen"]["layers"] and record["student"]["head_params"] == head.params
    # the training texts' hashes: each distinct reference and (reference, hypothesis) pair, one a line
    hashes = (student / "training_texts.sha256").read_text(encoding="utf-8").split()
    assert len(hashes) == record["data"]["texts"] > 0 and len(set(hashes)) == len(hashes)

    # a one-cell sweep on other texts
    rows = own_rows(10, seed=2, lps=["cs-en"])
    trained = {r["reference"] for r in distilled.train_rows}
    assert not trained & {r["reference"] for r in rows}  # else the leakage guard (rightly) refuses the sweep
    data = write_jsonl(tmp_path / "eval.jsonl", rows)
    spec = write_spec(tmp_path, sweep_spec(data, student, "head"))
    swept = run_cli("run", str(spec), "--out", str(tmp_path / "run"), env={"OMP_NUM_THREADS": "1"}, timeout=300)
    assert swept.returncode == 0, swept.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run" / "results.csv")
    assert row["status"] == "ok" and row["metric"] == "frugalscore" and row["n_segments"] == "10", row
    cell = tmp_path / "run" / "cells" / row["cell_id"]
    with (cell / "scores.csv").open(encoding="utf-8", newline="") as fh:
        scores = [float(r["score"]) for r in csv.DictReader(fh)]  # written as repr: exact

    scorer = nlgbench.Scorer("frugalscore", encoder=str(student), device="cpu")  # batch 64, the sweep's 4
    direct = scorer.score([r["hypothesis"] for r in rows], [r["reference"] for r in rows])
    # The features are computed in float32 (unit round-off 6e-8) and another batch size pads and orders
    # the float32 reductions differently: each design column (P, R, F1, cosine, the projections of
    # |h - r| and h * r of unit vectors: all of magnitude <= 1; the log length ratios: of token counts)
    # moves by a few ulps, 1e-6 at most (16 ulps). The float64 head is linear in them, so the score moves
    # by at most 1e-6 * sum_j |coef_j| / scale_j. Far below a wrong layer, head or pair order's change.
    bound = 1e-6 * sum(abs(c) / s for c, s in zip(head.coef, head.scale, strict=True))
    magnitude = max(abs(s) for s in direct)
    assert bound < 1e-4 * magnitude, (bound, magnitude)  # the data gives no near-constant feature
    assert scores == pytest.approx(direct, rel=0, abs=bound)
    assert len(set(scores)) > 1  # the head does not give every pair the same score

    result = json.loads((cell / "result.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256((student / "distill.json").read_bytes()).hexdigest()[:12]
    signature = result["scorer"]["signature"]
    assert f"|student:head@{digest}|" in signature, signature
    assert signature == scorer.signature
    # params: the cut encoder's (both layers of the tiny BERT run; the pooler never does) plus the head's
    from transformers import AutoModel

    base = AutoModel.from_pretrained(distilled.base)
    encoder_params = sum(p.numel() for name, p in base.named_parameters() if not name.startswith("pooler."))
    assert result["params"] == encoder_params + head.params > encoder_params
    assert result["params"] == record["student"]["params"] and row["params"] == str(result["params"])


@pytest.mark.integration
def test_a_sweep_on_the_students_own_training_data_is_refused(distilled: Distilled, tmp_path: Path) -> None:
    assert distilled.proc.returncode == 0, distilled.proc.stderr[-3000:]
    spec = write_spec(tmp_path, sweep_spec(distilled.train, distilled.student, "leak"))
    proc = run_cli("run", str(spec), "--out", str(tmp_path / "run"), env={"OMP_NUM_THREADS": "1"}, timeout=300)
    line = assert_one_line(proc, f"student {distilled.student}", "evaluation dataset 'train'", "40 of 40 items")
    assert "--allow-overlap" in line
    assert not (tmp_path / "run" / "cells").exists()  # refused before any cell
