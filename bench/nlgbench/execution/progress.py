"""Live progress of a sweep: whether to show it, and the bar inside a running cell; the same for a
long command outside a sweep (`nlgbench baseline`: `command_progress`).

On a terminal the worker draws a tqdm bar per pass and unit of work the metric reports to the
cell's context (`nlgbench.foundations.cellcontext.CellContext.advance`: texts encoded, transport
batches solved, inputs scored), with its rate, and prints its phase lines (data, load, warm-up,
repeats with items/s); elsewhere (a log file, CI, a Slurm task) it stays quiet and the sweep
prints one line per cell. `NLGBENCH_PROGRESS=1` or `0` overrides the terminal check (the sweep
passes its decision to the worker this way).
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import IO, TYPE_CHECKING

from nlgbench.foundations.fmt import duration

if TYPE_CHECKING:
    from tqdm import tqdm

PROGRESS_ENV = "NLGBENCH_PROGRESS"
FALLBACK_SIZE = (80, 24)  # a pseudo-terminal may report 0 columns or 0 lines: bars are drawn for this size then


def bar_size(stream: IO[str]) -> tuple[int, int] | None:
    """The (columns, lines) to draw bars for: None (tqdm follows the terminal) where the bar's
    terminal reports both; FALLBACK_SIZE's for what it reports as 0 or cannot say (with 0 columns
    or 0 lines tqdm draws nothing at all)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return FALLBACK_SIZE
    if size.columns > 0 and size.lines > 0:
        return None
    return (size.columns or FALLBACK_SIZE[0], size.lines or FALLBACK_SIZE[1])


def live(stream: IO[str] | None = None) -> bool:
    """Whether to show live progress: `NLGBENCH_PROGRESS` (1 / 0) if set, else whether `stream`
    (default stdout) is a terminal."""
    forced = os.environ.get(PROGRESS_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a file
        return False


class CellProgress:
    """The bar of one cell's work in its worker; the progress hook of the cell's `CellContext`.

    `stage("repeat 2/3")` names the pass; each `(what, done, total)` report moves the bar of that
    unit, starting a new one when the unit or its total changes. Bars vanish when done (the phase
    lines stay). Disabled: every call does nothing."""

    def __init__(self, enabled: bool, stream: IO[str] | None = None, refresh_s: float = 0.5) -> None:
        self.enabled = enabled
        self.refresh_s = refresh_s  # at most one redraw per this many seconds
        self.stream = stream if stream is not None else sys.stderr
        self._stage = ""
        self._bar: tqdm | None = None
        self._key: tuple[str, int] | None = None

    def stage(self, name: str) -> None:
        """A new pass begins (its bars are named after it)."""
        self._close()
        self._stage = name

    def __call__(self, what: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None or self._key != (what, total):
            from tqdm import tqdm  # imported only once a bar is drawn

            self._close()
            self._key = (what, total)
            unit = what.split(" ")[0]
            size = bar_size(self.stream)
            self._bar = tqdm(
                total=total,
                desc=f"    {self._stage} {what}".rstrip(),
                unit=f" {unit}",
                leave=False,
                file=self.stream,
                mininterval=self.refresh_s,
                dynamic_ncols=size is None,
                ncols=size[0] if size else None,
                nrows=size[1] if size else None,
            )
        self._bar.update(max(0, done - self._bar.n))

    def line(self, text: str) -> None:
        """A phase line: the open bar is closed first (it vanishes), so the line is never glued onto a
        half-drawn bar and no stale bar stays above it; then the line, on the bar's stream."""
        self._close()
        print(text, file=self.stream, flush=True)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar, self._key = None, None

    def __enter__(self) -> CellProgress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close()


class StepLines:
    """Progress as lines, for a log file or a pipe: `PREFIX: DONE/TOTAL WHAT, R/s, ETA T` when the work
    starts (done 0), at each tenth of it and at its end; the rate counts from the first report, so a
    model's loading before it is not in the ETA."""

    def __init__(self, prefix: str, stream: IO[str] | None = None, steps: int = 10) -> None:
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.steps = steps
        self._start: float | None = None
        self._step = -1  # the last tenth printed

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        step = self.steps if done >= total else done * self.steps // max(total, 1)
        if step == self._step:
            return
        self._step = step
        parts = [f"{self.prefix}: {done}/{total} {what}"]
        elapsed = now - self._start
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            parts.append(f"{rate:.1f} {what.split(' ')[0]}/s")
            parts.append(f"ETA {duration((total - done) / rate)}" if done < total else f"done in {duration(elapsed)}")
        print(", ".join(parts), file=self.stream, flush=True)

    def __enter__(self) -> StepLines:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


def command_progress(prefix: str, stream: IO[str] | None = None) -> CellProgress | StepLines:
    """The progress display of a long command writing its progress on `stream` (default stderr): on a
    terminal (or NLGBENCH_PROGRESS=1) a tqdm bar with its rate and ETA, named `prefix`, that vanishes
    when done; elsewhere `StepLines`, a line per tenth of the work. Used as a context manager."""
    stream = stream if stream is not None else sys.stderr
    if live(stream):
        bar = CellProgress(True, stream)
        bar.stage(prefix)
        return bar
    return StepLines(prefix, stream)
