"""One rule for every name given at input (`nlgbench.foundations.names`): no control character (C0,
DEL, C1, U+2028, U+2029) in a `--label`, a spec's `labels:`, an import-scores name, a data file's
lp / system / doc_id / seg_id / human dimension, an encoder's label; each is refused where it enters
with one line naming the file and line or the option, and the character. Texts are not names.
And one rule for names shown: two labels under one name are refused by report, compare and the
spec check alike (`nlgbench.core.labels.Names.check`)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import write_spec
from nlgbench.cli import main
from nlgbench.core.labels import Names, label_map, label_option
from nlgbench.core.spec import parse_metric_entry, parse_spec
from nlgbench.data.importers.output import write_items
from nlgbench.data.userfile import load_user_file
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.names import control_character, refuse_name
from nlgbench.runs.importscores import import_scores

pytestmark = pytest.mark.unit

# C0 (NUL, BEL, ESC, tab, line feed, carriage return), DEL, C1 (NEL, CSI) and the Unicode line breaks
CONTROLS = ["\x00", "\x07", "\x1b", "\t", "\n", "\r", "\x7f", "\x85", "\x9b", "\u2028", "\u2029"]
# the bidirectional embeddings, overrides and isolates: they reorder what is shown after them
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


def named(char: str) -> str:
    """How a message names `char`: `a control character ('\\x1b', U+001B)`."""
    return f"holds a control character ({char!r}, U+{ord(char):04X})"


def one_error_line(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    """The CLI's single error line (exit 2; a traceback would propagate here)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("nlgbench: error:")]
    assert code == 2 and len(lines) == 1, (code, out, err)
    return lines[0]


def data_rows(systems: tuple[str, ...] = ("A", "B", "C"), n: int = 8) -> list[dict[str, Any]]:
    rng = random.Random(0)
    return [
        {"lp": "en", "seg_id": i, "system": s, "reference": f"r {i}", "hypothesis": f"h {i} {s}", "human": rng.random()}
        for s in systems
        for i in range(1, n + 1)
    ]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_scores(path: Path, rows: list[dict[str, Any]], seed: int) -> Path:
    rng = random.Random(seed)
    lines = [f"{r['lp']},{r['seg_id']},{r['system']},{rng.random():.4f}\n" for r in rows]
    path.write_text("lp,seg_id,system,score\n" + "".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def two_encoders(tmp_path: Path) -> Path:
    """A run folder with two imported cells of metric `m`: encoders `encA` and `encB`."""
    rows = data_rows()
    data = write_rows(tmp_path / "d.jsonl", rows)
    for seed, encoder in enumerate(("encA", "encB")):
        import_scores(write_scores(tmp_path / f"{encoder}.csv", rows, seed), str(data), "m", encoder, tmp_path / "run")
    return tmp_path / "run"


# ----------------------------------------------------------------------------- the character rule


@pytest.mark.parametrize("char", CONTROLS)
def test_a_control_character_anywhere_in_a_name_is_named(char: str) -> None:
    with pytest.raises(UserError) as caught:
        refuse_name(f"sys{char}x", "system", "d.jsonl line 3")
    assert str(caught.value).startswith(f"d.jsonl line 3: system {f'sys{char}x'!r} {named(char)}")
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)  # the message itself is one plain line


@pytest.mark.parametrize("char", BIDI)
def test_a_bidirectional_override_in_a_name_is_named(char: str) -> None:
    """U+202E shows `x<U+202E>cba` as `xabc`: a name read as another."""
    with pytest.raises(
        UserError, match=re.escape(f"holds a bidirectional control character ({char!r}, U+{ord(char):04X})")
    ):
        refuse_name(f"x{char}cba", "the name", "--label")


@pytest.mark.parametrize(
    "name", ["Ünïcødé", "中文 系统", "a\u00a0b", "emoji 🙂", "👩\u200d🔬", "فارسی\u200cها", "x-y", "-", "+2", "a=b"]
)
def test_printable_names_pass(name: str) -> None:
    """Non-ASCII letters, a no-break space, the joiners emoji and Persian need: names as written."""
    assert control_character(name) is None
    assert refuse_name(name, "system", "here") == name


# ----------------------------------------------------------------------------- item 7: names at input


