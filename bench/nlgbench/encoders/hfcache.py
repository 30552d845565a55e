"""Local model folders and the Hugging Face hub cache (offline model placement and sizing).

`import_model` copies a model folder into the hub cache layout
(`<cache>/models--org--name/snapshots/<commit>/`, `refs/<revision>`) so that
`from_pretrained("org/name")` works with `HF_HUB_OFFLINE=1`. Files are copied into the
snapshot directly (no `blobs/` symlinks), which the hub library accepts as well.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from nlgbench.foundations.digests import cached_file_sha256
from nlgbench.foundations.errors import UserError

#: Files never copied from a source folder (operating-system litter).
JUNK_FILES = frozenset({"desktop.ini", "thumbs.db", ".ds_store"})
JUNK_DIRS = frozenset({"__macosx", ".git", ".cache"})

#: `.bin` files in model folders that hold no model weights.
NON_WEIGHT_BINS = frozenset({"optimizer.bin", "scheduler.bin", "training_args.bin", "scaler.bin", "rng_state.bin"})

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache_dir() -> Path:
    """The hub cache directory, from the environment as it is now.

    Order as in huggingface_hub: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE (legacy),
    HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
    """
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(var)
        if value:
            return Path(os.path.expandvars(value)).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def check_hub_id(hub_id: str) -> str:
    """`hub_id` if it looks like "name" or "org/name", else UserError."""
    ok = (
        bool(_HUB_ID.match(hub_id))
        and "--" not in hub_id
        and ".." not in hub_id
        and not hub_id.endswith((".", "-"))
        and len(hub_id) <= 96
    )
    if not ok:
        raise UserError(f"bad Hub id {hub_id!r}: expected 'name' or 'org/name' (letters, digits, '-', '_', '.')")
    return hub_id


def repo_dir(hub_id: str, cache: Path | None = None) -> Path:
    """The cache folder of model repository `hub_id` (it may not exist)."""
    check_hub_id(hub_id)
    return (cache or hub_cache_dir()) / ("models--" + hub_id.replace("/", "--"))


def _is_junk(rel: Path) -> bool:
    parts = [p.lower() for p in rel.parts]
    return parts[-1] in JUNK_FILES or any(p in JUNK_DIRS for p in parts[:-1])


def _source_files(src: Path) -> list[Path]:
    """Relative paths of the files to import from `src`, sorted, junk left out."""
    files = []
    for path in src.rglob("*"):
        if path.is_file():
            rel = path.relative_to(src)
            if not _is_junk(rel):
                files.append(rel)
    return sorted(files, key=lambda p: p.as_posix())


def folder_commit(src: Path) -> str:
    """Deterministic 40-hex sha1 over the imported files' relative names and contents."""
    digest = hashlib.sha1()
    for rel in _source_files(src):
        name = rel.as_posix().encode("utf-8")
        digest.update(len(name).to_bytes(8, "big") + name)
        path = src / rel
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def check_model_folder(folder: Path, *, need_weights: bool = True) -> None:
    """A model folder that can be loaded, or a one-line UserError: config.json a JSON object, weights
    present (`need_weights`; a Hub cache snapshot may lack files the Hub would still send) and intact
    as far as their headers tell (`check_weight_file`). Cheap: no tensor is read."""
    folder = Path(folder)
    where = f"model folder {str(folder)!r}"
    if not folder.is_dir():
        raise UserError(f"{where} does not exist or is not a directory")
    config = folder / "config.json"
    if not config.is_file():
        raise UserError(f"{where} has no config.json")
    try:
        parsed = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read config.json: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{where}: config.json is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(parsed, dict):
        raise UserError(f"{where}: config.json must hold a JSON object, got {type(parsed).__name__}")
    files = weight_files(folder)
    if need_weights and not files:
        raise UserError(f"{where} has no weight file (*.safetensors or pytorch_model.bin)")
    for path in files:
        check_weight_file(path, where)


#: Bytes per element of the safetensors dtypes.
SAFETENSORS_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
MAX_SAFETENSORS_HEADER = 100 * 2**20  # the format's own limit on the JSON header


