"""Encoders as a spec names them: the registry (`encoders.yaml` plus the user's files) and `EncoderRef`.

Everything here works without loading a model: which encoders are registered, what a name
resolves to, what kind of model it is, the variant options a spec may give, and the one
check of layer numbers. The runtime encoder (tokenizer + model) is `nlgbench.encoders.runtime`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from nlgbench.encoders.hfcache import (
    HEAD_FILE,
    HUB_OFF,
    check_model_folder,
    content_fingerprint,
    hub_is_off,
    local_snapshot,
    not_cached,
)
from nlgbench.foundations.deferred import require
from nlgbench.foundations.errors import UserError, closest, unknown_name
from nlgbench.foundations.jsonwalk import map_strings
from nlgbench.foundations.lazyregistry import Registry, UserFiles, read_registry_file
from nlgbench.foundations.package import package_file

ENCODERS_FILE = package_file("encoders.yaml")  # the repository's encoders.yaml, shipped in the package
USER_ENCODERS = UserFiles("NLGBENCH_ENCODERS")  # the user's encoder files, merged over the packaged one
NO_ENCODER = "none"  # the encoder of a metric that runs none (lexical baselines: sentbleu, chrf, rouge)
KINDS = ("encoder", "seq2seq", "causal-lm", "cross-encoder", "feature-head")

# Variant options an encoder may carry in a spec, with their types (see nlgbench.encoders.variants).
VARIANT_OPTIONS: dict[str, type] = {
    "backend": str,  # torch (default), onnxruntime, openvino (nlgbench.encoders.backends), auto (backendchoice)
    "num_layers": int,
    "early_exit": float,
    "quantize": str,
    "dtype": str,
}
TORCH = "torch"
BACKENDS = (TORCH, "onnxruntime", "openvino")  # the backends that run a model (nlgbench.encoders.backends)
# `backend: auto`: the fastest of them that scores equal to torch, measured once per model and machine
# (nlgbench.encoders.backendchoice); float32 token-embedding encoders only.
AUTO = "auto"
# The pip extra that installs a backend's libraries, and the modules it needs (the first: its version).
BACKEND_EXTRAS = {"onnxruntime": "onnx", "openvino": "openvino"}
BACKEND_MODULES = {"onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx", "nncf")}
DTYPE_NAMES = ("fp32", "fp16", "bf16")  # a variant's `dtype` (nlgbench.encoders.variants.DTYPES: the torch dtypes)
QUANTIZE = ("int8",)  # a variant's `quantize`
WEIGHTS_PREFIX = "weights:"  # a cell's `inputs` value for a local model folder: weights:<fingerprint>


@dataclass(frozen=True)
class EncoderEntry:
    """One registered encoder (a row of encoders.yaml)."""

    name: str
    hub_id: str
    family: str
    kind: str
    layers: int | None
    default_layers: dict[str, int]
    multilingual: bool
    notes: str


def registry() -> Registry[EncoderEntry]:
    """All registered encoders: the packaged encoders.yaml, then the user's files over it."""
    return _registry((ENCODERS_FILE, *USER_ENCODERS.paths()))


@lru_cache(maxsize=8)
def _registry(paths: tuple[Path, ...]) -> Registry[EncoderEntry]:
    reg: Registry[EncoderEntry] = Registry("encoder", EncoderEntry)
    for path in paths:
        for name, raw in read_registry_file(path, "encoders", "encoder registry").items():
            reg.register(str(name), _entry(str(name), raw, path))
    return reg


def add_encoders_file(path: Path) -> None:
    """Merge a user's encoder file (a sweep spec's `encoders_file`) over the registry from now on; checked first."""
    _registry((path.expanduser().resolve(),))
    USER_ENCODERS.add(path)


