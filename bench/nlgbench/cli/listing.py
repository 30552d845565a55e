"""`nlgbench list encoders|metrics|datasets`: the registries as aligned text tables (`print_table`)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence

from nlgbench.data.catalogue import load_catalogue
from nlgbench.encoders.hfcache import check_model_folder, checkpoint_params, disk_bytes, local_snapshot
from nlgbench.encoders.registry import registry
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric, metric_names


def cmd_list_encoders(args: argparse.Namespace) -> int:
    rows = [("name", "hub_id", "family", "kind", "layers", "local", "params", "disk_mib")]
    for name, e in sorted(registry().items()):
        snap = local_snapshot(e.hub_id)
        local, params, disk = "no", "-", "-"
        if snap:
            try:
                check_model_folder(snap)
                local, params, disk = "yes", f"{checkpoint_params(snap) / 1e6:.1f}M", f"{disk_bytes(snap) / 2**20:.1f}"
            except UserError as exc:  # a broken cache entry is listed as such, with why
                local = "broken"
                print(f"nlgbench: {name}: {exc}", file=sys.stderr)
        rows.append((name, e.hub_id, e.family, e.kind, str(e.layers or "-"), local, params, disk))
    print_table(rows, as_json=args.json)
    return 0


def cmd_list_metrics(args: argparse.Namespace) -> int:
    rows = [("name", "needs", "better", "corpus_state", "encoders", "references", "options", "description")]
    for name in metric_names():
        m = get_metric(name)
        opts = ", ".join(f"{k}={d!r}" for k, (_, d) in {**m.options, **m.harness_options}.items())
        # how several references per item are used: max / mean over them, native (the library's own), or
        # refuse (set reference_policy); '-' for a metric that reads none
        refs = (m.multi_reference or "refuse") if m.harness_options or m.multi_reference else "-"
        rows.append(
            (
                name,
                "+".join(m.needs),
                "higher" if m.higher_is_better else "lower",
                "yes" if m.corpus_state else "no",
                "|".join(m.encoder_kinds),
                refs,
                opts,
                m.description,
            )
        )
    print_table(rows, as_json=args.json)
    return 0


def cmd_list_datasets(args: argparse.Namespace) -> int:
    rows = [("name", "format", "language pairs", "items", "description")]
    for name, d in sorted(load_catalogue()["datasets"].items()):
        rows.append(
            (
                name,
                d["format"],
                " ".join(d["language_pairs"]),
                str(d.get("expected_items", "")),
                d.get("description", ""),
            )
        )
    print_table(rows, as_json=args.json)
    return 0


MIN_COLUMN = 8  # on a narrow terminal no column is cut below this many characters


def fit_widths(widths: list[int], room: int) -> list[int]:
    """Column widths whose line (two spaces apart) fits `room` characters: the widest columns are
    narrowed first, none below MIN_COLUMN (or its own width), so names and short fields stay whole."""
    fitted = list(widths)
    while sum(fitted) + 2 * (len(fitted) - 1) > room:
        widest = max(range(len(fitted)), key=lambda i: fitted[i])
        if fitted[widest] <= MIN_COLUMN:
            break
        fitted[widest] -= 1
    return fitted


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + "…"


def print_table(rows: Sequence[Sequence[str]], *, as_json: bool = False) -> None:
    """Rows as columns padded to their widest cell, two spaces apart (the first row is the header).
    On a terminal the widest columns (descriptions, options) are cut with '…' so that each line fits
    its width (80 columns where the terminal reports none); piped or redirected output is never cut.
    `as_json`: a JSON list of objects keyed by the header, in full."""
    if as_json:
        print(json.dumps([dict(zip(rows[0], r, strict=True)) for r in rows[1:]], ensure_ascii=False, indent=1))
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if sys.stdout.isatty():
        widths = fit_widths(widths, shutil.get_terminal_size((80, 24)).columns or 80)
    for r in rows:
        print("  ".join(_cut(cell, w).ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