def safetensors_header(path: Path) -> bytes:
    """The JSON header of a safetensors file (an 8-byte little-endian length, then that many bytes);
    UserError if the file is too short to hold it."""
    with path.open("rb") as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            raise UserError(f"{path} is not a safetensors file ({len(prefix)} bytes; truncated?)")
        length = int.from_bytes(prefix, "little")
        if length > MAX_SAFETENSORS_HEADER:
            raise UserError(f"{path} is not a safetensors file (header length {length} bytes; corrupt?)")
        header = fh.read(length)
    if len(header) < length:
        raise UserError(f"{path} is truncated: {len(header) + 8} bytes, its header alone needs {length + 8}")
    return header


def check_weight_file(path: Path, where: str) -> None:
    """A weight file whose header says it is complete: a safetensors header that parses, every
    tensor's bytes match its shape and the file holds them all; a `.bin` not empty and, if a zip
    (torch.save's format), with its directory at the end."""
    try:
        size = path.resolve().stat().st_size
        if path.suffix != ".safetensors":
            if size == 0:
                raise UserError(f"{where}: {path.name} is empty")
            with path.open("rb") as fh:
                is_zip = fh.read(2) == b"PK"
            if is_zip and not zipfile.is_zipfile(path):
                raise UserError(f"{where}: {path.name} is a truncated or corrupt zip (torch.save) file")
            return
        header = safetensors_header(path)
    except OSError as exc:
        raise UserError(f"{where}: cannot read {path.name}: {exc.strerror or exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    try:
        tensors = json.loads(header)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UserError(f"{where}: {path.name} has a corrupt safetensors header (not JSON)") from None
    if not isinstance(tensors, dict):
        raise UserError(f"{where}: {path.name} has a corrupt safetensors header (not a JSON object)")
    end = 0
    for name, info in tensors.items():
        if name == "__metadata__":
            continue
        try:
            begin, stop = info["data_offsets"]
            need = math.prod(info["shape"]) * SAFETENSORS_DTYPE_BYTES.get(info["dtype"], 0)
        except (TypeError, KeyError, ValueError):
            raise UserError(f"{where}: {path.name} has a corrupt safetensors header (tensor {name!r})") from None
        if not 0 <= begin <= stop or (need and stop - begin != need):
            raise UserError(f"{where}: {path.name} has a corrupt safetensors header (offsets of tensor {name!r})")
        end = max(end, stop)
    if size < 8 + len(header) + end:
        raise UserError(
            f"{where}: {path.name} is truncated: {size} bytes, its header describes {8 + len(header) + end}"
        )


def load_options(source: str) -> dict[str, bool]:
    """`from_pretrained` options for `source`: `local_files_only` where its snapshot is on disk. Without
    it transformers asks the Hub on every load even for a cached model (round trips per cell, and long
    retries on a machine without network and without HF_HUB_OFFLINE); with it the cell reads exactly the
    snapshot its id was computed from."""
    return {"local_files_only": True} if local_snapshot(source) is not None else {}


# A local model folder holding this file is a feature-head student (an encoder and a fitted head over its
# features: `nlgbench.metrics.featurehead`), scored by the frugalscore metric.
HEAD_FILE = "head.json"
#: Besides config.json and the weight files (`weight_files`): the files a model folder's loading reads where
#: present. The tokenizer's: every transformers tokenizer class's `vocab_files_names`, the special and added
#: tokens, the chat template; the model's: a sharded checkpoint's index, a generative model's
#: generation_config.json, an adapter's config (read by `from_pretrained` where peft is installed); a distilled
#: student's: its fitted feature head (`head.json`, scored by FrugalScore) and its training record
#: (`distill.json`, whose digest FrugalScore's scorer names the student by).
LOADED_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "chat_template.jinja",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "bpe.codes",
        "dict.txt",
        "entity_vocab.json",
        "target_vocab.json",
        "vocab-src.json",
        "vocab-tgt.json",
        "normalizer.json",
        "byte_maps.json",
        "emoji.json",
        "word_shape.json",
        "word_pronunciation.json",
        "prophetnet.tokenizer",
        "generation_config.json",
        "adapter_config.json",
        HEAD_FILE,
        "distill.json",
    }
)
#: Loaded files known by their form: sentencepiece models (transformers takes any `*.model`: spiece.model,
#: sentencepiece.bpe.model, tokenizer.model ...), Marian's `*.spm`, versioned fast-tokenizer files
#: (`tokenizer.<version>.json`) and shard indexes (`model.safetensors.index.json`).
LOADED_PATTERNS = ("*.model", "*.spm", "tokenizer.*.json", "*.index.json")


