"""A run folder as the report and compare commands read it: one row per finished cell, with the
measured quantities, and each cell's segment scores (signed so higher is better) against the human
scores of one human dimension (`--human DIM`; default each cell's primary one)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nlgbench.cell import OK, CellResult
from nlgbench.data import HUMAN
from nlgbench.errors import UserError, unknown_name
from nlgbench.labels import distinct_dataset_labels
from nlgbench.stats import Segments
from nlgbench.store import Store


@dataclass
class RunData:
    """Finished cells of a run folder (`cells`, a DataFrame) and access to their segment scores."""

    folder: Path
    cells: pd.DataFrame
    results: dict[str, CellResult]
    human: str | None = None  # the human dimension asked for; None: each cell's primary one

    def segments(self, cell_id: str) -> Segments:
        """The cell's segment scores in dataset order, negated for lower-is-better metrics, against the
        chosen human dimension; segments without a score on it are left out."""
        with Store(self.folder) as store:
            rows = store.segment_scores(cell_id)
            meta = store.segment_meta(cell_id)
        metric = self.results[cell_id].metric
        assert metric is not None  # finished cells only
        sign = 1.0 if metric.higher_is_better else -1.0
        if self.human is not None and meta is not None and any(m[1] for m in meta):  # named dimensions
            human = np.array([m[1].get(self.human, np.nan) for m in meta], dtype=float)
        else:
            human = np.array([np.nan if r[4] is None else r[4] for r in rows], dtype=float)
        keep = np.isfinite(human)
        seg = Segments(
            score=sign * np.array([r[3] for r in rows], dtype=float),
            human=human,
            lp=np.array([r[0] for r in rows]),
            system=np.array([r[2] for r in rows]),
            seg_id=np.array([r[1] for r in rows], dtype=object),
            doc=np.array([m[0] for m in meta] if meta is not None else [""] * len(rows), dtype=object),
        )
        return seg if keep.all() else seg.take(np.flatnonzero(keep))


def human_dims(result: CellResult) -> list[str]:
    """The human dimensions a finished cell was correlated with, the primary one first."""
    c = result.correlation or {}
    return list(c["dimensions"]) if c.get("dimensions") else [c.get("human_dim", HUMAN)]


def load_run(folder: Path, human: str | None = None) -> RunData:
    """Read DIR/results.sqlite; one clear error when the folder holds no finished cells, or none
    with the human dimension `human` (cells without it are left out)."""
    if not (folder / "results.sqlite").is_file():
        raise UserError(f"{folder}: no results.sqlite (run `nlgbench run SPEC --out {folder}` or `nlgbench import-scores` first)")
    with Store(folder) as store:
        results = [r for r in store.results() if r.status == OK]
    if not results:
        raise UserError(f"{folder}: no finished (ok) cells to report")
    if human is not None:
        known = list(dict.fromkeys(d for r in results for d in human_dims(r)))
        results = [r for r in results if human in human_dims(r)]
        if not results:
            raise unknown_name("human dimension", human, known)
    rows = []
    for r in results:
        cfg = r.config
        timing, memory, env = r.timing, r.memory, r.environment or {}
        rows.append({
            "cell_id": r.cell_id, "metric": cfg.metric_label, "encoder": cfg.encoder.label,
            "dataset": cfg.dataset.label, "human_dim": human if human is not None else human_dims(r)[0],
            "device": "cuda" if str(cfg.device).startswith("cuda") else cfg.device,
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
    df = pd.DataFrame(rows)
    df["dataset"] = distinct_dataset_labels(list(df["dataset"]), [r.dataset_file[1] for r in results])
    return RunData(folder, df, {r.cell_id: r for r in results}, human)
