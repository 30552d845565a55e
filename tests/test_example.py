"""`nlgbench example [NAME] [--out FILE]`: the bundled example specs (the repository's examples/, carried by
the package through the bench/nlgbench/examples link) listed, printed, or written into a new file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import cli_subprocess
from nlgbench.cli import main
from nlgbench.cli.example import SUMMARY_CHARS, example_files, relative_paths
from nlgbench.foundations.package import package_file

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("nlgbench: error: "), (out, err)
    return err.strip()


def test_the_package_examples_are_the_repository_files() -> None:
    assert package_file("examples").resolve() == (REPO / "examples").resolve()
    assert {name: path.resolve() for name, path in example_files().items()} == {p.stem: p.resolve() for p in EXAMPLES}


def opening_sentence(path: Path) -> str:
    """A spec's opening comment up to its first line ending a sentence, `#`s and the closing stop removed."""
    words: list[str] = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.startswith("#"):
            break
        words += text[1:].split()
        if words and words[-1].endswith((".", ":")):
            break
    return " ".join(words).rstrip(".:")


def test_list_names_each_example_with_its_opening_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    """Not on a terminal (captured here, piped in use): each example's whole opening sentence, uncut."""
    assert main(["example"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names[0] == "quickstart" and sorted(names) == sorted(p.stem for p in EXAMPLES)
    for line in lines:
        assert line.split(None, 1)[1] == opening_sentence(REPO / "examples" / f"{line.split()[0]}.yaml")
    assert lines[0].startswith("quickstart     Quickstart: BERTScore with a heavy encoder, a light one")
    assert any(len(line.split(None, 1)[1]) > SUMMARY_CHARS for line in lines)  # some sentence is longer than a cut


@pytest.mark.integration
def test_piped_listing_is_not_cut() -> None:
    """`nlgbench example | less` or `> list.txt`: a pipe gets whole sentences, no "..."."""
    proc = cli_subprocess("example")
    assert proc.returncode == 0, proc.stderr
    assert "..." not in proc.stdout
    summaries = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    assert summaries == {p.stem: opening_sentence(p) for p in EXAMPLES}


def test_terminal_listing_fits_its_width(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal each line fits its width (at most SUMMARY_CHARS of summary), long sentences cut with "..."."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    for columns in (80, 200):
        monkeypatch.setenv("COLUMNS", str(columns))
        assert main(["example"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert all(len(line) <= columns and len(line.split(None, 1)[1]) <= SUMMARY_CHARS for line in lines)
        cut = [line for line in lines if line.endswith("...")]
        assert cut and all(
            opening_sentence(REPO / "examples" / f"{line.split()[0]}.yaml").startswith(line.split(None, 1)[1][:-3])
            for line in cut
        )


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_name_prints_the_spec_unchanged(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", path.stem]) == 0
    out, err = capsys.readouterr()
    assert out == path.read_text(encoding="utf-8")
    named = relative_paths(out)
    assert (named == []) == (err == ""), err  # a note exactly where the spec names paths beside itself


def test_note_for_specs_that_name_repository_paths(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "summarisation"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("nlgbench: note: summarisation names ../tests/data/summarisation.jsonl relative to")
    assert (REPO / "examples" / "../tests/data/summarisation.jsonl").is_file()
    assert relative_paths((REPO / "examples" / "quickstart.yaml").read_text(encoding="utf-8")) == []
    assert relative_paths((REPO / "examples" / "distill.yaml").read_text(encoding="utf-8")) == [
        "../reports/distill-models/minilm-l3-mpnet-bertscore",
        "../reports/distill-models/minilm-l6-mpnet-bertscore",
    ]


def test_unknown_name_says_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "quikstart"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("nlgbench: error: unknown example 'quikstart'; did you mean 'quickstart'?")


def test_out_writes_a_new_file_and_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "q.yaml"
    assert main(["example", "quickstart", "--out", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == f"wrote the example quickstart into {target}\n"
    assert target.read_bytes() == (REPO / "examples" / "quickstart.yaml").read_bytes()
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    target.write_text("mine\n", encoding="utf-8")
    assert main(["example", "similarity", "--out", str(target)]) == 2
    assert "exists already; refusing to overwrite it" in one_error_line(capsys)
    assert target.read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_out_refuses_a_symbolic_link(tmp_path: Path, dangling: bool, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("keep\n", encoding="utf-8")
    link = tmp_path / "q.yaml"
    link.symlink_to(victim)
    assert main(["example", "quickstart", "--out", str(link)]) == 2
    assert f"--out {link} is a symbolic link; nlgbench does not write through links" in one_error_line(capsys)
    assert link.is_symlink() and (
        victim.read_text(encoding="utf-8") == "keep\n" if not dangling else not victim.exists()
    )


def test_out_in_a_missing_folder_and_without_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "quickstart", "--out", str(tmp_path / "no" / "q.yaml")]) == 2
    assert "its folder does not exist" in one_error_line(capsys)
    assert main(["example", "--out", str(tmp_path / "q.yaml")]) == 2
    assert "--out needs an example NAME" in one_error_line(capsys)
    assert not (tmp_path / "q.yaml").exists()
