"""MkDocs hook: the figures under docs/img/ that copy a committed report's figure must equal it.

The site cannot link files outside docs/ (strict mode), so a page shows a copy; a report regenerated
without its copy would leave the page showing old numbers. Each copy is checked before the build, and a
stale or missing one is a warning, which `mkdocs build --strict` turns into a failure.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("mkdocs.hooks.figures")

#: docs/img/<copy> -> the committed figure it copies (repository path).
COPIES = {
    "quickstart_runtime_cpu_wmt16_100.png": "reports/example/report/runtime_cpu_wmt16_100.png",
    "similarity_runtime_cpu_wmt16_40_part1.png": "reports/similarity/report/runtime_cpu_wmt16_40_part1.png",
    "backends_runtime_cpu_wmt16_40.png": "reports/backends/report/runtime_cpu_wmt16_40.png",
    "gpu_batch_sweep.png": "reports/gpu/batch_sweep.png",
    "distill_runtime_cpu_wmt16.png": "reports/distill/report/runtime_cpu_wmt16.png",
}


def on_pre_build(config: Any, **kwargs: Any) -> None:
    """Warn (strict: fail) for each copy that differs from its source, naming the `cp` that fixes it."""
    for copy, source in COPIES.items():
        copied, original = REPO / "docs" / "img" / copy, REPO / source
        if not copied.is_file() or not original.is_file() or copied.read_bytes() != original.read_bytes():
            log.warning(f"docs/img/{copy} is not a copy of {source}: cp {source} docs/img/{copy}")
