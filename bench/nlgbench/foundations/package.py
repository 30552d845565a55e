"""Where the installed package lies: its data files (encoders.yaml, catalogue.yaml) and, in a
checkout, the repository around it (for the git commit a result records)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # .../nlgbench, the folder of the import name
REPOSITORY_DIR = PACKAGE_DIR.parents[1]  # bench/nlgbench -> the checkout (meaningless in a wheel install)


def checkout_dir() -> Path | None:
    """The repository checkout the package runs from (its bench/nlgbench), or None for an installed wheel, whose
    site-packages may lie inside another project's repository (a project's .venv): never nlgbench's."""
    in_checkout = PACKAGE_DIR.parent.name == "bench" and (REPOSITORY_DIR / "pyproject.toml").is_file()
    return REPOSITORY_DIR if in_checkout else None


def package_file(name: str) -> Path:
    """A data file shipped inside the package (a link to the repository's file in a checkout)."""
    return PACKAGE_DIR / name


CACHE_ENV = "NLGBENCH_CACHE"  # the cache root: datasets, distillation labels, backend exports


def cache_root() -> Path:
    """The cache root: ``$NLGBENCH_CACHE`` or ``~/.cache/nlgbench``."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "nlgbench"
