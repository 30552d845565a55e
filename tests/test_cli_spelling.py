"""Options are never abbreviated (`--idf` once silently meant `--idf-sents`), and bert-score's command-line
names given to `nlgbench score` get one line with nlgbench's spelling instead of the top-level usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlgbench.cli import main

pytestmark = pytest.mark.unit

PREFIX = "nlgbench: error: "


def files(tmp_path: Path) -> list[str]:
    cands, refs = tmp_path / "c.txt", tmp_path / "r.txt"
    cands.write_text("the cat sat\n", encoding="utf-8")
    refs.write_text("a cat sat\n", encoding="utf-8")
    return ["score", "-c", str(cands), "-r", str(refs)]


@pytest.mark.parametrize(
    ("extra", "spelling"),
    [
        (["--idf"], "--option idf=true"),
        (["--model", "roberta-large"], "--encoder NAME"),
        (["--model_type", "roberta-large"], "--encoder NAME"),
        (["-m", "roberta-large"], "--encoder NAME"),
        (["--num_layers", "9"], "--option layer=N"),
        (["-l", "9"], "--option layer=N"),
        (["--rescale_with_baseline"], "--option rescale_with_baseline=true"),
    ],
)
def test_bert_score_names_get_nlgbench_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], spelling: str
) -> None:
    code = main([*files(tmp_path), *extra])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2 and captured.out == ""
    assert len(lines) == 1 and lines[0].startswith(PREFIX), captured.err
    assert f"{extra[0]} is bert-score's spelling" in lines[0] and spelling in lines[0]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["score", "-c", "c.txt", "-r", "r.txt", "--idf-s", "corpus.txt"], "unrecognized arguments: --idf-s"),
        (["run", "spec.yaml", "--dry"], "unrecognized arguments: --dry"),
        (["compare", "DIR", "--cand", "a", "--baseline", "b"], "required: --candidate"),  # --cand not taken
    ],
)
def test_no_option_is_abbreviated(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(argv)
    assert exc.value.code == 2
    assert said in capsys.readouterr().err
