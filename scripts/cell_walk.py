"""The walk of one cell through the package: which nlgbench modules its worker's code calls, in order.

python scripts/cell_walk.py RUN_DIR/cells/CELL_ID

Reruns the cell's worker in this process (on a copy of the cell folder; the run folder is not touched)
with a profile hook, and prints the calls made from the worker and from the measuring protocol into
another nlgbench module: one line per stop (caller module -> callee module.function), consecutive
calls to one module collapsed, then the number of stops per module. What a newcomer follows when
reading how one cell is measured.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

# The modules whose outgoing calls are the walk: the worker and the protocol it hands the phases to.
FOLLOWED = ("nlgbench.execution.worker", "nlgbench.measurement.protocol")


def module_of(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    source = Path(argv[0])
    from nlgbench.execution import worker

    stops: list[tuple[str, str]] = []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = module_of(frame), module_of(frame.f_back)
        if caller in FOLLOWED and callee.startswith("nlgbench.") and callee != caller:
            step = (caller, f"{callee}.{frame.f_code.co_name}")
            if not stops or stops[-1][1].rsplit(".", 1)[0] != callee or stops[-1][0] != caller:
                stops.append(step)

    with tempfile.TemporaryDirectory() as tmp:
        cell = Path(tmp) / source.name
        shutil.copytree(source, cell)
        sys.setprofile(hook)
        try:
            code = worker.main([str(cell)])
        finally:
            sys.setprofile(None)
    for n, (caller, callee) in enumerate(stops, 1):
        print(f"{n:3d}  {caller.removeprefix('nlgbench.')} -> {callee.removeprefix('nlgbench.')}")
    counts = Counter(callee.rsplit(".", 1)[0].removeprefix("nlgbench.") for _, callee in stops)
    print(f"\n{len(stops)} stops; per module: " + ", ".join(f"{m} {k}" for m, k in counts.most_common()))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
