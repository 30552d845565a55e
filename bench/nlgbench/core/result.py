"""A cell's result: `CellResult` and its records (to and from result.json, checked by `check_shape`),
and `measured_result`, which adds the correlation of a measured cell's scores with the human judgments.

A cell that failed or ran out of memory is a CellResult too: status `failed`/`oom`, an error line, and
its measured sections None. result.json's keys and values are the output contract of docs/architecture.md.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT, CellConfig
from nlgbench.core.datawarnings import data_warnings
from nlgbench.data.items import Dataset
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text, write_atomic
from nlgbench.measurement.protocol import coefficient_of_variation, too_variable
from nlgbench.metrics import get_metric
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from nlgbench.statistics.summary import correlate

if TYPE_CHECKING:
    from nlgbench.measurement.protocol import ScoringRun
    from nlgbench.measurement.trackers import MemoryTracker

OK, FAILED, OOM = "ok", "failed", "oom"  # a cell's status
MAX_ERROR_CHARS = 500  # a failed cell's error line is cut here (the full traceback is in traceback.txt)


def json_safe(value: Any) -> Any:
    """NaN/inf become None (recursively), so result.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def correlate_scores(score: Sequence[float], dataset: Dataset, higher_is_better: bool) -> dict[str, Any]:
    """A cell's correlation section: its scores against the dataset's human judgments, every level,
    with bootstrap intervals (nlgbench.statistics.bootstrap's resamples and seed, so they are reproducible).

    Per selected human dimension, over the items that have a score on it (`n_missing_human` counts
    the others); the section is the primary dimension's (`human_dim`), and with several dimensions
    `dimensions` holds each one's section."""
    items = dataset.items
    docs = dataset.has_docs
    sections = {}
    for dim in dataset.human_dims:
        kept = [(s, it) for s, it in zip(score, items, strict=True) if dim in it.humans]
        section = correlate(
            [s for s, _ in kept],
            [it.humans[dim] for _, it in kept],
            [it.lp for _, it in kept],
            [it.system for _, it in kept],
            [it.doc_id for _, it in kept] if docs else None,
            seg_ids=[it.seg_id for _, it in kept],
            higher_is_better=higher_is_better,
            bootstrap=BOOTSTRAP_RESAMPLES,
            seed=BOOTSTRAP_SEED,
        )
        sections[dim] = {**section, "human_dim": dim, "n_missing_human": len(items) - len(kept)}
    primary = dict(sections[dataset.human_dims[0]])
    if len(sections) > 1:
        primary["dimensions"] = sections
    return primary


# ----------------------------------------------------------------------------- result sections


@dataclass(frozen=True)
class MetricRecord:
    """The metric as run: its name, direction and which output is the score."""

    name: str
    higher_is_better: bool
    primary: str


@dataclass(frozen=True)
class DatasetRecord:
    """The dataset as loaded, with the sha256 of every file read."""

    name: str
    files: dict[str, str]
    has_systems: bool