def _entry(name: str, raw: Any, path: Path) -> EncoderEntry:
    """An EncoderEntry from one YAML entry; one-line UserError naming the file and entry if malformed."""
    where = f"encoder registry {path}: entry {name!r}"
    if not isinstance(raw, dict) or not isinstance(raw.get("hub_id"), str):
        raise UserError(f"{where} needs a 'hub_id' string")
    layers = raw.get("layers")
    if layers is not None and (not isinstance(layers, int) or isinstance(layers, bool) or layers < 1):
        raise UserError(f"{where}: layers must be an integer >= 1, got {layers!r}")
    kind = str(raw.get("kind", "encoder"))
    if kind not in KINDS:
        raise UserError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    default_layers = raw.get("default_layers") or {}
    if not isinstance(default_layers, dict) or not all(isinstance(v, int) for v in default_layers.values()):
        raise UserError(f"{where}: default_layers must map metric names to layer numbers, got {default_layers!r}")
    return EncoderEntry(
        name=name,
        hub_id=raw["hub_id"],
        family=str(raw.get("family", "")),
        kind=kind,
        layers=layers,
        default_layers=dict(default_layers),
        multilingual=bool(raw.get("multilingual", False)),
        notes=str(raw.get("notes", "")),
    )


def find_entry(name: str) -> EncoderEntry | None:
    """The registry entry for a registry name or a registered Hub id, else None."""
    reg = registry()
    if name in reg:
        return reg.get(name)
    for _, entry in reg.items():
        if entry.hub_id == name:
            return entry
    return None


