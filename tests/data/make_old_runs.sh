#!/usr/bin/env bash
# Writes tests/data/run_0_1_0/ and tests/data/run_0_2_0/: run folders written by the released nlgbench
# 0.1.0 (451abd9, the last commit of 2026-11-23) and 0.2.0 (a261741), for tests/test_run_format.py.
# Each release's code is checked out in a temporary git worktree and runs the sweep
# tests/data/old_run_spec.yaml (sentBLEU and chrF on 3 WMT16 segments per language pair) with this
# checkout's .venv; the folders are copied without their lock file. Run from the repository root with
# NLGBENCH_DATA_MIRROR set as for the tests (about a minute).
set -euo pipefail
repo=$(pwd)
python="$repo/.venv/bin/python"
scratch=$(mktemp -d)
worktrees=()
cleanup() {
    for tree in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$tree"; done
    rm -rf "$scratch"
}
trap cleanup EXIT

make_run() {  # COMMIT VERSION IMPORT_ROOT_SETUP
    local commit=$1 version=$2 tree="$scratch/nlgbench-$1" root
    git -C "$repo" worktree add --detach "$tree" "$commit" >/dev/null
    worktrees+=("$tree")
    if [ -d "$tree/bench/nlgbench" ]; then  # 0.2.0: bench/ is the source root
        root="$tree/bench"
    else  # 0.1.0: bench/ is the package itself, metrics/ its metrics sub-package (pyproject's package-dir)
        root="$scratch/root-$commit"
        mkdir -p "$root"
        ln -s "$tree/bench" "$root/nlgbench"
        ln -s ../metrics "$tree/bench/metrics"
    fi
    local found
    found=$(cd "$scratch" && PYTHONPATH="$root" "$python" -c 'import nlgbench; print(nlgbench.__version__, nlgbench.__file__)')
    case "$found" in
        "$version $root/"*) ;;
        *) echo "the worktree's nlgbench is not the one imported: $found" >&2; exit 1 ;;
    esac
    mkdir -p "$scratch/$version"
    cp "$repo/tests/data/old_run_spec.yaml" "$scratch/$version/spec.yaml"
    (cd "$scratch/$version" && PYTHONPATH="$root" NLGBENCH_FORKSERVER=0 "$python" -m nlgbench.cli run spec.yaml --out run)
    rm -f "$scratch/$version/run/.lock"
    local dest="$repo/tests/data/run_${version//./_}"
    rm -rf "$dest"
    cp -r "$scratch/$version/run" "$dest"
    if grep -rla -e "$scratch" -e "$repo" -e "$HOME" "$dest"; then
        echo "$dest holds a path of this machine (above)" >&2
        exit 1
    fi
}

make_run 451abd9 0.1.0
make_run a261741 0.2.0
