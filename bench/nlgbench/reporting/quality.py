"""Which correlation measures a cell's quality in report and compare: method x level (x the
kendall_like threshold), checked once, labelled once (nlgbench.statistics.levels computes it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.statistics.correlation import METHODS
from nlgbench.statistics.levels import (
    GROUPING,
    LEVEL_ALIASES,
    LEVELS,
    Segments,
    canonical_level,
    has_docs,
    has_systems,
    quality,
)


@dataclass(frozen=True)
class QualityOptions:
    """Which correlation measures quality: method x level (see nlgbench.statistics.levels; the level's old
    names `pooled` and `lp_mean` are accepted)."""

    method: str = "pearson"
    level: str = "global"
    threshold: float = 0.0

    def check(self) -> None:
        if self.method not in METHODS:
            raise unknown_name("correlation method", self.method, METHODS)
        try:
            canonical_level(self.level)
        except ValueError:
            raise unknown_name("correlation level", self.level, (*LEVELS, *LEVEL_ALIASES)) from None
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise UserError(
                f"--threshold must be a number >= 0 (kendall_like's human score difference), got {self.threshold}"
            )

    def check_segments(self, segments: Sequence[Segments]) -> None:
        """The system level needs system names and the item level document ids: one line when
        none of the cells has them."""
        level = canonical_level(self.level)
        if level == "system" and not any(has_systems(seg) for seg in segments):
            raise UserError(
                "system-level correlation needs datasets with system names (e.g. wmt21); "
                "these cells have none (use --level global or segment)"
            )
        if level == "item" and not any(has_docs(seg) for seg in segments):
            raise UserError(
                "item-level correlation needs datasets with document ids (a doc_id field); "
                "these cells have none (use --level global or segment)"
            )

    def value(self, seg: Segments) -> float:
        """This quality of one cell's segments."""
        return quality(seg, self.method, self.level, self.threshold)

    @property
    def label(self) -> str:
        """E.g. 'kendall (segment, by lp)', 'pearson (global)': the method, the level and its grouping."""
        level = canonical_level(self.level)
        grouping = "" if GROUPING[level] == "none" else f", by {GROUPING[level]}"
        return f"{self.method.replace('_', '-')} ({level}{grouping})"


DEFAULT_QUALITY = QualityOptions()  # pearson, global: report's and compare's default