def resolve_source(name: str) -> str:
    """What `from_pretrained` gets: a local folder, or the Hub id of a registry name / Hub id."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser().resolve())
    entry = find_entry(name)
    return entry.hub_id if entry else name


def registered_name(name: str) -> str:
    """The registry name of a registered Hub id (`sentence-transformers/all-MiniLM-L6-v2` ->
    `all-MiniLM-L6-v2`), so both spellings of one model are one cell; any other name unchanged."""
    if name in registry() or Path(name).expanduser().is_dir():
        return name
    entry = find_entry(name)
    return entry.name if entry else name


@dataclass(frozen=True)
class ResolvedEncoder:
    """A model name (an encoder, or a model a metric option names) resolved once, by `resolve_encoder`,
    against the registry, the local disk and the Hugging Face cache; it travels from the spec to
    the checks that need it (kind, validity, weights fingerprint, leakage guard, ETA, `--dry-run`).
    A snapshot of the disk when resolved: a model downloaded afterwards is not in it."""

    name: str  # as given
    source: str  # what `from_pretrained` gets (`resolve_source`)
    entry: EncoderEntry | None  # the registry entry of a registry name or registered Hub id
    folder: Path | None  # the local folder the name is, if it is one (as given, `~` expanded)
    snapshot: Path | None  # the local folder with a config.json, or the cached `refs/main` snapshot; None: not local

    @property
    def kind(self) -> str | None:
        """What the model is: the registry's kind, else read from the local/cached config.json; None if unknown.

        Kinds: "encoder", "seq2seq" (encoder-decoder), "causal-lm", "cross-encoder" (one-output
        sequence classifier), "feature-head" (a folder with `HEAD_FILE`: an encoder and a fitted head).
        """
        if self.entry is not None:
            return self.entry.kind
        if self.snapshot is None:
            return None
        if (self.snapshot / HEAD_FILE).is_file():
            return "feature-head"
        config = json.loads((self.snapshot / "config.json").read_text(encoding="utf-8"))
        archs = " ".join(config.get("architectures") or [])
        if config.get("is_encoder_decoder"):
            return "seq2seq"
        if "CausalLM" in archs or "LMHeadModel" in archs:
            return "causal-lm"
        if "ForSequenceClassification" in archs:
            return "cross-encoder"
        return "encoder"

    def fingerprint(self) -> str | None:
        """The content fingerprint of a local model folder (`nlgbench.encoders.hfcache.content_fingerprint`:
        its config, tokenizer and weight files); None for a registered name or Hub id (their name and revision
        identify them)."""
        return content_fingerprint(self.folder) if self.folder is not None else None

    def check(self, where: str) -> None:
        """Reject names that are neither a local folder, cached, nor (online) a registered name or Hub id, and
        model folders that cannot load (`nlgbench.encoders.hfcache.check_model_folder`): a local folder must be
        complete; a cached snapshot must have a valid config.json and intact weight files."""
        name = self.name
        if not name.strip():  # Path("") is the current folder: an empty name must not load it as a model
            raise UserError(f"{where}: the model name is empty")
        try:
            if self.folder is not None:
                check_model_folder(self.folder)
                return
            if self.snapshot is not None:
                check_model_folder(self.snapshot, need_weights=False)
                return
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        offline, entry = hub_is_off(), self.entry
        if entry and offline:  # it would only fail later, inside the cell, with transformers' OSError
            raise UserError(f"{where}: {not_cached(f'encoder {name!r} ({entry.hub_id})', entry.hub_id, HUB_OFF)}")
        if entry:
            return
        if is_path_name(name):
            raise UserError(f"{where}: model folder {name!r} does not exist ({Path(name).expanduser().resolve()})")
        if name.count("/") == 1 and all(name.split("/")):  # a Hub id: downloaded on first use unless the Hub is off
            if offline:
                raise UserError(f"{where}: {not_cached(f'model {name!r}', name, HUB_OFF)}")
            return
        err = unknown_name("encoder", name, registry().names())
        reason = "not a registered name, a local folder, or a model in the local Hugging Face cache"
        raise UserError(f"{where}: {err} — {reason}")


def resolve_encoder(name: str) -> ResolvedEncoder:
    """`name` resolved once: its source, registry entry, local folder and local snapshot."""
    path = Path(name).expanduser()
    source = resolve_source(name)
    return ResolvedEncoder(
        name=name,
        source=source,
        entry=find_entry(name),
        folder=path if path.is_dir() else None,
        snapshot=local_snapshot(source),
    )


# ----------------------------------------------------------------------------- references in specs


@dataclass(frozen=True)
class EncoderRef:
    """An encoder as a spec names it: registry name, Hub id or local folder, plus variant options and
    the spec's `label:` (`given_label`).

    `local` says that the name is a local model folder (the spec found it on disk, or the cell's
    `inputs` hold its weights fingerprint); it only changes the label, so it is neither compared nor
    serialised."""

    name: str
    num_layers: int | None = None  # keep only the first N layers
    early_exit: float | None = None  # DeeBERT-style exit threshold (entropy, or relative change)
    quantize: str | None = None  # "int8": dynamic quantisation of linear layers (CPU)
    dtype: str | None = None  # "fp32", "fp16", "bf16"
    backend: str | None = None  # "onnxruntime", "openvino"; None: torch (`backend: torch` is normalised to None)
    given_label: str | None = None  # the spec's `label:`; part of the config (and id) only where given
    local: bool = field(default=False, compare=False)

    @property
    def label(self) -> str:
        """Short human-readable name used in tables: the model's name (`model_label`) with the variant
        options set, e.g. `all-MiniLM-L6-v2[num_layers=3]`, `student-minilm[quantize=int8]`."""
        opts = self.variant()
        base = self.given_label or model_label(self.name, self.local)
        return base + (f"[{','.join(f'{k}={v}' for k, v in opts.items())}]" if opts else "")

    def variant(self) -> dict[str, Any]:
        """The variant options that are set."""
        return {k: getattr(self, k) for k in VARIANT_OPTIONS if getattr(self, k) is not None}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (config.json, result.json, cell ids): name, variant options, and `label` only
        where the spec gave one, so cells without it keep their ids."""
        return {"name": self.name, **self.variant(), **({"label": self.given_label} if self.given_label else {})}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EncoderRef:
        """The reference `to_dict` wrote (not marked `local`: `CellConfig` does that from its inputs)."""
        return cls(**{k: v for k, v in raw.items() if k != "label"}, given_label=raw.get("label"))


def is_path_name(name: str) -> bool:
    """Whether a model name is written as a path of a machine: absolute (`/...`, `C:\\...`), from the
    home or current folder (`~`, `./`, `../`), with a backslash, or with two or more `/` (a Hub id
    has one). A relative `folder/model` reads as a Hub id here: the spec marks it `local` instead."""
    return (
        name.startswith(("/", "~", "./", "../"))
        or "\\" in name
        or name.count("/") >= 2
        or bool(PureWindowsPath(name).drive)
    )


def model_label(name: str, local: bool = False) -> str:
    """How tables name a model: a local folder (`local`, or a name written as a path, `is_path_name`)
    by its last part, `student-minilm` for `/data/models/student-minilm`, so no path of the machine
    that ran a cell reaches results.csv, reports or compare; any other name as it is."""
    if not (local or is_path_name(name)):
        return name
    last = PureWindowsPath(name).name if "\\" in name or PureWindowsPath(name).drive else PurePosixPath(name).name
    return last or name


