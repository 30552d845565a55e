"""A cell's configuration: `DatasetRef` and `CellConfig` (typed, to and from config.json), the cell id
(a hash of the config and the versions that change scores), and the names of a cell folder's files.

The runner writes `cells/<id>/config.json` (`write_config`: the cell id, its label and a `CellConfig`);
the worker reads it (`read_config`), measures, and writes `result.json` (`nlgbench.core.result`) and
`scores.csv` (`nlgbench.core.scores`). The config serialises to exactly the JSON keys and values of the
output contract in docs/architecture.md, which other tools read.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from nlgbench.core.labels import aligner_label, cell_label, dataset_label, metric_label, options_label
from nlgbench.data.catalogue import USER_CATALOGUES
from nlgbench.data.hubsource import HubSource
from nlgbench.data.items import Dataset
from nlgbench.data.loaders import load_dataset
from nlgbench.encoders.registry import AUTO, USER_ENCODERS, WEIGHTS_PREFIX, EncoderRef, backend_version, major_minor
from nlgbench.foundations.deferred import library_version
from nlgbench.foundations.files import write_atomic
from nlgbench.foundations.lazyregistry import UserFiles
from nlgbench.foundations.version import __version__
from nlgbench.metrics import get_metric, metric_names

# An imported cell (`import-scores`: scores computed elsewhere, nothing measured) records device
# `none` and batch size 0 in its config, as it always has: the config is hashed into the cell id, so
# a re-import into an older run folder replaces its cell instead of adding a second one. Every view
# (results.csv, correlations.csv, report, compare) shows `IMPORTED` and no batch size instead
# (`CellConfig.device_label`, `CellConfig.batch_label`).
IMPORTED_DEVICE = "none"  # an imported cell's config device (part of its id)
IMPORTED = "imported"  # how views show an imported cell's device
CONFIG_FILE, RESULT_FILE, SCORES_FILE, TRACEBACK_FILE = "config.json", "result.json", "scores.csv", "traceback.txt"
# The format of the files a run folder holds (result.json's `format`, the store's `user_version`, the
# sidecar of results.csv), written by this nlgbench; older formats and how each is upgraded when read:
# `FORMATS` in nlgbench.runs.migrate.
RUN_FORMAT = 3
# The user registry files a cell's worker merges over the packaged ones, by kind (`registry_files`).
REGISTRY_FILES: dict[str, UserFiles] = {"encoders": USER_ENCODERS, "catalogue": USER_CATALOGUES}


# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class DatasetRef:
    """A catalogue dataset, a user file or a Hugging Face dataset (`hf`), optionally cut to the first N
    items per language pair; `human` selects its human dimension(s) (None: every one, as ``all``)."""

    name: str | None = None
    path: str | None = None
    max_segments: int | None = None
    human: str | None = None
    sample: tuple[int, int] | None = None  # (n, seed): a seeded random subset per language pair
    columns: tuple[str, ...] = ()  # further columns of a user file carried into scores.csv
    hf: HubSource | None = None  # a Hugging Face dataset (nlgbench.data.hubdata); its content hash is in `inputs`

    def __post_init__(self) -> None:
        if isinstance(self.sample, Mapping):  # from JSON: {"n": .., "seed": ..}
            object.__setattr__(self, "sample", (self.sample["n"], self.sample["seed"]))
        object.__setattr__(self, "columns", tuple(self.columns))
        if isinstance(self.hf, Mapping):  # from JSON
            object.__setattr__(self, "hf", HubSource.from_dict(self.hf))

    @property
    def label(self) -> str:
        return dataset_label(self.hf.label if self.hf else self.name, self.path, self.max_segments, self.sample)

    @property
    def input_key(self) -> str | None:
        """The key of the data it reads in a cell's `inputs` (and results.csv's dataset_path): a user
        file's path, an hf dataset's `hf:ID`; None for catalogue data (sha256-checked by the catalogue)."""
        return self.hf.key if self.hf is not None else self.path

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; `human`, `sample`, `columns` and `hf` only where set, so earlier cells keep their ids."""
        out: dict[str, Any] = {"name": self.name, "path": self.path, "max_segments": self.max_segments}
        if self.human is not None:
            out["human"] = self.human
        if self.sample is not None:
            out["sample"] = {"n": self.sample[0], "seed": self.sample[1]}
        if self.columns:
            out["columns"] = list(self.columns)
        if self.hf is not None:
            out["hf"] = self.hf.to_dict()
        return out

    def load(self) -> Dataset:
        """The dataset this reference names, cut or sampled, with its human dimension(s) selected."""
        return load_dataset(
            self.name,
            path=self.path,
            hf=self.hf,
            max_segments=self.max_segments,
            human=self.human,
            sample=self.sample,
            columns=self.columns,
        )


