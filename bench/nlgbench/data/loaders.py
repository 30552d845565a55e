"""Loading a dataset: `load_dataset` reads a catalogue dataset (fetched into the cache, parsed per
format, ``da`` or ``mqm``), a user's own file (`nlgbench.data.userfile`) or a Hugging Face dataset
(`nlgbench.data.hubdata`), then keeps the requested subset and human dimensions. Bad input raises
:class:`nlgbench.foundations.errors.UserError` (one line)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nlgbench.data.catalogue import Progress, catalogue_entry, fetch
from nlgbench.data.hubdata import load_hub
from nlgbench.data.hubsource import HubSource, hub_warnings
from nlgbench.data.items import Dataset, Item, select_human, take_subset
from nlgbench.data.text import parse_score, parse_seg_id
from nlgbench.data.userfile import load_user_file
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, split_lines, utf8_text

#: DA file field name (in the catalogue ``pattern``) for each item field.
_DA_FIELDS = {"source": "source", "reference": "reference", "hypothesis": "mt-system", "human": "human"}


def load_dataset(
    name: str | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    hf: HubSource | None = None,
    max_segments: int | None = None,
    human: str | None = None,
    sample: tuple[int, int] | None = None,
    columns: Sequence[str] = (),
    catalogue: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> Dataset:
    """Load a catalogue dataset (`name`), a user file (`path`) or a Hugging Face dataset (`hf`); exactly
    one of them.

    `sample` = (n, seed) keeps a seeded random subset instead of the head (`sample_items`).
    `columns` names further columns of a user file to carry through to scores.csv (`Item.extra`).

    `human` selects the human dimension(s) to correlate with: one name, or None / ``all`` for
    every dimension of the data (the first is primary: `Item.human`).

    `max_segments` keeps the first N items of each language pair in the stable order
    (for MQM data that is N items, i.e. (segment, system) pairs, not N segments).
    A catalogue dataset is always parsed whole first, and its item count checked
    against the catalogue's ``expected_items``.
    """
    if sum(given is not None for given in (name, path, hf)) != 1:
        raise UserError("load a dataset by exactly one of a catalogue name, a file path or a Hugging Face dataset")
    if max_segments is not None and (
        isinstance(max_segments, bool) or not isinstance(max_segments, int) or max_segments < 1
    ):
        raise UserError(f"max_segments must be a positive integer, got {max_segments!r}")
    if columns and path is None:
        shown = name if hf is None else hf.label
        raise UserError(f"dataset {shown!r}: columns are carried from own data files only")
    if path is not None:
        dataset = load_user_file(Path(path), tuple(columns))
    elif hf is not None:
        dataset = load_hub(hf)
    else:
        assert name is not None
        dataset = _load_catalogue_dataset(name, catalogue, progress)
    take_subset(dataset, max_segments, sample)
    if hf is not None:
        dataset.warnings = [*hub_warnings(hf), *dataset.warnings]  # after take_subset, which sets its own
    return select_human(dataset, human)


def _load_catalogue_dataset(name: str, catalogue: dict[str, Any] | None, progress: Progress | None) -> Dataset:
    """Fetch and parse a catalogue dataset, then check its item count."""
    entry = catalogue_entry(name, catalogue)
    local = fetch(name, progress, catalogue=catalogue)
    reader = _CatalogueReader(name, entry, local)
    lps = sorted(str(lp) for lp in entry["language_pairs"])
    items: list[Item] = []
    for lp in lps:
        items.extend(reader.da(lp) if entry["format"] == "da" else reader.mqm(lp))
    items.sort(key=lambda item: item.key)
    expected = entry.get("expected_items")
    if expected is not None and len(items) != expected:
        raise UserError(f"dataset {name!r}: expected {expected} items (catalogue), got {len(items)} from {local}")
    return Dataset(name=name, items=items, has_systems=entry["format"] == "mqm", files=reader.files)


class _CatalogueReader:
    """Reads one catalogue dataset's cached files, recording what was read."""

    def __init__(self, name: str, entry: dict[str, Any], local: Path) -> None:
        self.name = name
        self.entry = entry
        self.local = local
        self.files: dict[str, str] = {}

    def lines(self, rel: str) -> list[str]:
        """Lines of a cached catalogue file, re-checking its sha256."""
        sums = self.entry["files"]
        if rel not in sums:
            raise UserError(f"dataset catalogue: {self.name!r} uses {rel!r} but does not list it under 'files'")
        key = f"{self.entry['folder']}/{rel}"
        data = read_bytes(self.local / rel)
        sha = hashlib.sha256(data).hexdigest()
        if sha != sums[rel]:
            raise UserError(f"checksum mismatch for {self.local / rel}: expected sha256 {sums[rel]}, got {sha}")
        self.files[key] = sha
        return split_lines(utf8_text(self.local / rel, data, data_file=True))

    def check_counts(self, lp: str, columns: dict[str, list[str]]) -> int:
        """The common line count of `columns` (rel -> lines), or an error listing them."""
        counts = {rel: len(lines) for rel, lines in columns.items()}
        if len(set(counts.values())) != 1:
            listing = ", ".join(f"{rel}: {n}" for rel, n in counts.items())
            raise UserError(f"dataset {self.name!r}, {lp}: files have unequal line counts ({listing})")
        return next(iter(counts.values()))

    def da(self, lp: str) -> list[Item]:
        """Items of one DA language pair: four parallel files, seg_id = line number."""
        pattern = self.entry.get("pattern")
        if not isinstance(pattern, str):
            raise UserError(f"dataset catalogue: DA entry {self.name!r} lacks a 'pattern'")
        rels = {fld: pattern.format(field=stem, lp=lp) for fld, stem in _DA_FIELDS.items()}
        cols = {rel: self.lines(rel) for rel in rels.values()}
        n = self.check_counts(lp, cols)
        src, ref, hyp, hum = (cols[rels[f]] for f in ("source", "reference", "hypothesis", "human"))
        items = []
        for i in range(n):
            where = f"{self.entry['folder']}/{rels['human']} line {i + 1}"
            items.append(Item(lp, i + 1, "", src[i], ref[i], hyp[i], parse_score(hum[i], where)))
        return items

    def mqm(self, lp: str) -> list[Item]:
        """Items of one MQM language pair: rated (segment, system) pairs from the score file."""
        layout = (self.entry.get("layout") or {}).get(lp)
        if not isinstance(layout, dict) or not all(k in layout for k in ("source", "reference", "scores", "systems")):
            raise UserError(
                f"dataset catalogue: MQM entry {self.name!r} needs layout.{lp} with source, reference, scores, systems"
            )
        systems: dict[str, str] = {str(s): str(rel) for s, rel in layout["systems"].items()}
        cols = {rel: self.lines(rel) for rel in [layout["source"], layout["reference"], *systems.values()]}
        n = self.check_counts(lp, cols)
        src, ref = cols[layout["source"]], cols[layout["reference"]]
        scores_rel = str(layout["scores"])
        score_lines = self.lines(scores_rel)
        where_file = f"{self.entry['folder']}/{scores_rel}"
        if not score_lines or score_lines[0].split()[:1] != ["system"]:
            raise UserError(f"{where_file}: expected a header line starting with 'system'")
        items = []
        seen: set[tuple[str, int]] = set()
        for number, line in enumerate(score_lines[1:], start=2):
            where = f"{where_file} line {number}"
            parts = line.split()
            if len(parts) != 3:
                raise UserError(f"{where}: expected 'system score seg_id', got {line!r}")
            system, score, seg_text = parts
            if system not in systems:
                raise UserError(
                    f"{where}: system {system!r} has no output file in the catalogue (known: {', '.join(systems)})"
                )
            seg_id = parse_seg_id(seg_text, where)
            if not 1 <= seg_id <= n:
                raise UserError(f"{where}: seg_id {seg_id} is outside 1..{n} (the text files' lines)")
            if (system, seg_id) in seen:
                raise UserError(f"{where}: duplicate score for system {system!r} seg_id {seg_id}")
            seen.add((system, seg_id))
            if score == "None":
                continue  # unrated segment: documented to be dropped
            hyp = cols[systems[system]][seg_id - 1]
            items.append(Item(lp, seg_id, system, src[seg_id - 1], ref[seg_id - 1], hyp, parse_score(score, where)))
        return items
