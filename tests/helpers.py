"""Builders shared by several test modules: data and spec files, CSV reading, the CLI in a fresh process
(`cli_subprocess`; the `cli_subprocess` and `cli_in_process` fixtures of tests/shared_fixtures.py wrap the two forms),
fake catalogue datasets, minimal specs, copies of committed reports; the min-max round-off bound."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml


def write_jsonl(path: Path, rows: Sequence[Any], *, ensure_ascii: bool = True) -> Path:
    """`rows` as a JSON Lines file (one JSON value a line, UTF-8); `ensure_ascii=False` writes non-ASCII text as is."""
    path.write_text("".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows), encoding="utf-8")
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows as dicts (header -> text)."""
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def write_spec(folder: Path, spec: dict[str, Any] | str, name: str = "spec.yaml") -> Path:
    """`spec` (a dict, dumped as YAML in its key order, or the text itself) as the file `folder/name`."""
    path = folder / name
    text = spec if isinstance(spec, str) else yaml.safe_dump(spec, allow_unicode=True, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def cli_subprocess(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would, in a fresh process (this environment plus `env`); output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "nlgbench.cli", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit code 2, exactly one `nlgbench: error: ...` line on stderr holding every needle, no traceback;
    returns that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("nlgbench: error:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def fake_da(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: dict[str, list[str]], *, bad_sha: str | None = None
) -> dict[str, Any]:
    """A one-pair DA dataset 'fake' in a mirror under tmp_path (mirror and cache env set); returns its catalogue."""
    mirror = tmp_path / "mirror" / "fake-da"
    mirror.mkdir(parents=True)
    files = {}
    for field, lines in columns.items():
        rel = f"fake.{field}.xx-en"
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        (mirror / rel).write_bytes(data)
        files[rel] = hashlib.sha256(data).hexdigest()
    if bad_sha is not None:
        files[bad_sha] = "0" * 64
    monkeypatch.setenv("NLGBENCH_DATA_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    entry = {
        "source": "https://example.invalid/never-used",
        "folder": "fake-da",
        "format": "da",
        "language_pairs": ["xx-en"],
        "pattern": "fake.{field}.{lp}",
        "files": files,
    }
    return {"datasets": {"fake": entry}}


def minimal_spec(**changes: Any) -> dict[str, Any]:
    """A valid spec (as a dict); `changes` replace or add top-level keys."""
    spec: dict[str, Any] = {
        "name": "t",
        "datasets": ["wmt16"],
        "metrics": [{"metric": "bertscore", "encoders": ["all-MiniLM-L6-v2"]}],
    }
    spec.update(changes)
    return spec


def min_max_exp_error(delta: float, spread: float) -> float:
    """Largest change of exp(n) (or exp(1 - n)), n = (v - min) / (max - min), when every v moves by at most `delta`.

    n' - n = ((dv - dmin) - n (dmax - dmin)) / (spread + dmax - dmin), so |n' - n| <= 4 delta / (spread - 2 delta)
    for n in [0, 1]; exp's slope on [0, 1] is at most e. Min-max normalisation thus amplifies an input
    error by e * 4 / spread: 1 float32 ulp (1.2e-7) over a spread of 0.025 is already 5e-5.
    """
    assert spread > 2 * delta, (spread, delta)
    return math.e * 4 * delta / (spread - 2 * delta)


REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str, name: str) -> Any:
    """A script of the repository (benchmarks/, scripts/: not a package) imported as module `name`,
    registered in sys.modules (a dataclass in it resolves its annotations there)."""
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def committed_copy(name: str, root: Path) -> Path:
    """A copy of what git holds of reports/<name> (report/cells.jsonl and metric_scores.csv: no
    store, no cells), as a fresh clone has it."""
    listed = subprocess.run(
        ["git", "ls-files", f"reports/{name}"], cwd=REPO, capture_output=True, text=True, check=True
    )
    run = root / name
    for file in listed.stdout.split():
        dest = run / Path(file).relative_to(f"reports/{name}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / file, dest)
    return run
