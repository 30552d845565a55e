"""The store's CSV views, rewritten from it after every recorded cell: `results.csv` (one row per cell and
human dimension: the output contract of docs/architecture.md, Result files) and `correlations.csv`
(every figure of every cell, long format). The columns are declared here, in order."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from nlgbench.core.labels import distinct_dataset_labels
from nlgbench.core.result import CellResult
from nlgbench.core.signature import recorded_signature
from nlgbench.foundations.files import write_atomic
from nlgbench.runs.folder import CORRELATIONS_FILE, CSV_FILE

# The output contract of docs/architecture.md (Result files), in order; extra columns follow.
CSV_COLUMNS = [
    "cell_id",
    "metric",
    "encoder",
    "aligner",
    "dataset",
    "device",
    "batch_size",
    "status",
    "n_segments",
    "load_s",
    "ms_per_segment_mean",
    "ms_per_segment_median",
    "ms_per_segment_std",
    "n_repeats",
    "peak_rss_mb",
    "rss_growth_mb",
    "cuda_peak_allocated_mb",
    "params",
    "disk_mb",
    "pearson",
    "kendall",
    "pearson_pooled",
    "kendall_pooled",
    "error",
]
EXTRA_COLUMNS = [
    "layer",
    "prepare_s",
    "warmup_s",
    "cuda_peak_reserved_mb",
    "n_lps",
    "system_pearson",
    "system_kendall",
    "pearson_pooled_ci_low",
    "pearson_pooled_ci_high",
    "scores_agree",
    "threads",
    "cpu_model",
    "gpu",
    "phase_ms",
    "mean_exit_layer",
    "weight_mb",
    "metric_options",
    "truncated_segments",
    "human_dim",
    "n_missing_human",
    "spearman",
    "spearman_pooled",
    "system_spearman",
    "item_pearson",
    "item_kendall",
    "item_spearman",
    "n_docs",
    "dataset_path",
    "dataset_sha256",
    "ms_per_segment_cv",
    "warmup_passes",
    "batch_tokens",
    "signature",  # the scorer's reproducibility signature (nlgbench.core.signature), blank before issue 28
    "warnings",  # the cell's data warnings (result.json `warnings`), "; "-joined
    "correlation_note",  # the note stays last: it says why any figure left of it is blank
]
WARNINGS_SEPARATOR = "; "  # between a cell's data warnings in results.csv's `warnings` column
# correlations.csv: every figure of every cell, long format, naming its level and grouping (nlgbench.statistics.levels).
CORRELATION_COLUMNS = [
    "cell_id",
    "metric",
    "encoder",
    "aligner",
    "dataset",
    "device",
    "human_dim",
    "level",
    "grouping",
    "method",
    "value",
    "n",
    "n_groups",
    "n_groups_too_small",
    "note",
    "epsilon",
]


def write_views(folder: Path, results: list[CellResult]) -> Path:
    """Write results.csv and correlations.csv of these results (the store's, in sweep order), atomically."""
    path = folder / CSV_FILE
    text = io.StringIO(newline="")
    long = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=CSV_COLUMNS + EXTRA_COLUMNS)
    w.writeheader()
    figures = csv.DictWriter(long, fieldnames=CORRELATION_COLUMNS)
    figures.writeheader()
    labels = distinct_dataset_labels([r.config.dataset.label for r in results], [r.dataset_file[1] for r in results])
    for result, label in zip(results, labels, strict=True):
        w.writerows([{**row, "dataset": label} for row in csv_rows(result)])
        figures.writerows([{**row, "dataset": label} for row in figure_rows(result)])
    write_atomic(path, text.getvalue())
    write_atomic(folder / CORRELATIONS_FILE, long.getvalue())
    return path


def _num(value: Any, digits: int | None = None) -> Any:
    """A CSV cell: blank for missing/NaN, rounded where `digits` is given (correlations are kept exact)."""
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return round(value, digits) if digits is not None else value
    return value


def dimension_sections(result: CellResult) -> list[dict[str, Any]]:
    """A finished cell's correlation section per human dimension (one for data with one human score)."""
    c = result.correlation or {}
    return list(c["dimensions"].values()) if c.get("dimensions") else [c]


def csv_rows(result: CellResult) -> list[dict[str, Any]]:
    """results.csv's rows of one cell: one per human dimension (`human_dim`); one for a failed cell."""
    if not result.ok:
        return [csv_row(result)]
    return [csv_row(result, section) for section in dimension_sections(result)]


def figure_rows(result: CellResult) -> list[dict[str, Any]]:
    """correlations.csv's rows of one finished cell: every figure (level x grouping x method) per dimension."""
    if not result.ok:
        return []
    cfg = result.config
    key = {
        "cell_id": result.cell_id,
        "metric": cfg.metric,
        "encoder": cfg.encoder.label,
        "aligner": cfg.aligner_label,
        "dataset": cfg.dataset.label,
        "device": cfg.device,
    }
    return [
        {**key, "human_dim": section.get("human_dim", ""), **{k: _num(figure.get(k)) for k in CORRELATION_COLUMNS[7:]}}
        for section in dimension_sections(result)
        for figure in section.get("figures") or []
    ]


