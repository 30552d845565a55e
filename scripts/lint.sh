#!/usr/bin/env bash
# Lint, format check and type check (what .ci/run runs before the tests), with the versions
# pinned in pyproject.toml's test extra. Configuration: pyproject.toml ([tool.ruff], [tool.mypy]).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