def without_machine_paths(value: Any) -> Any:
    """A JSON-ready value with every absolute path (a whole string, or a mapping's key: `/data/models/student`,
    `~/x.jsonl`, `C:\\data\\x.tsv`) replaced by its last part (`model_label`); other values unchanged."""

    def local(text: str) -> str:
        absolute = text.startswith(("/", "~", "\\")) or PureWindowsPath(text).drive
        return model_label(text, local=True) if absolute else text

    return map_strings(value, local)


def check_label(label: Any, where: str) -> str:
    """A spec's `label:` of an encoder: plain text, one line, no `/`, `\\`, `[`, `]` or `|` (it stands
    for a model name in labels, beside variant options and cell-label separators)."""
    if not isinstance(label, str) or not label.strip():
        raise UserError(f"{where}: label must be a non-empty string, got {label!r}")
    bad = sorted({c for c in label if c in "/\\[]|"})
    if bad or not label.isprintable():
        shown = ", ".join(repr(c) for c in bad) if bad else "a control character"
        raise UserError(f"{where}: label {label!r} may not contain {shown} (it names the model in tables)")
    return label.strip()


def parse_encoder_ref(raw: Any, where: str) -> EncoderRef:
    """Build an EncoderRef from a spec value: a string or `{name: ..., num_layers: ..., label: ...}`."""
    if isinstance(raw, str):
        return EncoderRef(name=raw)
    if not isinstance(raw, dict) or "name" not in raw or not isinstance(raw["name"], str):
        raise UserError(f"{where}: an encoder must be a name or a mapping with 'name', got {raw!r}")
    opts: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("name", "label"):
            continue
        if key not in VARIANT_OPTIONS:
            valid = [*VARIANT_OPTIONS, "label"]
            hits = closest(key, valid)
            hint = f"; did you mean {hits[0]!r}?" if hits else ""
            raise UserError(f"{where}: unknown encoder option {key!r}{hint} (valid: {', '.join(valid)})")
        want = VARIANT_OPTIONS[key]
        if want is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)  # an integer threshold is accepted as a float
        elif not isinstance(value, want) or isinstance(value, bool):
            raise UserError(f"{where}: encoder option {key!r} must be {want.__name__}, got {value!r}")
        opts[key] = value
    _check_variant(opts, where)
    label = check_label(raw["label"], f"{where}.label") if "label" in raw else None
    return EncoderRef(name=raw["name"], **opts, given_label=label)


def _check_variant(opts: dict[str, Any], where: str) -> None:
    if opts.get("num_layers") is not None and opts["num_layers"] < 1:
        raise UserError(f"{where}: num_layers must be >= 1, got {opts['num_layers']}")
    if opts.get("early_exit") is not None and not opts["early_exit"] > 0:
        raise UserError(f"{where}: early_exit is a threshold > 0, got {opts['early_exit']}")
    if opts.get("quantize") is not None and opts["quantize"] not in QUANTIZE:
        raise UserError(f"{where}: quantize must be one of {', '.join(QUANTIZE)}, got {opts['quantize']!r}")
    if opts.get("dtype") is not None and opts["dtype"] not in DTYPE_NAMES:
        raise UserError(f"{where}: dtype must be one of {', '.join(DTYPE_NAMES)}, got {opts['dtype']!r}")
    if opts.get("quantize") and opts.get("dtype") not in (None, "fp32"):
        raise UserError(f"{where}: quantize int8 runs float32 activations; drop dtype {opts['dtype']!r}")
    if opts.get("backend") is not None:
        check_backend(opts["backend"], where)
        if opts["backend"] == TORCH:
            del opts["backend"]  # the default: the same cell (and id) as no backend key
        elif opts["backend"] == AUTO:
            check_auto_options(opts.get("quantize"), opts.get("dtype"), opts.get("early_exit"), where)
        else:
            try:
                check_backend_options(opts["backend"], opts.get("quantize"), opts.get("dtype"), opts.get("early_exit"))
                for module in BACKEND_MODULES[opts["backend"]]:  # installed: not first found missing in a cell
                    require(module, BACKEND_EXTRAS[opts["backend"]], f"backend {opts['backend']}")
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None


