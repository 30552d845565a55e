"""Every command-line value is a string or one clear refusal: `--option=--` (which Python 3.11's argparse turned
into an empty list), an empty value (`--encoder=`, which meant the default) and `--` inside an option's values,
for every option of every command, found by walking the parser. Input files that are no regular file (a FIFO,
whose reading waits for a writer, a device, a folder) are refused before any read."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from nlgbench.cli import main
from nlgbench.cli.parser import build_parser
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, read_lines

pytestmark = pytest.mark.unit

PREFIX = "nlgbench: error: "
TEXTS = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """`nlgbench ARGV` in this process: exit 2, exactly one `nlgbench: error:` line on stderr, nothing on
    stdout, no traceback; the line's message."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage error: not the one line asked for
        code = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == 2, (argv, code, captured.err[-2000:])
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), (argv, captured.err[-2000:])
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0][len(PREFIX) :]


def leaf_parsers(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's parser with the words that name it (`score`, `models import`, `list`)."""
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not commands:
        yield words, parser
    for action in commands:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, (*words, name))


def value_options() -> list[tuple[tuple[str, ...], str, str]]:
    """(command words, option string, the option's name as argparse shows it) of every option that takes a value."""
    out = []
    for words, parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                for flag in action.option_strings:
                    out.append((words, flag, "/".join(action.option_strings)))
    return out


VALUE_OPTIONS = value_options()


def test_the_walk_finds_every_command_and_option() -> None:
    """The walk reaches the leaf commands and their options (so the tests below cover them all)."""
    commands = {" ".join(words) for words, _, _ in VALUE_OPTIONS}
    assert {"score", "baseline", "compare", "report", "import-scores", "distill", "run", "datasets import"} <= commands
    assert ("score", "-c", "-c/--candidates") in [(" ".join(w), f, n) for w, f, n in VALUE_OPTIONS]
    assert len(VALUE_OPTIONS) > 90


@pytest.mark.parametrize("words, flag, name", VALUE_OPTIONS, ids=[f"{' '.join(w)} {f}" for w, f, _ in VALUE_OPTIONS])
def test_double_dash_as_a_value_is_refused(
    capsys: pytest.CaptureFixture[str], words: tuple[str, ...], flag: str, name: str
) -> None:
    """`--option=--` (and `-c--` for a short option): one line naming the option, before any command runs
    (it was a list: a TypeError, an AttributeError, or silently the default encoder)."""
    forms = [f"{flag}=--"] + ([f"{flag}--"] if not flag.startswith("--") else [])
    for form in forms:
        message = one_line(capsys, [*words, form])
        assert message.startswith(f"argument {name}: got '--'"), message


@pytest.mark.parametrize("words, flag, name", VALUE_OPTIONS, ids=[f"{' '.join(w)} {f}" for w, f, _ in VALUE_OPTIONS])
def test_an_empty_value_is_refused(
    capsys: pytest.CaptureFixture[str], words: tuple[str, ...], flag: str, name: str
) -> None:
    """`--option=` and `--option ' '`: one line naming the option (`baseline --encoder=` computed with the default
    encoder, `score --idf-sents=` took idf from the references, `score --out=` wrote to stdout)."""
    for form in ([f"{flag}="], [flag, " "]):
        message = one_line(capsys, [*words, *form])
        assert message == f"argument {name}: the value is empty; give one", message


