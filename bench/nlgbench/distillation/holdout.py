"""The evaluation data held out of the distillation pairs (`--holdout`): every source and reference
text of the named datasets is removed from the pairs before labelling (a pair goes when its
reference or its candidate is one of them, texts compared in Unicode NFC with whitespace
normalised, as the leakage guard compares them: `nlgbench.data.training_texts.text_hash`), counted per
dataset, and the final pairs are checked with the leakage guard's own units
(`nlgbench.data.training_texts.training_hashes`), so a student made from them passes it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nlgbench.data.items import Dataset
from nlgbench.data.loaders import load_dataset
from nlgbench.data.training_texts import overlapping_items, text_hash, training_hashes
from nlgbench.foundations.errors import UserError


class TextPair(Protocol):
    """What the holdout reads of a pair (`nlgbench.distillation.pairs.Pair`)."""

    @property
    def reference(self) -> str: ...
    @property
    def candidate(self) -> str: ...


P = TypeVar("P", bound=TextPair)


def holdout_names(values: Iterable[str]) -> list[str]:
    """`--holdout` values, each a name or a comma-separated list of names, in order, each once."""
    return list(dict.fromkeys(name.strip() for value in values for name in value.split(",") if name.strip()))


def own_data_file(name: str) -> bool:
    """Whether a `--pairs` / `--holdout` name means an own-data file (an existing path, or a .jsonl /
    .tsv name: its own clear errors) rather than a catalogue dataset (unknown names: the closest ones)."""
    path = Path(name).expanduser()
    return path.exists() or path.suffix.lower() in (".jsonl", ".tsv")


def load_named(name: str) -> Dataset:
    """A catalogue dataset by name, or an own-data file by path (as `--pairs` reads them)."""
    return load_dataset(path=Path(name).expanduser()) if own_data_file(name) else load_dataset(name)


@dataclass
class Holdout:
    """The held-out datasets, the hashes of their texts, and the pairs removed per dataset."""

    datasets: list[Dataset] = field(default_factory=list)
    texts: dict[str, set[str]] = field(default_factory=dict)  # dataset name -> text hashes (sources, references)
    removed: dict[str, int] = field(default_factory=dict)  # dataset name -> pairs removed for touching its texts
    removed_total: int = 0

    @classmethod
    def load(cls, names: Sequence[str], sources: Sequence[str] = ()) -> Holdout:
        """The datasets `names` (`holdout_names` of them) loaded whole; a name that is also a pairs
        source is refused (everything would be held out)."""
        wanted = holdout_names(names)
        both = [name for name in wanted if name in set(sources)]
        if both:
            raise UserError(f"{both[0]} is both a --pairs source and held out (--holdout); name it in one of them")
        out = cls()
        for name in wanted:
            dataset = load_named(name)
            out.datasets.append(dataset)
            out.texts[dataset.name] = {
                text_hash(text) for it in dataset.items for text in (it.source, *it.references) if text.strip()
            }
            out.removed[dataset.name] = 0
        return out

    def remove(self, pairs: Sequence[P]) -> list[P]:
        """`pairs` without those whose reference or candidate is a held-out text; counted."""
        if not self.texts:
            return list(pairs)
        every = set().union(*self.texts.values())
        kept = []
        for p in pairs:
            hashes = {text_hash(p.reference), text_hash(p.candidate)}
            if every.isdisjoint(hashes):
                kept.append(p)
                continue
            self.removed_total += 1
            for name, texts in self.texts.items():
                if not texts.isdisjoint(hashes):
                    self.removed[name] += 1
        return kept

    def check(self, pairs: Sequence[TextPair]) -> None:
        """The leakage guard's test of the final pairs against every held-out dataset: no item's
        reference, nor (reference, hypothesis) pair, among the pairs' units. Fails only on a bug."""
        units = set(training_hashes((p.reference, p.candidate) for p in pairs))
        for dataset in self.datasets:
            hits = overlapping_items(units, dataset)
            if hits:
                raise RuntimeError(f"held-out dataset {dataset.name} overlaps the pairs at {hits[0].key} (a bug)")

    def counts(self) -> dict[str, Any]:
        """distill.json's `held_out`: pairs removed in all and per dataset, the texts held out."""
        return {
            "pairs": self.removed_total,
            "by_dataset": dict(self.removed),
            "texts": len(set().union(*self.texts.values())) if self.texts else 0,
        }

    def summary(self) -> str:
        per = ", ".join(f"{name} {n}" for name, n in self.removed.items())
        return (
            f"{self.removed_total} pairs touching a source or reference of the held-out data removed ({per}; "
            "leakage guard: no overlap left)"
        )
