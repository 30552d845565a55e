"""The training pairs of `nlgbench distill` (FrugalScore's recipe): (reference, candidate) pairs read
from pairs files (JSONL / TSV with `reference` and `candidate`: kind `given`), catalogue datasets or
own-data files (every reference x system output of the same source: `system`; every two distinct
references of one source: `paraphrase`), the evaluation data's texts held out (`holdout`), a seeded
subset, synthetic candidates (`augment`: `synthetic`), random unrelated pairs as a stated share
(`random`), their content hash, and the split by reference (no reference on both sides)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.data.catalogue import sha256_file
from nlgbench.data.text import jsonl_records, tsv_table
from nlgbench.distillation.augment import SCALE_EDITS, synthetic_candidates
from nlgbench.distillation.holdout import Holdout, load_named, own_data_file
from nlgbench.distillation.steplog import Log, log_stderr
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_text

PAIR_FIELDS = ("reference", "candidate")
KINDS = ("given", "system", "paraphrase", "synthetic", "random")
MAX_RANDOM_SHARE = 0.5


@dataclass(frozen=True)
class Pair:
    reference: str
    candidate: str
    origin: str  # the source's name, `augment:<edit>` or `random`
    kind: str = "given"  # one of KINDS


@dataclass(frozen=True)
class PairSource:
    """What one `--pairs` value read."""

    name: str
    kind: str  # "pairs file", "catalogue dataset" or "own data file"
    pairs: int
    files: dict[str, str]  # file -> sha256


def read_pairs(source: str) -> tuple[list[Pair], PairSource]:
    """The pairs of one source: a `.jsonl` / `.tsv` pairs file (fields `reference`, `candidate`), an
    own-data file (fields of "Your own data"), or a catalogue dataset's name."""
    path = Path(source).expanduser()
    if path.suffix.lower() in (".jsonl", ".tsv") and path.is_file() and _is_pairs_file(path):
        pairs = _read_pairs_file(path)
        return pairs, PairSource(path.stem, "pairs file", len(pairs), {str(path): sha256_file(path)})
    dataset = load_named(source)
    kind = "own data file" if own_data_file(source) else "catalogue dataset"
    pairs = [Pair(ref, it.hypothesis, dataset.name, "system") for it in dataset.items for ref in it.references]
    references: dict[tuple[str, object], dict[str, None]] = {}  # per source (lp, seg_id): its distinct references
    for it in dataset.items:
        references.setdefault((it.lp, it.seg_id), {}).update(dict.fromkeys(it.references))
    pairs += [
        Pair(a, b, dataset.name, "paraphrase") for refs in references.values() for a in refs for b in refs if a != b
    ]
    return pairs, PairSource(dataset.name, kind, len(pairs), dict(dataset.files))