@pytest.mark.parametrize(
    "argv",
    [
        ["report", ""],
        ["run", " "],
        ["compare", "", "--candidate", "a", "--baseline", "b"],
        ["import-scores", "", "--dataset", "wmt16"],
    ],
)
def test_an_empty_positional_is_refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """An empty folder or file argument is no name (`report ''` read the current folder as the run)."""
    assert "the value is empty" in one_line(capsys, argv)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["score", "-c", "--"], "argument -c/--candidates: expected one argument"),
        (["compare", "run", "--candidate", "--", "--baseline", "b"], "argument --candidate: expected one argument"),
        (["score", "-c", "h.txt", "-r", "r.txt", "--", "s.txt"], "unrecognized arguments: -- s.txt"),
    ],
)
def test_double_dash_after_an_option_stays_argparses_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """`--option --` and `-r a.txt -- b.txt`: argparse reads `--` as the end of the options, and says so."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(message)


def test_values_that_only_look_like_options_are_kept() -> None:
    """A value starting with `--` given with `=` is a value, and `--` before positionals still ends the options."""
    args = build_parser().parse_args(["score", "-c=--x", "-r", "a.txt", "b.txt", "--encoder=-e", "--out", "-"])
    assert (args.candidates, args.references, args.encoder, args.out) == ("--x", ["a.txt", "b.txt"], "-e", "-")
    args = build_parser().parse_args(["run", "--force", "--", "-spec.yaml"])
    assert args.spec == "-spec.yaml"


# --------------------------------------------------------------------------- input files that are no regular file


class Hung(Exception):
    """The read waited: the file was opened although no one writes to it."""


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise Hung in this (main) thread after `seconds`: a blocked open of a FIFO fails the test, never hangs it."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    return path


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def score_argv(texts: Path, **files: Path) -> list[str]:
    """`score` of chrf (no model) with `texts` as every file but those in `files` (option -> path)."""
    paths = {"-c": texts, "-r": texts, **files}
    argv = ["score", "--metric", "chrf", "--encoder", "none"]
    for option, path in paths.items():
        argv += [option, str(path)]
    return argv


@pytest.mark.parametrize("option", ["-c", "-r", "--idf-sents"])
def test_a_fifo_as_a_score_file_is_refused(
    capsys: pytest.CaptureFixture[str], fifo: Path, texts: Path, option: str
) -> None:
    """A FIFO without a writer blocked `nlgbench score` forever (`--idf-sents`, `-c`, `-r`)."""
    with deadline(60):
        message = one_line(capsys, score_argv(texts, **{option: fifo}))
    assert message == f"cannot read {fifo}: it is a FIFO (named pipe), not a regular file", message


def test_a_fifo_as_the_sources_file_is_refused(capsys: pytest.CaptureFixture[str], fifo: Path, texts: Path) -> None:
    with deadline(60):
        message = one_line(
            capsys, ["score", "--metric", "chrf", "--encoder", "none", "-c", str(texts), "-s", str(fifo)]
        )
    assert "it is a FIFO (named pipe), not a regular file" in message


def test_a_fifo_as_the_spec_is_refused(capsys: pytest.CaptureFixture[str], fifo: Path, tmp_path: Path) -> None:
    with deadline(60):
        message = one_line(capsys, ["run", str(fifo), "--out", str(tmp_path / "out")])
    assert "it is a FIFO (named pipe), not a regular file" in message
    assert not (tmp_path / "out").exists()


def test_a_device_as_a_score_file_is_refused(capsys: pytest.CaptureFixture[str], texts: Path) -> None:
    """/dev/null read as an empty file; /dev/zero would be read until memory runs out."""
    message = one_line(capsys, score_argv(texts, **{"-r": Path(os.devnull)}))
    assert message == f"cannot read {os.devnull}: it is a character device, not a regular file"


def test_a_folder_as_a_score_file_is_refused(capsys: pytest.CaptureFixture[str], texts: Path, tmp_path: Path) -> None:
    message = one_line(capsys, score_argv(texts, **{"--idf-sents": tmp_path}))
    assert message == f"cannot read {tmp_path}: it is a directory, not a regular file"


@pytest.mark.parametrize("read", [read_bytes, read_lines], ids=["read_bytes", "read_lines"])
def test_the_shared_reader_refuses_a_fifo_before_opening_it(fifo: Path, read: Callable[[Path], Any]) -> None:
    """Every reader of input text (data files, pairs, importers) goes through `read_bytes`."""
    with deadline(30), pytest.raises(UserError, match=r"it is a FIFO \(named pipe\), not a regular file"):
        read(fifo)


def test_a_link_to_a_regular_file_is_read(texts: Path, tmp_path: Path) -> None:
    """The check follows links, as the read does: a link to a text file is that file."""
    link = tmp_path / "link.txt"
    link.symlink_to(texts)
    assert read_lines(link) == TEXTS
