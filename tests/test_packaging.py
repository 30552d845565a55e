"""The built wheel, installed without `-e`, works from any folder, including one that holds
packages named `bench` and `metrics` (they must never shadow nlgbench, in the CLI or the worker); it
carries the example specs (the same files as examples/); installed with its runtime dependencies only
into a fresh environment, a user's first two commands work (`nlgbench example quickstart`, a dry run)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

import nlgbench
from nlgbench.cli import main
from nlgbench.encoders.hfcache import local_snapshot
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.environment import git_commit

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[1]
SHADOW = 'raise ImportError("the user\'s own {name} package was imported instead of nlgbench")\n'
TORCH_CPU = "torch==2.13.0"  # the CPU wheel on this project's machines (any other spec pulls GBs of CUDA wheels)


def tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (as they are in the working tree, links kept) copied to `dest`: the
    wheel is built from what a clone holds, and the build writes nothing into the checkout that the
    tests running beside it read (its build/ and egg-info) nor reads what they write there."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = REPO / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet in git
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built without network (this environment's setuptools) from the tracked files."""
    dist = tmp_path_factory.mktemp("dist")
    source = tracked_copy(tmp_path_factory.mktemp("source"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return next(dist.glob("nlgbench-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The wheel installed with --target into a fresh folder that reuses the installed dependencies;
    return that folder and the environment."""
    root = tmp_path_factory.mktemp("wheel")
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert (site / "nlgbench" / "encoders.yaml").is_file() and not (site / "nlgbench" / "encoders.yaml").is_symlink()
    env = dict(os.environ, PYTHONPATH=str(site))
    return site, env


def test_wheel_contents(wheel: Path) -> None:
    """Package data, the metrics behind the folder link, the licence, and every example spec as the same
    bytes as examples/ (one copy: bench/nlgbench/examples links to it); the version is the package's."""
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert wheel.name.startswith(f"nlgbench-{nlgbench.__version__}-")
    assert "nlgbench/encoders.yaml" in names and "nlgbench/catalogue.yaml" in names and "nlgbench/py.typed" in names
    assert "nlgbench/metrics/bertscore.py" in names
    assert "nlgbench/reporting/figures/nlgbench.mplstyle" in names  # the figures' style
    assert not [n for n in names if n.split("/")[0] in ("bench", "metrics", "examples")]
    assert any(n.endswith("licenses/LICENSE") for n in names)
    examples = sorted((REPO / "examples").glob("*.yaml"))
    assert [p.name for p in examples][:1] and (REPO / "bench" / "nlgbench" / "examples").is_symlink()
    assert sorted(n for n in names if n.startswith("nlgbench/examples/")) == [
        f"nlgbench/examples/{p.name}" for p in examples
    ]
    for path in examples:
        assert archive.read(f"nlgbench/examples/{path.name}") == path.read_bytes(), path.name
    metadata = archive.read(f"nlgbench-{nlgbench.__version__}.dist-info/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [line for line in requires if "extra ==" not in line]
    assert not [line for line in runtime if "submitit" in line or "pyarrow" in line or "moverscore" in line]
    assert [line for line in requires if "submitit" in line and 'extra == "slurm"' in line]
    assert not [line for line in requires if "moverscore" in line or line.split()[1].startswith("typing")]


def test_version_is_one_number_in_changelog_and_citation() -> None:
    """The version lives in foundations/version.py; the changelog's newest release and CITATION.cff name it,
    with one date (an `[Unreleased]` section above it, Keep a Changelog's, is not a release); CITATION.cff
    holds CFF 1.2.0's required keys."""
    headings = [
        line for line in (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines() if line.startswith("## [")
    ]
    releases = [line for line in headings if line != "## [Unreleased]"]
    assert headings.index(releases[0]) <= 1  # at most the one Unreleased section above the newest release
    version, _, date = releases[0].removeprefix("## [").partition("] - ")
    assert version == nlgbench.__version__ and releases[-1].startswith("## [0.1.0] - ")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert {"cff-version", "message", "title", "authors"} <= set(citation) and citation["cff-version"] == "1.2.0"
    assert citation["version"] == nlgbench.__version__ and str(citation["date-released"]) == date
    assert all(isinstance(a, dict) and ("name" in a or "family-names" in a) for a in citation["authors"])


NO_SUBMITIT = (
    "a Slurm sweep (--executor slurm, or kind: slurm in the spec's executor block) needs the package "
    "'submitit': pip install 'nlgbench[slurm]'"
)


def _lexical_spec(folder: Path, executor: str = "") -> Path:
    spec = folder / "s.yaml"
    spec.write_text(
        f"name: s\ndatasets: [{{name: wmt16, max_segments: 4}}]\nmetrics: [{{metric: sentbleu}}]\n{executor}",
        encoding="utf-8",
    )
    return spec


@pytest.mark.parametrize(
    "executor, flags",
    [("", ["--executor", "slurm"]), ("executor: {kind: slurm, partition: gpu}\n", [])],
    ids=["flag", "spec-block"],
)
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_slurm_without_submitit_is_one_line_naming_the_extra(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    executor: str,
    flags: list[str],
    dry: bool,
) -> None:
    """submitit is the extra `slurm`: without it (None in sys.modules: `import submitit` fails, as where it is
    not installed) a Slurm run or dry run stops before anything runs or is written, with one line."""
    monkeypatch.setitem(sys.modules, "submitit", None)
    spec = _lexical_spec(tmp_path, executor)
    out = tmp_path / "run"
    assert main(["run", str(spec), "--out", str(out), *flags, *(["--dry-run"] if dry else [])]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"nlgbench: error: {NO_SUBMITIT}\n"
    assert not out.exists()


def test_slurm_without_submitit_through_the_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)
    spec = _lexical_spec(tmp_path, "executor: slurm\n")
    with pytest.raises(UserError) as caught:
        nlgbench.run(spec, tmp_path / "run", quiet=True)
    assert str(caught.value) == NO_SUBMITIT and not (tmp_path / "run").exists()


def test_a_spec_with_a_local_executor_block_needs_no_submitit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cluster settings in a spec that runs locally (no kind): submitit is not needed."""
    monkeypatch.setitem(sys.modules, "submitit", None)
    spec = _lexical_spec(tmp_path, "executor: {partition: gpu}\n")
    assert main(["run", str(spec), "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 cells; models not in the local cache: none"


def test_git_commit_in_the_checkout() -> None:
    """From the repository (this suite), results record its HEAD; from a wheel, None (the fresh-environment
    test below, whose site-packages lies inside another git repository)."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert (git_commit() or "").removesuffix("-dirty") == head.stdout.strip()


def _shadow_folder(tmp_path: Path) -> Path:
    for name in ("bench", "metrics"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(SHADOW.format(name=name), encoding="utf-8")
    return tmp_path


def _nlgbench(site: Path, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(site / "bin" / "nlgbench"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.system
def test_installed_wheel_lists_from_a_shadowing_folder(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    site, env = installed
    cwd = _shadow_folder(tmp_path)
    where = subprocess.run(
        [sys.executable, "-c", "import nlgbench; print(nlgbench.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(site)  # the wheel's copy, not the repository's editable one
    version = _nlgbench(site, env, cwd, "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"nlgbench {nlgbench.__version__}"
    encoders = _nlgbench(site, env, cwd, "list", "encoders")
    assert encoders.returncode == 0, encoders.stderr
    assert "all-MiniLM-L6-v2" in encoders.stdout and "all-mpnet-base-v2" in encoders.stdout
    datasets = _nlgbench(site, env, cwd, "list", "datasets")
    assert datasets.returncode == 0, datasets.stderr
    assert all(name in datasets.stdout for name in ("wmt15", "wmt16", "wmt20", "wmt21"))


@pytest.mark.system
@pytest.mark.skipif(
    local_snapshot("sentence-transformers/all-MiniLM-L6-v2") is None, reason="real MiniLM-L6 not in the local HF cache"
)
def test_installed_wheel_runs_a_cell_from_a_shadowing_folder(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """A one-cell sweep with the real MiniLM-L6; the worker imports the wheel's package (it checks)."""
    site, env = installed
    cwd = _shadow_folder(tmp_path)
    (cwd / "one.yaml").write_text(
        "name: one\ndatasets: [{name: wmt16, max_segments: 4}]\nrepeats: 1\n"
        "metrics:\n  - metric: bertscore\n    encoders: [all-MiniLM-L6-v2]\n",
        encoding="utf-8",
    )
    proc = _nlgbench(site, env, cwd, "run", "one.yaml", "--out", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with (cwd / "out" / "results.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["ok"] and int(rows[0]["n_segments"]) == 24
    result = json.loads((cwd / "out" / "cells" / rows[0]["cell_id"] / "result.json").read_text(encoding="utf-8"))
    assert result["environment"]["nlgbench"] == nlgbench.__version__
    assert f"|nlgbench:{nlgbench.__version__}|" in result["scorer"]["signature"]


def _user_environment(root: Path) -> dict[str, str]:
    """A user's environment: none of the test run's Python, Hub or nlgbench settings; an empty Hugging Face
    cache and nlgbench cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "HF_", "NLGBENCH_"))}
    env.pop("TRANSFORMERS_OFFLINE", None)
    return {**env, "HF_HOME": str(root / "hf-home"), "NLGBENCH_CACHE": str(root / "nlgbench-cache")}


def _site_megabytes(python: Path) -> tuple[Path, float]:
    """The environment's site-packages and the size of what it holds, in MB (10^6 bytes)."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    total = sum(f.stat().st_size for f in Path(purelib).rglob("*") if f.is_file() and not f.is_symlink())
    return Path(purelib), total / 1e6


@pytest.mark.system
def test_wheel_in_a_fresh_environment_runs_the_quickstart_example(wheel: Path, tmp_path: Path) -> None:
    """A fresh virtual environment (inside a git repository of the user's, as a
    project's .venv is) gets the CPU torch, then the wheel with its runtime dependencies only, from the
    registry; from a foreign folder `nlgbench example quickstart > q.yaml` and `nlgbench run q.yaml --dry-run`
    work, `--executor slurm` says which extra it needs, and a real cell (sentBLEU on an own data file: no
    model to download) records nlgbench's version and no git commit (the user's repository is not nlgbench's)."""
    started = time.perf_counter()
    project = tmp_path / "project"
    project.mkdir()
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@example.org", "-C", str(project)]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the user's project"], check=True)
    env = _user_environment(tmp_path)
    venv.EnvBuilder(with_pip=True).create(project / ".venv")
    python, bin_dir = project / ".venv" / "bin" / "python", project / ".venv" / "bin"
    for what in (TORCH_CPU, str(wheel)):  # torch first: then the wheel's `torch>=2.1` installs nothing more
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", what],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"], env=env, capture_output=True, text=True, check=True
    )
    names = {d["name"].lower() for d in json.loads(installed.stdout)}
    assert "nlgbench" in names and "torch" in names
    assert not {n for n in names if n.startswith("nvidia")}, "a CUDA build came in"
    assert not names & {"submitit", "pyarrow", "typing", "moverscore", "datasets"}, "an extra came in"
    purelib, megabytes = _site_megabytes(python)
    assert not (purelib / "typing.py").exists()
    print(f"\nfresh install ({TORCH_CPU}, CPU): {megabytes:.0f} MB in site-packages")

    user = tmp_path / "elsewhere"
    user.mkdir()
    example = subprocess.run(
        [str(bin_dir / "nlgbench"), "example", "quickstart"], cwd=user, env=env, capture_output=True, check=True
    )
    assert example.stdout == (REPO / "examples" / "quickstart.yaml").read_bytes()
    (user / "q.yaml").write_bytes(example.stdout)
    dry = subprocess.run(
        [str(bin_dir / "nlgbench"), "run", "q.yaml", "--dry-run"], cwd=user, env=env, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    lines = dry.stdout.splitlines()
    assert [line.split("  ", 1)[1] for line in lines[:3]] == [
        "bertscore | all-mpnet-base-v2 | wmt16[:100] | cpu | bs64",
        "bertscore | all-MiniLM-L6-v2 | wmt16[:100] | cpu | bs64",
        "bertscore | all-MiniLM-L6-v2[num_layers=3] | wmt16[:100] | cpu | bs64",
    ]
    assert lines[3] == (
        "3 cells; models not in the local cache: sentence-transformers/all-MiniLM-L6-v2, "
        "sentence-transformers/all-mpnet-base-v2"
    )
    assert not (user / "reports").exists()
    slurm = subprocess.run(
        [str(bin_dir / "nlgbench"), "run", "q.yaml", "--dry-run", "--executor", "slurm"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
    )
    assert slurm.returncode == 2 and slurm.stdout == "", slurm.stdout + slurm.stderr
    assert slurm.stderr == (
        "nlgbench: error: a Slurm sweep (--executor slurm, or kind: slurm in the spec's executor block) "
        "needs the package 'submitit': pip install 'nlgbench[slurm]'\n"
    )

    rows = [
        {"lp": "en", "seg_id": i, "reference": f"the cat sat on mat number {i}", "hypothesis": h, "human": v}
        for i, (h, v) in enumerate([("the cat sat on the mat", 0.9), ("a dog ran", 0.1), ("the cat sat", 0.5)])
    ]
    (user / "own.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (user / "own.yaml").write_text(
        "name: own\ndatasets: [{path: own.jsonl}]\nrepeats: 1\nmetrics:\n  - metric: sentbleu\n", encoding="utf-8"
    )
    run = subprocess.run(
        [str(bin_dir / "nlgbench"), "run", "own.yaml", "--out", "out"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (cell,) = (user / "out" / "cells").iterdir()
    result = json.loads((cell / "result.json").read_text(encoding="utf-8"))
    assert result["status"] == "ok" and result["n_segments"] == 3
    assert result["environment"]["nlgbench"] == nlgbench.__version__ and result["environment"]["git_commit"] is None
    assert f"|nlgbench:{nlgbench.__version__}|" in result["scorer"]["signature"]
    print(f"fresh environment, install and commands: {time.perf_counter() - started:.0f} s")
