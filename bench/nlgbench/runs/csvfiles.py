"""The store's CSV views, rewritten from it after every recorded cell: `results.csv` (one row per cell and
human dimension: the output contract of docs/architecture.md, Result files) and `correlations.csv`
(every figure of every cell, long format). The columns are declared here, in order.

results.csv names every correlation `<method>_<level>` (`correlation_column`; levels as in
nlgbench.statistics.levels: global = pooled segments, segment = per language pair then the mean,
item, system), and its first one is the figure report and compare show by default (Pearson,
global: nlgbench.reporting.quality.DEFAULT_QUALITY; a test checks they agree). Memory and sizes
are in MiB (bytes / 2**20), named `_mib`. The older names follow as LEGACY_COLUMNS (same
values), kept for one release. Their format is written beside them (format.json); a reader gets an older
results.csv in these columns through nlgbench.runs.migrate."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RUN_FORMAT
from nlgbench.core.labels import distinct_dataset_labels
from nlgbench.core.result import CellResult
from nlgbench.core.signature import recorded_signature
from nlgbench.foundations.files import write_atomic
from nlgbench.runs.folder import CORRELATIONS_FILE, CSV_FILE, FORMAT_FILE
from nlgbench.statistics.levels import GROUPING
from nlgbench.statistics.summary import SUMMARY_METHODS


def correlation_column(method: str, level: str) -> str:
    """results.csv's column of a correlation method at a level (canonical names): `pearson_global`."""
    return f"{method}_{level}"


def column_label(column: str) -> str:
    """A correlation column's figure named as report and compare name it (QualityOptions.label, a test
    checks they agree): `pearson_global` 'pearson (global)', `kendall_segment` 'kendall (segment, by lp)'."""
    method, level = column.rsplit("_", 1)
    grouping = "" if GROUPING[level] == "none" else f", by {GROUPING[level]}"
    return f"{method} ({level}{grouping})"


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
    "peak_rss_mib",
    "rss_growth_mib",
    "cuda_peak_allocated_mib",
    "params",
    "disk_mib",
    "pearson_global",  # the first correlation column: report's and compare's default figure
    "kendall_global",
    "pearson_segment",
    "kendall_segment",
    "error",
]
EXTRA_COLUMNS = [
    "layer",
    "prepare_s",
    "warmup_s",
    "cuda_peak_reserved_mib",
    "n_lps",
    "pearson_system",
    "kendall_system",
    "pearson_global_ci_low",
    "pearson_global_ci_high",
    "scores_agree",
    "threads",
    "cpu_model",
    "gpu",
    "phase_ms",
    "mean_exit_layer",
    "weight_mib",
    "metric_options",
    "truncated_segments",
    "human_dim",
    "n_missing_human",
    "spearman_global",
    "spearman_segment",
    "spearman_system",
    "pearson_item",
    "kendall_item",
    "spearman_item",
    "n_docs",
    "dataset_path",
    "dataset_sha256",
    "ms_per_segment_cv",
    "timing_unstable",  # "yes" where ms_per_segment_cv > 5%: rerun on a quieter machine before comparing
    "warmup_passes",
    "batch_tokens",
    "startup_s",  # worker start until loading began (timing.startup_s); blank in older results
    "export_s",  # exporting the model to its backend's format (0 when the export cache held it)
    "energy_j_per_segment",  # mean energy per segment over the repeats, from a hardware counter
    "energy_counter",  # which counter (rapl, nvml), or "n/a (no counter)"; blank in older results
    "signature",  # the scorer's reproducibility signature (nlgbench.core.signature), blank in older results
    "peak_uss_mib",  # the sampled peak of the worker's unique set (memory.peak_uss_mb), blank in older results
    "bootstrap_unit",  # what the pearson_global interval resampled; blank in older results
    "warnings",  # the cell's data warnings (result.json `warnings`), "; "-joined
]
# The older column names, kept for one release with the same values (old name -> new name),
# between EXTRA_COLUMNS and the note: `pearson`/`kendall`/`spearman` were the segment level (the mean
# over language pairs), `*_pooled` the global level, `system_*` / `item_*` those levels, `*_mb` MiB.
LEGACY_COLUMNS = {
    "pearson": "pearson_segment",
    "kendall": "kendall_segment",
    "pearson_pooled": "pearson_global",
    "kendall_pooled": "kendall_global",
    "system_pearson": "pearson_system",
    "system_kendall": "kendall_system",
    "pearson_pooled_ci_low": "pearson_global_ci_low",
    "pearson_pooled_ci_high": "pearson_global_ci_high",
    "spearman": "spearman_segment",
    "spearman_pooled": "spearman_global",
    "system_spearman": "spearman_system",
    "item_pearson": "pearson_item",
    "item_kendall": "kendall_item",
    "item_spearman": "spearman_item",
    "peak_rss_mb": "peak_rss_mib",
    "rss_growth_mb": "rss_growth_mib",
    "cuda_peak_allocated_mb": "cuda_peak_allocated_mib",
    "cuda_peak_reserved_mb": "cuda_peak_reserved_mib",
    "disk_mb": "disk_mib",
    "weight_mb": "weight_mib",
}
NOTE_COLUMN = "correlation_note"  # last: it says why any figure left of it is blank
# results.csv's correlation figures, method x level (the global level's Pearson first, as in CSV_COLUMNS)
SUMMARY_LEVELS = ("global", "segment", "system", "item")
QUALITY_COLUMNS = [correlation_column(m, level) for level in SUMMARY_LEVELS for m in SUMMARY_METHODS]
MAIN_QUALITY = [c for c in CSV_COLUMNS if c in QUALITY_COLUMNS]  # the contract's: pearson/kendall, global/segment
RESULTS_COLUMNS = [*CSV_COLUMNS, *EXTRA_COLUMNS, *LEGACY_COLUMNS, NOTE_COLUMN]  # results.csv's header, in order
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