def check_backend(name: str, where: str) -> None:
    """A spec's `backend` value."""
    if name not in (*BACKENDS, AUTO):
        raise UserError(f"{where}: backend must be one of {', '.join((*BACKENDS, AUTO))}, got {name!r}")


def installed_backends() -> list[str]:
    """torch, then each float32 backend whose libraries are installed (found without importing them)."""
    found = [TORCH]
    for name in BACKENDS:
        needed = [m for m in BACKEND_MODULES.get(name, ()) if m != "nncf"]  # NNCF: only for int8 weights
        if name != TORCH and all(importlib.util.find_spec(m) is not None for m in needed):
            found.append(name)
    return found


def backend_version(backend: str) -> str:
    """The backend library's version ("" for torch, whose version every cell records anyway)."""
    if backend == TORCH:
        return ""
    try:
        return importlib.metadata.version(BACKEND_MODULES[backend][0])
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def major_minor(version: str) -> str:
    """`2.13` of `2.13.0+cpu`: the part of a library's version that cell ids hold."""
    return ".".join(version.split("+")[0].split(".")[:2])


def check_backend_options(backend: str, quantize: str | None, dtype: str | None, early_exit: float | None) -> None:
    """What a (non-torch) backend cannot combine with, refused before loading (one line each)."""
    if early_exit is not None:
        raise UserError(f"backend {backend}: early_exit needs torch (its layers are wrapped in Python); drop one")
    if dtype == "fp16":
        raise UserError(f"backend {backend}: dtype fp16 is not offered on CPU; use dtype bf16 with openvino, or torch")
    if dtype == "bf16" and backend != "openvino":
        raise UserError(f"backend {backend}: no bf16 CPU kernels; use backend openvino or torch for dtype bf16")
    if dtype == "bf16" and quantize:
        raise UserError(f"backend {backend}: quantize int8 and dtype bf16 exclude each other")


def own_arithmetic(quantize: Any, dtype: Any, early_exit: Any) -> list[str]:
    """The variant options set that fix an encoder's arithmetic (`quantize`, a `dtype` other than fp32,
    `early_exit`), as `name value`: with any of them `backend: auto`, which compares exact float32
    backends, has nothing to choose among."""
    fixed = (("quantize", quantize), ("dtype", None if dtype == "fp32" else dtype), ("early_exit", early_exit))
    return [f"{name} {value}" for name, value in fixed if value is not None]


def check_auto_options(quantize: str | None, dtype: str | None, early_exit: float | None, where: str) -> None:
    """`backend: auto` compares exact float32 backends: a variant with its own arithmetic names its backend."""
    given = own_arithmetic(quantize, dtype, early_exit)
    if given:
        raise UserError(
            f"{where}: backend auto chooses among exact float32 backends; with {', '.join(given)} name the backend "
            "(torch, onnxruntime, openvino)"
        )


def check_layers(ref: EncoderRef, depth: int | None, layer: int | None, where: str) -> None:
    """The one check of layer numbers: `layer` >= 0, and neither `num_layers` nor `layer` deeper than kept.

    `depth` is the model's number of layers where known (the registry's `layers` before
    loading, the counted stack after), else None; `layer` is the deepest layer a metric reads.
    """
    if layer is not None and layer < 0:
        raise UserError(f"{where}: layer must be >= 0, got {layer}")
    if depth is not None and ref.num_layers is not None and ref.num_layers > depth:
        raise UserError(f"{where}: num_layers={ref.num_layers} but {ref.name} has only {depth} layers")
    keep = ref.num_layers if ref.num_layers is not None else depth
    if layer is not None and keep is not None and layer > keep:
        raise UserError(f"{where}: layer={layer} but encoder {ref.label} has only {keep} layers")


def default_layer(ref: EncoderRef, metric: str) -> int | None:
    """The registry's tuned layer of `metric` for this encoder, within the layers it keeps; None if none."""
    entry = find_entry(ref.name)
    layer = entry.default_layers.get(metric) if entry else None
    if layer is not None and ref.num_layers is not None:
        layer = min(layer, ref.num_layers)
    return layer
