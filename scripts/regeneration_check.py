"""Whether a fresh run reproduces a committed run folder's results, byte for byte, timings aside.

python scripts/regeneration_check.py reports/example /tmp/example-rerun

Both folders are run folders (`nlgbench run SPEC --out DIR`; the rerun may hold a subset of the
committed cells: a spec with fewer encoders). For every cell in both, the fields that do not depend on
the machine's speed (cell id, status, segments, layer, parameters, signature, every correlation figure in
results.csv and correlations.csv) are compared as the files' text, and each cell's scores.csv byte for
byte where both folders hold it (two reruns, e.g. before and after a change, on one machine). Prints one
line per difference and a summary; exit 1 when any field differs, 0 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

# Fields that depend on the machine or the moment (times, memory, the CPU's name, the dataset's folder)
# are left out; everything else a result records is compared.
MACHINE_FIELDS = {
    "load_s", "prepare_s", "warmup_s", "startup_s", "export_s", "phase_ms", "threads", "cpu_model", "gpu",
    "device", "peak_rss_mib", "rss_growth_mib", "peak_uss_mib", "cuda_peak_allocated_mib",
    "cuda_peak_reserved_mib", "energy_j_per_segment", "energy_counter", "ms_per_segment_cv", "timing_unstable",
    "warmup_passes", "dataset_path", "warnings", "peak_rss_mb", "rss_growth_mb", "cuda_peak_mb",
}  # fmt: skip


def machine_field(name: str) -> bool:
    """Whether a results.csv column is a measurement of this machine (time, memory) rather than a result."""
    return name in MACHINE_FIELDS or name.startswith(("ms_per_segment", "time_", "seconds"))


def read_rows(path: Path, key: tuple[str, ...]) -> dict[tuple[str, ...], dict[str, str]]:
    """A CSV file's rows (comment lines skipped) by the values of `key`."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {tuple(row[k] for k in key): row for row in rows}


def differences(committed: Path, rerun: Path, name: str, key: tuple[str, ...]) -> tuple[int, list[str]]:
    """(rows compared, one line per differing field) of the file `name` in both folders."""
    old, new = read_rows(committed / name, key), read_rows(rerun / name, key)
    cells = {row["cell_id"] for row in new.values()}
    found: list[str] = []
    compared = 0
    for k, old_row in old.items():
        if old_row["cell_id"] not in cells:
            continue  # a cell the rerun left out
        new_row = new.get(k)
        if new_row is None:
            found.append(f"{name} {'/'.join(k)}: missing from the rerun")
            continue
        compared += 1
        for field in old_row:
            if machine_field(field) or field not in new_row:
                continue
            if old_row[field] != new_row[field]:
                found.append(f"{name} {'/'.join(k)} {field}: {old_row[field]!r} -> {new_row[field]!r}")
    extra = sorted("/".join(k) for k in new if k not in old)
    found += [f"{name} {k}: only in the rerun" for k in extra]
    return compared, found


def score_differences(committed: Path, rerun: Path) -> tuple[int, list[str]]:
    """(files compared, one line per differing file) of the cells' scores.csv, where both folders hold them
    (a committed report holds none: its scores sit beside the human scores and are never committed)."""
    compared, found = 0, []
    for old in sorted(committed.glob("cells/*/scores.csv")):
        new = rerun / old.relative_to(committed)
        if not new.is_file():
            continue
        compared += 1
        if old.read_bytes() != new.read_bytes():
            found.append(f"{old.relative_to(committed)}: differs")
    return compared, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("committed", type=Path, help="the committed run folder")
    parser.add_argument("rerun", type=Path, help="a fresh run of (some of) its cells")
    args = parser.parse_args(argv)
    cell_key = ("cell_id",)
    figure_key = ("cell_id", "human_dim", "level", "grouping", "method")
    found: list[str] = []
    for name, key in (("results.csv", cell_key), ("correlations.csv", figure_key)):
        compared, lines = differences(args.committed, args.rerun, name, key)
        print(f"{name}: {compared} rows compared, {len(lines)} differences")
        found += lines
    scores = score_differences(args.committed, args.rerun)
    print(f"cells/*/scores.csv: {scores[0]} files compared, {len(scores[1])} differ")
    found += scores[1]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