def csv_row(result: CellResult, section: dict[str, Any] | None = None) -> dict[str, Any]:
    """One results.csv row from a cell result (ok, imported or failed); `section` is the correlation
    section of the human dimension the row is for (default: the primary one)."""
    cfg = result.config
    row: dict[str, Any] = {
        "cell_id": result.cell_id,
        "metric": cfg.metric,
        "encoder": cfg.encoder.label,
        "aligner": cfg.aligner_label,
        "dataset": cfg.dataset.label,
        "device": cfg.device,
        "batch_size": cfg.batch_size,
        "status": result.status,
        "n_repeats": cfg.repeats,
        "error": result.error or "",
        "threads": cfg.threads or "",
        "metric_options": cfg.options_label,
        "dataset_path": result.dataset_file[0],
        "dataset_sha256": result.dataset_file[1],
        "batch_tokens": cfg.batch_tokens if cfg.batch_tokens is not None else "",
        "warnings": WARNINGS_SEPARATOR.join(result.warnings),
    }
    if not result.ok:
        return row
    row.update(
        correlation_columns(section if section is not None else (result.correlation or {})),
        n_segments=result.n_segments,
    )
    if result.imported:  # precomputed scores (import-scores): correlations only, nothing measured
        row.update({"n_repeats": 0, "threads": ""})
        return row
    row.update(measured_columns(result))
    return row


def correlation_columns(c: dict[str, Any]) -> dict[str, Any]:
    """results.csv's correlation columns from one correlation section of a finished cell."""
    system = c.get("system") or {}
    item = c.get("item") or {}
    ci = (c.get("bootstrap") or {}).get("pearson_pooled_ci") or [None, None]
    return {
        "pearson": _num(c["pearson"]),
        "kendall": _num(c["kendall"]),
        "pearson_pooled": _num(c["pearson_pooled"]),
        "kendall_pooled": _num(c["kendall_pooled"]),
        "n_lps": c.get("n_lps", ""),
        "system_pearson": _num(system.get("pearson")),
        "system_kendall": _num(system.get("kendall")),
        "pearson_pooled_ci_low": _num(ci[0]),
        "pearson_pooled_ci_high": _num(ci[1]),
        "correlation_note": c.get("note") or "",
        "human_dim": c.get("human_dim", ""),
        "n_missing_human": c.get("n_missing_human", ""),
        "spearman": _num(c.get("spearman")),
        "spearman_pooled": _num(c.get("spearman_pooled")),
        "system_spearman": _num(system.get("spearman")),
        "item_pearson": _num(item.get("pearson")),
        "item_kendall": _num(item.get("kendall")),
        "item_spearman": _num(item.get("spearman")),
        "n_docs": item.get("n_docs", ""),
    }


def measured_columns(result: CellResult) -> dict[str, Any]:
    """results.csv's timing, memory, model and environment columns of a finished measured cell."""
    t, m, scorer = result.timing, result.memory, result.scorer
    assert t is not None and m is not None and scorer is not None and result.repeat_agreement is not None
    env = result.environment or {}
    return {
        "load_s": _num(t.load_s, 3),
        "ms_per_segment_mean": _num(t.ms_per_segment_mean, 4),
        "ms_per_segment_median": _num(t.ms_per_segment_median, 4),
        "ms_per_segment_std": _num(t.ms_per_segment_std, 4),
        "peak_rss_mb": _num(m.peak_rss_mb, 1),
        "rss_growth_mb": _num(m.rss_growth_mb, 1),
        # 0 on CPU cells: no CUDA memory was allocated there.
        "cuda_peak_allocated_mb": _num(m.cuda_peak_allocated_mb, 1) if m.cuda_peak_allocated_mb is not None else 0.0,
        "cuda_peak_reserved_mb": _num(m.cuda_peak_reserved_mb, 1) if m.cuda_peak_reserved_mb is not None else 0.0,
        "params": result.params,
        "disk_mb": _num(result.disk_bytes / 2**20, 2) if result.disk_bytes is not None else "",
        "layer": scorer.get("layer", ""),
        "prepare_s": _num(t.prepare_s, 3),
        "warmup_s": _num(t.warmup_s, 3),
        "scores_agree": result.repeat_agreement.agree,
        "threads": env.get("torch_threads", ""),
        "cpu_model": env.get("cpu_model", ""),
        "gpu": env.get("gpu") or "",
        "mean_exit_layer": _num(scorer.get("mean_exit_layer"), 3),
        "truncated_segments": scorer.get("truncated_segments", ""),  # blank in results written before it was counted
        "signature": recorded_signature(result.config.metric, scorer),
        "weight_mb": _num(scorer["weight_bytes"] / 2**20, 2) if "weight_bytes" in scorer else "",
        "phase_ms": ";".join(f"{k}={v:.3f}" for k, v in t.phase_ms_per_segment_mean.items()),
        # blank in results written before the GPU-grade protocol, and the CV with one repeat
        "ms_per_segment_cv": _num(t.ms_per_segment_cv, 4),
        "warmup_passes": len(t.warmup_passes_s) if t.warmup_passes_s is not None else "",
    }
