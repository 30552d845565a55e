"""The data model: an `Item` (one judged output), a `Dataset` (items in stable order plus provenance),
and what is done to a loaded dataset: head or sampled subsets with their warnings, the choice of human
dimensions, blank texts found. Every dataset is a list of items ordered by language pair (sorted by
name), then ``seg_id``, then ``system``."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.statistics.correlation import spearman

#: The human dimension of data with one human score per item (DA, MQM, a plain ``human`` number).
HUMAN = "human"
#: A spec's ``human:`` value selecting every dimension.
ALL_DIMENSIONS = "all"
#: Item text fields :func:`blank_positions` can test.
TEXT_FIELDS = ("lp", "source", "reference", "hypothesis")
NAN = float("nan")
SORTED_HEAD_SPEARMAN = 0.5  # above this |Spearman(row order, human)|, a head subset is not a fair sample
_MIN_HEAD = 10  # fewer rows say nothing about the order

SegId = int | str  # an integer (line number) or, in user files, a string id such as "dm-test-8764fb95"


@dataclass(frozen=True)
class Item:
    """One judged output, identified by ``(lp, seg_id, system)``.

    `reference` is the first of `references` (all of them; metrics declare how they use several);
    `humans` maps each human dimension to its score (a missing score is absent), and `human` is the
    score of the dataset's primary dimension (NaN where this item lacks it)."""

    lp: str
    seg_id: SegId  # catalogue data: the 1-based line number in that lp's text files
    system: str  # "" for DA data
    source: str
    reference: str
    hypothesis: str
    human: float
    references: tuple[str, ...] = ()  # () means (reference,)
    humans: dict[str, float] = field(default_factory=dict)  # {} means {HUMAN: human}
    doc_id: str = ""  # the document (summary level groups by it); "" when none
    extra: dict[str, str] = field(default_factory=dict)  # further columns a spec asked to carry into scores.csv

    def __post_init__(self) -> None:
        if not self.references:
            object.__setattr__(self, "references", (self.reference,))
        if not self.humans and math.isfinite(self.human):
            object.__setattr__(self, "humans", {HUMAN: self.human})

    @property
    def key(self) -> tuple[str, SegId, str]:
        """The item's identity ``(lp, seg_id, system)``, also its sort key."""
        return (self.lp, self.seg_id, self.system)


@dataclass
class Dataset:
    """A loaded dataset: items in stable order plus provenance of the files read."""

    name: str  # catalogue name, or the user file's stem
    items: list[Item]  # stable order: lp sorted by name, then seg_id, then system
    has_systems: bool
    files: dict[str, str] = field(default_factory=dict)  # relative path (or file path) -> sha256
    human_dims: list[str] = field(default_factory=lambda: [HUMAN])  # selected dimensions; the first is primary
    warnings: list[str] = field(default_factory=list)  # e.g. a head subset of a file sorted by human score
    drawn_whole: bool = False  # `sample: {n}` drew every item (no language pair holds more than n units)

    @property
    def language_pairs(self) -> list[str]:
        """The language pairs present, sorted."""
        return sorted({item.lp for item in self.items})

    @property
    def has_docs(self) -> bool:
        """Whether items name their document (the item / summary level needs it)."""
        return any(item.doc_id for item in self.items)

    @property
    def max_references(self) -> int:
        return max((len(item.references) for item in self.items), default=0)

    def missing_human(self, dim: str) -> int:
        """Items without a score on human dimension `dim`."""
        return sum(1 for item in self.items if dim not in item.humans)


# --------------------------------------------------------------------------- subsets


def take_subset(dataset: Dataset, max_segments: int | None, sample: tuple[int, int] | None) -> None:
    """Keep (in place) the first `max_segments` items of each language pair in the stable order, or
    `sample` = (n, seed), a seeded random subset (`sample_items`), with the warnings each may need."""
    if max_segments is not None and sample is not None:
        raise UserError("give max_segments (the first N per language pair) or sample (a random N), not both")
    if max_segments is not None:
        dataset.items = _first_per_lp(dataset.items, max_segments)
        dataset.warnings = sorted_head_warnings(dataset)
    if sample is not None:
        dataset.drawn_whole = all(len(units) <= sample[0] for units in _sample_units(dataset.items).values())
        dataset.warnings = sample_warnings(dataset, *sample)
        dataset.items = sample_items(dataset.items, *sample)


