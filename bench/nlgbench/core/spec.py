"""Sweep specs: YAML -> validated dataclasses -> cells with deterministic ids. Every check here raises
`UserError` naming the bad key or value, so a wrong spec stops before any model is loaded."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nlgbench.core.cell import CellConfig, DatasetRef, user_registry_files
from nlgbench.core.executor_options import ExecutorOptions, parse_executor
from nlgbench.core.labels import check_spec_labels, label_map, plain_encoder
from nlgbench.data.catalogue import add_catalogue_file, dataset_names, sha256_file, unknown_dataset
from nlgbench.data.hubdata import hub_fingerprint
from nlgbench.data.hubsource import HUB_KEYS, HubSource, check_library
from nlgbench.data.items import ALL_DIMENSIONS
from nlgbench.data.userfile import check_user_file
from nlgbench.encoders.registry import (
    AUTO,
    NO_ENCODER,
    WEIGHTS_PREFIX,
    EncoderRef,
    ResolvedEncoder,
    add_encoders_file,
    check_layers,
    parse_encoder_ref,
    registered_name,
    resolve_encoder,
)
from nlgbench.foundations.devicenames import known_device
from nlgbench.foundations.errors import ErrorLines, UserError, closest
from nlgbench.foundations.files import read_named
from nlgbench.foundations.lazyregistry import load_yaml, yaml_problem
from nlgbench.metrics import get_metric, metric_names
from nlgbench.metrics.alignment import get_aligner
from nlgbench.metrics.baseline_files import baseline_input

if TYPE_CHECKING:
    from nlgbench.metrics.base import MetricInfo

TOP_KEYS = {
    "name",
    "description",
    "datasets",
    "devices",
    "batch_size",
    "batch_tokens",
    "repeats",
    "warmup",
    "threads",
    "metrics",
    "encoders_file",
    "catalogue_file",
    "human",
    "executor",
    "labels",
}
METRIC_KEYS = {"metric", "options", "encoders", "aligners"}
DATASET_KEYS = {"name", "path", "max_segments", "human", "sample", "columns", *HUB_KEYS}
MAX_NAME_CHARS = 100  # a sweep's name (it names the folder reports/<name>)


@dataclass
class MetricEntry:
    metric: str
    options: dict[str, Any]
    encoders: list[EncoderRef]
    aligners: list[str | None]


@dataclass
class SweepSpec:
    name: str
    datasets: list[DatasetRef]
    metrics: list[MetricEntry]
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    batch_sizes: list[int] = field(default_factory=lambda: [64])
    repeats: int = 3
    # Untimed warm-up passes before the repeats, at least this many (0: none): on CUDA over the
    # whole data and on until two consecutive passes agree within 2% (at most max(warmup, 5)); on
    # CPU over a prefix of two batches (nlgbench.measurement.protocol.warmup_policy).
    warmup: int = 1
    threads: int | None = None
    # Per-batch token budgets of model inputs (`batch_tokens: N` or a list, null in it meaning none:
    # an alternative to batch_size for the model's batches; cells are crossed with batch_size);
    # [None]: not set, batch_size texts.
    batch_tokens: list[int | None] = field(default_factory=lambda: [None])
    description: str = ""
    executor: ExecutorOptions | None = None  # how cells are run (nlgbench.execution.slurm); not part of any cell
    labels: dict[str, str] = field(default_factory=dict)  # names figures and tables show (`labels:`); not in ids

    def model_names(self) -> list[str]:
        """Every model the sweep loads: encoders, and models named by metric options (e.g. XMoverScore's `lm`)."""
        names = [e.name for m in self.metrics for e in m.encoders if e.name != NO_ENCODER]
        for m in self.metrics:
            names += [m.options[k] for k in get_metric(m.metric).model_options if m.options.get(k)]
        return list(dict.fromkeys(names))

    @cached_property
    def models(self) -> dict[str, ResolvedEncoder]:
        """`model_names`, each resolved once (`nlgbench.encoders.registry.resolve_encoder`) on first use and
        kept with the spec (not a field: not part of the spec's record), for the weights fingerprints,
        the leakage guard and `run --dry-run`."""
        return {name: resolve_encoder(name) for name in self.model_names()}

    def input_fingerprints(self) -> dict[str, str]:
        """Path -> fingerprint of every local file the sweep reads: user data files (`sha256:...`)
        and local model folders (`weights:...`); read once, when the cells are made. Hugging Face
        datasets have theirs per entry (`dataset_inputs`: two entries may filter one dataset)."""
        out = {ds.path: "sha256:" + sha256_file(Path(ds.path)) for ds in self.datasets if ds.path is not None}
        for name, model in self.models.items():
            fingerprint = model.fingerprint()
            if fingerprint is not None:
                out[name] = WEIGHTS_PREFIX + fingerprint
        return out

    def dataset_inputs(self) -> list[dict[str, str]]:
        """Per dataset entry, what its cells' `inputs` hold for it besides files: for an hf dataset
        {`hf:ID`: `sha256:` of its mapped records} (loaded here, once per process), else {}."""
        return [{ds.hf.key: hub_fingerprint(ds.hf)} if ds.hf is not None else {} for ds in self.datasets]

    def cells(self) -> list[CellConfig]:
        """All cells in a stable order: metric entry, encoder, aligner, dataset, device, batch size, token budget."""
        fingerprints = self.input_fingerprints()
        data_inputs = self.dataset_inputs()
        registry_files = user_registry_files()  # the workers' registries are this process's
        out: list[CellConfig] = []
        for entry in self.metrics:
            models = [entry.options[k] for k in get_metric(entry.metric).model_options if entry.options.get(k)]
            for enc in entry.encoders:
                rescaled = baseline_input(entry.options, self.models.get(enc.name))  # the baseline's digest
                for aligner in entry.aligners:
                    for ds, data_input in zip(self.datasets, data_inputs, strict=True):
                        read = [ds.path, enc.name, *models]
                        inputs = {**data_input, **{p: fingerprints[p] for p in read if p in fingerprints}, **rescaled}
                        for device in self.devices:
                            for bs in self.batch_sizes:
                                for tokens in self.batch_tokens:
                                    out.append(
                                        CellConfig(
                                            metric=entry.metric,
                                            options=dict(sorted(entry.options.items())),
                                            encoder=enc,
                                            aligner=aligner,
                                            dataset=ds,
                                            device=device,
                                            batch_size=bs,
                                            repeats=self.repeats,
                                            warmup=self.warmup,
                                            threads=self.threads,
                                            inputs=inputs,
                                            batch_tokens=tokens,
                                            registry_files=registry_files,
                                        )
                                    )
        unique: dict[str, CellConfig] = {}
        for c in out:
            unique.setdefault(c.cell_id, c)  # the first cell of each id, in order
        return list(unique.values())


# ----------------------------------------------------------------------------- parsing


def _check_keys(raw: dict[str, Any], valid: set[str], where: str) -> None:
    for key in raw:
        if key not in valid:
            hits = closest(str(key), valid)
            hint = f"; did you mean {hits[0]!r}?" if hits else ""
            raise UserError(f"{where}: unknown key {key!r}{hint} (valid: {', '.join(sorted(valid))})")


def _int(raw: Any, where: str, minimum: int) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < minimum:
        raise UserError(f"{where} must be an integer >= {minimum}, got {raw!r}")
    return raw


def _list(raw: Any, where: str) -> list[Any]:
    if isinstance(raw, list):
        if not raw:
            raise UserError(f"{where} must not be empty")
        return raw
    return [raw]


def _human(raw: Any, where: str) -> str | None:
    """A `human:` selection: a dimension's name or `all` (None: not given, i.e. all)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise UserError(f"{where} must be a human dimension's name or 'all', got {raw!r}")
    return None if raw.strip() == ALL_DIMENSIONS else raw.strip()


def _dataset(raw: Any, where: str, base: Path, human: str | None = None) -> DatasetRef:
    """One `datasets:` entry; `human` is the spec-level selection, which the entry's own `human` overrides."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise UserError(f"{where}: a dataset must be a name or a mapping, got {raw!r}")
    _check_keys(raw, DATASET_KEYS, where)
    name, path, hf = raw.get("name"), raw.get("path"), raw.get("hf")
    if sum(given is not None for given in (name, path, hf)) != 1:
        raise UserError(f"{where}: give exactly one of 'name' or 'path', or 'hf' for a Hugging Face dataset")
    hub = None
    if hf is not None:
        check_library(where)
        hub = HubSource.parse({k: v for k, v in raw.items() if k in (*HUB_KEYS, "columns")}, where, base)
    else:
        misplaced = [key for key in HUB_KEYS if key in raw]
        if misplaced:
            raise UserError(f"{where}: {', '.join(misplaced)} belong to Hugging Face entries (hf: ID)")
    if name is not None:
        if not isinstance(name, str) or name not in dataset_names():
            raise unknown_dataset(str(name))
    elif path is not None:
        if not isinstance(path, str):
            raise UserError(f"{where}.path must be a string, got {path!r}")
        p = Path(path).expanduser()
        p = p if p.is_absolute() else (base / p).resolve()
        check_user_file(p)
        path = str(p)
    max_seg = raw.get("max_segments")
    if max_seg is not None:
        max_seg = _int(max_seg, f"{where}.max_segments", 1)
    selected = _human(raw.get("human"), f"{where}.human") or human
    sample = _sample(raw.get("sample"), f"{where}.sample")
    if sample is not None and max_seg is not None:
        raise UserError(f"{where}: give max_segments (the first N per language pair) or sample (a random N), not both")
    columns = [] if hub is not None else raw.get("columns") or []
    if not isinstance(columns, list) or not all(isinstance(c, str) and c.strip() for c in columns):
        raise UserError(f"{where}.columns must be a list of column names to carry into scores.csv, got {columns!r}")
    if columns and name is not None:
        raise UserError(f"{where}.columns: further columns are carried from own data files (path:) only")
    return DatasetRef(
        name=name,
        path=path,
        max_segments=max_seg,
        human=selected,
        sample=sample,
        columns=tuple(dict.fromkeys(c.strip() for c in columns)),
        hf=hub,
    )


def _devices(raw: Any, where: str) -> list[str]:
    """`devices:` (one or a list): cpu, cuda or cuda:N."""
    devices = [str(d) for d in _list(raw, where)]
    for d in devices:
        if not known_device(d):
            raise UserError(f"{where}: unknown device {d!r} (use cpu, cuda or cuda:N)")
    return devices


def _batch_tokens(raw: Any, where: str) -> list[int | None]:
    """`batch_tokens:` (one or a list; null in a list: a cell batched by batch_size alone, beside the
    budgets); [None] when not set."""
    if raw is None:
        return [None]
    return [None if b is None else _int(b, where, 1) for b in _list(raw, where)]


def _sample(raw: Any, where: str) -> tuple[int, int] | None:
    """`sample: {n: N, seed: S}` (seed default 0): a seeded random N per language pair."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a mapping {{n: N, seed: S}}, got {raw!r}")
    _check_keys(raw, {"n", "seed"}, where)
    if "n" not in raw:
        raise UserError(f"{where} needs n (items, or documents where the data names them, per language pair)")
    return _int(raw["n"], f"{where}.n", 1), _int(raw.get("seed", 0), f"{where}.seed", 0)


def _options(metric: str, raw: Any, where: str) -> dict[str, Any]:
    info = get_metric(metric)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a mapping, got {raw!r}")
    _check_keys(raw, set(info.options) | set(info.harness_options), where)
    return info.cell_options(raw, where)


def _check_depths(
    options: dict[str, Any], encoders: list[EncoderRef], models: dict[str, ResolvedEncoder], where: str
) -> None:
    """`layer` and `num_layers` against each encoder's registered depth (before any model is loaded)."""
    for i, enc in enumerate(encoders):
        model = models.get(enc.name)
        entry = model.entry if model is not None else None
        check_layers(enc, entry.layers if entry else None, options.get("layer"), f"{where}.encoders[{i}]")


def _local_folder(enc: EncoderRef, base: Path) -> EncoderRef:
    """A relative encoder path that names a folder beside the spec file becomes absolute."""
    candidate = base / enc.name
    if not Path(enc.name).is_absolute() and not Path(enc.name).is_dir() and candidate.is_dir():
        return replace(enc, name=str(candidate.resolve()))
    return enc


def _registered(enc: EncoderRef) -> EncoderRef:
    """A registered model named by its Hub id is named by its registry name (one cell, one label)."""
    name = registered_name(enc.name)
    return enc if name == enc.name else replace(enc, name=name)


def _encoder(raw: Any, where: str, info: MetricInfo, base: Path) -> tuple[EncoderRef, ResolvedEncoder | None]:
    """One `encoders:` entry, checked against the kinds of model the metric runs, and its model as
    resolved (None for `none`). `none` (no model) is the one entry of a metric that runs none
    (`encoder_kinds` holds NO_ENCODER: the lexical baselines), and only of such a metric."""
    enc = parse_encoder_ref(raw, where)
    models = [kind for kind in info.encoder_kinds if kind != NO_ENCODER]
    if enc.name == NO_ENCODER:
        if NO_ENCODER not in info.encoder_kinds:
            raise UserError(
                f"{where}: metric {info.name!r} needs a {' or '.join(models)} model; "
                f"{NO_ENCODER!r} is for metrics that run no model"
            )
        given = [*enc.variant(), *(["label"] if enc.given_label else [])]
        if given:
            raise UserError(f"{where}: {NO_ENCODER!r} (no model) takes no encoder options, got {', '.join(given)}")
        return enc, None
    if not models:
        raise UserError(
            f"{where}: metric {info.name!r} runs no model; write 'encoders: [{NO_ENCODER}]' or leave "
            f"the key out, got {enc.label!r}"
        )
    runs = ["encoder"] if enc.backend == AUTO else ["encoder", "cross-encoder"]  # auto: compared on encoders only
    if enc.backend is not None and not set(runs) & set(models):
        raise UserError(
            f"{where}: backend {enc.backend} runs token-embedding encoders (bertscore, moverscore, baryscore, sentsim, "
            f"xmoverscore){'' if enc.backend == AUTO else ' and cross-encoders (frugalscore)'}; metric {info.name!r} "
            f"runs a whole {' or '.join(models)} model on torch"
        )
    enc = plain_encoder(_registered(_local_folder(enc, base)), where)  # before the model's messages show it
    model = resolve_encoder(enc.name)
    model.check(where)
    if model.folder is not None:
        enc = replace(enc, local=True)  # labelled by the folder's name
    kind = model.kind
    if kind is not None and kind not in models:
        raise UserError(
            f"{where}: metric {info.name!r} needs a {' or '.join(models)} model; {enc.name} is of kind {kind}"
        )
    return enc, model


def parse_metric_entry(raw: Any, where: str, base: Path) -> MetricEntry:
    """One `metrics:` entry; its options, encoders, model options and aligners are checked each, and
    every error among them is raised together (`ErrorLines`)."""
    if not isinstance(raw, dict):
        raise UserError(f"{where}: must be a mapping with 'metric', got {raw!r}")
    _check_keys(raw, METRIC_KEYS, where)
    name = raw.get("metric")
    if not isinstance(name, str):
        raise UserError(f"{where}.metric is required (one of: {', '.join(metric_names())})")
    info = get_metric(name)
    if "encoders" not in raw and NO_ENCODER not in info.encoder_kinds:
        raise UserError(f"{where}.encoders is required")
    errors = ErrorLines()
    options = errors.attempt(lambda: _options(name, raw.get("options"), f"{where}.options"))
    listed = errors.attempt(lambda: _list(raw.get("encoders", [NO_ENCODER]), f"{where}.encoders")) or []
    parsed = [errors.attempt(partial(_encoder, e, f"{where}.encoders[{i}]", info, base)) for i, e in enumerate(listed)]
    for key, kind in info.model_options.items():
        if options is not None and options.get(key) is not None:
            errors.attempt(partial(_model_option, options[key], kind, f"{where}.options.{key}"))
    aligners = errors.attempt(lambda: _aligners(raw, info, where))
    errors.raise_any()
    assert options is not None and aligners is not None  # no error: every check returned its value
    found = [p for p in parsed if p is not None]
    encoders = [enc for enc, _ in found]
    models = {enc.name: model for enc, model in found if model is not None}
    _check_depths(options, encoders, models, where)
    return MetricEntry(metric=name, options=options, encoders=encoders, aligners=aligners)


def _model_option(name: Any, kind: str, where: str) -> None:
    """A model a metric option names (e.g. XMoverScore's `lm`): known, and of the kind the option needs."""
    model = resolve_encoder(name)
    model.check(where)
    found = model.kind
    if found is not None and found != kind:
        raise UserError(f"{where}: needs a {kind} model; {name} is of kind {found}")


def _aligners(raw: dict[str, Any], info: MetricInfo, where: str) -> list[str | None]:
    """The entry's aligners: `wmd` by default for a metric that takes one, [None] for the others."""
    if "aligners" not in raw:
        return ["wmd"] if info.accepts_aligners else [None]
    if not info.accepts_aligners:
        raise UserError(f"{where}.aligners: metric {info.name!r} takes no aligner")
    return [get_aligner(str(a)).name for a in _list(raw["aligners"], f"{where}.aligners")]


def _user_registries(raw: dict[str, Any], source: str, base: Path) -> None:
    """Merge the spec's own encoder registry / dataset catalogue files (paths relative to the spec) over the
    packaged ones."""
    for key, add in (("encoders_file", add_encoders_file), ("catalogue_file", add_catalogue_file)):
        if key in raw:
            if not isinstance(raw[key], str):
                raise UserError(f"{source}.{key} must be a file path, got {raw[key]!r}")
            path = Path(raw[key]).expanduser()
            try:
                add(path if path.is_absolute() else base / path)
            except UserError as exc:
                raise UserError(f"{source}.{key}: {exc}") from None


def _run_name(name: Any, where: str) -> str:
    """The sweep's name, which also names its default run folder `reports/<name>`: refused (not
    rewritten) unless it is one plain folder name of at most MAX_NAME_CHARS characters."""
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where} must be a non-empty string, got {name!r}")
    shown = name if len(name) <= 40 else name[:40] + "..."
    if len(name) > MAX_NAME_CHARS:
        raise UserError(
            f"{where} {shown!r} is {len(name)} characters; use at most {MAX_NAME_CHARS} "
            "(it names the run folder reports/<name>)"
        )
    if name.strip() in (".", "..") or any(c in name for c in "/\\") or not name.isprintable():
        raise UserError(
            f"{where} {shown!r} is not a plain folder name (no '/' or '\\', not '.' or '..', no "
            "control characters): it names the run folder reports/<name>"
        )
    return name


