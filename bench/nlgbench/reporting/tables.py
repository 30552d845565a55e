"""Plain tables of a run folder's results.csv: every cell, and one row per metric x encoder across datasets."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from nlgbench.foundations.errors import UserError
from nlgbench.core.labels import metric_label

CELL_COLUMNS = [
    ("metric", "metric"), ("metric_options", "options"), ("aligner", "aligner"), ("encoder", "encoder"), ("dataset", "dataset"),
    ("n_segments", "n"), ("ms_per_segment_median", "ms/seg"), ("peak_rss_mb", "peak RSS MB"),
    ("params", "params (M)"), ("weight_mb", "weights MB"), ("mean_exit_layer", "mean exit layer"),
    ("pearson", "pearson"), ("kendall", "kendall"), ("pearson_pooled", "pearson pooled"), ("status", "status"),
]


def read_results(folder: Path) -> list[dict[str, str]]:
    """Rows of DIR/results.csv."""
    path = folder / "results.csv"
    if not path.is_file():
        raise UserError(f"{path}: no results.csv (run `nlgbench run SPEC --out {folder}` first)")
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _fmt(key: str, value: str) -> str:
    if value == "":
        return "-"
    if key == "params":
        return f"{int(value) / 1e6:.1f}"
    if key in {"pearson", "kendall", "pearson_pooled", "kendall_pooled"}:
        return f"{float(value):.3f}"
    if key in {"ms_per_segment_median", "peak_rss_mb", "weight_mb"}:
        return f"{float(value):.1f}"
    if key == "mean_exit_layer":
        return f"{float(value):.2f}"
    return value


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def cells_table(rows: list[dict[str, str]]) -> str:
    """Every cell with its time, memory, size, exit layer and correlations."""
    return markdown([h for _, h in CELL_COLUMNS], [[_fmt(k, r.get(k, "")) for k, _ in CELL_COLUMNS] for r in rows])


def by_dataset_table(rows: list[dict[str, str]], quality: str = "pearson_pooled") -> str:
    """One row per metric x aligner x encoder; per dataset its ms/segment and `quality` correlation."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    def metric(r: dict[str, str]) -> str:
        return metric_label(r["metric"], r["aligner"], r.get("metric_options", ""))

    keys = list(dict.fromkeys((metric(r), r["encoder"]) for r in rows))
    index = {(metric(r), r["encoder"], r["dataset"]): r for r in rows}
    header = ["metric", "encoder", "params (M)", "weights MB"]
    for ds in datasets:
        header += [f"{ds} ms/seg", f"{ds} r"]
    header.append("mean exit layer")
    out = []
    for label, encoder in keys:
        cells = [index.get((label, encoder, ds)) for ds in datasets]
        ok = [c for c in cells if c and c["status"] == "ok"]
        first = ok[0] if ok else {}
        line = [label, encoder,
                _fmt("params", first.get("params", "")), _fmt("weight_mb", first.get("weight_mb", ""))]
        for c in cells:
            if c is None or c["status"] != "ok":
                line += ["-", c["status"] if c else "-"]
            else:
                line += [_fmt("ms_per_segment_median", c["ms_per_segment_median"]), _fmt(quality, c[quality])]
        exits = [float(c["mean_exit_layer"]) for c in ok if c.get("mean_exit_layer")]
        line.append(f"{sum(exits) / len(exits):.2f}" if exits else "-")
        out.append(line)
    return markdown(header, out)
