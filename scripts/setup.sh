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
# moverscore==1.0.3 (the published moverscore_v2, reference of the MoverScore parity test) declares the
# obsolete `typing` backport, whose typing.py in site-packages shadows the standard library's (an import of
# that site-packages through PYTHONPATH then fails with AttributeError: '_abc_registry'). It is installed
# without its declared dependencies: moverscore_v2 needs only numpy, torch, pyemd and transformers, which
# the test extra brings. An environment made before this fix loses the backport.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps moverscore==1.0.3
if .venv/bin/python -m pip show -q typing >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -q -y typing
fi
.venv/bin/python scripts/get_models.py
# Debian packages for three tests: Chromium and ChromeDriver (the test that opens the HTML report in a
# real browser), Slurm with MUNGE (the test that runs a sweep on a real single-node cluster that
# scripts/slurm-single-node.sh starts; slurm-wlm without its recommended extra plugins is
# slurmctld + slurmd + the client commands), and TeX with poppler (tests/test_latex.py compiles the
# report's .tex files with pdflatex: booktabs is in texlive-latex-recommended, siunitx in
# texlive-science; pdftoppm and pdftotext are in poppler-utils).
need_browser=0 need_slurm=0 need_tex=0
{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || need_browser=1
{ command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
  && command -v munged >/dev/null; } || need_slurm=1
{ command -v pdflatex >/dev/null && command -v pdftoppm >/dev/null && command -v pdftotext >/dev/null \
  && kpsewhich booktabs.sty siunitx.sty geometry.sty | [ "$(wc -l)" = 3 ]; } || need_tex=1
if [ "$need_browser$need_slurm$need_tex" != 000 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    if [ "$need_browser" = 1 ]; then
      echo "setup: installing Debian's chromium and chromium-driver (browser test of the HTML report)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
    if [ "$need_slurm" = 1 ]; then
      echo "setup: installing Debian's slurm-wlm and munge (single-node Slurm test)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
    fi
    if [ "$need_tex" = 1 ]; then
      echo "setup: installing Debian's TeX (latex-base, latex-recommended, science) and poppler-utils (LaTeX test)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends texlive-latex-base \
        texlive-latex-recommended texlive-science poppler-utils >/dev/null
    fi
  else
    [ "$need_browser" = 0 ] || echo "setup: chromium/chromedriver missing and apt-get (as root) unavailable: install them, or the browser test fails" >&2
    [ "$need_slurm" = 0 ] || echo "setup: slurm-wlm/munge missing and apt-get (as root) unavailable: install them, or the Slurm test fails" >&2
    [ "$need_tex" = 0 ] || echo "setup: pdflatex (booktabs, siunitx) or poppler-utils missing and apt-get (as root) unavailable: install them, or the LaTeX test is skipped (fails under CI)" >&2
  fi
fi
