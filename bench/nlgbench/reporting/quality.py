"""Which correlation measures a cell's quality in report and compare: method x level (x the
kendall_like threshold), checked once, labelled once (nlgbench.statistics.levels computes it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.statistics.correlation import METHOD_ALIASES, METHODS, canonical_method
from nlgbench.statistics.levels import (
    GROUPING,
    LEVEL_ALIASES,
    LEVEL_SYNONYMS,
    LEVELS,
    Segments,
    canonical_level,
    has_docs,
    has_systems,
    method_reason,
    several_per_source,
)
from nlgbench.statistics.reference import CONVENTIONS, convention_quality
from nlgbench.statistics.resampling import RESAMPLE_CHOICES, UNIT_LABELS, resample_reason, resampling_unit

TESTS = ("bootstrap", "permutation")  # compare's significance test of the difference
TEST_LABELS = {"bootstrap": "paired bootstrap", "permutation": "paired permutation (perm-both)"}


@dataclass(frozen=True)
class QualityOptions:
    """Which correlation measures quality: method x level (see nlgbench.statistics.levels; the level's old
    names `pooled` and `lp_mean` are accepted, and `kendall_like` for kendall_like_all_pairs), and how
    its difference is tested: what is resampled (`resample`: the level's unit, or segments, sources, or
    `both` systems and inputs; nlgbench.statistics.resampling) and the test (`bootstrap` or `permutation`);
    `convention`: nlgbench's, or mt-metrics-eval's where they differ (nlgbench.statistics.reference)."""

    method: str = "pearson"
    level: str = "global"
    threshold: float = 0.0
    resample: str = "auto"
    test: str = "bootstrap"
    convention: str = "nlgbench"

    def check(self) -> None:
        if self.method not in METHODS and self.method not in METHOD_ALIASES:
            raise unknown_name("correlation method", self.method, METHODS)
        try:
            canonical_level(self.level)
        except ValueError:
            raise unknown_name("correlation level", self.level, (*LEVELS, *LEVEL_ALIASES, *LEVEL_SYNONYMS)) from None
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise UserError(
                f"--threshold must be a number >= 0 (the human score difference darr_kendall and "
                f"kendall_like_all_pairs count), got {self.threshold}"
            )
        reason = method_reason(self.method, self.level)
        if reason is not None:
            raise UserError(f"--correlation {self.method} at --level {canonical_level(self.level)}: {reason}")
        if self.resample not in RESAMPLE_CHOICES:
            raise unknown_name("resampling", self.resample, RESAMPLE_CHOICES)
        reason = resample_reason(self.level, self.method, self.resample)
        if reason is not None:
            raise UserError(f"--resample {self.resample} at --level {canonical_level(self.level)}: {reason}")
        if self.test not in TESTS:
            raise unknown_name("significance test", self.test, TESTS)
        if self.convention not in CONVENTIONS:
            raise unknown_name("convention", self.convention, CONVENTIONS)

    def check_segments(self, segments: Sequence[Segments]) -> None:
        """The system level (and `--resample both`) needs system names, the item level document ids
        and the source level a source with several translations: one line when none of the cells
        has them."""
        level = canonical_level(self.level)
        if level == "system" and not any(has_systems(seg) for seg in segments):
            raise UserError(
                "system-level correlation needs datasets with system names (e.g. wmt21); "
                "these cells have none (use --level global or segment)"
            )
        if self.resample == "both" and not any(has_systems(seg) for seg in segments):
            raise UserError(
                "--resample both draws systems and inputs: these cells name no systems (use --resample auto)"
            )
        if level == "source" and not any(several_per_source(seg) for seg in segments):
            raise UserError(
                "source-level correlation needs several translations of a source (systems sharing seg_ids, e.g. "
                "wmt21); in these cells every source has one (use --level global or segment)"
            )
        if level == "item" and not any(has_docs(seg) for seg in segments):
            raise UserError(
                "item-level correlation needs datasets with document ids (a doc_id field); "
                "these cells have none (use --level global or segment)"
            )

    def value(self, seg: Segments) -> float:
        """This quality of one cell's segments."""
        return convention_quality(seg, self.method, self.level, self.threshold, self.convention)

    def unit(self, seg: Segments) -> str:
        """What the bootstrap and permutation tests resample for this quality (a UNIT_LABELS key)."""
        return resampling_unit(seg, self.level, self.method, self.resample)

    def unit_label(self, seg: Segments) -> str:
        """The resampling unit in words, e.g. 'segments, stratified by language pair'."""
        return UNIT_LABELS[self.unit(seg)]

    @property
    def test_label(self) -> str:
        """The significance test in words, e.g. 'paired bootstrap'."""
        return TEST_LABELS[self.test]

    @property
    def label(self) -> str:
        """E.g. 'kendall (segment, by lp)', 'pearson (global)': the method, the level and its grouping."""
        level = canonical_level(self.level)
        grouping = "" if GROUPING[level] == "none" else f", by {GROUPING[level]}"
        convention = "" if self.convention == "nlgbench" else f", {self.convention} convention"
        return f"{canonical_method(self.method).replace('_', '-')} ({level}{grouping}{convention})"


DEFAULT_QUALITY = QualityOptions()  # pearson, global: report's and compare's default
