"""Security at the edges a spec and a data file reach: what reaches a Slurm batch script is checked at
spec time (a spec's sbatch options are resource and accounting ones only), and names a spreadsheet
would run as a formula are refused where they enter (data, labels, import-scores).

Each case runs the real CLI (`python -m nlgbench.cli`, a subprocess) and checks it ends with one line
and exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_one_line, cli_subprocess, write_jsonl
from securitykit import write_spec
from tiny import TEXTS

pytestmark = pytest.mark.integration

# ----------------------------------------------------------------------------- 1: the sbatch script


def dry_run_error(*args: str) -> str:
    """`nlgbench run ... --dry-run` in a fresh process: exit 2 and one error line, returned. (Not in
    this process: importing submitit binds its log handlers to the sys.stdout/sys.stderr of the
    moment, here pytest's capture streams, which are closed after the test.)"""
    proc = cli_subprocess("run", *args, "--dry-run")
    line = assert_one_line(proc)
    assert "#SBATCH" not in proc.stdout and "PWNED" not in proc.stdout, proc.stdout
    return line


def test_newline_in_a_spec_slurm_arg_is_refused_at_spec_time(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = write_spec(
        tmp_path, tiny_model, extra='executor: {kind: slurm, slurm_args: {account: "nlp\\ntouch PWNED #"}}\n'
    )
    line = dry_run_error(str(spec), "--out", str(tmp_path / "run"))
    assert "sec.yaml.executor.slurm_args.account" in line and "control character" in line, line
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "arg, what",
    [
        ("qos=high\ntouch PWNED2 #", "control character"),
        ("qos=high\rtouch PWNED2", "control character"),
        ("qos=high\x1b[2J", "control character"),
        ("comment=a\u2028b", "control character"),  # a line separator to str.splitlines
        ("comment=a\xa0b", "a non-ASCII space ('\\xa0', U+00A0)"),  # no-break space: no control character
        ("comment=a\u200bb", "an invisible character ('\\u200b', U+200B)"),  # zero-width space
        ("qos=high\\", "backslash"),  # Slurm's directive parser escapes with it, even inside quotes
        ("constr\nint=x", "not an sbatch option name"),
    ],
)
def test_bad_characters_in_slurm_arg_are_refused_at_spec_time(
    arg: str, what: str, tiny_model: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, tiny_model)
    line = dry_run_error(str(spec), "--out", str(tmp_path / "run"), "--executor", "slurm", "--slurm-arg", arg)
    assert what in line, line
    assert "\n" not in line and "\r" not in line


@pytest.mark.parametrize(
    "key, value",
    [
        ("export", '"ALL,LD_PRELOAD=/tmp/evil.so"'),
        ("export", '"ALL,PYTHONPATH=/tmp/site"'),
        ("chdir", "/elsewhere"),
        ("get-user-env", "true"),
        ("get_user_env", "true"),
        ("exp", "ALL"),  # sbatch takes any unambiguous prefix of an option: --exp is --export
        ("uid", "0"),
    ],
)
def test_spec_slurm_args_beyond_resources_and_accounting_are_refused_at_spec_load(
    key: str, value: str, tiny_model: Path, tmp_path: Path
) -> None:
    from nlgbench.core.spec import load_spec
    from nlgbench.foundations.errors import UserError

    spec = write_spec(tmp_path, tiny_model, extra=f"executor: {{kind: slurm, slurm_args: {{{key}: {value}}}}}\n")
    with pytest.raises(UserError) as info:
        load_spec(spec)
    message = str(info.value)
    name = key.replace("_", "-")
    assert f"sec.yaml.executor.slurm_args.{key}: a spec may not set sbatch's --{name}" in message, message
    assert "--slurm-arg" in message and "\n" not in message


def test_spec_slurm_export_is_refused_in_dry_run_and_allowed_options_pass(tiny_model: Path, tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        tiny_model,
        extra='executor: {kind: slurm, slurm_args: {account: nlp, export: "ALL,LD_PRELOAD=/tmp/evil.so"}}\n',
    )
    line = dry_run_error(str(spec), "--out", str(tmp_path / "run"))
    assert "slurm_args.export: a spec may not set sbatch's --export" in line, line
    # the resource and accounting options, in sbatch's and submitit's spellings, pass and reach the script
    spec.write_text(
        spec.read_text().replace(
            'export: "ALL,LD_PRELOAD=/tmp/evil.so"',
            "mail_type: END, mail-user: me@x.org, mem_per_cpu: 2G, gpus_per_task: 1, nodelist: n1, nodes: 1, "
            "exclusive: true, qos: high, constraint: a100, gres: 'gpu:1', exclude: n2, reservation: r, comment: c",
        ),
        encoding="utf-8",
    )
    proc = cli_subprocess("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    directives = {line for line in proc.stdout.splitlines() if line.startswith("#SBATCH")}
    for wanted in ("--mail-type=END", "--mail-user=me@x.org", "--mem-per-cpu=2G", "--gpus-per-task=1", "--nodes=1"):
        assert f"#SBATCH {wanted}" in directives, (wanted, directives)
    assert not (tmp_path / "run").exists()


def test_slurm_arg_on_the_command_line_may_set_export(tiny_model: Path, tmp_path: Path) -> None:
    """The user's own command line may set what a spec may not; `--help` says so."""
    spec = write_spec(tmp_path, tiny_model)
    proc = cli_subprocess(
        "run", str(spec), "--out", str(tmp_path / "run"), "--executor", "slurm", "--dry-run",
        "--slurm-arg", "export=ALL,OMP_PROC_BIND=true", "--slurm-arg", "chdir=/tmp",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "#SBATCH --export=ALL,OMP_PROC_BIND=true" in proc.stdout.splitlines(), proc.stdout
    assert "#SBATCH --chdir=/tmp" in proc.stdout.splitlines(), proc.stdout
    assert "--export" in " ".join(cli_subprocess("run", "--help").stdout.split())


def test_newline_in_partition_or_run_folder_never_reaches_the_script(tiny_model: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, tiny_model)
    line = dry_run_error(str(spec), "--executor", "slurm", "--partition", "gpu\n#SBATCH --uid=0")
    assert "--partition" in line, line
    line = dry_run_error(str(spec), "--executor", "slurm", "--out", str(tmp_path / "run\ntouch PWNED3 #"))
    assert "control character" in line and "sbatch" in line, line


def test_assembled_script_holds_only_the_lines_nlgbench_meant(tmp_path: Path) -> None:
    from nlgbench.execution.slurm.options import SlurmOptions
    from nlgbench.execution.slurm.submit import check_script, sbatch_parameters, sbatch_script
    from nlgbench.foundations.errors import UserError

    options = SlurmOptions(partition="gpu", mem="8G", slurm_args={"account": "nlp", "exclusive": True})
    params = sbatch_parameters(options, "cuda", 2, "nlgbench-abc")
    script = sbatch_script(tmp_path, params, 3)
    check_script(script, params, tmp_path)  # as generated: accepted
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --account=nlp" in directives and "#SBATCH --exclusive" in directives
    injected = {
        "a line of its own": script.replace("#SBATCH --account=nlp", "#SBATCH --account=nlp\ntouch PWNED"),
        "two directives on one line": script.replace("#SBATCH --account=nlp", "#SBATCH --account=nlp --uid=0"),
        "a directive dropped": script.replace("#SBATCH --mem=8G\n", ""),
        "a directive not asked for": script.replace("#SBATCH --account=nlp", "#SBATCH --account=nlp\n#SBATCH --uid=0"),
        "a changed command": script.replace("-m submitit.core._submit", "-m submitit.core._submit; touch PWNED"),
        "a carriage return": script.replace("#SBATCH --account=nlp", "#SBATCH --account=nlp\rtouch PWNED"),
    }
    for why, bad in injected.items():
        with pytest.raises(UserError, match="sbatch script") as info:
            check_script(bad, params, tmp_path)
        assert "\n" not in str(info.value), why
    # options made without the spec's checks: the assembled script is refused all the same
    unchecked = SlurmOptions(slurm_args={"account": "nlp\ntouch PWNED #"})
    with pytest.raises(UserError, match="sbatch script nlgbench assembled is not what it meant"):
        sbatch_script(tmp_path, sbatch_parameters(unchecked, "cpu", 1, "x"), 2)
    # spaces and # are quoted, and stay one value to sbatch (its parser honours quotes)
    spaced = SlurmOptions(slurm_args={"comment": "a b #c"})
    assert "#SBATCH --comment='a b #c'" in sbatch_script(tmp_path, sbatch_parameters(spaced, "cpu", 1, "x"), 2).split(
        "\n"
    )


# ----------------------------------------------------------------------------- 4: names a spreadsheet would run

FORMULA = '=HYPERLINK("http://x","y")'


def data_rows(**changes: object) -> list[dict[str, object]]:
    """Four plain own-data rows (two systems, two documents); `changes` set on the third."""
    rows: list[dict[str, object]] = [
        {"lp": "de-en", "seg_id": k // 2 + 1, "system": f"sys{k % 2}", "doc_id": f"doc{k // 2}"}
        | {"reference": TEXTS[k], "hypothesis": TEXTS[k + 1], "human": float(k)}
        for k in range(4)
    ]
    rows[2].update(changes)
    return rows


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    write_jsonl(path, rows)
    return path


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"system": FORMULA}, "line 3: system '=HYPERLINK("),
        ({"lp": "@SUM(1+1)"}, "line 3: lp '@SUM(1+1)'"),
        ({"doc_id": "+cmd|' /C calc'!A0"}, "line 3: doc_id \"+cmd|' /C calc'!A0\""),
        ({"seg_id": "-2+3+cmd|' /C calc'!A0"}, "line 3: seg_id"),
        ({"human": {"=x": 1.0}}, "line 3: human dimension '=x'"),
        ({"domain": "\t=1+1"}, "line 3: column 'domain'"),
    ],
)
def test_names_a_spreadsheet_would_run_are_refused_at_load(
    changes: dict[str, object], needle: str, tmp_path: Path
) -> None:
    from nlgbench.data.userfile import load_user_file
    from nlgbench.foundations.errors import UserError

    path = write_rows(tmp_path / "data.jsonl", data_rows(**changes))
    with pytest.raises(UserError) as info:
        load_user_file(path, ("domain",) if "domain" in changes else ())
    message = str(info.value)
    assert message.startswith(f"{path} {needle}"), message
    assert "spreadsheet" in message and "\n" not in message


