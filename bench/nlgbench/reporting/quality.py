"""Which correlation measures a cell's quality in report and compare: method x level (x the
kendall_like threshold), checked once, labelled once (nlgbench.statistics.levels computes it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from nlgbench.foundations.arguments import check_arguments
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.statistics.correlation import METHOD_ALIASES, METHODS, canonical_method
from nlgbench.statistics.levels import (
    GROUPING,
    LEVEL_ALIASES,
    LEVEL_SYNONYMS,
    LEVELS,
    MIN_POINTS,
    Segments,
    canonical_level,
    has_docs,
    has_systems,
    left_out_count,
    level_points,
    method_reason,
    several_per_source,
)
from nlgbench.statistics.reference import (
    CONVENTIONS,
    convention_groups_left_out,
    convention_note,
    convention_quality,
    convention_statistic,
)
from nlgbench.statistics.resampling import RESAMPLE_CHOICES, UNIT_LABELS, resample_reason, resampling_unit
from nlgbench.statistics.significance import PairedPermutation, pair_permutation, paired_permutation

TESTS = ("bootstrap", "permutation")  # compare's significance test of the difference
TEST_LABELS = {"bootstrap": "paired bootstrap", "permutation": "paired permutation (perm-both)"}
PERM_TESTS = ("scores", "pairs")  # what the permutation test swaps (mt-metrics-eval's perm_test)
PAIRS_LABEL = "paired permutation of translation pairs (WMT23/24, epsilons fixed)"


@dataclass(frozen=True)
class QualityOptions:
    """Which correlation measures quality: method x level (see nlgbench.statistics.levels; the level's old
    names `pooled` and `lp_mean` are accepted, and `kendall_like` for kendall_like_all_pairs), and how
    its difference is tested: what is resampled (`resample`: the level's unit, or segments, sources, or
    `both` systems and inputs; nlgbench.statistics.resampling) and the test (`bootstrap` or `permutation`,
    which swaps segment scores or, `perm_test="pairs"` for acc_eq, pairs' verdicts with fixed epsilons);
    `convention`: nlgbench's, or mt-metrics-eval's where they differ (nlgbench.statistics.reference)."""

    method: str = "pearson"
    level: str = "global"
    threshold: float = 0.0
    resample: str = "auto"
    test: str = "bootstrap"
    convention: str = "nlgbench"
    perm_test: str = "scores"

    def check(self) -> None:
        # the API passes these as given: a value of another type is one line naming it, not a TypeError below
        check_arguments(
            "string",
            method=self.method,
            level=self.level,
            resample=self.resample,
            test=self.test,
            convention=self.convention,
            perm_test=self.perm_test,
        )
        check_arguments("number", threshold=self.threshold)
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
        if self.perm_test not in PERM_TESTS:
            raise unknown_name("permutation test", self.perm_test, PERM_TESTS)
        if self.perm_test == "pairs" and (self.test != "permutation" or canonical_method(self.method) != "acc_eq"):
            raise UserError(
                "--perm-test pairs is WMT23/24's permutation test of acc_eq (epsilons fixed, pairs of translations "
                "swapped): it needs --correlation acc_eq and --test permutation"
            )

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

    def permutation(self, cs: Segments, bs: Segments, n_permutations: int, seed: int) -> PairedPermutation:
        """The permutation test of candidate `cs` against baseline `bs`: segment scores swapped
        (perm-both; acc_eq re-calibrates its epsilons on each draw), or with perm_test 'pairs' the
        two metrics' verdicts on pairs of translations, epsilons fixed (WMT23/24)."""
        if self.perm_test == "pairs":
            return pair_permutation(cs, bs, self.level, n_permutations, seed)
        return paired_permutation(cs, bs, self.value, n_permutations, seed)

    def permuted(self, perm: PairedPermutation) -> str:
        """What a permutation test swapped, counted, in words (the p column's label)."""
        if self.perm_test == "pairs":
            return f"{perm.n_swapped} pairs of translations swapped, epsilons fixed"
        recalibrated = ", epsilons re-calibrated per draw" if canonical_method(self.method) == "acc_eq" else ""
        return f"{perm.n_swapped} segment scores swapped{recalibrated}"

    def left_out(self, cs: Segments, bs: Segments) -> dict[str, Any]:
        """compare's count of the level's groups without a figure under the convention in force, per
        side, and its line."""
        args = (self.method, self.level, self.threshold, self.convention)
        (c, why), (b, _) = (convention_groups_left_out(seg, *args) for seg in (cs, bs))
        return {
            "n_groups": c[1],
            "n_groups_left_out_candidate": c[0],
            "n_groups_left_out_baseline": b[0],
            "groups_left_out": left_out_count(self.level, c, b, why),
        }

    def too_small(self, seg: Segments) -> list[str]:
        """The level's groups left out for having fewer than MIN_POINTS points: those without a figure
        under the convention in force (DARR Kendall counts the pairs of a 2-segment group)."""
        if canonical_level(self.level) == "global":
            return []
        statistic = convention_statistic(self.method, self.threshold, self.convention)
        small = [p for p in level_points(seg, self.level) if len(p.x) < MIN_POINTS]
        return [p.name for p in small if not math.isfinite(statistic(p))]

    def note(self, seg: Segments) -> str:
        """Why this quality of one cell, or a group of it, is undefined, in the convention's terms ('' if defined)."""
        return convention_note(seg, self.method, self.level, self.threshold, self.convention)

    def unit(self, seg: Segments) -> str:
        """What the bootstrap and permutation tests resample for this quality (a UNIT_LABELS key)."""
        return resampling_unit(seg, self.level, self.method, self.resample)

    def unit_label(self, seg: Segments) -> str:
        """The resampling unit in words, e.g. 'segments, stratified by language pair'."""
        return UNIT_LABELS[self.unit(seg)]

    @property
    def statistic_key(self) -> QualityOptions:
        """These options without the test: what a cell's bootstrap replicates depend on (their memo key)."""
        return replace(self, test="bootstrap", perm_test="scores")

    @property
    def test_label(self) -> str:
        """The significance test in words, e.g. 'paired bootstrap'."""
        return PAIRS_LABEL if self.test == "permutation" and self.perm_test == "pairs" else TEST_LABELS[self.test]

    @property
    def label(self) -> str:
        """E.g. 'kendall (segment, by lp)', 'pearson (global)': the method, the level and its grouping."""
        level = canonical_level(self.level)
        grouping = "" if GROUPING[level] == "none" else f", by {GROUPING[level]}"
        convention = "" if self.convention == "nlgbench" else f", {self.convention} convention"
        return f"{canonical_method(self.method).replace('_', '-')} ({level}{grouping}{convention})"


DEFAULT_QUALITY = QualityOptions()  # pearson, global: report's and compare's default
