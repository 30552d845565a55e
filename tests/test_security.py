"""Security and data integrity at the edges: what reaches a Slurm batch script is
checked at spec time (a spec's sbatch options are resource and accounting ones only), nothing
nlgbench writes into a run folder follows a symbolic link out of it, and no command writes its
output file (`--out`) through a symbolic or hard link.

Each run folder case plants a link to a file or folder outside the run folder, runs the real CLI
(`python -m nlgbench.cli`, a subprocess) and checks the outside target is byte for byte untouched
and the command ends with one line and exit code 2 (or, where the link is no longer used at all,
succeeds without touching it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import assert_one_line, nlgbench, write_jsonl
from tiny import TEXTS

pytestmark = pytest.mark.integration

KEEP = "outside the run folder: must stay as it is\n"


# ----------------------------------------------------------------------------- helpers


def write_spec(folder: Path, model: Path, *, extra: str = "") -> Path:
    """A one-cell sweep (BERTScore with the tiny model, 1 repeat, no warm-up) over 2 x 4 own segments."""
    data = folder / "data.jsonl"
    rows = [
        {
            "lp": lp,
            "seg_id": k + 1,
            "reference": TEXTS[(i := 4 * j + k) % 8],
            "hypothesis": TEXTS[(i + 1) % 8],
            "human": float((i * 7) % 5),
        }
        for j, lp in enumerate(("de-en", "fr-en"))
        for k in range(4)
    ]
    write_jsonl(data, rows)
    spec = folder / "sec.yaml"
    spec.write_text(
        f"name: sec\ndatasets: [{{path: {data}}}]\nrepeats: 1\nwarmup: 0\nbatch_size: 4\nthreads: 1\n"
        f"{extra}metrics:\n  - metric: bertscore\n    encoders: [{model}]\n",
        encoding="utf-8",
    )
    return spec


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself), relative name -> bytes."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_model(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert(TEXTS, num_layers=2, name="bert")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, Path]:
    """(spec, run folder) of a finished one-cell sweep; tests copy the folder before planting links."""
    folder = tmp_path_factory.mktemp("sec-run")
    spec = write_spec(folder, tiny_model)
    run = folder / "run"
    proc = nlgbench("run", str(spec), "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return spec, run


@pytest.fixture
def run(finished: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the finished run folder (its cells, store, results.csv) to plant links in."""
    return Path(shutil.copytree(finished[1], tmp_path / "run"))


def outside_file(tmp_path: Path, name: str) -> Path:
    target = tmp_path / "outside" / name
    target.parent.mkdir(exist_ok=True)
    target.write_text(KEEP, encoding="utf-8")
    return target


# ----------------------------------------------------------------------------- 1: the sbatch script


