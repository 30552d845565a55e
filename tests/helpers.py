"""Builders shared by several test modules: fake catalogue datasets, minimal specs, copies of committed
reports; the min-max round-off bound."""

from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


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
