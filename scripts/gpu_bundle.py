"""Pack what `benchmarks/gpu.py` needs for a GPU machine that reaches neither the Hub nor PyPI and
takes uploads of limited size (the checkout plus at most LIMIT MiB), in two uploads.

    python scripts/gpu_bundle.py [--limit-mib 64] [--datasets ../shared/datasets]

Writes, in the repository root (both folders added to .git/info/exclude):
- `.gpu/`: POT and bert_score for CPython 3.12 on x86-64 Linux (their extension modules stripped of
  debug symbols: POT's `bsp_wrap` is 170 MB with them, 1 MB without), WMT16 (the data mirror's
  files), all-MiniLM-L6-v2's Hub cache folder without its weights, the weights' first part, and
  `call1.sh`;
- `.gpu2/`: the weights' second part and `call2.sh`.
Upload `.gpu` and run `bash .gpu/call1.sh` (it stages everything in /tmp/nlg and runs the CUDA
tests), then, while that machine is still up, upload `.gpu2` and run `bash .gpu2/call2.sh` (it
joins the weights, checks their sha256, runs the quickstart, bert_score and batch-sweep parts of
benchmarks/gpu.py and packs reports/gpu-new into $OUT). The machine is assumed to have torch,
transformers, tokenizers, pandas, scipy, matplotlib, psutil, PyYAML, tqdm and sacrebleu.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "models--sentence-transformers--all-MiniLM-L6-v2"
WEIGHTS = "model.safetensors"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
ENV = (
    "export PYTHONPATH=/tmp/nlg/site:$PWD/bench PYTHONUNBUFFERED=1"
    " NLGBENCH_DATA_MIRROR=/tmp/nlg/datasets HF_HUB_OFFLINE=1"
)

CALL1 = f"""# First upload: stage the bundle in /tmp/nlg (with the weights' first part), then the CUDA tests.
mkdir -p /tmp/nlg ~/.cache/huggingface/hub
cp -r .gpu/site .gpu/datasets .gpu/{WEIGHTS}.part0 /tmp/nlg/
cp -r .gpu/hub/* ~/.cache/huggingface/hub/
{ENV}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import torch, transformers, ot, bert_score, nlgbench; print(torch.__version__, transformers.__version__, \
ot.__version__, nlgbench.__version__, torch.cuda.get_device_name())"
timeout 170 python3 -m pytest -q -p no:cacheprovider --tier all tests/test_protocol_devices.py tests/test_baryscore.py \
tests/test_alignment.py tests/test_energy.py tests/test_startup.py tests/test_warm_transport.py \
-k "cuda or nvml or energy or startup or fork" 2>&1 | tail -25
"""

CALL2 = f"""# Second upload: the weights whole again, then benchmarks/gpu.py; its folder packed into $OUT.
S=$(ls -d ~/.cache/huggingface/hub/{MODEL}/snapshots/*)
cat /tmp/nlg/{WEIGHTS}.part0 .gpu2/{WEIGHTS}.part1 > $S/{WEIGHTS}
echo "$(cat .gpu2/sha256)  $S/{WEIGHTS}" | sha256sum -c || exit 1
{ENV}
mkdir -p reports/gpu-new
timeout 330 python3 benchmarks/gpu.py --out reports/gpu-new --without-mpnet --parts quickstart,reference \
--cpu-max-segments 50 > $OUT/log1.txt 2>&1
tail -40 $OUT/log1.txt
tar czf $OUT/gpu-part1.tgz -C reports gpu-new
timeout $((${{GPU_LEFT:-520}} - SECONDS)) python3 benchmarks/gpu.py --out reports/gpu-new --without-mpnet \
--parts sweep --batch-sizes 16,64,256,512 > $OUT/log2.txt 2>&1
tail -12 $OUT/log2.txt
python3 benchmarks/gpu.py --out reports/gpu-new --summary-only --device cuda 2>&1 | tail -40
tar czf $OUT/gpu-new.tgz -C reports gpu-new
"""


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def packages(site: Path) -> None:
    """POT and bert_score (this environment's versions) for CPython 3.12, unpacked, .so files stripped."""
    with tempfile.TemporaryDirectory() as tmp:
        platform_args = [arg for p in PLATFORMS for arg in ("--platform", p)]
        wanted = [f"POT=={version('POT')}", f"bert-score=={version('bert-score')}"]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
             "3.12", "--implementation", "cp", *platform_args, "-d", tmp, *wanted],
            check=True,
        )  # fmt: skip
        for wheel in Path(tmp).glob("*.whl"):
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
    for lib in site.rglob("*.so*"):
        subprocess.run(["strip", "--strip-unneeded", str(lib)], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=float, default=64.0, help="the most one upload may carry (default 64)")
    parser.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets")
    args = parser.parse_args(argv)
    snapshots = sorted((Path.home() / ".cache" / "huggingface" / "hub" / MODEL / "snapshots").glob("*"))
    if not snapshots or not (snapshots[-1] / WEIGHTS).exists():
        print(f"no {MODEL} in the local Hugging Face cache: run scripts/setup.sh first", file=sys.stderr)
        return 1
    if not (args.datasets / "wmt16-selection").is_dir():
        print(f"no wmt16-selection under {args.datasets} (--datasets)", file=sys.stderr)
        return 1
    one, two = REPO / ".gpu", REPO / ".gpu2"
    exclude = REPO / ".git" / "info" / "exclude"
    lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    exclude.write_text(
        "\n".join([*lines, *(x for x in ("/.gpu/", "/.gpu2/") if x not in lines)]) + "\n", encoding="utf-8"
    )
    for folder in (one, two):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    packages(one / "site")
    for name in ("wmt16-selection", "README.md", "SHA256SUMS"):
        source = args.datasets / name
        if source.is_dir():
            shutil.copytree(source, one / "datasets" / name)
        elif source.exists():
            shutil.copy(source, one / "datasets" / name)
    hub = one / "hub" / MODEL
    shutil.copytree(
        snapshots[-1].parents[1], hub, symlinks=False, ignore=shutil.ignore_patterns(WEIGHTS, "*.lock", "blobs")
    )
    (one / "call1.sh").write_text(CALL1, encoding="utf-8")
    (two / "call2.sh").write_text(CALL2, encoding="utf-8")

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    tree = sum((REPO / f.decode()).stat().st_size for f in tracked if f and (REPO / f.decode()).is_file())
    weights = (snapshots[-1] / WEIGHTS).read_bytes()
    room = int(args.limit_mib * 2**20) - tree - size(one) - 2**20  # a MiB to spare
    if room <= 0 or len(weights) - room > int(args.limit_mib * 2**20) - tree - size(two) - 2**20:
        print(
            f"the weights ({mib(len(weights))}) do not fit two uploads beside the checkout ({mib(tree)})",
            file=sys.stderr,
        )
        return 1
    (one / f"{WEIGHTS}.part0").write_bytes(weights[:room])
    (two / f"{WEIGHTS}.part1").write_bytes(weights[room:])
    (two / "sha256").write_text(hashlib.sha256(weights).hexdigest(), encoding="utf-8")
    print(
        f"checkout {mib(tree)}; .gpu {mib(size(one))}, .gpu2 {mib(size(two))} "
        f"(limit {args.limit_mib:g} MiB each with the checkout)"
    )
    print(
        "first: upload .gpu, run `bash .gpu/call1.sh`; then at once: upload .gpu2, "
        "run `GPU_LEFT=520 bash .gpu2/call2.sh`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
