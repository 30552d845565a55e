"""How fast the command line starts and answers: each command ROUNDS times in a fresh process (wall seconds,
median), against sacrebleu's own command on the same lines, and whether it imported torch or transformers.

Commands: `nlgbench --help`; `nlgbench score --metric M -c HYP -r REF` for chrf, sentbleu and rouge1 on the first
LINES lines of WMT16 de-en; `sacrebleu REF -i HYP -m chrf` (corpus chrF) and with `-sl` (a score per line, as
`nlgbench score` gives); `nlgbench report` and `nlgbench compare` on a copy of reports/example; and two floors of
`nlgbench score --metric chrf`, Python importing what it cannot do without: sacrebleu and PyYAML, then numpy too
(which the package imports at the top of its modules). The commands
alternate round by round, so a busy spell of a shared machine falls on all of them alike. Run from the
repository root, with the dataset under NLGBENCH_DATA_MIRROR (or --data):

    python benchmarks/cli_startup.py [--rounds 5] [--lines 100] [--data FOLDER]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The CLI's main in this process, then which heavy libraries it imported (one JSON line on stderr's last line).
PROBE = """
import json, sys
from nlgbench.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def commands(hyp: Path, ref: Path, run: Path) -> dict[str, list[str]]:
    """Name -> the arguments after `nlgbench` (or a whole command line for sacrebleu's)."""
    score = ["score", "-c", str(hyp), "-r", str(ref)]
    sacrebleu = str(Path(sys.executable).with_name("sacrebleu"))
    pair = ["--candidate", "all-MiniLM-L6-v2[num_layers=3]", "--baseline", "all-MiniLM-L6-v2"]
    return {
        "nlgbench --help": ["--help"],
        "nlgbench score --metric chrf": [*score, "--metric", "chrf"],
        "sacrebleu -m chrf (corpus)": [sacrebleu, str(ref), "-i", str(hyp), "-m", "chrf"],
        "sacrebleu -m chrf -sl (per line)": [sacrebleu, str(ref), "-i", str(hyp), "-m", "chrf", "-sl"],
        "nlgbench score --metric sentbleu": [*score, "--metric", "sentbleu"],
        "sacrebleu -m bleu -sl (per line)": [sacrebleu, str(ref), "-i", str(hyp), "-m", "bleu", "-sl"],
        "nlgbench score --metric rouge1": [*score, "--metric", "rouge1"],
        "nlgbench report": ["report", str(run)],
        "nlgbench compare": ["compare", str(run), *pair],
        "floor: import sacrebleu, yaml": [sys.executable, "-c", "import sacrebleu.metrics, yaml"],
        "floor: import sacrebleu, yaml, numpy": [sys.executable, "-c", "import sacrebleu.metrics, yaml, numpy"],
    }


def timed(args: list[str]) -> tuple[float, list[str] | None]:
    """Wall seconds of one fresh process, and (for nlgbench) the heavy libraries it imported."""
    own = not Path(args[0]).is_absolute()  # nlgbench's arguments, else a whole command line
    line = [sys.executable, "-c", PROBE, *args] if own else args
    start = time.perf_counter()
    proc = subprocess.run(line, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    if not own:
        return seconds, None
    probe = json.loads(proc.stderr.strip().splitlines()[-1])
    return seconds, list(probe["heavy"])


def cpu_line() -> str:
    """The CPU model and the flags that matter for inference (from lscpu, where there is one)."""
    if shutil.which("lscpu") is None:
        return platform.processor() or "unknown CPU"
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    model = fields.get("Model name", "?").strip()
    flags = set(fields.get("Flags", "").split())
    shown = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} CPUs, flags: {' '.join(shown) or 'none of avx2/avx512'}"


def load_line() -> str:
    """This machine's load average over 1, 5 and 15 minutes: a shared machine's times depend on it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=100, help="first lines of WMT16 de-en")
    parser.add_argument("--data", type=Path, default=None, help="the datasets folder (default: NLGBENCH_DATA_MIRROR)")
    args = parser.parse_args()
    load_before = load_line()
    data = args.data or Path(os.environ.get("NLGBENCH_DATA_MIRROR", "../shared/datasets"))
    folder = data / "wmt16-selection"
    with tempfile.TemporaryDirectory() as tmp:
        hyp, ref = Path(tmp, "hyp.txt"), Path(tmp, "ref.txt")
        for path, kind in ((hyp, "mt-system"), (ref, "reference")):
            lines = (folder / f"DAseg.newstest2016.{kind}.de-en").read_text(encoding="utf-8").splitlines()
            path.write_text("".join(f"{t}\n" for t in lines[: args.lines]), encoding="utf-8")
        run = Path(tmp, "example")
        shutil.copytree(REPO / "reports" / "example", run)
        table = commands(hyp, ref, run)
        seconds: dict[str, list[float]] = {name: [] for name in table}
        heavy: dict[str, list[str] | None] = {}
        for _ in range(args.rounds):
            for name, line in table.items():
                wall, loaded = timed(line)
                seconds[name].append(wall)
                heavy[name] = loaded
    print(f"CPU: {cpu_line()}; Python {platform.python_version()}; {args.rounds} rounds, {args.lines} lines")
    print(f"{'command':36s} {'median s':>9s} {'min..max':>13s}  imports torch/transformers")
    for name, values in seconds.items():
        loaded = heavy[name]
        said = "-" if loaded is None else (", ".join(loaded) or "no")
        spread = f"{min(values):.2f}..{max(values):.2f}"
        print(f"{name:36s} {statistics.median(values):9.3f} {spread:>13s}  {said}")
    own = statistics.median(seconds["sacrebleu -m chrf (corpus)"])
    for name in ("nlgbench score --metric chrf", *(name for name in table if name.startswith("floor:"))):
        print(f"{name} / sacrebleu -m chrf: {statistics.median(seconds[name]) / own:.2f}x")
    print(f"load average (1, 5, 15 min) before: {load_before}, after: {load_line()}")


if __name__ == "__main__":
    main()
