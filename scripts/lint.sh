#!/usr/bin/env bash
# Lint, format check and type check (what .ci/run runs before the tests), with the versions
# pinned in pyproject.toml's test extra. Configuration: pyproject.toml ([tool.ruff], [tool.mypy]).
# Then the docs site (`mkdocs build --strict`: broken links, anchors and pages out of the nav fail)
# and the distribution (`python -m build`, `twine check --strict`, what the wheel carries).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
bash scripts/docs.sh
bash scripts/check_dist.sh
