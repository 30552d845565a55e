"""The speed-up of one metric over another from their repeats' times: the one speed-up of nlgbench,
in compare, report and tables."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nlgbench.statistics.correlation import NAN


@dataclass(frozen=True)
class SpeedUp:
    """How many times faster the candidate is: `value` = median baseline time / median candidate time
    (the ratio of medians: the one speed-up of nlgbench, in compare, report and tables); `low` and
    `high` = the smallest and largest ratio over every (baseline repeat, candidate repeat) pair, the
    spread the repeats allow. NaN where a side has no timed repeat."""

    value: float
    low: float
    high: float


def speedup(baseline: Sequence[float], candidate: Sequence[float]) -> SpeedUp:
    """The speed-up of `candidate` over `baseline` from their repeats' times (any one unit)."""
    base = [float(t) for t in baseline if math.isfinite(t) and t > 0]
    cand = [float(t) for t in candidate if math.isfinite(t) and t > 0]
    if not base or not cand:
        return SpeedUp(NAN, NAN, NAN)
    ratios = [b / c for b in base for c in cand]
    return SpeedUp(statistics.median(base) / statistics.median(cand), min(ratios), max(ratios))
