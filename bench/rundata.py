"""A run folder as the report and compare commands read it: one row per finished cell, with the
measured quantities, and each cell's segment scores (signed so higher is better)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nlgbench.errors import UserError
from nlgbench.stats import Segments


@dataclass
class RunData:
    """Finished cells of a run folder (`cells`, a DataFrame) and access to their segment scores."""

    folder: Path
    cells: pd.DataFrame
    results: dict[str, dict[str, Any]]

    def segments(self, cell_id: str) -> Segments:
        """The cell's segment scores in dataset order, negated for lower-is-better metrics."""
        db = sqlite3.connect(self.folder / "results.sqlite")
        try:
            rows = db.execute("SELECT lp, seg_id, system, score, human FROM segment_scores WHERE cell_id = ? ORDER BY idx",
                              (cell_id,)).fetchall()
        finally:
            db.close()
        sign = 1.0 if self.results[cell_id]["metric"]["higher_is_better"] else -1.0
        return Segments(
            score=sign * np.array([r[3] for r in rows], dtype=float),
            human=np.array([r[4] for r in rows], dtype=float),
            lp=np.array([r[0] for r in rows]),
            system=np.array([r[2] or "" for r in rows]),
            seg_id=np.array([r[1] for r in rows]),
        )


def load_run(folder: Path) -> RunData:
    """Read DIR/results.sqlite; one clear error when the folder holds no finished cells."""
    from nlgbench.store import Store, _labels, metric_label, options_label

    if not (folder / "results.sqlite").is_file():
        raise UserError(f"{folder}: no results.sqlite (run `nlgbench run SPEC --out {folder}` or `nlgbench import-scores` first)")
    store = Store(folder)
    try:
        results = [r for r in store.results() if r.get("status") == "ok"]
    finally:
        store.close()
    if not results:
        raise UserError(f"{folder}: no finished (ok) cells to report")
    rows = []
    for r in results:
        cfg = r["config"]
        encoder, aligner, dataset = _labels(cfg)
        timing = r.get("timing") or {}
        memory = r.get("memory") or {}
        env = r.get("environment") or {}
        rows.append({
            "cell_id": r["cell_id"], "metric": metric_label(cfg["metric"], aligner, options_label(cfg["metric"], cfg.get("options"))), "encoder": encoder,
            "dataset": dataset, "device": "cuda" if str(cfg["device"]).startswith("cuda") else cfg["device"],
            "batch_size": cfg["batch_size"], "n_segments": r["n_segments"],
            "ms_per_segment": timing.get("ms_per_segment_median", np.nan),
            "ms_per_segment_repeats": timing.get("ms_per_segment", []),
            "peak_rss_mb": memory.get("peak_rss_mb", np.nan),
            "cuda_peak_allocated_mb": memory.get("cuda_peak_allocated_mb") or np.nan,
            "params": r.get("params") if r.get("params") is not None else np.nan,
            "disk_mb": r["disk_bytes"] / 2**20 if r.get("disk_bytes") is not None else np.nan,
            "imported": bool(r.get("imported")),
            "cpu_model": env.get("cpu_model", ""), "gpu": env.get("gpu") or "",
            "versions": json.dumps({k: env.get(k) for k in ("torch", "transformers", "pot", "nlgbench")}),
            "threads": env.get("torch_threads"),
        })
    return RunData(folder, pd.DataFrame(rows), {r["cell_id"]: r for r in results})