def loaded_files(folder: Path) -> list[Path]:
    """The one list of the files of a model folder that loading its tokenizer and model reads: config.json,
    the tokenizer and model files present (`LOADED_FILES`, `LOADED_PATTERNS`), sorted by name, then the
    weight files. Other files (a README, training logs) change no score and are left out. A loaded
    name that is not a regular file (a folder, a FIFO) is refused: it would block or break the loading."""
    folder = Path(folder)
    named = {folder / name for name in LOADED_FILES} | {p for pattern in LOADED_PATTERNS for p in folder.glob(pattern)}
    present = sorted((p for p in named if p.exists() or p.is_symlink()), key=lambda p: p.name)
    for path in present:
        if not path.is_file():
            raise UserError(
                f"model folder {str(folder)!r}: {path.name} is not a regular file (a folder, FIFO or dangling link)"
            )
    return [folder / "config.json", *present, *weight_files(folder)]


def content_fingerprint(folder: Path) -> str:
    """16 hex digits identifying what a local model folder loads (`loaded_files`: config, tokenizer and
    weights): the sha256 over each file's name and the sha256 of its bytes (`cached_file_sha256`: read
    once, then remembered while the file's stat is unchanged). Part of a cell's id (`inputs`, as
    `weights:...`), of a scorer's signature, of the export cache's key and of the cached baseline's
    key, so a changed tokenizer or weights are measured again even where sizes and mtimes are not."""
    digest = hashlib.sha256()
    for path in loaded_files(folder):
        digest.update(f"\0{path.name}\0{cached_file_sha256(path)}\0".encode())
    return digest.hexdigest()[:16]


def import_model(src: Path, hub_id: str, *, revision: str = "main") -> Path:
    """Copy model folder `src` into the hub cache as `hub_id`; return the snapshot folder.

    Idempotent: the same files give the same commit, and an existing snapshot is reused.
    The snapshot is built in a temporary folder and renamed into place, and
    `refs/<revision>` is written last, so an interrupted import is never referenced.
    """
    src = Path(src).expanduser()
    check_hub_id(hub_id)
    if not revision or "/" in revision or revision.startswith("."):
        raise UserError(f"bad revision {revision!r}: expected a branch name such as 'main'")
    check_model_folder(src)

    repo = repo_dir(hub_id)
    commit = folder_commit(src)
    snapshot = repo / "snapshots" / commit
    try:
        if not snapshot.is_dir():
            (repo / "snapshots").mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".nlgbench-import-", dir=repo))
            try:
                for rel in _source_files(src):
                    dest = tmp / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src / rel, dest)
                try:
                    tmp.rename(snapshot)
                except OSError:
                    if not snapshot.is_dir():  # not a concurrent import of the same files
                        raise
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        refs = repo / "refs"
        refs.mkdir(parents=True, exist_ok=True)
        ref_tmp = refs / f".{revision}.{os.getpid()}.tmp"
        ref_tmp.write_text(commit, encoding="utf-8")
        os.replace(ref_tmp, refs / revision)
    except OSError as exc:
        raise UserError(f"cannot import {str(src)!r} as {hub_id!r} into {str(repo)!r}: {exc}") from exc
    return snapshot


def local_snapshot(name_or_path: str) -> Path | None:
    """A local model folder (a directory with config.json) or the cached `refs/main` snapshot of a Hub id."""
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    try:
        repo = repo_dir(name_or_path)
    except UserError:
        return None
    ref = repo / "refs" / "main"
    if not ref.is_file():
        return None
    commit = ref.read_text(encoding="utf-8").strip()
    if not _COMMIT.match(commit):
        return None
    snapshot = repo / "snapshots" / commit
    if snapshot.is_dir() and (snapshot / "config.json").exists():
        return snapshot
    return None


HUB_OFF = "the Hub is off (HF_HUB_OFFLINE=1)"  # how the Hub stands, in messages of `not_cached`


