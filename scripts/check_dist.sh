#!/usr/bin/env bash
# Build the distributions as a release would (`python -m build`: the sdist, then the wheel from the
# sdist, each in a fresh isolated build environment) into a temporary folder outside the repository,
# check their metadata and README rendering with `twine check`, and check that the wheel carries the
# files that the repository holds behind folder links (metrics/, examples/) as real files.
# Needs the test extra (build, twine); uses .venv/bin/python unless $PYTHON is set.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
out="$(mktemp -d "${TMPDIR:-/tmp}/nlgbench-dist.XXXXXX")"
trap 'rm -rf "$out"' EXIT
"$PY" -m build --sdist --wheel --outdir "$out" . >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; }
"$PY" -m twine check --strict "$out"/*.tar.gz "$out"/*.whl
"$PY" - "$out" <<'EOF'
import sys
import tarfile
import zipfile
from pathlib import Path

out = Path(sys.argv[1])
(wheel,), (sdist,) = list(out.glob("nlgbench-*.whl")), list(out.glob("nlgbench-*.tar.gz"))
names = set(zipfile.ZipFile(wheel).namelist())
examples = sorted(p.name for p in Path("examples").glob("*.yaml"))
needed = [f"nlgbench/examples/{name}" for name in examples] + [
    "nlgbench/metrics/bertscore.py",
    "nlgbench/encoders.yaml",
    "nlgbench/catalogue.yaml",
    "nlgbench/py.typed",
]
missing = [name for name in needed if name not in names]
links = [m.name for m in tarfile.open(sdist).getmembers() if m.issym() or m.islnk()]
if missing or links:
    sys.exit(f"check_dist: wheel lacks {missing}; sdist holds links {links}")
print(f"check_dist: {sdist.name} and {wheel.name} pass twine check; the wheel carries {len(examples)} example specs")
EOF
