"""A cell's configuration and result, typed, as they cross the process boundary and sit on disk.

The runner writes `cells/<id>/config.json` (`write_config`: the cell id, its label and a
`CellConfig`); the worker reads it, measures, and writes `result.json` (a `CellResult`) and
`scores.csv` (`write_scores`); the store keeps the result. Both dataclasses serialise to exactly
the JSON keys and values of DESIGN.md's output contract, which other tools read. A cell that
failed or ran out of memory is a CellResult too: status `failed`/`oom`, an error line, and its
measured sections None.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.version import __version__
from nlgbench.core.labels import aligner_label, cell_label, dataset_label, metric_label, options_label
from nlgbench.foundations.files import write_atomic

if TYPE_CHECKING:
    from nlgbench.data.dataset import Dataset, Item
    from nlgbench.measurement.protocol import MemoryTracker, ScoringRun

OK, FAILED, OOM = "ok", "failed", "oom"  # a cell's status
IMPORTED_DEVICE = "none"  # the device of a cell whose scores were imported, not measured
CONFIG_FILE, RESULT_FILE, SCORES_FILE, TRACEBACK_FILE = "config.json", "result.json", "scores.csv", "traceback.txt"
MAX_ERROR_CHARS = 500  # a failed cell's error line is cut here (the full traceback is in traceback.txt)


# ----------------------------------------------------------------------------- files


def read_bytes(path: Path) -> bytes:
    """A run file's bytes; one UserError naming it where it cannot be read."""
    from nlgbench.foundations.errors import UserError

    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def utf8_text(path: Path, data: bytes) -> str:
    """`data` (read from `path`) as UTF-8 text; one UserError naming the file and byte where it is not."""
    from nlgbench.foundations.errors import UserError

    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def json_safe(value: Any) -> Any:
    """NaN/inf become None (recursively), so result.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def human_columns(items: Sequence[Item]) -> list[str]:
    """The named human dimensions of `items` in order of first appearance; [] for data with one
    human score per item (its `human` column says it all)."""
    from nlgbench.data.dataset import HUMAN

    dims = list(dict.fromkeys(dim for it in items for dim in it.humans))
    return [] if dims in ([], [HUMAN]) else dims


def write_scores(path: Path, items: Sequence[Item], score: Sequence[float],
                 extra: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """scores.csv: one row per item in dataset order: `lp, seg_id, system, score, human` (`score` the
    metric's primary output, `human` the primary human dimension), then `doc_id` where items name
    documents, `human.DIM` per named human dimension (blank: missing), `item.NAME` per column the spec
    carries (`DatasetRef.columns`), then the metric's further outputs (`extra`); numbers as `repr` (exact).
    Returns result.json's record of the file (`scores_record`), so that a reader can tell it is whole."""
    extra = extra or {}
    docs = any(it.doc_id for it in items)
    dims = human_columns(items)
    carried = list(dict.fromkeys(c for it in items for c in it.extra))
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(["lp", "seg_id", "system", "score", "human", *(["doc_id"] if docs else []),
                *(f"{HUMAN_COLUMN_PREFIX}{d}" for d in dims), *(f"{ITEM_COLUMN_PREFIX}{c}" for c in carried), *extra])
    for i, it in enumerate(items):
        w.writerow([it.lp, it.seg_id, it.system, repr(score[i]), repr(it.human), *([it.doc_id] if docs else []),
                    *(repr(it.humans[d]) if d in it.humans else "" for d in dims),
                    *(it.extra.get(c, "") for c in carried), *(repr(extra[c][i]) for c in extra)])
    write_atomic(path, text.getvalue())
    return scores_record(text.getvalue().encode("utf-8"), len(items))


def scores_record(data: bytes, rows: int) -> dict[str, Any]:
    """result.json's `scores_csv`: the file's row count and sha256, checked when it is read back."""
    return {"rows": rows, "sha256": hashlib.sha256(data).hexdigest()}


TEXT_SCORE_COLUMNS = ("lp", "seg_id", "system", "doc_id")  # scores.csv's ids; `item.*` columns are texts too


def read_scores(path: Path, result: CellResult | None) -> tuple[list[str], list[dict[str, Any]]]:
    """scores.csv's columns and rows, checked against `result` (the cell's result.json; None: nothing to
    check against): its recorded row count (else `n_segments`, in results written before the record)
    and sha256, so a truncated or edited file is refused, not read as a smaller or other cell. Ids and
    texts stay text (seg_ids integers only where all are plain integers: `seg_id_values`), the other
    columns are numbers (blank: NaN). Every problem is one UserError naming the file (and row, column)."""
    from nlgbench.data.dataset import seg_id_values
    from nlgbench.foundations.errors import UserError

    data = read_bytes(path)
    reader = csv.DictReader(io.StringIO(utf8_text(path, data), newline=""))
    columns = list(reader.fieldnames or [])
    missing = [c for c in ("lp", "seg_id", "system", "score", "human") if c not in columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)}")
    raw = [(reader.line_num, row) for row in reader]
    record = result.scores_csv if result is not None else None
    expected = record["rows"] if record is not None else (result.n_segments if result is not None else None)
    if expected is not None and len(raw) != expected:
        raise UserError(f"{path}: {len(raw)} row(s) where {RESULT_FILE} records {expected} (truncated or changed "
                        "since the cell wrote it); run the cell again")
    if record is not None and hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise UserError(f"{path}: its sha256 is not the one {RESULT_FILE} records (changed since the cell wrote "
                        "it); run the cell again")
    ids = seg_id_values([row["seg_id"] or "" for _, row in raw])
    rows = []
    for (line, row), seg_id in zip(raw, ids):
        if None in row or any(value is None for value in row.values()):
            raise UserError(f"{path}:{line}: {len(row)} field(s) where the header has {len(columns)}")
        out: dict[str, Any] = {}
        for column, value in row.items():
            if column in TEXT_SCORE_COLUMNS or column.startswith(ITEM_COLUMN_PREFIX):
                out[column] = value
                continue
            try:
                out[column] = float(value) if value != "" else math.nan
            except ValueError:
                raise UserError(f"{path}:{line}: column {column!r}: {value!r} is not a number") from None
        rows.append({**out, "seg_id": seg_id})
    return columns, rows


