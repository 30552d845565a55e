"""Edges of `nlgbench score` / `compare` and the Python API: text files split on '\\n'
only, bad arguments as one line (exit 2) before any work, 1-based line numbers, the bootstrap's
limits, and the exit statuses the help promises."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import nlgbench
import nlgbench.cli.score
from clikit import user_error
from nlgbench.cli import main
from nlgbench.cli.parser import build_parser
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import MAX_RESAMPLES, MIN_RESAMPLES, check_bootstrap
from test_own_data import imported_run

pytestmark = pytest.mark.integration

HYPS = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]
REFS = ["a cat sat on the mat", "the dog runs through the park", "today it rains"]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(HYPS + REFS, num_layers=2, name="bert")


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with two imported 'encoders' (good, poor) of one metric: compare needs no model."""
    return imported_run(tmp_path_factory.mktemp("compare"))[0]


def write_lines(path: Path, texts: list[str], end: str = "\n") -> Path:
    path.write_bytes("".join(t + end for t in texts).encode("utf-8"))
    return path


def score_rows(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, str]]:
    """`nlgbench score ...` to stdout: exit 0, the CSV's rows."""
    code = main(["score", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return list(csv.DictReader(io.StringIO(captured.out)))


# --------------------------------------------------------------------------- item 6: lines split on '\n' only


@pytest.mark.parametrize("separator", ["\u0085", "\u2028", "\u2029", "\x0c", "\x1c", "\x0b", "\r"])
def test_score_files_split_on_newline_only(tmp_path: Path, capsys: pytest.CaptureFixture[str], separator: str) -> None:
    """A text holding a character str.splitlines() cuts at stays one line: 3 lines, 3 rows, each
    pair scored as the API scores the same three texts (identical pairs: chrF's maximum)."""
    texts = [f"the cat{separator}sat on the mat", "a dog ran in the park", "it is raining today"]
    hyps, refs = write_lines(tmp_path / "h.txt", texts), write_lines(tmp_path / "r.txt", texts, end="\r\n")
    rows = score_rows(capsys, "--metric", "chrf", "-c", str(hyps), "-r", str(refs))
    assert [int(r["line"]) for r in rows] == [1, 2, 3]
    expected = nlgbench.score(texts, texts, metric="chrf")
    assert [float(r["score"]) for r in rows] == expected
    assert len(set(expected)) == 1  # identical pairs: one score, the metric's maximum


def test_identical_texts_with_u0085_score_one(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: BERTScore of a file against itself is 1 on every line (0.664 on a shifted pair before)."""
    texts = ["the cat\u0085sat on the mat", "a dog ran in the park", "it is raining today"]
    path = write_lines(tmp_path / "t.txt", texts)
    rows = score_rows(capsys, "--encoder", str(tiny_dir), "-c", str(path), "-r", str(path))
    # F1 of a text with itself: cosine 1 per token up to float32 rounding (a few eps of 1.2e-7 each)
    assert len(rows) == 3 and all(abs(float(r["score"]) - 1.0) <= 1e-6 for r in rows)


def test_score_files_of_different_line_counts_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hyps = write_lines(tmp_path / "h.txt", HYPS)
    refs = write_lines(tmp_path / "r.txt", REFS[:2])
    message = user_error(capsys, "score", "--metric", "chrf", "-c", str(hyps), "-r", str(refs))
    assert f"{refs} has 2 lines" in message and f"{hyps} has 3" in message
    srcs = write_lines(tmp_path / "s.txt", HYPS + ["one more"])
    message = user_error(capsys, "score", "--metric", "chrf", "-c", str(hyps), "-r", str(hyps), "-s", str(srcs))
    assert f"{srcs} has 4 lines" in message and f"{hyps} has 3" in message


# --------------------------------------------------------------------------- item 11: one line, before the work


def no_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if `score` reaches the scoring (the argument checks must come first)."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("scored before the arguments were checked")

    monkeypatch.setattr(nlgbench.cli.score, "Scorer", forbidden)  # building the scorer loads the model


@pytest.mark.parametrize("out", ["folder", "missing/x.csv"])
def test_score_out_is_checked_before_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    (tmp_path / "folder").mkdir()
    path = write_lines(tmp_path / "h.txt", HYPS)
    no_scoring(monkeypatch)
    message = user_error(
        capsys, "score", "--metric", "chrf", "-c", str(path), "-r", str(path), "--out", str(tmp_path / out)
    )
    assert str(tmp_path / out) in message
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_cuda_is_one_line(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """A CPU build of torch (or no GPU): one line naming the device, for the CLI and the API."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = write_lines(tmp_path / "h.txt", HYPS)
    message = user_error(
        capsys, "score", "--encoder", str(tiny_dir), "-c", str(path), "-r", str(path), "--device", device
    )
    assert f"device {device!r}" in message and "CUDA is not available" in message
    with pytest.raises(UserError, match="CUDA is not available"):
        nlgbench.score(HYPS, REFS, encoder=str(tiny_dir), device=device)


def test_cuda_index_beyond_the_devices_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(UserError, match=r"device 'cuda:2': this machine has 2 CUDA devices \(cuda:0 to cuda:1\)"):
        nlgbench.score(HYPS, REFS, metric="chrf", device="cuda:2")


def generator_of(texts: list[str]) -> Any:
    return (t for t in texts)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nlgbench.score(None, REFS), "hypotheses must be a list of strings, got NoneType"),
        (lambda: nlgbench.score(5, REFS), "hypotheses must be a list of strings, got int"),
        (lambda: nlgbench.score(HYPS, 5), "references must be a list of strings (or of lists of strings), got int"),
        (lambda: nlgbench.score(HYPS, REFS, metric=None), "metric must be a registered metric's name, got None"),
        (lambda: nlgbench.score(HYPS, REFS, metric=3), "metric must be a registered metric's name, got 3"),
        (lambda: nlgbench.score(HYPS, REFS, metric=""), "metric must be a registered metric's name, got ''"),
        (lambda: nlgbench.score(HYPS, REFS, encoder=""), "encoder is empty"),
        (lambda: nlgbench.score(HYPS, REFS, metric="chrf", device=None), "unknown device None"),
        (lambda: nlgbench.run(None), "spec must be a spec file's path, a dict or a SweepSpec, got NoneType"),
        (lambda: nlgbench.run(5), "spec must be a spec file's path, a dict or a SweepSpec, got int"),
        (lambda: nlgbench.run([1]), "spec must be a spec file's path, a dict or a SweepSpec, got list"),
        (lambda: nlgbench.run({"name": "x"}, out=3), "out must be a folder's path, got int"),
        (lambda: nlgbench.load_run(None), "path must be a run folder's path, got NoneType"),
        (lambda: nlgbench.load_scores(None, "abc"), "path must be a run folder's path, got NoneType"),
        (lambda: nlgbench.load_scores(".", None), "cell_id must be a cell's id (a folder name under cells/), got None"),
        (
            lambda: nlgbench.load_scores(".", "../x"),
            "cell_id must be a cell's id (a folder name under cells/), got '../x'",
        ),
        # a blank text where the metric defines no value (MoverScore's transport): refused before any model loads
        (
            lambda: nlgbench.score(HYPS, ["a", "", "c"], metric="moverscore"),
            "moverscore cannot score a blank reference (references line 2)",
        ),
        (
            lambda: nlgbench.score(["a", " ", ""], REFS, metric="moverscore"),
            "moverscore cannot score a blank hypothesis (hypotheses line 2, 2 blank in all)",
        ),
        (lambda: nlgbench.score(HYPS, ["a", 3, "c"], metric="chrf"), "references line 2 is int"),
        (lambda: nlgbench.score(["a", "b", 3], REFS, metric="chrf"), "hypotheses line 3 is int, not a string"),
        (
            lambda: nlgbench.score(HYPS, [["a"], ["b", " "], ["c"]], metric="moverscore"),
            "blank reference (references line 2, reference 2)",
        ),
        (lambda: nlgbench.score(HYPS, [["a"], [], ["c"]], metric="chrf"), "references line 2 is an empty list"),
    ],
)
def test_bad_api_arguments_are_one_clear_error(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(UserError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_any_iterable_of_strings_is_taken() -> None:
    """A generator of hypotheses (or references, sources) scores as the list of the same texts."""
    expected = nlgbench.score(HYPS, REFS, metric="chrf")
    assert nlgbench.score(generator_of(HYPS), generator_of(REFS), metric="chrf") == expected
    assert nlgbench.score(tuple(HYPS), REFS, metric="chrf") == expected


def test_cli_blank_line_is_named_by_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The message's line number is the file's (1-based), as the output CSV's `line` column."""
    hyps = write_lines(tmp_path / "h.txt", HYPS)
    refs = write_lines(tmp_path / "r.txt", [REFS[0], " ", REFS[2]])
    assert "moverscore cannot score a blank reference (references line 2)" in user_error(
        capsys, "score", "--metric", "moverscore", "-c", str(hyps), "-r", str(refs)
    )


@pytest.mark.parametrize("flag", ["--metric", "--encoder"])
def test_cli_empty_metric_or_encoder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    path = write_lines(tmp_path / "h.txt", HYPS)
    message = user_error(capsys, "score", "-c", str(path), "-r", str(path), flag, "")
    assert message == f"argument {flag}: the value is empty; give one"  # refused by the parser, for every option


# --------------------------------------------------------------------------- compare: bootstrap limits


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "-1"], "seed must be an integer >= 0, got -1"),
        (["--resamples", "1"], f"at least {MIN_RESAMPLES} resamples"),
        (["--resamples", "0"], f"at least {MIN_RESAMPLES} resamples"),
        (["--resamples", "-5"], f"at least {MIN_RESAMPLES} resamples"),
        (["--resamples", str(MIN_RESAMPLES - 1)], f"got {MIN_RESAMPLES - 1}"),
        (["--resamples", "100000000"], f"at most {MAX_RESAMPLES}, got 100000000"),
    ],
)
def test_compare_refuses_a_bootstrap_it_cannot_do(
    compare_run: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert message in user_error(
        capsys, "compare", str(compare_run), "--candidate", "poor", "--baseline", "good", *args
    )


@pytest.mark.parametrize(
    "n_resamples, seed, message",
    [
        (0, 0, "resamples must be an integer >= 1, got 0"),
        (-5, 0, "resamples must be an integer >= 1, got -5"),
        (MIN_RESAMPLES, -1, "seed must be an integer >= 0, got -1"),
        (MAX_RESAMPLES + 1, 0, f"resamples must be at most {MAX_RESAMPLES}, got {MAX_RESAMPLES + 1}"),
    ],
)
def test_api_compare_refuses_no_bootstrap(compare_run: Path, n_resamples: int, seed: int, message: str) -> None:
    """The API's `compare` takes fewer resamples (tests, `write_report`), but not none, nor a negative seed."""
    from nlgbench.reporting.compare import compare
    from nlgbench.runs.rundata import RunData

    with pytest.raises(UserError, match=message):
        compare(RunData.open(compare_run), "poor", "good", n_resamples=n_resamples, seed=seed)


def test_resamples_are_bounded_above() -> None:
    """Up to MAX_RESAMPLES is taken (by the CLI and the API alike); more is refused before any work,
    not left to run for days."""
    check_bootstrap(MAX_RESAMPLES, 0)
    for minimum in (1, MIN_RESAMPLES):
        with pytest.raises(UserError, match="minutes per row"):
            check_bootstrap(MAX_RESAMPLES + 1, 0, minimum=minimum)


def test_compare_at_the_fewest_resamples_brackets_the_estimate(
    compare_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the minimum the paired interval holds the estimate (with 1 resample it did not) and p is a probability."""
    from nlgbench.reporting.compare import compare
    from nlgbench.runs.rundata import RunData

    for seed in (0, 7):
        result = compare(RunData.open(compare_run), "poor", "good", n_resamples=MIN_RESAMPLES, seed=seed)
        row = result["rows"][0]
        assert row["delta_ci"][0] <= row["delta"] <= row["delta_ci"][1]
        assert 0 <= row["p_bootstrap"] <= 1
    assert (
        main(
            [
                "compare",
                str(compare_run),
                "--candidate",
                "poor",
                "--baseline",
                "good",
                "--resamples",
                str(MIN_RESAMPLES),
                "--seed",
                "0",
            ]
        )
        == 0
    )
    assert f"{MIN_RESAMPLES} resamples, seed 0" in capsys.readouterr().out


# --------------------------------------------------------------------------- exit statuses


def test_help_documents_the_exit_statuses() -> None:
    parser = build_parser()
    run_help = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["run"].format_help()
    for text in (parser.format_help(), run_help):
        flat = " ".join(text.split())
        for status in ("0 every cell ok", "1 some cell not ok", "2 usage or input error", "130 interrupted"):
            assert status in flat, status


def test_exit_statuses_are_the_documented_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 for bad input (ours and argparse's), 130 for Ctrl-C; 0 and 1 by the cells (test_faults_*, test_runner)."""
    assert main(["compare", str(tmp_path / "nothing"), "--candidate", "a", "--baseline", "b"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["score"])  # -c is required: argparse's usage error
    assert exit_info.value.code == 2

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(nlgbench.cli.score, "Scorer", interrupted)
    path = write_lines(tmp_path / "h.txt", HYPS)
    assert main(["score", "--metric", "chrf", "-c", str(path), "-r", str(path)]) == 130
    assert capsys.readouterr().err.strip().endswith("interrupted; run the same command again to resume")
