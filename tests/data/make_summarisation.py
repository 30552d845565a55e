"""Writes tests/data/summarisation.jsonl: a small SYNTHETIC summarisation file in nlgbench's own-data
format, with several references per item and four human dimensions (SummEval's), for the example
spec examples/summarisation.yaml and the tests. Not real data: documents are generated from
templates, system outputs degrade a reference by a system-specific amount, and human scores follow
that degradation with seeded noise (so correlations are positive but not perfect). Rerun to
regenerate: `python tests/data/make_summarisation.py` (deterministic)."""

from __future__ import annotations

import json
import random
from pathlib import Path

SUBJECTS = [
    "The city council",
    "A local hospital",
    "The national team",
    "A small startup",
    "The university",
    "The weather service",
    "A regional airline",
    "The central bank",
]
VERBS = ["announced", "approved", "rejected", "postponed", "celebrated", "reviewed", "expanded", "cancelled"]
OBJECTS = [
    "a new budget plan",
    "the summer festival",
    "a research programme",
    "its annual report",
    "a bridge repair project",
    "the ticket prices",
    "a training centre",
    "the merger talks",
]
DETAILS = [
    "after a long debate on Monday",
    "despite strong protests from residents",
    "following a surprise vote",
    "to the delight of local businesses",
    "amid growing financial pressure",
    "for the third time this year",
]
SYSTEMS = {"M0": 0.0, "M1": 0.15, "M2": 0.3, "M3": 0.5}  # fraction of reference words dropped or replaced
DIMENSIONS = ("coherence", "consistency", "fluency", "relevance")
N_DOCS = 8
N_REFERENCES = 3


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(DETAILS)}."


def degrade(text: str, amount: float, rng: random.Random) -> str:
    """Drop or replace about `amount` of the words (a worse system changes more)."""
    words = text.split()
    out = []
    for word in words:
        r = rng.random()
        if r < amount / 2:
            continue
        out.append(rng.choice(["thing", "very", "also", "some", "the"]) if r < amount else word)
    return " ".join(out or words[:1])


def main() -> None:
    rng = random.Random(14)
    lines = []
    for d in range(N_DOCS):
        doc_id = f"doc-{d:02d}"
        source = " ".join(sentence(rng) for _ in range(4))
        references = [" ".join(source.split(". ")[k % 4].split()) + "." for k in range(N_REFERENCES)]
        references = [r if r.endswith(".") else r + "." for r in references]
        for system, amount in SYSTEMS.items():
            hypothesis = degrade(references[0], amount, rng)
            quality = 5 - 6 * amount
            human = {dim: round(min(5.0, max(1.0, quality + rng.gauss(0, 0.6))) * 3) / 3 for dim in DIMENSIONS}
            if d == 3 and system == "M2":
                human["fluency"] = None  # a missing annotation
            lines.append(
                {
                    "lp": "en",
                    "seg_id": f"{doc_id}-{system}",
                    "system": system,
                    "doc_id": doc_id,
                    "source": source,
                    "references": references,
                    "hypothesis": hypothesis,
                    "human": human,
                }
            )
    path = Path(__file__).with_name("summarisation.jsonl")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    print(f"{len(lines)} items -> {path}")


if __name__ == "__main__":
    main()