HUMAN_COLUMN_PREFIX = "human."  # scores.csv's column of a named human dimension
ITEM_COLUMN_PREFIX = "item."  # scores.csv's column of a further data column the spec carries through


def correlate_scores(score: Sequence[float], dataset: Dataset, higher_is_better: bool) -> dict[str, Any]:
    """A cell's correlation section: its scores against the dataset's human judgments, every level,
    with bootstrap intervals (nlgbench.statistics.stats' resamples and seed, so they are reproducible).

    Per selected human dimension, over the items that have a score on it (`n_missing_human` counts
    the others); the section is the primary dimension's (`human_dim`), and with several dimensions
    `dimensions` holds each one's section."""
    from nlgbench.statistics.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, correlate

    items = dataset.items
    docs = dataset.has_docs
    sections = {}
    for dim in dataset.human_dims:
        kept = [(s, it) for s, it in zip(score, items) if dim in it.humans]
        section = correlate([s for s, _ in kept], [it.humans[dim] for _, it in kept], [it.lp for _, it in kept],
                            [it.system for _, it in kept], higher_is_better=higher_is_better,
                            bootstrap=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED,
                            **({"docs": [it.doc_id for _, it in kept]} if docs else {}))
        sections[dim] = {**section, "human_dim": dim, "n_missing_human": len(items) - len(kept)}
    primary = dict(sections[dataset.human_dims[0]])
    if len(sections) > 1:
        primary["dimensions"] = sections
    return primary


# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class DatasetRef:
    """A catalogue dataset or a user file, optionally cut to the first N items per language pair;
    `human` selects its human dimension(s) (None: every one, as ``all``)."""

    name: str | None = None
    path: str | None = None
    max_segments: int | None = None
    human: str | None = None
    sample: tuple[int, int] | None = None  # (n, seed): a seeded random subset per language pair
    columns: tuple[str, ...] = ()  # further columns of a user file carried into scores.csv

    def __post_init__(self) -> None:
        if isinstance(self.sample, Mapping):  # from JSON: {"n": .., "seed": ..}
            object.__setattr__(self, "sample", (self.sample["n"], self.sample["seed"]))
        object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def label(self) -> str:
        return dataset_label(self.name, self.path, self.max_segments, self.sample)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; `human` and `sample` only where set, so earlier cells keep their ids."""
        out: dict[str, Any] = {"name": self.name, "path": self.path, "max_segments": self.max_segments}
        if self.human is not None:
            out["human"] = self.human
        if self.sample is not None:
            out["sample"] = {"n": self.sample[0], "seed": self.sample[1]}
        if self.columns:
            out["columns"] = list(self.columns)
        return out

    def load(self) -> Dataset:
        """The dataset this reference names, cut or sampled, with its human dimension(s) selected."""
        from nlgbench.data.dataset import load_dataset

        return load_dataset(self.name, path=self.path, max_segments=self.max_segments, human=self.human,
                            sample=self.sample, columns=self.columns)


@dataclass(frozen=True)
class CellConfig:
    """What defines a cell (and its id): metric x options x encoder x aligner x dataset x device x
    batch size, plus the protocol's repeats, warm-up passes and threads (None: all cores), and
    where set the per-batch token budget of model inputs (`batch_tokens`; absent from the id's
    config when unset, so cells without it keep their ids).

    `inputs` fingerprints the local files the cell reads, by path: a user data file's
    `sha256:...`, a local model folder's `weights:...` (`nlgbench.encoders.hfcache.weights_fingerprint`),
    so changed data or weights make a new cell instead of a skipped one. Catalogue datasets (whose
    files are sha256-checked) and registered or Hub models have none: their ids are unchanged."""

    metric: str
    options: dict[str, Any]
    encoder: EncoderRef
    aligner: str | None
    dataset: DatasetRef
    device: str
    batch_size: int
    repeats: int
    warmup: int
    threads: int | None
    inputs: dict[str, str] = field(default_factory=dict)
    batch_tokens: int | None = None  # per-batch token budget of model inputs (None: batch_size texts)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form: config.json's `config` and result.json's `config`."""
        return {
            "metric": self.metric,
            "options": dict(self.options),
            "encoder": self.encoder.to_dict(),
            "aligner": self.aligner,
            "dataset": self.dataset.to_dict(),
            "device": self.device,
            "batch_size": self.batch_size,
            "repeats": self.repeats,
            "warmup": self.warmup,
            "threads": self.threads,
            **({"inputs": dict(self.inputs)} if self.inputs else {}),  # only where present: ids stay as they were
            **({"batch_tokens": self.batch_tokens} if self.batch_tokens is not None else {}),  # likewise
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CellConfig:
        return cls(
            metric=raw["metric"], options=dict(raw["options"]), encoder=EncoderRef(**raw["encoder"]),
            aligner=raw["aligner"], dataset=DatasetRef(**raw["dataset"]), device=raw["device"],
            batch_size=raw["batch_size"], repeats=raw["repeats"], warmup=raw["warmup"], threads=raw["threads"],
            inputs=dict(raw.get("inputs") or {}), batch_tokens=raw.get("batch_tokens"),
        )

    @property
    def cell_id(self) -> str:
        """The cell's id: a short hash of this config (with its `inputs`' fingerprints) and the
        versions that change scores, so a finished cell is recognised (and skipped) when the same
        sweep runs again on the same data, weights and library versions."""
        return self.id_under({**score_versions(), **metric_versions(self.metric)})

    def id_under(self, versions: Mapping[str, str]) -> str:
        """The id this config has under the given score-changing versions (`cell_id`: this process's;
        `recorded_score_versions`: those a stored result was measured with)."""
        return short_hash({"config": self.to_dict(), "versions": dict(versions)})

    @property
    def label(self) -> str:
        """The sweep's one-line name of this cell (progress lines, `run --dry-run`)."""
        return cell_label(self.metric, self.options, self.encoder.label, self.aligner, self.dataset.label,
                          self.device, self.batch_size)

    @property
    def options_label(self) -> str:
        """Non-default metric options, `key=value,...` (results.csv's metric_options)."""
        return options_label(self.metric, self.options)

    @property
    def aligner_label(self) -> str:
        return aligner_label(self.aligner)

    @property
    def metric_label(self) -> str:
        """The metric as tables and reports name it: `moverscore (wcd)`, `sentsim[token_part=wmd]`."""
        return metric_label(self.metric, self.aligner, self.options_label)


def short_hash(payload: Mapping[str, Any]) -> str:
    """12 hex digits of the sha256 of a JSON-ready mapping (keys sorted): cell ids."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


@lru_cache(maxsize=1)
def score_versions() -> dict[str, str]:
    """Versions whose change may change scores (major.minor of the libraries), part of every cell id."""
    import torch
    import transformers

    return recorded_score_versions({"nlgbench": __version__, "torch": torch.__version__,
                                    "transformers": transformers.__version__})


def recorded_score_versions(environment: Mapping[str, Any]) -> dict[str, str]:
    """The score-changing versions out of full version strings as a result's environment records
    them (`score_versions` passes this process's): with `metric_versions`, what a cell id hashes."""
    return {"nlgbench": str(environment["nlgbench"]), "torch": _major_minor(str(environment["torch"])),
            "transformers": _major_minor(str(environment["transformers"]))}


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


@lru_cache(maxsize=None)
def metric_versions(metric: str) -> dict[str, str]:
    """major.minor of the libraries a metric declares (`MetricInfo.libraries`: sacrebleu for BLEU and
    chrF, rouge-score for ROUGE), part of its cells' ids; {} for the others, whose ids stay as they were."""
    from importlib.metadata import PackageNotFoundError, version

    from nlgbench.metrics import get_metric, metric_names

    if metric not in metric_names():
        return {}
    out = {}
    for name in get_metric(metric).libraries:
        try:
            out[name] = _major_minor(version(name))
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def write_config(cell_dir: Path, cell_id: str, label: str, config: CellConfig) -> None:
    """config.json: what the worker is asked to measure."""
    payload = {"cell_id": cell_id, "label": label, "config": config.to_dict()}
    write_atomic(cell_dir / CONFIG_FILE, json.dumps(payload, indent=2))


def read_config(cell_dir: Path) -> tuple[str, str, CellConfig]:
    """(cell id, label, config) from config.json."""
    raw = json.loads((cell_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    return raw["cell_id"], raw["label"], CellConfig.from_dict(raw["config"])


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

    Since the GPU-grade protocol (issue 15): each warm-up pass's seconds and, on CUDA, whether the
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

    # Fields added after the first results were written: left out of the JSON when None, so
    # older result.json files round-trip byte for byte.
    OPTIONAL = ("ms_per_segment_cv", "warmup_passes_s", "warmup_stable", "repeat_cpu_s", "repeat_cuda_s",
                "gpu_sm_clock_mhz")

    @classmethod
    def of_protocol(cls, data_s: float, load_s: float, prepare_s: float, run: ScoringRun, n_segments: int) -> Timing:
        """The phases' seconds and the protocol's repeats, per segment over `n_segments`."""
        from nlgbench.measurement.protocol import coefficient_of_variation

        per_seg = [t / n_segments * 1000 for t in run.repeat_s]
        phases = run.phases_s
        names = list(dict.fromkeys(k for p in phases for k in p))
        return cls(
            data_s=data_s, load_s=load_s, prepare_s=prepare_s, warmup_s=run.warmup_s, warmup_items=run.warmup_items,
            repeat_s=run.repeat_s, ms_per_segment=per_seg,
            ms_per_segment_mean=statistics.fmean(per_seg),
            ms_per_segment_median=statistics.median(per_seg),
            ms_per_segment_std=statistics.stdev(per_seg) if len(per_seg) > 1 else 0.0,
            phases_s=phases,
            phase_ms_per_segment_mean={
                k: statistics.fmean(p.get(k, 0.0) for p in phases) / n_segments * 1000 for k in names
            },
            ms_per_segment_cv=coefficient_of_variation(per_seg),
            warmup_passes_s=run.warmup_passes_s, warmup_stable=run.warmup_stable,
            repeat_cpu_s=run.repeat_cpu_s, repeat_cuda_s=run.repeat_cuda_s, gpu_sm_clock_mhz=run.gpu_sm_clock_mhz,
        )

    def to_dict(self) -> dict[str, Any]:
        """result.json's timing section: every field, but the OPTIONAL ones only where not None."""
        return {k: v for k, v in asdict(self).items() if not (k in self.OPTIONAL and v is None)}


@dataclass(frozen=True)
class Memory:
    """MiB: RSS before loading anything, its peak and growth; CUDA peaks since the reset (None on CPU)."""

    baseline_rss_mb: float
    peak_rss_mb: float
    rss_growth_mb: float
    cuda_peak_allocated_mb: float | None
    cuda_peak_reserved_mb: float | None

    @classmethod
    def of_tracker(cls, tracker: MemoryTracker) -> Memory:
        return cls(
            baseline_rss_mb=tracker.baseline_rss_mb, peak_rss_mb=tracker.peak_rss_mb,
            rss_growth_mb=tracker.peak_rss_mb - tracker.baseline_rss_mb,
            cuda_peak_allocated_mb=tracker.cuda_peak_allocated_mb, cuda_peak_reserved_mb=tracker.cuda_peak_reserved_mb,
        )


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
    machine and versions. Failed/oom cells carry only the first five fields; imported cells
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
    scores_csv: dict[str, Any] | None = None  # scores.csv's rows and sha256 (`scores_record`); None before issue 25

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def dataset_file(self) -> tuple[str, str]:
        """(path, sha256) of the user data file the cell read; ('', '') for a catalogue dataset."""
        path = self.config.dataset.path
        if not path:
            return "", ""
        sha = self.config.inputs.get(path, "") or (self.dataset.files.get(path, "") if self.dataset else "")
        return path, sha.removeprefix("sha256:")

    @classmethod
    def not_finished(cls, cell_id: str, label: str, config: CellConfig, error: str, *, oom: bool) -> CellResult:
        """The result of a cell that failed (or ran out of memory): one error line, nothing measured."""
        return cls(cell_id=cell_id, label=label, status=OOM if oom else FAILED, error=error[:MAX_ERROR_CHARS],
                   config=config)

    def to_dict(self) -> dict[str, Any]:
        """result.json's keys, in its order; a cell that did not finish stops after `config`."""
        out: dict[str, Any] = {"cell_id": self.cell_id, "label": self.label, "status": self.status, "error": self.error}
        if self.imported:
            out["imported"] = True
        out["config"] = self.config.to_dict()
        if self.metric is None:
            return out

        def section(value: Any) -> Any:
            return asdict(value) if value is not None else None

        out.update({
            "metric": section(self.metric),
            "scorer": self.scorer,
            "n_segments": self.n_segments,
            "dataset": section(self.dataset),
            "timing": self.timing.to_dict() if self.timing is not None else None,
            "memory": section(self.memory),
            "params": self.params,
            "disk_bytes": self.disk_bytes,
            "repeat_agreement": section(self.repeat_agreement),
            "correlation": self.correlation,
            "environment": self.environment,
        })
        if self.scores_csv is not None:  # left out where unknown, so older result.json files round-trip
            out["scores_csv"] = self.scores_csv
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CellResult:
        """The result a result.json holds; a ValueError naming the field where it is not one (`check_shape`)."""
        check_shape(raw)

        def section(kind: Any, key: str) -> Any:
            value = raw.get(key)
            return kind(**value) if value is not None else None

        return cls(
            cell_id=raw["cell_id"], label=raw["label"], status=raw["status"], error=raw.get("error"),
            config=CellConfig.from_dict(raw["config"]), imported=bool(raw.get("imported", False)),
            metric=section(MetricRecord, "metric"), scorer=raw.get("scorer"), n_segments=raw.get("n_segments"),
            dataset=section(DatasetRecord, "dataset"), timing=section(Timing, "timing"),
            memory=section(Memory, "memory"), params=raw.get("params"), disk_bytes=raw.get("disk_bytes"),
            repeat_agreement=section(RepeatAgreement, "repeat_agreement"), correlation=raw.get("correlation"),
            environment=raw.get("environment"), scores_csv=raw.get("scores_csv"),
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
        """The cell folder's result.json; one UserError naming the file (and field) where it cannot be read."""
        from nlgbench.foundations.errors import UserError

        path = cell_dir / RESULT_FILE
        text = utf8_text(path, read_bytes(path))
        try:
            return cls.from_json(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: {exc if not isinstance(exc, KeyError) else f'no field {exc}'}") from None


def measured_result(cell_id: str, label: str, config: CellConfig, *, metric: MetricRecord, scorer: dict[str, Any],
                    dataset: Dataset, timing: Timing, memory: Memory, agreement: RepeatAgreement,
                    environment: dict[str, Any], scores: Sequence[float],
                    scores_csv: dict[str, Any] | None = None) -> CellResult:
    """The result of a measured cell; its correlation is computed here from `scores`; `scores_csv` is
    what `write_scores` returned for them."""
    return CellResult(
        cell_id=cell_id, label=label, status=OK, error=None, config=config,
        metric=metric, scorer=scorer, n_segments=len(dataset.items),
        dataset=DatasetRecord(name=dataset.name, files=dataset.files, has_systems=dataset.has_systems),
        timing=timing, memory=memory, params=scorer["params"], disk_bytes=scorer["disk_bytes"],
        repeat_agreement=agreement,
        correlation=correlate_scores(scores, dataset, metric.higher_is_better),
        environment=environment, scores_csv=scores_csv,
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

    for key in ("cell_id", "label", "status"):
        need(isinstance(raw.get(key), str), key, "a text")
    need(raw["status"] in (OK, FAILED, OOM), "status", f"one of {OK}, {FAILED}, {OOM}")
    need(isinstance(raw.get("config"), Mapping), "config", "an object")
    if raw["status"] != OK:
        return
    n = raw.get("n_segments")
    need(isinstance(n, int) and not isinstance(n, bool) and n >= 0, "n_segments", "a count")
    measured = [] if raw.get("imported") else ["timing", "memory", "repeat_agreement", "scorer"]
    for key in ["metric", "dataset", "correlation", *measured]:
        need(isinstance(raw.get(key), Mapping), key, "an object")
    record = raw.get("scores_csv")
    need(record is None or (isinstance(record, Mapping) and isinstance(record.get("rows"), int)
                            and isinstance(record.get("sha256"), str)), "scores_csv", "an object with rows and sha256")
    dims = raw["correlation"].get("dimensions")
    sections = list(dims.values()) if isinstance(dims, Mapping) and dims else [raw["correlation"]]
    need(all(isinstance(section, Mapping) and all(
        k in section and (section[k] is None or (isinstance(section[k], (int, float)) and not isinstance(section[k], bool)))
        for k in CORRELATION_FIGURES) for section in sections), "correlation",
        f"an object with the numbers {', '.join(CORRELATION_FIGURES)}")
