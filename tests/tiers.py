"""Test tiers: every test belongs to one tier, by what it needs; plain `pytest` runs the fast two.

- unit: no subprocess, no worker, no model (statistics, data, spec, registry, names, caches ...);
- component: in-process, tiny random models and the reference packages (parity), no subprocess;
- integration: sweeps through workers and the fork server, CLI subprocesses, reports;
- system: real outside services and artefacts (Slurm, a wheel in a fresh venv, Chromium, pdflatex,
  real MiniLM/MPNet, the fault soak).

The rule: a tier marker on the module (`pytestmark = pytest.mark.unit`), and a test that needs more
carries its own tier marker, which wins (the closest marker). `--tier` picks the tiers to run
(default `unit,component`; `--tier all` runs every test). A unit or component test that starts a
process, and a unit test that opens a model file, fails: an audit hook raises `TierViolation`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

TIERS = ("unit", "component", "integration", "system")
DEFAULT_TIERS = ("unit", "component")
IN_PROCESS = frozenset({"unit", "component"})


class TierViolation(RuntimeError):
    """A unit or component test did what only an integration or system test may do."""


def tier_of(item: pytest.Item) -> str | None:
    """The item's tier: its closest tier marker (the test's own, else its class's, else its module's)."""
    for marker in item.iter_markers():
        if marker.name in TIERS:
            return marker.name
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        default=",".join(DEFAULT_TIERS),
        help="comma-separated tiers to run (unit, component, integration, system) or 'all'; default: unit,component",
    )


def chosen_tiers(config: pytest.Config) -> set[str]:
    """The tiers `--tier` names; a usage error for a name that is no tier."""
    value = str(config.getoption("--tier")).strip()
    if value == "all":
        return set(TIERS)
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = sorted(names - set(TIERS))
    if unknown or not names:
        raise pytest.UsageError(f"--tier {value!r}: tiers are {', '.join(TIERS)} or 'all'")
    return names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    untiered = [item.nodeid for item in items if tier_of(item) is None]
    if untiered:
        shown = "\n  ".join(untiered[:20])
        raise pytest.UsageError(f"{len(untiered)} tests have no tier marker (tests/tiers.py says how):\n  {shown}")
    chosen = chosen_tiers(config)
    kept = [item for item in items if tier_of(item) in chosen]
    dropped = [item for item in items if tier_of(item) not in chosen]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.system", "os.exec"})
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".ckpt")
running_tier: str | None = None


def audit(event: str, args: tuple[object, ...]) -> None:
    """Refuse, in a unit or component test, what its tier rules out (a Python audit hook: it sees every
    process start and file open, whoever makes it)."""
    if running_tier is None:
        return
    if event in PROCESS_EVENTS:
        raise TierViolation(f"{event} in a {running_tier} test: only integration and system tests start processes")
    if running_tier == "unit" and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        name = os.fsdecode(args[0])
        if name.endswith(MODEL_FILE_SUFFIXES):
            raise TierViolation(f"a unit test opened the model file {name}: mark it component (tests/tiers.py)")


sys.addaudithook(audit)


@pytest.fixture(autouse=True)
def tier_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Unit and component tests run in this process only; unit tests open no model file."""
    global running_tier
    node = request.node
    tier = tier_of(node) if isinstance(node, pytest.Item) else None
    running_tier = tier if tier in IN_PROCESS else None
    try:
        yield
    finally:
        running_tier = None
