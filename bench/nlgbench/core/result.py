"""A cell's result: `CellResult` and its records, the schema of result.json, and their (de)serialisation
(`to_dict` / `from_dict`, strict JSON). Reading a run's result.json (upgraded, its shape checked) is
`nlgbench.runs.resultfile`'s; building a measured cell's result is `nlgbench.execution.measured`'s.

A cell that failed or ran out of memory is a CellResult too: status `failed`/`oom`, an error line, and
its measured sections None. result.json's keys and values are the output contract of docs/architecture.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT, CellConfig
from nlgbench.foundations.files import write_atomic
from nlgbench.measurement.protocol import too_variable

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
        """The result a result.json's content holds, taken as it is: a run's files are read, upgraded and
        checked by `nlgbench.runs.resultfile` first."""

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
