"""The built wheel, installed without `-e`, works from any folder, including one that holds
packages named `bench` and `metrics` (they must never shadow nlgbench, in the CLI or the worker)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nlgbench.encoders.hfcache import local_snapshot

REPO = Path(__file__).resolve().parents[1]
SHADOW = 'raise ImportError("the user\'s own {name} package was imported instead of nlgbench")\n'


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Build the wheel (no network: this environment's setuptools), install it with --target into a
    fresh folder that reuses the installed dependencies; return that folder and the environment."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next((root / "dist").glob("nlgbench-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "nlgbench/encoders.yaml" in names and "nlgbench/catalogue.yaml" in names and "nlgbench/py.typed" in names
    assert "nlgbench/metrics/bertscore.py" in names
    assert "nlgbench/reporting/nlgbench.mplstyle" in names  # the figures' style (issue 29)
    assert not [n for n in names if n.split("/")[0] in ("bench", "metrics")]
    assert any(n.endswith("licenses/LICENSE") for n in names)
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


def _shadow_folder(tmp_path: Path) -> Path:
    for name in ("bench", "metrics"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(SHADOW.format(name=name), encoding="utf-8")
    return tmp_path


def _nlgbench(site: Path, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(site / "bin" / "nlgbench"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
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
    assert version.returncode == 0 and version.stdout.startswith("nlgbench ")
    encoders = _nlgbench(site, env, cwd, "list", "encoders")
    assert encoders.returncode == 0, encoders.stderr
    assert "all-MiniLM-L6-v2" in encoders.stdout and "all-mpnet-base-v2" in encoders.stdout
    datasets = _nlgbench(site, env, cwd, "list", "datasets")
    assert datasets.returncode == 0, datasets.stderr
    assert all(name in datasets.stdout for name in ("wmt15", "wmt16", "wmt20", "wmt21"))


@pytest.mark.slow
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
