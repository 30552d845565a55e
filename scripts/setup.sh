#!/usr/bin/env bash
# Set up nlgbench in ./.venv and place the two real models of ../shared/MODELS.md into the
# local Hugging Face cache. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# torch first, pinned: on the project's CPU machines this is the CPU wheel; users with a GPU
# may install their own torch build before running this script (any torch>=2.1 satisfies it).
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
.venv/bin/python scripts/get_models.py
# Debian's Chromium and ChromeDriver, for the test that opens the HTML report in a real browser.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian's chromium and chromium-driver (browser test of the HTML report)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: chromium/chromedriver missing and apt-get (as root) unavailable: install them, or the browser test fails" >&2
  fi
fi
