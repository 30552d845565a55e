"""Synthetic candidates from references, to spread a teacher's score range (FrugalScore's pseudo-pairs).

Word-level edits, each at a random strength (the fraction of words touched, uniform in
[MIN_STRENGTH, MAX_STRENGTH]): drop words, swap words, substitute words drawn from the corpus
vocabulary, truncate (keep a head); at scale (`SCALE_EDITS`, what `gather_pairs` uses) also delete
one contiguous span and insert words drawn from the corpus vocabulary. Words are
whitespace-separated tokens, so a reference needs at least MIN_WORDS of them; shorter ones get no
synthetic candidate. Everything is seeded: the same references, count and seed give the same
candidates, and a reference's candidates depend only on (seed, its text, k) and, for substitutions
(and insertions), on the vocabulary of all references.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

EDITS = ("drop", "swap", "substitute", "truncate")
SCALE_EDITS = (*EDITS, "delete", "insert")  # `gather_pairs --augment`: also a span deleted, corpus words inserted
MIN_STRENGTH, MAX_STRENGTH = 0.1, 0.7
MIN_WORDS = 3  # fewer words leave too little to edit


@dataclass(frozen=True)
class Synthetic:
    """One synthetic candidate: the reference it was made from, the text, and the edit that made it."""

    reference: str
    candidate: str
    edit: str  # one of EDITS
    strength: float  # the fraction of words the edit touched (asked for)


def edit_words(
    words: list[str], edit: str, strength: float, rng: random.Random, vocabulary: Sequence[str]
) -> list[str]:
    """`words` changed by one edit touching about `strength` of them (at least one word); never empty."""
    n = len(words)
    k = max(1, round(strength * n))
    if edit == "drop":
        gone = set(rng.sample(range(n), min(k, n - 1)))
        return [w for i, w in enumerate(words) if i not in gone]
    if edit == "swap":
        out = list(words)
        for _ in range(max(1, k // 2)):
            i, j = rng.sample(range(n), 2)
            out[i], out[j] = out[j], out[i]
        return out
    if edit == "substitute":
        out = list(words)
        for i in rng.sample(range(n), k):
            out[i] = rng.choice(vocabulary)
        return out
    if edit == "truncate":
        return words[: max(1, n - k)]
    if edit == "delete":  # one contiguous span of k words (at most n - 1)
        k = min(k, n - 1)
        start = rng.randrange(n - k + 1)
        return words[:start] + words[start + k :]
    if edit == "insert":
        out = list(words)
        for _ in range(k):
            out.insert(rng.randrange(len(out) + 1), rng.choice(vocabulary))
        return out
    raise ValueError(f"unknown edit {edit!r} (valid: {', '.join(SCALE_EDITS)})")


def synthetic_candidates(
    references: Sequence[str], per_reference: int, seed: int, edits: Sequence[str] = EDITS
) -> list[Synthetic]:
    """`per_reference` synthetic candidates for each distinct reference of at least MIN_WORDS words,
    in the references' order; the edit cycles through `edits` (shifted per reference), so each edit
    makes about an equal share of them. A candidate equal to its reference (a swap of equal words, a
    substitution by the same word) is left out."""
    distinct = list(dict.fromkeys(references))
    vocabulary = sorted({w for ref in distinct for w in ref.split()})
    out: list[Synthetic] = []
    for ref in distinct:
        words = ref.split()
        if len(words) < MIN_WORDS:
            continue
        shift = random.Random(f"{seed}/{ref}").randrange(len(edits))
        for k in range(per_reference):
            rng = random.Random(f"{seed}/{k}/{ref}")
            edit = edits[(k + shift) % len(edits)]
            strength = rng.uniform(MIN_STRENGTH, MAX_STRENGTH)
            candidate = " ".join(edit_words(words, edit, strength, rng, vocabulary))
            if candidate != " ".join(words):
                out.append(Synthetic(reference=ref, candidate=candidate, edit=edit, strength=round(strength, 4)))
    return out
