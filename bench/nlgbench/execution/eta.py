"""The sweep's ETA from a cost model: a cell costs a fixed part (everything but its passes over all
items: worker start-up, data and model load, prepare, warm-up, correlation, writing) plus rate x units,
units = (encoder parameters) x items x passes (repeats + the memory pass); the rate and the fixed cost
are learnt from the cells finished so far (before any, DEFAULT_RATE and DEFAULT_FIXED_S give a first
guess, shown as such). A finished cell's result splits its time: its passes' seconds against units give the
rate, the rest of its time is its fixed part, predicted for a pending cell as the start-up of the
cell that finished last (the first cell of a sweep waits for the fork server's imports, the next
ones start at once) plus the median over finished cells of the rest.

An average over finished cells misleads as soon as cells differ in size (after a 110M-parameter
MPNet cell it predicts every remaining MiniLM cell at MPNet's time). Here each pending cell is
predicted as rate x its units, the rate fitted on the finished cells of the same metric (so
MoverScore's transport and BERTScore's matching each get theirs) or, before one has finished, on
all finished cells. Parameters are read from the checkpoint's safetensors headers (no weights
loaded; a `num_layers` cut counts its first layers only); a metric without an encoder counts as
`LEXICAL_PARAMS`, an encoder whose weights are not local as the sweep's median.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nlgbench.core.cell import CellConfig
from nlgbench.core.result import CellResult
from nlgbench.encoders.hfcache import SAFETENSORS_DTYPE_BYTES, safetensors_header, weight_files
from nlgbench.encoders.registry import NO_ENCODER, EncoderRef, resolve_encoder
from nlgbench.foundations.errors import UserError

# The stand-in parameter count of a metric that runs no model (sentBLEU, chrF, ROUGE): string
# matching per item costs about what a 1M-parameter encoder does; learnt properly once one finishes.
LEXICAL_PARAMS = 1_000_000
DEFAULT_PARAMS = 100_000_000  # an encoder of unknown size in a sweep where no size is known
# Before any cell has finished: the README quickstart's MPNet cell on this project's 2-vCPU machine
# (109M parameters x 600 items, about 150 s for 4 passes) and about 7 s outside its timed repeats. A
# guess for other machines, replaced by what the sweep measures once a cell ends.
DEFAULT_RATE = 150.0 / (109e6 * 600 * 4)
DEFAULT_FIXED_S = 7.0

# A transformer layer's tensors: `encoder.layer.3.`, `layers.3.`, `h.3.`, `block.3.`.
_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
_FLOAT_DTYPES = tuple(d for d in SAFETENSORS_DTYPE_BYTES if d.startswith(("F", "BF")))


def header_params(folder: Path, num_layers: int | None = None) -> int | None:
    """Floating-point parameters in the safetensors files of `folder`, read from their headers; with
    `num_layers`, tensors of transformer layers numbered >= num_layers are left out (a cut model).
    None when the folder has no safetensors weights or a header cannot be read."""
    files = [p for p in weight_files(folder) if p.suffix == ".safetensors"]
    if not files:
        return None
    total = 0
    for path in files:
        try:
            header = json.loads(safetensors_header(path))
        except (OSError, ValueError, UserError):  # unreadable or not JSON: size unknown
            return None
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, dict) or entry.get("dtype") not in _FLOAT_DTYPES:
                continue
            layer = _LAYER.search(name)
            if num_layers is not None and layer is not None and int(layer.group(1)) >= num_layers:
                continue
            count = 1
            for dim in entry.get("shape", []):
                count *= int(dim)
            total += count
    return total


def encoder_params(ref: EncoderRef) -> int | None:
    """The parameters a cell with this encoder runs (`header_params` of its local folder or cached
    Hub snapshot); 0 for no encoder; None when unknown here."""
    if ref.name == NO_ENCODER:
        return 0
    try:
        folder = resolve_encoder(ref.name).snapshot
    except (OSError, UserError):  # an unknown name fails the sweep elsewhere, with its own message
        return None
    return header_params(folder, ref.num_layers) if folder is not None else None


@dataclass
class CostModel:
    """Cost units per cell and the seconds the finished cells took; `eta` predicts the rest."""

    units: dict[str, float]
    metric: dict[str, str]
    done: dict[str, float] = field(default_factory=dict)
    repeats_s: dict[str, float] = field(default_factory=dict)  # of `done`: their timed repeats' seconds
    startup_s: dict[str, float] = field(default_factory=dict)  # and their start-up, in the order they ended

    @classmethod
    def of(cls, cells: Sequence[CellConfig], items: dict[str, int]) -> CostModel:
        """Units of each cell: parameters x items (`items` by dataset label) x passes over all items,
        its repeats and its memory pass (the warm-up is part of the fixed cost)."""
        params: dict[EncoderRef, int | None] = {}
        for cell in cells:
            if cell.encoder not in params:
                params[cell.encoder] = encoder_params(cell.encoder)
        known = [p for p in params.values() if p]
        fallback = statistics.median(known) if known else DEFAULT_PARAMS
        units, metric = {}, {}
        for cell in cells:
            p = params[cell.encoder]
            size = LEXICAL_PARAMS if p == 0 else (p if p is not None else fallback)
            units[cell.cell_id] = float(size) * items.get(cell.dataset.label, 1) * (cell.repeats + 1)
            metric[cell.cell_id] = cell.metric
        return cls(units, metric)

    def finished(
        self, cell_id: str, seconds: float, repeats_s: float | None = None, startup_s: float | None = None
    ) -> None:
        """A cell ended after `seconds` (ok or not: its time is spent either way); `repeats_s` and
        `startup_s`: how many of them its timed repeats and its start-up took (`time_split` of its
        result), None where unknown."""
        self.done[cell_id] = seconds
        if repeats_s is not None:
            self.repeats_s[cell_id] = min(repeats_s, seconds)
            if startup_s is not None:
                self.startup_s[cell_id] = min(startup_s, seconds - self.repeats_s[cell_id])

    def fit(self, metric: str) -> tuple[float, float] | None:
        """(fixed seconds per cell, seconds per unit), from the finished cells of `metric`, else from
        all finished cells; None before any. From cells whose time is split (`repeats_s`): the
        start-up of the cell that finished last plus the median of their fixed parts without their
        start-up, and their repeats' seconds over their units. Else (only cells
        without timing finished, e.g. failed ones): with one cell, the fixed cost is DEFAULT_FIXED_S
        (at most half its time) and the rate the rest; with several of different sizes, least squares
        of seconds = fixed + rate x units, the fixed cost kept within [0, the fastest cell's time]."""
        mine = [c for c in self.done if self.metric[c] == metric]
        for pick in ([c for c in mine if c in self.repeats_s], [c for c in self.done if c in self.repeats_s]):
            units = sum(self.units[c] for c in pick)
            if pick and units > 0:
                startup = list(self.startup_s.values())[-1] if self.startup_s else 0.0
                rest = statistics.median(self.done[c] - self.repeats_s[c] - self.startup_s.get(c, 0.0) for c in pick)
                return startup + rest, sum(self.repeats_s[c] for c in pick) / units
        for pick in (mine, list(self.done)):
            if not pick:
                continue
            sizes = [self.units[c] for c in pick]
            seconds = [self.done[c] for c in pick]
            fixed = min(DEFAULT_FIXED_S, min(seconds) / 2)
            if len(pick) > 1 and statistics.pvariance(sizes) > 0:
                slope = statistics.covariance(sizes, seconds) / statistics.variance(sizes)
                if slope > 0:
                    fixed = min(max(statistics.fmean(seconds) - slope * statistics.fmean(sizes), 0.0), min(seconds))
            if sum(sizes) > 0:
                return fixed, max(sum(seconds) - fixed * len(pick), 0.0) / sum(sizes)
        return None

    def rate(self, metric: str) -> float | None:
        """Seconds per unit (beyond the fixed cost) learnt for `metric`; None before any cell finished."""
        fitted = self.fit(metric)
        return None if fitted is None else fitted[1]

    def eta(self, pending: Sequence[str]) -> float:
        """Predicted seconds for the `pending` cells: per cell, fixed + rate x units, as learnt
        (`fit`), or DEFAULT_FIXED_S and DEFAULT_RATE before any cell has finished (`guessed`)."""
        total = 0.0
        for cell_id in pending:
            fixed, rate = self.fit(self.metric[cell_id]) or (DEFAULT_FIXED_S, DEFAULT_RATE)
            total += fixed + rate * self.units[cell_id]
        return total

    @property
    def guessed(self) -> bool:
        """Whether `eta` is the default guess (no cell of this sweep has finished yet)."""
        return not self.done


def time_split(result: CellResult) -> tuple[float | None, float | None]:
    """Seconds a finished cell spent in its passes over all items (timed repeats and memory pass) and
    in its start-up (None where its result does not say: a failed cell, a result written before `startup_s`)."""
    if result.timing is None:
        return None, None
    memory_pass = result.memory.pass_s if result.memory is not None and result.memory.pass_s is not None else 0.0
    return sum(result.timing.repeat_s) + memory_pass, result.timing.startup_s