def test_a_formula_name_is_one_line_from_run_and_datasets_import(tiny_model: Path, tmp_path: Path) -> None:
    """The CLI: `run --dry-run` on own data, a data file named like a formula, and an importer's output."""
    spec = write_spec(tmp_path, tiny_model)
    data = tmp_path / "data.jsonl"
    write_rows(data, data_rows(system=FORMULA))
    assert_one_line(cli_subprocess("run", str(spec), "--dry-run"), f"{data} line 3: system '=HYPERLINK(")
    named = write_rows(tmp_path / "=cmd.jsonl", data_rows())
    spec.write_text(spec.read_text(encoding="utf-8").replace(str(data), str(named)), encoding="utf-8")
    assert_one_line(cli_subprocess("run", str(spec), "--dry-run"), f"{named}: the dataset's name '=cmd'")
    table = tmp_path / "t.tsv"
    table.write_text("lp\tseg_id\tsystem\tref\thyp\tscore\nde-en\t1\t@cmd\ta b\ta c\t1.5\n", encoding="utf-8")
    columns = ["--column", "reference=ref", "--column", "hypothesis=hyp", "--human", "human=score"]
    proc = cli_subprocess("datasets", "import", "table", str(table), "--out", str(tmp_path / "o.jsonl"), *columns)
    assert_one_line(proc, f"{table}, item 1: system '@cmd'")
    assert not (tmp_path / "o.jsonl").exists()