def _is_pairs_file(path: Path) -> bool:
    """Whether a .jsonl / .tsv file holds pairs (its first record or header names `candidate`)."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        first = next((line for line in fh if line.strip()), "")
    if path.suffix.lower() == ".tsv":
        return "candidate" in [name.strip() for name in first.rstrip("\r\n").split("\t")]
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and "candidate" in record


def _read_pairs_file(path: Path) -> list[Pair]:
    """Pairs of a JSONL file (`{"reference": .., "candidate": ..}` per line) or a TSV file with a
    header row naming `reference` and `candidate`; other fields are ignored."""
    text = read_text(path)  # the data loader's rules: UTF-8, '\n' lines, verbatim TSV fields, no duplicate keys
    records: list[tuple[str, dict[str, Any]]]
    if path.suffix.lower() == ".tsv":
        header, rows = tsv_table(path, text)
        records = [(f"{path} line {number}", dict(zip(header, values, strict=True))) for number, values in rows]
    else:
        records = list(jsonl_records(path, text))
    pairs = []
    for where, record in records:
        for name in PAIR_FIELDS:
            if not isinstance(record.get(name), str):
                raise UserError(f"{where}: field {name!r} must be text, got {record.get(name)!r}")
        pairs.append(Pair(record["reference"], record["candidate"], path.stem))
    if not pairs:
        raise UserError(f"pairs file {path} has no pairs")
    return pairs


def gather_pairs(
    sources: Sequence[str],
    *,
    max_pairs: int | None,
    augment: int,
    seed: int,
    random_share: float = 0.0,
    holdout: Sequence[str] = (),
    log: Log = log_stderr,
) -> tuple[list[Pair], list[PairSource], dict[str, Any]]:
    """Every source's pairs, blank ones left out and duplicates once, every pair touching a text of
    the `holdout` datasets removed; a seeded subset of `max_pairs`; `augment` synthetic candidates
    per distinct reference; random unrelated pairs making `random_share` of the result. The same
    arguments give the same pairs in the same order. Returns the pairs, the sources and the counts
    (`held_out`: what the holdout removed, by dataset and in all; the mix: `kinds(pairs)`)."""
    if not 0 <= random_share <= MAX_RANDOM_SHARE:
        raise UserError(f"random-share must be between 0 and {MAX_RANDOM_SHARE}, got {random_share}")
    held = Holdout.load(holdout, sources)
    pairs: list[Pair] = []
    read: list[PairSource] = []
    for source in sources:
        got, info = read_pairs(source)
        pairs += got
        read.append(info)
    counts: dict[str, Any] = {"read": len(pairs)}
    kept = [p for p in pairs if p.reference.strip() and p.candidate.strip()]
    counts["blank"] = len(pairs) - len(kept)
    pairs = _unique(kept)
    counts["duplicate"] = len(kept) - len(pairs)
    pairs = held.remove(pairs)
    if max_pairs is not None and len(pairs) > max_pairs:
        chosen = set(random.Random(f"{seed}/max_pairs").sample(range(len(pairs)), max_pairs))
        pairs = [p for i, p in enumerate(pairs) if i in chosen]
    counts["kept"] = len(pairs)
    if augment:
        made = synthetic_candidates([p.reference for p in pairs], augment, seed, SCALE_EDITS)
        before = len(pairs)
        made_pairs = [Pair(s.reference, s.candidate, f"augment:{s.edit}", "synthetic") for s in made]
        pairs = _unique(pairs + held.remove(made_pairs))
        counts["synthetic"] = len(pairs) - before
    if random_share:
        made_random = held.remove(random_pairs(pairs, random_share, seed))
        pairs += made_random
        counts["random"] = len(made_random)
    if not pairs:
        raise UserError(f"no (reference, candidate) pairs in {', '.join(sources)}")
    if holdout:
        counts["held_out"] = held.counts()
        held.check(pairs)  # the leakage guard's own test, on the final pairs
    by_kind = kinds(pairs)
    log(
        f"pairs: {counts['read']} read from {', '.join(f'{s.name} ({s.pairs})' for s in read)}; "
        f"{counts['blank']} blank and {counts['duplicate']} duplicate left out; "
        + (held.summary() + "; " if holdout else "")
        + f"{counts['kept']} kept"
        + (f" (seeded subset of max_pairs={max_pairs})" if max_pairs is not None else "")
        + (f"; {counts.get('synthetic', 0)} synthetic candidates added ({augment} per reference)" if augment else "")
        + f"; {len(pairs)} in all ("
        + ", ".join(f"{n} {kind}" for kind, n in by_kind.items())
        + (f"; random share {random_share})" if random_share else ")")
    )
    return pairs, read, counts


def kinds(pairs: Sequence[Pair]) -> dict[str, int]:
    """The mix: pairs per kind (KINDS order, kinds present only)."""
    return {kind: n for kind in KINDS if (n := sum(p.kind == kind for p in pairs))}


def random_pairs(pairs: Sequence[Pair], share: float, seed: int) -> list[Pair]:
    """FrugalScore's random pairs: a reference with a candidate of another source (never one paired
    with it in `pairs`), seeded, as many as make `share` of `pairs` plus them; fewer where the
    data has too few distinct texts to find them."""
    wanted = round(share / (1 - share) * len(pairs))
    references = list(dict.fromkeys(p.reference for p in pairs))
    pool = list(dict.fromkeys(p.candidate for p in pairs if p.kind in ("system", "given"))) or references
    partners: dict[str, set[str]] = {}
    for p in pairs:
        partners.setdefault(p.reference, {p.reference}).add(p.candidate)
    rng = random.Random(f"{seed}/random")
    out: dict[tuple[str, str], Pair] = {}
    for _ in range(20 * wanted):
        if len(out) >= wanted:
            break
        reference, candidate = rng.choice(references), rng.choice(pool)
        if candidate not in partners[reference] and (reference, candidate) not in out:
            out[(reference, candidate)] = Pair(reference, candidate, "random", "random")
    return list(out.values())


def _unique(pairs: Sequence[Pair]) -> list[Pair]:
    """`pairs` with each (reference, candidate) once, the first kept."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in pairs:
        if (p.reference, p.candidate) not in seen:
            seen.add((p.reference, p.candidate))
            out.append(p)
    return out


def pairs_sha256(pairs: Sequence[Pair]) -> str:
    """The content hash of the pairs' texts in order (their origins are not part of it)."""
    return hashlib.sha256(json.dumps([[p.reference, p.candidate] for p in pairs]).encode("utf-8")).hexdigest()


def split_by_reference(pairs: Sequence[Pair], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, validation) indices: a seeded `val_fraction` of the distinct references with all
    their pairs is held out, so no reference is seen on both sides."""
    refs = list(dict.fromkeys(p.reference for p in pairs))
    if len(refs) < 2:
        raise UserError(f"the pairs have {len(refs)} distinct reference(s); a held-out split needs at least 2")
    random.Random(f"{seed}/split").shuffle(refs)
    n_val = min(len(refs) - 1, max(1, round(val_fraction * len(refs))))
    held = set(refs[:n_val])
    val = [i for i, p in enumerate(pairs) if p.reference in held]
    train = [i for i, p in enumerate(pairs) if p.reference not in held]
    return train, val