@pytest.mark.parametrize("char", ["\x1b", "\x9b", "\u2028"])
def test_label_options_refuse_control_characters(
    char: str, two_encoders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--label` of report and compare: the name and the label it names."""
    for value, what in ((f"encA=E{char}[31m", "the name"), (f"enc{char}A=E", "the label")):
        with pytest.raises(UserError, match=f"^--label: {what} .* {re.escape(named(char))}"):
            label_option(value)
        for command in (["report"], ["compare", "--candidate", "encA", "--baseline", "encB"]):
            line = one_error_line(capsys, command[0], two_encoders, *command[1:], "--label", value)
            assert named(char) in line and char not in line
    assert not (two_encoders / "report").exists()


@pytest.mark.parametrize("char", ["\x1b", "\x85", "\u2029"])
def test_spec_labels_refuse_control_characters(char: str) -> None:
    raw = {"name": "s", "datasets": ["wmt16"], "metrics": [{"metric": "sentbleu"}]}
    for labels in ({"sentbleu": f"BLEU{char}"}, {f"sent{char}bleu": "BLEU"}):
        with pytest.raises(
            UserError,
            match=r"^s\.yaml\.labels: the (name|label) .*" + re.escape(named(char)),
        ):
            parse_spec({**raw, "labels": labels}, source="s.yaml")
    with pytest.raises(UserError, match="control character"):
        label_map({"sentbleu": f"a{char}b"}, "x.labels")


@pytest.mark.parametrize("option", ["--encoder", "--metric", "--dataset"])
def test_import_scores_refuses_control_characters_in_its_names(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = data_rows()
    data = write_rows(tmp_path / "d.jsonl", rows)
    values = {"--encoder": "e", "--metric": "m", "--dataset": str(data)}
    values[option] = {"--encoder": "e\x1b]0;owned\x07", "--metric": "m\x1b[2J", "--dataset": "wmt16\x1b"}[option]
    args = [arg for pair in values.items() for arg in pair]
    line = one_error_line(
        capsys, "import-scores", write_scores(tmp_path / "s.csv", rows, 0), *args, "--out", tmp_path / "run"
    )
    assert line.startswith(f"nlgbench: error: import-scores: {option} ") and named("\x1b") in line
    assert not (tmp_path / "run").exists()


def test_import_scores_refuses_control_characters_in_the_files_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key of the scores file is a name too: its message would otherwise print it raw."""
    rows = data_rows()
    data = write_rows(tmp_path / "d.jsonl", rows)
    scores = write_scores(tmp_path / "s.csv", [*rows[:2], {**rows[2], "system": "A\x1b[2J"}, *rows[3:]], 0)
    line = one_error_line(
        capsys, "import-scores", scores, "--dataset", data, "--metric", "m", "--encoder", "e", "--out", tmp_path / "run"
    )
    assert line.startswith(
        f"nlgbench: error: {scores}:4: system 'A\\x1b[2J' {named(chr(27))}, which would be written raw"
    )


@pytest.mark.parametrize(
    ("field", "value", "char"),
    [
        ("system", "A\x1b[31m", "\x1b"),
        ("lp", "en\u2028de", "\u2028"),
        ("doc_id", "d\x85oc", "\x85"),
        ("seg_id", "s\x7f1", "\x7f"),
        ("system", "A\tB", "\t"),
        ("lp", "e\x9bn", "\x9b"),
    ],
)
def test_data_file_names_refuse_control_characters(field: str, value: str, char: str, tmp_path: Path) -> None:
    rows = data_rows()
    rows[3] = {**rows[3], field: value}
    data = write_rows(tmp_path / "d.jsonl", rows)
    with pytest.raises(UserError) as caught:
        load_user_file(data)
    assert str(caught.value).startswith(f"{data} line 4: {field} {value!r} {named(char)}")


def test_human_dimension_names_and_tsv_data_refuse_control_characters(tmp_path: Path) -> None:
    rows = [{**row, "human": {"flu\x1bency": row["human"]}} for row in data_rows()]
    data = write_rows(tmp_path / "d.jsonl", rows)
    with pytest.raises(UserError, match=r"d\.jsonl line 1: human dimension 'flu\\x1bency' holds a control character"):
        load_user_file(data)
    tsv = tmp_path / "d.tsv"
    tsv.write_text("lp\tseg_id\tsystem\treference\thypothesis\thuman\nen\t1\tA\x07\tr\th\t0.5\n", encoding="utf-8")
    with pytest.raises(
        UserError, match=r"d\.tsv line 2: system 'A\\x07' holds a control character \('\\x07', U\+0007\)"
    ):
        load_user_file(tsv)


def test_a_data_files_name_is_a_name_and_its_path_is_shown_escaped(tmp_path: Path) -> None:
    """The file's stem labels its cells; the message names the file without writing the escape raw."""
    data = write_rows(tmp_path / "my\x1b[2Jdata.jsonl", data_rows())
    with pytest.raises(UserError) as caught:
        load_user_file(data)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path}/my\\x1b[2Jdata.jsonl: the dataset's name 'my\\x1b[2Jdata' {named(chr(27))}")
    assert "\x1b" not in message


def test_texts_may_hold_control_characters(tmp_path: Path) -> None:
    """A hypothesis or reference is data, not a name: it loads as written."""
    rows = data_rows()
    rows[0] = {**rows[0], "hypothesis": "esc \x1b[31m red \u2028 next", "reference": "tab\there\x85"}
    dataset = load_user_file(write_rows(tmp_path / "d.jsonl", rows))
    assert any(item.hypothesis == "esc \x1b[31m red \u2028 next" for item in dataset.items)


def test_importer_output_refuses_control_characters_before_writing(tmp_path: Path) -> None:
    record = {
        "lp": "en",
        "seg_id": "a\x1bb",
        "system": "A",
        "source": "",
        "references": ["r"],
        "hypothesis": "h",
        "human": 0.5,
    }
    with pytest.raises(UserError, match=r"item 1: seg_id 'a\\x1bb' holds a control character"):
        write_items([record], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_an_encoder_folder_named_with_a_control_character_is_refused_before_its_files_are_read(tmp_path: Path) -> None:
    """The folder's name is the encoder's label: refused at the entry, `nlgbench score` and the API too."""
    folder = tmp_path / "mini\x1b[31mLM"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    with pytest.raises(UserError, match=r"^score\.encoders\[0\]: the encoder label 'mini\\x1b\[31mLM' holds a control"):
        parse_metric_entry({"metric": "bertscore", "encoders": [str(folder)]}, "score", tmp_path)


# ----------------------------------------------------------------------------- item 6: one name per label


def test_compare_refuses_a_label_shown_as_the_other_side(
    two_encoders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--label encA=encB` printed "candidate encB vs baseline encB"; report already refused it."""
    compare = ["compare", two_encoders, "--candidate", "encA", "--baseline", "encB", "--resamples", "100"]
    line = one_error_line(capsys, *compare, "--label", "encA=encB")
    assert line == "nlgbench: error: --label: 'encA' and 'encB' would both be shown as 'encB'"
    assert one_error_line(capsys, "report", two_encoders, "--label", "encA=encB") == line  # one rule


def test_compare_refuses_two_labels_given_one_name(two_encoders: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare = ["compare", two_encoders, "--candidate", "encA", "--baseline", "encB", "--resamples", "100"]
    line = one_error_line(capsys, *compare, "--label", "encA=X", "--label", "encB=X")
    assert line == "nlgbench: error: --label: 'encA' and 'encB' would both be shown as 'X'"
    assert one_error_line(capsys, "report", two_encoders, "--label", "encA=X", "--label", "encB=X") == line
    line = one_error_line(capsys, *compare, "--label", "encA=X", "--label", "encA=Y")
    assert line == "nlgbench: error: --label: 'encA' is given two names, 'X' and 'Y'"
    assert main([str(a) for a in [*compare, "--label", "encA=X"]]) == 0
    assert "candidate X vs baseline encB" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["encA=encB\u200b"], "encB\u200b"),  # a zero-width space shows nothing
        (["encA=e\u0301", "encB=\u00e9"], "\u00e9"),  # e + combining acute is é
        (["encA=B\u00adB", "encB=BB"], "BB"),  # a soft hyphen shows nothing mid-word
    ],
)
def test_names_that_look_the_same_are_one_name(
    given: list[str], shown: str, two_encoders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--label encA=encB<U+200B>` printed "candidate encB vs baseline encB" as before the rule."""
    options = [arg for value in given for arg in ("--label", value)]
    compare = ["compare", two_encoders, "--candidate", "encA", "--baseline", "encB", "--resamples", "100"]
    line = one_error_line(capsys, *compare, *options)
    assert line.startswith("nlgbench: error: --label: 'encA' and 'encB' would both be shown as"), line
    assert one_error_line(capsys, "report", two_encoders, *options) == line


def test_two_labels_given_one_name_are_refused_even_where_one_is_absent() -> None:
    """The map itself is refused: a name that stands for two labels names neither."""
    with pytest.raises(UserError, match="'a' and 'b' would both be shown as 'x'"):
        Names({"a": "x", "b": "x"}).check(["a"], "--label")
    Names({"a": "x", "b": "y"}).check(["a", "c"], "--label")  # one name each: fine


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"sentbleu": "X", "chrf": "X"}, "'sentbleu' and 'chrf' would both be shown as 'X'"),
        ({"sentbleu": "chrf"}, "'sentbleu' and 'chrf' would both be shown as 'chrf'"),
        ({"a": "X", "b": "X"}, "'a' and 'b' would both be shown as 'X'"),
    ],
)
def test_spec_labels_colliding_fail_the_dry_run(
    labels: dict[str, str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`labels: {A: X, B: X}` passed `--dry-run`; now the spec check refuses it as report would."""
    data = write_rows(tmp_path / "d.jsonl", data_rows())
    spec = {"name": "s", "datasets": [{"path": str(data)}], "metrics": [{"metric": "sentbleu"}, {"metric": "chrf"}]}
    path = write_spec(tmp_path, {**spec, "labels": labels})
    assert (
        one_error_line(capsys, "run", path, "--dry-run", "--out", tmp_path / "out")
        == f"nlgbench: error: spec.yaml.labels: {message}"
    )
    assert (
        main(["run", str(write_spec(tmp_path, spec, "plain.yaml")), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    )