def sorted_head_warnings(dataset: Dataset) -> list[str]:
    """Per language pair whose kept head is visibly ordered by the human score (|Spearman of row
    order vs human| above SORTED_HEAD_SPEARMAN; e.g. WMT17's DA files are sorted by score), the
    warning that `max_segments` keeps a biased subset and `sample` should be used."""
    warnings = []
    for lp in dataset.language_pairs:
        human = [it.human for it in dataset.items if it.lp == lp and math.isfinite(it.human)]
        if len(human) < _MIN_HEAD or len(set(human)) < 2:
            continue
        rho = spearman(np.arange(len(human)), np.asarray(human))
        if abs(rho) > SORTED_HEAD_SPEARMAN:
            warnings.append(
                f"dataset {dataset.name!r}, {lp}: the first {len(human)} items are ordered by human score "
                f"(Spearman {rho:+.2f} of row order vs human), so max_segments keeps a biased subset; "
                f"use sample: {{n: {len(human)}, seed: 0}}"
            )
    return warnings


def _sample_units(items: list[Item]) -> dict[str, list[tuple[str, int]]]:
    """Per language pair, the units `sample` draws from: each document named by a `doc_id` (sorted),
    then each item without one as a document of its own (its position)."""
    units: dict[str, list[tuple[str, int]]] = {}
    for lp in sorted({it.lp for it in items}):
        positions = [i for i, it in enumerate(items) if it.lp == lp]
        docs = sorted({items[i].doc_id for i in positions if items[i].doc_id})
        units[lp] = [(doc, -1) for doc in docs] + [("", i) for i in positions if not items[i].doc_id]
    return units


def sample_items(items: list[Item], n: int, seed: int) -> list[Item]:
    """A seeded random subset, stratified per language pair: n units of each pair, a unit being a
    document (all items naming one `doc_id`, so the item level keeps whole documents) or an item
    without a `doc_id`. Order kept; the draw of a pair depends only on (seed, lp), not on other pairs."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"sample needs n (an integer >= 1) and seed (an integer), got n={n!r}, seed={seed!r}")
    chosen: set[tuple[str, int]] = set()
    for lp, units in _sample_units(items).items():
        chosen.update(random.Random(f"{seed}/{lp}").sample(units, min(n, len(units))))
    return [it for i, it in enumerate(items) if (it.doc_id, -1) in chosen or ("", i) in chosen]


def sample_warnings(dataset: Dataset, n: int, seed: int) -> list[str]:
    """The warning that `sample: {n, seed}` asks for more than a language pair has (that pair is kept
    whole, and where no pair has n the label's ~n overstates what was drawn), with the counts drawn."""
    short = {lp: len(units) for lp, units in _sample_units(dataset.items).items() if len(units) < n}
    if not short:
        return list(dataset.warnings)
    counts = ", ".join(f"{lp}: {count}" for lp, count in short.items())
    return [
        *dataset.warnings,
        f"dataset {dataset.name!r}: sample n={n} (seed {seed}) is more than "
        f"{'every' if len(short) == len(dataset.language_pairs) else 'some'} language pair holds, so these are "
        f"kept whole ({counts} items or documents)",
    ]


def select_human(dataset: Dataset, human: str | None) -> Dataset:
    """`dataset` with only the human dimension `human` (None or ``all``: every one; order kept);
    each item's `human` becomes its score on the first selected dimension (NaN where missing)."""
    if human is None or human == ALL_DIMENSIONS:
        dims = list(dataset.human_dims)
    elif human in dataset.human_dims:
        dims = [human]
    else:
        raise UserError(f"dataset {dataset.name!r}: {unknown_name('human dimension', human, dataset.human_dims)}")
    if dims == dataset.human_dims:
        return dataset  # loaders already made the first dimension primary
    primary = dims[0]
    items = [
        replace(it, human=it.humans.get(primary, NAN), humans={d: it.humans[d] for d in dims if d in it.humans})
        for it in dataset.items
    ]
    return replace(dataset, items=items, human_dims=dims)


def blank_positions(items: Sequence[Item], field: str) -> list[int]:
    """Positions (0-based) of the items whose text `field` (one of TEXT_FIELDS) is blank: empty or
    whitespace only; for ``reference``, any of the item's references. What a metric does with such a
    text is its own declaration (`nlgbench.metrics.base.BlankTexts`)."""
    if field not in TEXT_FIELDS:
        raise unknown_name("item field", field, TEXT_FIELDS)
    return [
        i
        for i, item in enumerate(items)
        if any(not text.strip() for text in (item.references if field == "reference" else (getattr(item, field),)))
    ]


def item_name(item: Item) -> str:
    """An item as messages name it: ``lp='de-en' seg_id=7 system='x'`` (catalogue data: seg_id is the
    1-based line number in that lp's files)."""
    return f"lp={item.lp!r} seg_id={item.seg_id!r} system={item.system!r}"


def _first_per_lp(items: list[Item], limit: int) -> list[Item]:
    """The first `limit` items of each language pair, order kept."""
    seen: dict[str, int] = {}
    kept = []
    for item in items:
        count = seen.get(item.lp, 0)
        if count < limit:
            kept.append(item)
            seen[item.lp] = count + 1
    return kept
