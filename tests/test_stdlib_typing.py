"""The test environment's `typing` is the standard library's. moverscore==1.0.3 (the MoverScore parity
tests' reference) declares the obsolete `typing` backport; installed, its typing.py in site-packages shadows
the standard library for any process that puts that site-packages first (PYTHONPATH), which then fails at
`import typing` (AttributeError: ... '_abc_registry'). scripts/setup.sh installs moverscore with --no-deps."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import typing
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def site_folders() -> list[Path]:
    """This environment's site-packages folders (pure and platform-specific)."""
    return sorted({Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")})


def test_typing_comes_from_the_standard_library() -> None:
    assert Path(typing.__file__).resolve().parent == Path(sysconfig.get_paths()["stdlib"]).resolve()


def test_no_typing_backport_in_site_packages() -> None:
    for folder in site_folders():
        assert not (folder / "typing.py").exists(), folder / "typing.py"
        assert not list(folder.glob("typing-*.dist-info")), folder


def test_site_packages_first_on_pythonpath_keeps_the_standard_typing() -> None:
    """The issue's crash: this environment's site-packages on PYTHONPATH (before the standard library)."""
    path = os.pathsep.join(str(folder) for folder in site_folders())
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import typing, sysconfig; print(typing.__file__); print(sysconfig.get_paths()['stdlib'])",
        ],
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    module, stdlib = proc.stdout.splitlines()
    assert Path(module).resolve().parent == Path(stdlib).resolve()