@dataclass(frozen=True)
class Timing:
    """Seconds per phase; per-segment milliseconds of each timed repeat and their summary;
    per repeat the metric's own phases (tokenize, encode, match, transport ..., and `other`: the
    rest of the wall time; phases named `*_overlapped` ran in the background, hidden, and are not
    part of that sum).

    Since the GPU-grade protocol: each warm-up pass's seconds and, on CUDA, whether the
    warm-up ended stable; the repeats' coefficient of variation; per repeat the process CPU
    seconds and, on CUDA, the CUDA-event seconds and the SM clock after it. These are None in
    results written before (and the CUDA ones on CPU), and then left out of result.json."""

    data_s: float
    load_s: float
    prepare_s: float
    warmup_s: float
    warmup_items: int
    repeat_s: list[float]
    ms_per_segment: list[float]
    ms_per_segment_mean: float
    ms_per_segment_median: float
    ms_per_segment_std: float
    phases_s: list[dict[str, float]]
    phase_ms_per_segment_mean: dict[str, float]
    ms_per_segment_cv: float | None = None  # stdev / mean of ms_per_segment; None with one repeat
    warmup_passes_s: list[float] | None = None
    warmup_stable: bool | None = None  # CUDA: the last two warm-up passes agreed within 2%
    repeat_cpu_s: list[float] | None = None  # process CPU time (all threads) per repeat
    repeat_cuda_s: list[float] | None = None  # CUDA-event time per repeat
    gpu_sm_clock_mhz: list[int | None] | None = None  # SM clock after each repeat, where readable
    # Worker start until the scorer could begin loading (process start, imports, config),
    # model export to a backend's format (not part of load_s), and the energy each repeat drew where a
    # hardware counter exists (`energy_counter` names it: "rapl", "nvml"; "none" where none exists;
    # `energy_note` says what it read, or why there is none: nlgbench.measurement.energy).
    startup_s: float | None = None
    export_s: float | None = None
    energy_j: list[float] | None = None
    energy_counter: str | None = None
    energy_note: str | None = None
    # passes per timed repeat where a repeat has a minimum time (the seconds above are then per pass)
    repeat_passes: list[int] | None = None

    # Fields added after the first results were written: left out of the JSON when None, so
    # older result.json files round-trip byte for byte.
    OPTIONAL = (
        *("ms_per_segment_cv", "warmup_passes_s", "warmup_stable", "repeat_cpu_s", "repeat_cuda_s"),
        *("gpu_sm_clock_mhz", "startup_s", "export_s", "energy_j", "energy_counter", "energy_note", "repeat_passes"),
    )

    @classmethod
    def of_protocol(cls, data_s: float, load_s: float, prepare_s: float, run: ScoringRun, n_segments: int) -> Timing:
        """The phases' seconds and the protocol's repeats, per segment over `n_segments`, and their energy."""
        per_seg = [t / n_segments * 1000 for t in run.repeat_s]
        phases = run.phases_s
        names = list(dict.fromkeys(k for p in phases for k in p))
        return cls(
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

    @property
    def unstable(self) -> bool:
        """The repeats' CV exceeds CV_LIMIT: timings not to be compared before a rerun on a quieter machine."""
        return too_variable(self.ms_per_segment_cv)

    def to_dict(self) -> dict[str, Any]:
        """result.json's timing section: every field, but the OPTIONAL ones only where not None."""
        return {k: v for k, v in asdict(self).items() if not (k in self.OPTIONAL and v is None)}


@dataclass(frozen=True)
class Memory:
    """MiB, over load, prepare and the memory pass (`pass_s`, run under `allocator_policy`): RSS before
    loading, its peak and growth; CUDA peaks (None on CPU); peak USS. Optional fields: None in older results."""

    baseline_rss_mb: float
    peak_rss_mb: float
    rss_growth_mb: float
    cuda_peak_allocated_mb: float | None
    cuda_peak_reserved_mb: float | None
    peak_uss_mb: float | None = None
    pass_s: float | None = None
    allocator_policy: str | None = None

    OPTIONAL = ("peak_uss_mb", "pass_s", "allocator_policy")

    @classmethod
    def of_tracker(cls, tracker: MemoryTracker, pass_s: float | None = None) -> Memory:
        return cls(
            baseline_rss_mb=tracker.baseline_rss_mb,
            peak_rss_mb=tracker.peak_rss_mb,
            rss_growth_mb=tracker.peak_rss_mb - tracker.baseline_rss_mb,
            cuda_peak_allocated_mb=tracker.cuda_peak_allocated_mb,
            cuda_peak_reserved_mb=tracker.cuda_peak_reserved_mb,
            peak_uss_mb=tracker.peak_uss_mb,
            pass_s=pass_s,
            allocator_policy=tracker.allocator_policy,
        )

    def to_dict(self) -> dict[str, Any]:
        """result.json's memory section: every field, but the OPTIONAL ones only where not None."""
        return {k: v for k, v in asdict(self).items() if not (k in self.OPTIONAL and v is None)}


@dataclass(frozen=True)
class RepeatAgreement:
    """How far the later repeats' scores strayed from the first's, and whether within tolerance."""

    max_abs_diff: float
    agree: bool


# ----------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class CellResult:
    """result.json. `correlation` is the statistics module's section as is; `scorer` is what the
    metric's scorer describes (layer, parameters, disk and weight bytes ...); `environment` the
    machine and versions. Failed/oom cells carry only the first five fields (and `startup_s` where
    their worker got that far); imported cells
    (`imported`) have no timing, memory, sizes or repeats."""

    cell_id: str
    label: str
    status: str  # OK, FAILED or OOM
    error: str | None
    config: CellConfig
    imported: bool = False
    metric: MetricRecord | None = None
    scorer: dict[str, Any] | None = None
    n_segments: int | None = None
    dataset: DatasetRecord | None = None
    timing: Timing | None = None
    memory: Memory | None = None
    params: int | None = None
    disk_bytes: int | None = None
    repeat_agreement: RepeatAgreement | None = None
    correlation: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    scores_csv: dict[str, Any] | None = None  # scores.csv's rows and sha256 (`scores_record`); None in older results
    warnings: list[str] = field(
        default_factory=list
    )  # data warnings (`nlgbench.core.datawarnings`); [] in older results
    # A cell that did not finish: its start-up seconds where its worker got that far (a finished cell's
    # are `timing.startup_s`; read either through `startup_seconds`). None in older results.
    failed_startup_s: float | None = None

    @property
    def startup_seconds(self) -> float | None:
        """Start-up of the cell's worker (process start until it could load), finished or not."""
        return self.timing.startup_s if self.timing is not None else self.failed_startup_s

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def dataset_file(self) -> tuple[str, str]:
        """(path, sha256) of the user data file read (hf: `hf:ID`, its content's); ('', '') for the catalogue's."""
        path = self.config.dataset.input_key
        if not path:
            return "", ""
        sha = self.config.inputs.get(path, "") or (self.dataset.files.get(path, "") if self.dataset else "")
        return path, sha.removeprefix("sha256:")

    @classmethod
    def not_finished(
        cls, cell_id: str, label: str, config: CellConfig, error: str, *, oom: bool, startup_s: float | None = None
    ) -> CellResult:
        """A failed (or out-of-memory) cell's result: one error line and, where known, its start-up seconds."""
        return cls(
            cell_id=cell_id,
            label=label,
            status=OOM if oom else FAILED,
            error=error[:MAX_ERROR_CHARS],
            config=config,
            failed_startup_s=startup_s,
        )

    def to_dict(self) -> dict[str, Any]:
        """result.json's keys, in its order; a cell that did not finish stops after `config` (and its
        `startup_s`, where known)."""
        out: dict[str, Any] = {"format": RUN_FORMAT, "cell_id": self.cell_id, "label": self.label}  # format first
        out.update(status=self.status, error=self.error)
        if self.imported:
            out["imported"] = True
        out["config"] = self.config.to_dict()
        if self.failed_startup_s is not None:  # left out where unknown, so older result.json files round-trip
            out["startup_s"] = self.failed_startup_s
        if self.metric is None:
            return out

        def section(value: Any) -> Any:
            return asdict(value) if value is not None else None

        out.update(
            {
                "metric": section(self.metric),
                "scorer": self.scorer,
                "n_segments": self.n_segments,
                "dataset": section(self.dataset),
                "timing": self.timing.to_dict() if self.timing is not None else None,
                "memory": self.memory.to_dict() if self.memory is not None else None,
                "params": self.params,
                "disk_bytes": self.disk_bytes,
                "repeat_agreement": section(self.repeat_agreement),
                "correlation": self.correlation,
                "environment": self.environment,
            }
        )
        if self.scores_csv is not None:  # left out where unknown, so older result.json files round-trip
            out["scores_csv"] = self.scores_csv
        if self.warnings:  # left out where there are none, so older result.json files round-trip
            out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CellResult:
        """The result a result.json holds; a ValueError naming the field where it is not one (`check_shape`)."""
        check_shape(raw)

        def section(kind: Any, key: str) -> Any:
            value = raw.get(key)
            return kind(**value) if value is not None else None

        return cls(
            cell_id=raw["cell_id"],
            label=raw["label"],
            status=raw["status"],
            error=raw.get("error"),
            config=CellConfig.from_dict(raw["config"]),
            imported=bool(raw.get("imported", False)),
            metric=section(MetricRecord, "metric"),
            scorer=raw.get("scorer"),
            n_segments=raw.get("n_segments"),
            dataset=section(DatasetRecord, "dataset"),
            timing=section(Timing, "timing"),
            memory=section(Memory, "memory"),
            params=raw.get("params"),
            disk_bytes=raw.get("disk_bytes"),
            repeat_agreement=section(RepeatAgreement, "repeat_agreement"),
            correlation=raw.get("correlation"),
            environment=raw.get("environment"),
            scores_csv=raw.get("scores_csv"),
            warnings=list(raw.get("warnings") or []),
            failed_startup_s=raw.get("startup_s"),
        )

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (NaN/inf as null): result.json with indent 2, the store's copy on one line."""
        return json.dumps(json_safe(self.to_dict()), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> CellResult:
        return cls.from_dict(json.loads(text))

    def write(self, cell_dir: Path) -> None:
        """result.json in the cell folder (atomically)."""
        write_atomic(cell_dir / RESULT_FILE, self.to_json())

    @classmethod
    def read(cls, cell_dir: Path) -> CellResult:
        """The cell folder's result.json, of this nlgbench's format (any format: nlgbench.runs.migrate.read_result);
        one UserError naming the file (and field) where it cannot be read."""
        path = cell_dir / RESULT_FILE
        text = utf8_text(path, read_bytes(path))
        try:
            return cls.from_json(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: {exc if not isinstance(exc, KeyError) else f'no field {exc}'}") from None


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
    correlation = correlate_scores(scores, dataset, metric.higher_is_better)
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


CORRELATION_FIGURES = ("pearson", "kendall", "pearson_pooled", "kendall_pooled")  # what results.csv reads of a section


def check_shape(raw: Any) -> None:
    """A ValueError naming the first field of a result.json that is not what its readers take it to be
    (an edited or foreign file): so `report`, `repair` and the store stop at one line, not at a
    TypeError deep inside. A finished cell needs its sections; a measured one its timing and memory."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"not a result (a JSON object), got {type(raw).__name__}")

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise ValueError(f"field {field!r} must be {what}, got {json.dumps(raw.get(field))[:80]}")

    # an older file is upgraded before it gets here (nlgbench.runs.migrate); no format: a result made in memory
    need(raw.get("format", RUN_FORMAT) == RUN_FORMAT, "format", f"{RUN_FORMAT}, this nlgbench's format")

    for key in ("cell_id", "label", "status"):
        need(isinstance(raw.get(key), str), key, "a text")
    need(raw["status"] in (OK, FAILED, OOM), "status", f"one of {OK}, {FAILED}, {OOM}")
    need(isinstance(raw.get("config"), Mapping), "config", "an object")
    if raw["status"] != OK:
        startup = raw.get("startup_s")
        seconds = isinstance(startup, int | float) and not isinstance(startup, bool)
        need(startup is None or seconds, "startup_s", "seconds")
        return
    n = raw.get("n_segments")
    need(isinstance(n, int) and not isinstance(n, bool) and n >= 0, "n_segments", "a count")
    measured = [] if raw.get("imported") else ["timing", "memory", "repeat_agreement", "scorer"]
    for key in ["metric", "dataset", "correlation", *measured]:
        need(isinstance(raw.get(key), Mapping), key, "an object")
    record = raw.get("scores_csv")
    need(
        record is None
        or (
            isinstance(record, Mapping)
            and isinstance(record.get("rows"), int)
            and isinstance(record.get("sha256"), str)
        ),
        "scores_csv",
        "an object with rows and sha256",
    )
    found = raw.get("warnings", [])
    need(isinstance(found, list) and all(isinstance(w, str) for w in found), "warnings", "a list of texts")
    dims = raw["correlation"].get("dimensions")
    sections = list(dims.values()) if isinstance(dims, Mapping) and dims else [raw["correlation"]]
    need(
        all(
            isinstance(section, Mapping)
            and all(
                k in section
                and (section[k] is None or (isinstance(section[k], (int, float)) and not isinstance(section[k], bool)))
                for k in CORRELATION_FIGURES
            )
            for section in sections
        ),
        "correlation",
        f"an object with the numbers {', '.join(CORRELATION_FIGURES)}",
    )
