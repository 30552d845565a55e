#!/usr/bin/env bash
# Build the documentation site with `mkdocs build --strict` (every warning fails: a broken link or
# anchor, a page missing from the nav, a docstring mkdocstrings cannot read, a stale figure copy).
# The site goes to a temporary folder outside the repository, removed afterwards; pass a folder to
# keep it there instead: `bash scripts/docs.sh site` (git-ignored). Packages: the `docs` extra.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -gt 0 ]]; then
    site="$1"
else
    site="$(mktemp -d)"
    trap 'rm -rf "$site"' EXIT
fi
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site"