def hub_is_off() -> bool:
    """Whether the Hub is off (models read from the local cache only), read as huggingface_hub reads it:
    HF_HUB_OFFLINE, else TRANSFORMERS_OFFLINE, being 1, on, yes or true."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def not_cached(shown: str, hub_id: str, hub: str) -> UserError:
    """`shown` (e.g. "model 'org/name'") is not cached while `hub` (how the Hub stands) keeps it from coming."""
    return UserError(
        f"{shown} is not in the local Hugging Face cache and {hub}: download it where the Hub is "
        f"reachable, or copy a folder in with `nlgbench models import FOLDER --as {hub_id}`"
    )


def reach_hub(source: str) -> None:
    """Before a model that is not on disk is loaded: one request (no retries) for its config.json, so an
    unreachable Hub or an unknown id is one line now instead of a minute of retries and two tracebacks
    inside `from_pretrained`. A local folder or a cached snapshot asks nothing."""
    if local_snapshot(source) is not None or Path(source).expanduser().is_dir():
        return
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    try:
        get_hf_file_metadata(hf_hub_url(source, "config.json"))
    except OfflineModeIsEnabled:
        raise not_cached(f"model {source!r}", source, HUB_OFF) from None
    except RepositoryNotFoundError:
        raise UserError(
            f"model {source!r} is not on the Hugging Face Hub ({constants.ENDPOINT}), or is private or gated "
            "(a token in HF_TOKEN reads those): check the name"
        ) from None
    except HfHubHTTPError:
        return  # the Hub answered: from_pretrained says what the repository lacks
    except Exception as exc:  # the transport's own errors (refused, no route, timeout): httpx's or requests'
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        hub = f"the Hub cannot be reached ({constants.ENDPOINT}: {reason}; HF_HUB_OFFLINE=1 skips asking it)"
        raise not_cached(f"model {source!r}", source, hub) from None


def weight_files(folder: Path) -> list[Path]:
    """The model weight files of `folder`: `*.safetensors`, else `pytorch_model*.bin`, else other weight `.bin`s."""
    folder = Path(folder)
    safetensors = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if safetensors:
        return safetensors
    bins = sorted(p for p in folder.glob("pytorch_model*.bin") if p.is_file())
    if bins:
        return bins
    return sorted(
        p
        for p in folder.glob("*.bin")
        if p.is_file() and p.name not in NON_WEIGHT_BINS and not p.name.startswith(("rng_state", "optimizer"))
    )


def disk_bytes(folder: Path) -> int:
    """Bytes of the weight files of `folder` as stored (symlinks resolved)."""
    return sum(p.resolve().stat().st_size for p in weight_files(folder))


def checkpoint_params(folder: Path) -> int:
    """Number of parameters stored in the weight files of `folder`, without loading the weights.

    Floating-point tensors only: integer buffers some checkpoints carry (`position_ids`) are
    not parameters.
    """
    files = weight_files(folder)
    if not files:
        raise UserError(f"model folder {str(folder)!r} has no weight file (*.safetensors or pytorch_model.bin)")
    total = 0
    for path in files:
        if path.suffix == ".safetensors":
            total += _safetensors_params(path)
        else:
            total += _bin_params(path)
    return total


def _safetensors_params(path: Path) -> int:
    from safetensors import safe_open

    total = 0
    with safe_open(str(path), framework="pt") as fh:
        for key in fh.keys():
            tensor = fh.get_slice(key)
            if tensor.get_dtype().startswith(("F", "BF")):  # F32, F16, BF16, F8_*
                total += math.prod(tensor.get_shape())
    return total


def _bin_params(path: Path) -> int:
    """Parameters of a torch pickle checkpoint; tensors sharing storage (tied weights) count once."""
    import torch

    try:
        state = torch.load(str(path), map_location="cpu", mmap=True, weights_only=True)
    except RuntimeError:  # legacy (non-zip) format cannot be memory-mapped
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    total = 0
    for tensor in state.values():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            continue
        key = (tensor.untyped_storage().data_ptr(), int(tensor.storage_offset()), tuple(tensor.shape))
        if key in seen:
            continue
        seen.add(key)
        total += tensor.numel()
    return total
