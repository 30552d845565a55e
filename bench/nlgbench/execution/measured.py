"""A measured cell's result, built from what the protocol measured (`nlgbench.measurement.protocol`):
its timing and memory sections, its correlation with the human judgments and its data warnings."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from nlgbench.core.cell import CellConfig
from nlgbench.core.datawarnings import data_warnings
from nlgbench.core.result import OK, CellResult, DatasetRecord, Memory, MetricRecord, RepeatAgreement, Timing
from nlgbench.data.items import Dataset
from nlgbench.measurement.protocol import ScoringRun, coefficient_of_variation
from nlgbench.measurement.trackers import MemoryTracker
from nlgbench.metrics import get_metric
from nlgbench.statistics.summary import correlate_scores


def timing_of_protocol(data_s: float, load_s: float, prepare_s: float, run: ScoringRun, n_segments: int) -> Timing:
    """The phases' seconds and the protocol's repeats, per segment over `n_segments`, and their energy."""
    per_seg = [t / n_segments * 1000 for t in run.repeat_s]
    phases = run.phases_s
    names = list(dict.fromkeys(k for p in phases for k in p))
    return Timing(
        data_s=data_s,
        load_s=load_s,
        prepare_s=prepare_s,
        warmup_s=run.warmup_s,
        warmup_items=run.warmup_items,
        repeat_s=run.repeat_s,
        ms_per_segment=per_seg,
        ms_per_segment_mean=statistics.fmean(per_seg),
        ms_per_segment_median=statistics.median(per_seg),
        ms_per_segment_std=statistics.stdev(per_seg) if len(per_seg) > 1 else 0.0,
        phases_s=phases,
        phase_ms_per_segment_mean={
            k: statistics.fmean(p.get(k, 0.0) for p in phases) / n_segments * 1000 for k in names
        },
        ms_per_segment_cv=coefficient_of_variation(per_seg),
        warmup_passes_s=run.warmup_passes_s,
        warmup_stable=run.warmup_stable,
        repeat_cpu_s=run.repeat_cpu_s,
        repeat_cuda_s=run.repeat_cuda_s,
        gpu_sm_clock_mhz=run.gpu_sm_clock_mhz,
        energy_j=run.energy_j,
        energy_counter=run.energy_counter,
        energy_note=run.energy_note,
        repeat_passes=run.repeat_passes,
    )


def memory_of_tracker(tracker: MemoryTracker, pass_s: float | None = None) -> Memory:
    """The memory section from the tracker that watched load, prepare and the memory pass (`pass_s`)."""
    return Memory(
        baseline_rss_mb=tracker.baseline_rss_mb,
        peak_rss_mb=tracker.peak_rss_mb,
        rss_growth_mb=tracker.peak_rss_mb - tracker.baseline_rss_mb,
        cuda_peak_allocated_mb=tracker.cuda_peak_allocated_mb,
        cuda_peak_reserved_mb=tracker.cuda_peak_reserved_mb,
        peak_uss_mb=tracker.peak_uss_mb,
        pass_s=pass_s,
        allocator_policy=tracker.allocator_policy,
    )


def measured_result(
    cell_id: str,
    label: str,
    config: CellConfig,
    *,
    metric: MetricRecord,
    scorer: dict[str, Any],
    dataset: Dataset,
    timing: Timing,
    memory: Memory,
    agreement: RepeatAgreement,
    environment: dict[str, Any],
    scores: Sequence[float],
    scores_csv: dict[str, Any] | None = None,
) -> CellResult:
    """The result of a measured cell; its correlation is computed here from `scores`, and its data
    warnings (`data_warnings`) from the dataset, the correlation, the scorer's truncated segments and
    the blank texts the metric scored; `scores_csv` is what `write_scores` returned for them."""
    correlation = correlate_scores(scores, dataset.items, dataset.human_dims, metric.higher_is_better)
    return CellResult(
        cell_id=cell_id,
        label=label,
        status=OK,
        error=None,
        config=config,
        metric=metric,
        scorer=scorer,
        n_segments=len(dataset.items),
        dataset=DatasetRecord(name=dataset.name, files=dataset.files, has_systems=dataset.has_systems),
        timing=timing,
        memory=memory,
        params=scorer["params"],
        disk_bytes=scorer["disk_bytes"],
        repeat_agreement=agreement,
        correlation=correlation,
        environment=environment,
        scores_csv=scores_csv,
        warnings=data_warnings(
            dataset,
            correlation,
            scorer.get("truncated_segments") or 0,
            get_metric(config.metric).blank_rule(config.options),  # blank texts the metric scored
        ),
    )