@dataclass(frozen=True)
class CellConfig:
    """What defines a cell (and its id): metric x options x encoder x aligner x dataset x device x
    batch size, plus the protocol's repeats, warm-up passes and threads (None: all cores), and
    where set the per-batch token budget of model inputs (`batch_tokens`; absent from the id's
    config when unset, so cells without it keep their ids).

    `inputs` fingerprints the local files the cell reads, by path: a user data file's
    `sha256:...`, a local model folder's `weights:...` (`nlgbench.encoders.hfcache.content_fingerprint`: its
    config, tokenizer and weight files; the prefix named when it covered the weights only), a rescaled
    BERTScore cell's baseline file's `sha256:...` (`baseline_path`, or `cache:baselines/<fingerprint>.tsv`:
    `nlgbench.metrics.baseline_files.baseline_input`), and under `hf:ID` a Hugging Face dataset's
    `sha256:...` of its mapped records (`nlgbench.data.hubdata.hub_fingerprint`), so changed data, weights,
    tokenizer or baselines make a new cell instead of a skipped one. Catalogue datasets (whose files are
    sha256-checked) and registered or Hub models have none: their ids are unchanged."""

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
    # The user's registry files (`user_registry_files`) the worker merges over the packaged ones before
    # it resolves a name: config.json carries them beside the config; not part of the id, the result or
    # equality (paths of this machine, which name the same encoders and datasets elsewhere).
    registry_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        """A model folder fingerprinted in `inputs` is local: its label is the folder's name."""
        if not self.encoder.local and self.inputs.get(self.encoder.name, "").startswith(WEIGHTS_PREFIX):
            object.__setattr__(self, "encoder", replace(self.encoder, local=True))

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
            metric=raw["metric"],
            options=dict(raw["options"]),
            encoder=EncoderRef.from_dict(raw["encoder"]),
            aligner=raw["aligner"],
            dataset=DatasetRef(**raw["dataset"]),
            device=raw["device"],
            batch_size=raw["batch_size"],
            repeats=raw["repeats"],
            warmup=raw["warmup"],
            threads=raw["threads"],
            inputs=dict(raw.get("inputs") or {}),
            batch_tokens=raw.get("batch_tokens"),
        )

    @property
    def cell_id(self) -> str:
        """The cell's id: a short hash of this config (with its `inputs`' fingerprints) and the
        versions that change scores, so a finished cell is recognised (and skipped) when the same
        sweep runs again on the same data, weights and library versions."""
        return self.id_under({**score_versions(), **metric_versions(self.metric), **backend_versions(self.encoder)})

    def id_under(self, versions: Mapping[str, str]) -> str:
        """The id this config has under the given score-changing versions (`cell_id`: this process's;
        `recorded_score_versions`: those a stored result was measured with)."""
        return short_hash({"config": self.to_dict(), "versions": dict(versions)})

    @property
    def label(self) -> str:
        """The sweep's one-line name of this cell (progress lines, `run --dry-run`)."""
        return cell_label(
            self.metric,
            self.options,
            self.encoder.label,
            self.aligner,
            self.dataset.label,
            self.device,
            self.batch_size,
        )

    @property
    def imported(self) -> bool:
        """Whether the cell's scores were imported (`import-scores`), not measured: device `none`."""
        return self.device == IMPORTED_DEVICE

    @property
    def device_label(self) -> str:
        """The device as views show it: `imported` for an imported cell (older folders too), else the device."""
        return IMPORTED if self.imported else self.device

    @property
    def batch_label(self) -> int | str:
        """The batch size as views show it: blank for an imported cell (nothing was batched here)."""
        return "" if self.imported else self.batch_size

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
    # read without importing them: a cell that runs no model never imports torch
    torch, transformers = library_version("torch", "torch"), library_version("transformers", "transformers")
    return recorded_score_versions({"nlgbench": __version__, "torch": torch, "transformers": transformers})


def recorded_score_versions(environment: Mapping[str, Any]) -> dict[str, str]:
    """The score-changing versions out of full version strings as a result's environment records
    them (`score_versions` passes this process's): with `metric_versions`, what a cell id hashes."""
    return {
        "nlgbench": str(environment["nlgbench"]),
        "torch": major_minor(str(environment["torch"])),
        "transformers": major_minor(str(environment["transformers"])),
    }


@cache
def metric_versions(metric: str) -> dict[str, str]:
    """major.minor of the libraries a metric declares (`MetricInfo.libraries`: sacrebleu for BLEU and
    chrF, rouge-score for ROUGE), part of its cells' ids; {} for the others, whose ids stay as they were."""
    if metric not in metric_names():
        return {}
    out = {}
    for name in get_metric(metric).libraries:
        try:
            out[name] = major_minor(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def backend_versions(encoder: EncoderRef) -> dict[str, str]:
    """major.minor of the inference backend an encoder runs on (`onnxruntime`, `openvino`),
    part of its cells' ids; {} for torch, whose version every id holds already."""
    if encoder.backend is None or encoder.backend == AUTO:  # auto: the result records the backend chosen
        return {}
    return {encoder.backend: major_minor(backend_version(encoder.backend))}


def write_config(cell_dir: Path, cell_id: str, label: str, config: CellConfig) -> None:
    """config.json: what the worker is asked to measure (and its `registry_files`, where there are any)."""
    payload: dict[str, Any] = {"cell_id": cell_id, "label": label, "config": config.to_dict()}
    if config.registry_files:
        payload["registry_files"] = {kind: list(paths) for kind, paths in config.registry_files.items()}
    write_atomic(cell_dir / CONFIG_FILE, json.dumps(payload, indent=2))


def read_config(cell_dir: Path) -> tuple[str, str, CellConfig]:
    """(cell id, label, config) from config.json, the config with its registry files."""
    raw = json.loads((cell_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    files = {kind: tuple(paths) for kind, paths in (raw.get("registry_files") or {}).items()}
    return raw["cell_id"], raw["label"], replace(CellConfig.from_dict(raw["config"]), registry_files=files)


def user_registry_files() -> dict[str, tuple[str, ...]]:
    """This process's user registry files by kind: `$NLGBENCH_ENCODERS` / `$NLGBENCH_CATALOGUE`, then
    those the spec names (`encoders_file`, `catalogue_file`); what its cells' workers merge."""
    return {kind: tuple(str(p) for p in files.paths()) for kind, files in REGISTRY_FILES.items() if files.paths()}


def use_registry_files(files: Mapping[str, Sequence[str]]) -> None:
    """Merge a cell's registry files over this process's registries (the worker, before it resolves a name)."""
    for kind, paths in files.items():
        for path in paths:
            REGISTRY_FILES[kind].add(Path(path))