def format_record(found: int = RUN_FORMAT) -> str:
    """format.json: the format of results.csv and correlations.csv beside it (a sidecar, so the CSV files
    stay plain tables that csv and pandas read without options)."""
    return json.dumps({"format": found}) + "\n"


def write_views(folder: Path, results: list[CellResult]) -> Path:
    """Write results.csv and correlations.csv of these results (the store's, in sweep order) and their
    format (format.json), atomically."""
    path = folder / CSV_FILE
    text = io.StringIO(newline="")
    long = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=RESULTS_COLUMNS)
    w.writeheader()
    figures = csv.DictWriter(long, fieldnames=CORRELATION_COLUMNS)
    figures.writeheader()
    labels = distinct_dataset_labels([r.config.dataset.label for r in results], [r.dataset_file[1] for r in results])
    for result, label in zip(results, labels, strict=True):
        w.writerows([with_legacy({**row, "dataset": label}) for row in csv_rows(result)])
        figures.writerows([{**row, "dataset": label} for row in figure_rows(result)])
    write_atomic(path, text.getvalue())
    write_atomic(folder / CORRELATIONS_FILE, long.getvalue())
    write_atomic(folder / FORMAT_FILE, format_record())
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


def with_legacy(row: dict[str, Any]) -> dict[str, Any]:
    """A results.csv row with its LEGACY_COLUMNS, each the value of the column that replaced it."""
    return {**row, **{old: row.get(new, "") for old, new in LEGACY_COLUMNS.items()}}


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
        "device": cfg.device_label,
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
        "device": cfg.device_label,  # `imported` for an imported cell (its config: none)
        "batch_size": cfg.batch_label,  # blank for an imported cell
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
        return {**row, "startup_s": _num(result.failed_startup_s, 3)}  # where its worker got that far
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
    # result.json's section: the segment level's figures under the method's name, the global level's
    # as `<method>_pooled` (nlgbench.statistics.summary.correlate), the system and item levels' in theirs
    levels = {
        "global": {m: c.get(f"{m}_pooled") for m in SUMMARY_METHODS},
        "segment": c,
        "system": system,
        "item": item,
    }
    return {
        **{
            correlation_column(m, level): _num(levels[level].get(m))
            for level in SUMMARY_LEVELS
            for m in SUMMARY_METHODS
        },
        "n_lps": c.get("n_lps", ""),
        "pearson_global_ci_low": _num(ci[0]),
        "pearson_global_ci_high": _num(ci[1]),
        "bootstrap_unit": (c.get("bootstrap") or {}).get("resampled", ""),
        NOTE_COLUMN: c.get("note") or "",
        "human_dim": c.get("human_dim", ""),
        "n_missing_human": c.get("n_missing_human", ""),
        "n_docs": item.get("n_docs", ""),
    }


NO_COUNTER = "n/a (no counter)"  # results.csv and the report where no hardware energy counter exists


def energy_counter_label(counter: str | None) -> str:
    """results.csv's `energy_counter`: the counter's name, NO_COUNTER where none exists, blank in older results."""
    if counter is None:
        return ""
    return NO_COUNTER if counter == "none" else counter


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
        # MiB: result.json's memory figures are MiB (nlgbench.measurement.trackers), sizes bytes / 2**20
        "peak_rss_mib": _num(m.peak_rss_mb, 1),
        "rss_growth_mib": _num(m.rss_growth_mb, 1),
        # 0 on CPU cells: no CUDA memory was allocated there.
        "cuda_peak_allocated_mib": _num(m.cuda_peak_allocated_mb, 1) if m.cuda_peak_allocated_mb is not None else 0.0,
        "cuda_peak_reserved_mib": _num(m.cuda_peak_reserved_mb, 1) if m.cuda_peak_reserved_mb is not None else 0.0,
        "params": result.params,
        "disk_mib": _num(result.disk_bytes / 2**20, 2) if result.disk_bytes is not None else "",
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
        "weight_mib": _num(scorer["weight_bytes"] / 2**20, 2) if "weight_bytes" in scorer else "",
        "phase_ms": ";".join(f"{k}={v:.3f}" for k, v in t.phase_ms_per_segment_mean.items()),
        # blank in results written before the GPU-grade protocol, and the CV with one repeat
        "ms_per_segment_cv": _num(t.ms_per_segment_cv, 4),
        "timing_unstable": "yes" if t.unstable else "",
        "warmup_passes": len(t.warmup_passes_s) if t.warmup_passes_s is not None else "",
        "startup_s": _num(t.startup_s, 3),
        "export_s": _num(t.export_s, 3),
        "peak_uss_mib": _num(m.peak_uss_mb, 1),
        "energy_j_per_segment": _num(statistics.fmean(t.energy_j) / result.n_segments, 6)
        if t.energy_j and result.n_segments
        else "",
        "energy_counter": energy_counter_label(t.energy_counter),
    }