def dry_run_error(*args: str) -> str:
    """`nlgbench run ... --dry-run` in a fresh process: exit 2 and one error line, returned. (Not in
    this process: importing submitit binds its log handlers to the sys.stdout/sys.stderr of the
    moment, here pytest's capture streams, which are closed after the test.)"""
    proc = nlgbench("run", *args, "--dry-run")
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
    proc = nlgbench("run", str(spec), "--out", str(tmp_path / "run"), "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    directives = {line for line in proc.stdout.splitlines() if line.startswith("#SBATCH")}
    for wanted in ("--mail-type=END", "--mail-user=me@x.org", "--mem-per-cpu=2G", "--gpus-per-task=1", "--nodes=1"):
        assert f"#SBATCH {wanted}" in directives, (wanted, directives)
    assert not (tmp_path / "run").exists()


def test_slurm_arg_on_the_command_line_may_set_export(tiny_model: Path, tmp_path: Path) -> None:
    """The user's own command line may set what a spec may not; `--help` says so."""
    spec = write_spec(tmp_path, tiny_model)
    proc = nlgbench(
        "run", str(spec), "--out", str(tmp_path / "run"), "--executor", "slurm", "--dry-run",
        "--slurm-arg", "export=ALL,OMP_PROC_BIND=true", "--slurm-arg", "chdir=/tmp",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "#SBATCH --export=ALL,OMP_PROC_BIND=true" in proc.stdout.splitlines(), proc.stdout
    assert "#SBATCH --chdir=/tmp" in proc.stdout.splitlines(), proc.stdout
    assert "--export" in " ".join(nlgbench("run", "--help").stdout.split())


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


# ----------------------------------------------------------------------------- 2: links in a run folder


def test_symlinked_lock_is_refused_and_its_target_untouched(run: Path, tmp_path: Path) -> None:
    v1 = outside_file(tmp_path, "v1")
    (run / ".lock").unlink()
    (run / ".lock").symlink_to(v1)
    assert_one_line(nlgbench("repair", str(run)), str(run / ".lock"), "symbolic link")
    assert v1.read_text(encoding="utf-8") == KEEP


def test_hard_linked_lock_is_refused_and_its_target_untouched(run: Path, tmp_path: Path) -> None:
    v1 = outside_file(tmp_path, "v1")
    (run / ".lock").unlink()
    os.link(v1, run / ".lock")
    assert_one_line(nlgbench("repair", str(run)), str(run / ".lock"), "hard link")
    assert v1.read_text(encoding="utf-8") == KEEP


def test_symlinked_temporary_is_never_written_through(run: Path, tmp_path: Path) -> None:
    """A link planted where the old code put its fixed temporary name (results.csv.tmp), and
    results.csv itself a link: the rewrite replaces results.csv with a file of its own."""
    v2, v3 = outside_file(tmp_path, "v2"), outside_file(tmp_path, "v3")
    before = (run / "results.csv").read_text(encoding="utf-8")
    (run / "results.csv.tmp").symlink_to(v2)
    proc = nlgbench("repair", str(run))
    assert proc.returncode == 0, proc.stderr
    assert v2.read_text(encoding="utf-8") == KEEP
    assert not (run / "results.csv").is_symlink() and (run / "results.csv").read_text(encoding="utf-8") == before
    (run / "results.csv").unlink()
    (run / "results.csv").symlink_to(v3)
    assert nlgbench("repair", str(run)).returncode == 0
    assert v3.read_text(encoding="utf-8") == KEEP
    assert not (run / "results.csv").is_symlink() and (run / "results.csv").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == ["results.csv.tmp"]  # no leftovers


def test_symlinked_report_folder_is_refused(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-report"
    outside.mkdir()
    (outside / "index.html").write_text(KEEP, encoding="utf-8")
    (run / "report").symlink_to(outside, target_is_directory=True)
    assert_one_line(nlgbench("report", str(run)), str(run / "report"), "symbolic link")
    assert snapshot(outside) == {"index.html": KEEP.encode()}


def test_symlinked_file_in_report_is_replaced_not_followed(run: Path, tmp_path: Path) -> None:
    v4 = outside_file(tmp_path, "v4")
    (run / "report").mkdir()
    (run / "report" / "index.html").symlink_to(v4)
    (run / "report" / "tradeoff.csv").symlink_to(v4)
    proc = nlgbench("report", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert v4.read_text(encoding="utf-8") == KEEP
    assert not (run / "report" / "index.html").is_symlink() and "<html" in (run / "report" / "index.html").read_text()
    assert not (run / "report" / "tradeoff.csv").is_symlink()


def test_run_force_never_deletes_through_a_symlinked_cell_folder(
    finished: tuple[Path, Path], run: Path, tmp_path: Path
) -> None:
    spec = finished[0]
    (cell,) = (run / "cells").iterdir()
    outside = Path(shutil.move(str(cell), str(tmp_path / "outside-cell")))
    before = snapshot(outside)
    assert {"config.json", "result.json", "scores.csv"} <= set(before)
    cell.symlink_to(outside, target_is_directory=True)
    assert_one_line(nlgbench("run", str(spec), "--out", str(run), "--force"), str(cell), "symbolic link")
    assert snapshot(outside) == before
    assert_one_line(nlgbench("repair", str(run)), str(cell), "symbolic link")
    assert snapshot(outside) == before


@pytest.mark.parametrize("name", ["results.sqlite", "results.sqlite-journal", "results.sqlite-wal"])
def test_symlinked_store_is_refused(name: str, finished: tuple[Path, Path], run: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside" / name
    target.parent.mkdir()
    if name == "results.sqlite":
        shutil.move(str(run / name), str(target))
    else:
        target.write_bytes(b"")  # a journal link to a file the store's next write would fill
    before = snapshot(target)
    (run / name).symlink_to(target)
    for args in (("run", str(finished[0]), "--out", str(run), "--force"), ("repair", str(run)), ("report", str(run))):
        assert_one_line(nlgbench(*args), str(run / name), "symbolic link")
        assert snapshot(target) == before, args


# ----------------------------------------------------------------------------- 3: a command's output file


SUMMEVAL = (
    Path(__file__).resolve().parent / "data" / "importers" / "summeval" / "model_annotations.aligned.paired.jsonl"
)


def plant_link(kind: str, path: Path, victim: Path) -> None:
    """`path` made a symbolic or a hard link to `victim`."""
    if kind == "symlink":
        path.symlink_to(victim)
    else:
        os.link(victim, path)


def output_command(command: str, tmp_path: Path, out: Path, model: Path) -> list[str]:
    """The arguments of `command` writing its output to `out`."""
    if command == "score":
        (tmp_path / "c.txt").write_text("the cat sat\na dog ran\n", encoding="utf-8")
        (tmp_path / "r.txt").write_text("the cat sat down\na dog runs\n", encoding="utf-8")
        texts = ["-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt")]
        return ["score", "--metric", "sentbleu", *texts, "--out", str(out)]
    if command == "datasets import":
        return ["datasets", "import", "summeval", str(SUMMEVAL), "--out", str(out)]
    if command == "example":
        return ["example", "quickstart", "--out", str(out)]
    data = write_spec(tmp_path, model).parent / "data.jsonl"
    return ["distill", "--teacher-metric", "chrf", "--student", str(model), "--pairs", str(data), "--out", str(out)]


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("command", ["score", "datasets import", "example"])
def test_output_file_that_is_a_link_is_refused_and_its_target_untouched(
    command: str, kind: str, tiny_model: Path, tmp_path: Path
) -> None:
    victim = outside_file(tmp_path, "victim.jsonl")
    out = tmp_path / ("sc.csv" if command == "score" else "out.jsonl")
    plant_link(kind, out, victim)
    proc = nlgbench(*output_command(command, tmp_path, out, tiny_model))
    assert_one_line(proc, str(out), "link")
    assert victim.read_text(encoding="utf-8") == KEEP


def test_distill_out_that_is_a_symlink_is_refused_and_its_target_untouched(tiny_model: Path, tmp_path: Path) -> None:
    victim = tmp_path / "outside" / "student"
    victim.mkdir(parents=True)
    (victim / "distill.json").write_text(KEEP, encoding="utf-8")  # a previous student, which --out may replace
    out = tmp_path / "student"
    out.symlink_to(victim)
    proc = nlgbench(*output_command("distill", tmp_path, out, tiny_model))
    assert_one_line(proc, f"--out {out} is a symbolic link")
    assert snapshot(victim) == {"distill.json": KEEP.encode()} and out.is_symlink()
    out.unlink()  # the checkpoint folder beside it (OUT.partial), a link: refused as well, before any training
    (tmp_path / "student.partial").symlink_to(victim)
    proc = nlgbench(*output_command("distill", tmp_path, out, tiny_model))
    assert_one_line(proc, f"the checkpoint folder {tmp_path / 'student.partial'} is a symbolic link")
    assert snapshot(victim) == {"distill.json": KEEP.encode()} and not out.exists()


def test_score_out_replaces_a_plain_file_whole(tmp_path: Path, tiny_model: Path) -> None:
    """An existing plain file is replaced (as before), through a temporary file: nothing else left."""
    out = tmp_path / "sc.csv"
    out.write_text("old\n", encoding="utf-8")
    proc = nlgbench(*output_command("score", tmp_path, out, tiny_model))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text(encoding="utf-8").splitlines()[0] == "line,score"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


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
    assert_one_line(nlgbench("run", str(spec), "--dry-run"), f"{data} line 3: system '=HYPERLINK(")
    named = write_rows(tmp_path / "=cmd.jsonl", data_rows())
    spec.write_text(spec.read_text(encoding="utf-8").replace(str(data), str(named)), encoding="utf-8")
    assert_one_line(nlgbench("run", str(spec), "--dry-run"), f"{named}: the dataset's name '=cmd'")
    table = tmp_path / "t.tsv"
    table.write_text("lp\tseg_id\tsystem\tref\thyp\tscore\nde-en\t1\t@cmd\ta b\ta c\t1.5\n", encoding="utf-8")
    columns = ["--column", "reference=ref", "--column", "hypothesis=hyp", "--human", "human=score"]
    proc = nlgbench("datasets", "import", "table", str(table), "--out", str(tmp_path / "o.jsonl"), *columns)
    assert_one_line(proc, f"{table}, item 1: system '@cmd'")
    assert not (tmp_path / "o.jsonl").exists()


def test_names_like_numbers_or_a_dash_load_and_round_trip_through_scores_csv(tmp_path: Path) -> None:
    """What is not a formula loads, and scores.csv gives back exactly the names it was given."""
    from nlgbench.core.scores import read_scores, write_scores
    from nlgbench.data.userfile import load_user_file

    rows = data_rows(system="-", doc_id="-1.5e3")
    rows[0].update(system="+2", lp="x=y", doc_id="'=not a formula")
    rows[1].update(system="a-b@c")
    dataset = load_user_file(write_rows(tmp_path / "data.jsonl", rows))
    names = [(it.lp, str(it.seg_id), it.system, it.doc_id) for it in dataset.items]
    assert ("x=y", "1", "+2", "'=not a formula") in names and ("de-en", "2", "-", "-1.5e3") in names
    write_scores(tmp_path / "scores.csv", dataset.items, [0.5] * len(dataset.items))
    _, back = read_scores(tmp_path / "scores.csv", None)
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
    proc = nlgbench("import-scores", str(scores), "--dataset", str(data), *args, "--out", str(tmp_path / "run"))
    assert_one_line(proc, f"import-scores: {option} \"+cmd|' /C calc'!A0\" starts with '+'")
    assert not (tmp_path / "run").exists()
    names[option] = "-"  # a lone dash is no formula
    args = [arg for pair in names.items() for arg in pair]
    proc = nlgbench("import-scores", str(scores), "--dataset", str(data), *args, "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
