"""A cell's fixed cost: start-up against a bare `import torch, transformers`, and where an
encoder's `load_s` goes.

1. `python -c "import torch, transformers"`, ROUNDS fresh processes: the bare import's seconds.
2. `load_encoder`'s steps for one encoder, each round in a fresh process: torch, transformers, each
   module every model load imports (`nlgbench.execution.preload.LIBRARIES`), the architecture's
   module, then resolve_source, tokenizer, model (from_pretrained), eval, local_snapshot, disk_bytes,
   and last the whole `load_encoder` once more (what `load_s` is once start-up has done the imports).
3. A 3-cell sweep (the encoder, cut to 3 and 2 layers; 5 segments per pair, 1 repeat) with the fork
   server and with NLGBENCH_FORKSERVER=0: each cell's startup_s and load_s, and the sweep's wall time.
   Also in the fork server's children: torch's threads and a 2-thread matrix product against 1 thread.

Each figure is printed as 'median (min..max, n=N)'. Run with HF_HUB_OFFLINE=1 and the encoder cached:

    python benchmarks/startup.py [--encoder all-MiniLM-L6-v2] [--rounds 5] [--skip-sweep]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = r"""
import json, sys, time
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
import torch; mark("import torch")
import transformers; mark("import transformers")
from nlgbench.execution.preload import LIBRARIES, architecture_modules, import_modules
mark("import nlgbench.execution.preload")
for name in LIBRARIES:
    import_modules([name]); mark(f"LIBRARIES: {name}")
import_modules(architecture_modules([sys.argv[1]])); mark("import the architecture's module")
from transformers import AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging
from nlgbench.encoders.hfcache import disk_bytes, local_snapshot
from nlgbench.encoders.registry import EncoderRef, resolve_source
from nlgbench.encoders.runtime import load_encoder
hf_logging.disable_progress_bar(); mark("import nlgbench.encoders.runtime")
source = resolve_source(sys.argv[1]); mark("resolve_source")
tokenizer = AutoTokenizer.from_pretrained(source); mark("AutoTokenizer.from_pretrained")
model = AutoModel.from_pretrained(source); mark("AutoModel.from_pretrained")
model.eval(); mark("eval()")
folder = local_snapshot(source); mark("local_snapshot")
disk_bytes(folder); mark("disk_bytes")
load_encoder(EncoderRef(name=sys.argv[1]), "cpu"); mark("load_encoder, all again (warm imports)")
print(json.dumps([(b[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]))
"""

CHILD_THREADS = r"""
import time, torch
def product_s():
    a = torch.randn(1024, 1024)
    a @ a
    start = time.perf_counter()
    for _ in range(20):
        a @ a
    return time.perf_counter() - start
torch.set_num_threads(1); one = product_s()
torch.set_num_threads(2); two = product_s()
print(torch.get_num_threads(), one, two)
"""


def spread(values: list[float]) -> str:
    """'median (min..max, n=N)'."""
    return f"{statistics.median(values):.3f} ({min(values):.3f}..{max(values):.3f}, n={len(values)})"


def bare_import(rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, transformers"], check=True)
        out.append(time.perf_counter() - start)
    return out


def load_steps(encoder: str, rounds: int) -> dict[str, list[float]]:
    steps: dict[str, list[float]] = {}
    for _ in range(rounds):
        proc = subprocess.run([sys.executable, "-c", STEPS, encoder], capture_output=True, text=True, check=True)
        for name, seconds in json.loads(proc.stdout.strip().splitlines()[-1]):
            steps.setdefault(name, []).append(seconds)
    return steps


def sweep(encoder: str, folder: Path, forkserver: str) -> tuple[float, list[dict[str, str]]]:
    spec = {
        "name": "startup",
        "datasets": [{"name": "wmt16", "max_segments": 5}],
        "batch_size": 64,
        "repeats": 1,
        "warmup": 0,
        "threads": 2,
        "metrics": [
            {
                "metric": "bertscore",
                "encoders": [encoder, {"name": encoder, "num_layers": 3}, {"name": encoder, "num_layers": 2}],
            }
        ],
    }
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    out = folder / f"out-{forkserver}"
    env = dict(os.environ, NLGBENCH_FORKSERVER=forkserver, NLGBENCH_PROGRESS="0")
    start = time.perf_counter()
    command = [sys.executable, "-m", "nlgbench.cli", "run", str(folder / "spec.json"), "--out", str(out), "--force"]
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    with (out / "results.csv").open(encoding="utf-8", newline="") as fh:
        return wall, list(csv.DictReader(fh))


def child_threads() -> str:
    """torch's threads and a 1- then 2-thread product in a child forked after the fork server's imports."""
    from nlgbench.execution.preload import LIBRARIES, import_modules

    import_modules(LIBRARIES)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(CHILD_THREADS, {})
        os.write(write, buffer.getvalue().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    threads, one, two = os.read(read, 1000).decode().split()
    return f"threads {threads}, 20 products 1024^2: 1 thread {float(one):.3f} s, 2 threads {float(two):.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()
    print(f"bare `import torch, transformers`: {spread(bare_import(args.rounds))} s")
    print(f"load_encoder steps, {args.encoder}, fresh process per round (s):")
    for name, seconds in load_steps(args.encoder, args.rounds).items():
        print(f"  {name:55s} {spread(seconds)}")
    print(f"forked child: {child_threads()}")
    if args.skip_sweep:
        return
    with tempfile.TemporaryDirectory() as tmp:
        for setting, name in (("1", "fork server"), ("0", "plain workers")):
            wall, rows = sweep(args.encoder, Path(tmp), setting)
            cells = "; ".join(f"startup_s {r['startup_s']}, load_s {r['load_s']}" for r in rows)
            print(f"3-cell sweep, {name}: wall {wall:.1f} s; per cell: {cells}")


if __name__ == "__main__":
    main()