def test_names_like_numbers_or_a_dash_load_and_round_trip_through_scores_csv(tmp_path: Path) -> None:
    """What is not a formula loads, and scores.csv gives back exactly the names it was given."""
    from nlgbench.core.scores import UncheckedScores, read_scores, write_scores
    from nlgbench.data.userfile import load_user_file

    rows = data_rows(system="-", doc_id="-1.5e3")
    rows[0].update(system="+2", lp="x=y", doc_id="'=not a formula")
    rows[1].update(system="a-b@c")
    dataset = load_user_file(write_rows(tmp_path / "data.jsonl", rows))
    names = [(it.lp, str(it.seg_id), it.system, it.doc_id) for it in dataset.items]
    assert ("x=y", "1", "+2", "'=not a formula") in names and ("de-en", "2", "-", "-1.5e3") in names
    write_scores(tmp_path / "scores.csv", dataset.items, [0.5] * len(dataset.items))
    _, back = read_scores(tmp_path / "scores.csv", None, unchecked=UncheckedScores())
    assert [(r["lp"], str(r["seg_id"]), r["system"], r["doc_id"]) for r in back] == names


def test_an_encoder_label_a_spreadsheet_would_run_is_refused_at_spec_load(tiny_model: Path, tmp_path: Path) -> None:
    from nlgbench.core.spec import load_spec
    from nlgbench.foundations.errors import UserError

    spec = write_spec(tmp_path, tiny_model)
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(f"[{tiny_model}]", f"[{{name: {tiny_model}, label: '@cmd'}}]"),
        encoding="utf-8",
    )
    with pytest.raises(UserError, match=r"sec\.yaml\.metrics: the encoder label '@cmd' starts with '@'"):
        load_spec(spec)


@pytest.mark.parametrize("option", ["--metric", "--encoder"])
def test_import_scores_names_a_spreadsheet_would_run_are_refused(option: str, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "data.jsonl", data_rows())
    scores = tmp_path / "s.csv"
    scores.write_text("lp,seg_id,system,score\n" + "".join(f"de-en,{k // 2 + 1},sys{k % 2},0.{k}\n" for k in range(4)))
    names = {"--metric": "m", "--encoder": "e", option: "+cmd|' /C calc'!A0"}
    args = [arg for pair in names.items() for arg in pair]
    proc = cli_subprocess("import-scores", str(scores), "--dataset", str(data), *args, "--out", str(tmp_path / "run"))
    assert_one_line(proc, f"import-scores: {option} \"+cmd|' /C calc'!A0\" starts with '+'")
    assert not (tmp_path / "run").exists()
    names[option] = "-"  # a lone dash is no formula
    args = [arg for pair in names.items() for arg in pair]
    proc = cli_subprocess("import-scores", str(scores), "--dataset", str(data), *args, "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