def parse_spec(raw: Any, source: str = "spec", base: Path | None = None) -> SweepSpec:
    """Validate a loaded YAML document and build the SweepSpec."""
    base = base or Path.cwd()
    if raw is None:
        raise UserError(f"{source}: the spec is empty")
    if not isinstance(raw, dict):
        raise UserError(f"{source}: the spec must be a YAML mapping, got {type(raw).__name__}")
    _check_keys(raw, TOP_KEYS, source)
    _user_registries(raw, source, base)
    for key in ("datasets", "metrics"):
        if key not in raw:
            raise UserError(f"{source}: missing required key {key!r}")
    errors = ErrorLines()  # the checks below are independent: every error is named in one pass
    name = errors.attempt(lambda: _run_name(raw.get("name", Path(source).stem), f"{source}.name"))
    human = errors.attempt(lambda: _human(raw.get("human"), f"{source}.human"))
    listed = errors.attempt(lambda: _list(raw["datasets"], f"{source}.datasets")) or []
    datasets = [
        errors.attempt(partial(_dataset, d, f"{source}.datasets[{i}]", base, human)) for i, d in enumerate(listed)
    ]
    devices = errors.attempt(lambda: _devices(raw.get("devices", ["cpu"]), f"{source}.devices"))
    batch_sizes = errors.attempt(
        lambda: [_int(b, f"{source}.batch_size", 1) for b in _list(raw.get("batch_size", 64), f"{source}.batch_size")]
    )
    batch_tokens = errors.attempt(lambda: _batch_tokens(raw.get("batch_tokens"), f"{source}.batch_tokens"))
    repeats = errors.attempt(lambda: _int(raw.get("repeats", 3), f"{source}.repeats", 1))
    warmup = errors.attempt(lambda: _int(raw.get("warmup", 1), f"{source}.warmup", 0))
    threads = errors.attempt(
        lambda: None if raw.get("threads") is None else _int(raw["threads"], f"{source}.threads", 1)
    )
    entries = errors.attempt(lambda: _list(raw["metrics"], f"{source}.metrics")) or []
    metrics = [
        errors.attempt(partial(parse_metric_entry, m, f"{source}.metrics[{i}]", base)) for i, m in enumerate(entries)
    ]
    executor = errors.attempt(
        lambda: None if raw.get("executor") is None else parse_executor(raw["executor"], f"{source}.executor")
    )
    labels = errors.attempt(lambda: label_map(raw.get("labels"), f"{source}.labels"))
    errors.raise_any()
    assert name is not None and devices and batch_sizes and batch_tokens and repeats is not None and warmup is not None
    checked = [m for m in metrics if m is not None]
    check_spec_labels(checked, labels or {}, source)
    return SweepSpec(
        name=name,
        datasets=[d for d in datasets if d is not None],
        metrics=checked,
        devices=devices,
        batch_sizes=batch_sizes,
        repeats=repeats,
        warmup=warmup,
        threads=threads,
        batch_tokens=batch_tokens,
        description=str(raw.get("description", "")),
        executor=executor,
        labels=labels or {},
    )


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec file."""
    p = Path(path)
    text = read_named(p, "spec file")
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        raise UserError(f"malformed YAML in {p}{yaml_problem(exc)}") from None
    return parse_spec(raw, source=p.name, base=p.resolve().parent)
