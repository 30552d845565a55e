"""Builders shared by several test modules: fake catalogue datasets and minimal specs."""

from __future__ import annotations

import hashlib
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
