"""A run folder as the report and compare commands read it: one row per finished cell, with the
measured quantities, and each cell's segment scores (signed so higher is better)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nlgbench.cell import OK, CellResult
from nlgbench.errors import UserError
from nlgbench.stats import Segments
from nlgbench.store import Store


@dataclass
class RunData:
    """Finished cells of a run folder (`cells`, a DataFrame) and access to their segment scores."""

    folder: Path
    cells: pd.DataFrame
    results: dict[str, CellResult]

    def segments(self, cell_id: str) -> Segments:
        """The cell's segment scores in dataset order, negated for lower-is-better metrics."""
        with Store(self.folder) as store:
            rows = store.segment_scores(cell_id)
        metric = self.results[cell_id].metric
        assert metric is not None  # finished cells only
        sign = 1.0 if metric.higher_is_better else -1.0
        return Segments(
            score=sign * np.array([r[3] for r in rows], dtype=float),
            human=np.array([r[4] for r in rows], dtype=float),
            lp=np.array([r[0] for r in rows]),
            system=np.array([r[2] for r in rows]),
            seg_id=np.array([r[1] for r in rows]),
        )


def load_run(folder: Path) -> RunData:
    """Read DIR/results.sqlite; one clear error when the folder holds no finished cells."""
    if not (folder / "results.sqlite").is_file():
        raise UserError(f"{folder}: no results.sqlite (run `nlgbench run SPEC --out {folder}` or `nlgbench import-scores` first)")
    with Store(folder) as store:
        results = [r for r in store.results() if r.status == OK]
    if not results:
        raise UserError(f"{folder}: no finished (ok) cells to report")
    rows = []
    for r in results:
        cfg = r.config
        timing, memory, env = r.timing, r.memory, r.environment or {}
        rows.append({
            "cell_id": r.cell_id, "metric": cfg.metric_label, "encoder": cfg.encoder.label,
            "dataset": cfg.dataset.label, "device": "cuda" if str(cfg.device).startswith("cuda") else cfg.device,
            "batch_size": cfg.batch_size, "n_segments": r.n_segments,
            "ms_per_segment": timing.ms_per_segment_median if timing else np.nan,
            "ms_per_segment_repeats": timing.ms_per_segment if timing else [],
            "peak_rss_mb": memory.peak_rss_mb if memory else np.nan,
            "cuda_peak_allocated_mb": (memory.cuda_peak_allocated_mb if memory else None) or np.nan,
            "params": r.params if r.params is not None else np.nan,
            "disk_mb": r.disk_bytes / 2**20 if r.disk_bytes is not None else np.nan,
            "imported": r.imported,
            "cpu_model": env.get("cpu_model", ""), "gpu": env.get("gpu") or "",
            "versions": json.dumps({k: env.get(k) for k in ("torch", "transformers", "pot", "nlgbench")}),
            "threads": env.get("torch_threads"),
        })
    return RunData(folder, pd.DataFrame(rows), {r.cell_id: r for r in results})
