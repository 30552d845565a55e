"""What every importer writes: one JSON object per item,

    {"lp", "seg_id", "system", "doc_id"?, "source", "references": [...], "hypothesis", "human"}

where ``human`` is a number or a mapping dimension -> number or null (missing), written atomically,
and the `ImportSummary` of it the command prints."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import refuse_output_link, write_output
from nlgbench.foundations.names import refuse_name

Record = dict[str, Any]  # one output object, in the field order written


@dataclass(frozen=True)
class ImportSummary:
    """What an importer wrote: counts a user checks against the release's documentation."""

    out: Path
    items: int
    systems: int  # distinct non-empty system names
    documents: int  # distinct doc_id values (0: the format has none)
    references_min: int  # references per item, fewest
    references_max: int  # references per item, most
    dimensions: tuple[str, ...]  # human dimensions; () when human is one number per item
    missing: Mapping[str, int]  # dimension ('human' when it is one number per item) -> items whose value is null
    notes: tuple[str, ...] = ()  # what the user should know (e.g. no source texts in the file)

    def line(self, fmt: str) -> str:
        """One line for the terminal."""
        refs = (
            str(self.references_min)
            if self.references_min == self.references_max
            else (f"{self.references_min}-{self.references_max}")
        )
        if self.dimensions:
            missing = ", ".join(f"{d} {n}" for d, n in self.missing.items() if n) or "none"
            human = f"human dimensions {', '.join(self.dimensions)} (missing: {missing})"
        else:
            unscored = self.missing.get("human", 0)
            human = "human: one score per item" + (f" (missing: {unscored})" if unscored else "")
        notes = "".join(f"; note: {note}" for note in self.notes)
        return (
            f"{fmt}: wrote {self.items} items to {self.out} ({self.systems} systems, {self.documents} documents, "
            f"{refs} reference{'' if refs == '1' else 's'} per item, {human}){notes}"
        )


def write_items(
    records: Sequence[Record],
    out: str | os.PathLike[str],
    *,
    src: str | os.PathLike[str] | None = None,
    notes: Iterable[str] = (),
) -> ImportSummary:
    """Write `records` as JSONL to `out` atomically (`write_output`: a temporary file, then a rename; a
    link at `out` refused).

    `out` must end in ``.jsonl`` (the loader's type) and must not be the input `src`.
    """
    target = Path(out)
    if target.suffix.lower() != ".jsonl":
        raise UserError(f"output {target}: must end in .jsonl (nlgbench reads own data as .jsonl)")
    if src is not None and target.exists() and target.resolve() == Path(src).resolve():
        raise UserError(f"output {target} is the input file; choose another --out")
    refuse_output_link(target, "output")
    if target.is_dir():
        raise UserError(f"output {target} is a folder")
    if not records:
        raise UserError(f"nothing to write to {target}: the input has no items")
    for n, record in enumerate(records, 1):  # what loading the file would refuse, refused before it is written
        where = f"{src or 'the input'}, item {n}"
        for field in ("lp", "system", "doc_id", "seg_id"):
            if isinstance(record.get(field), str):
                refuse_name(record[field], field, where)
        for dim in record["human"] if isinstance(record["human"], dict) else ():
            refuse_name(dim, "human dimension", where)
    summary = summarize(records, target, notes)
    text = "".join(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n" for record in records)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_output(target, text, "output")
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    return summary


def summarize(records: Sequence[Record], out: Path, notes: Iterable[str] = ()) -> ImportSummary:
    """Counts of `records` for the summary line."""
    ref_counts = [len(r["references"]) for r in records] or [0]
    dimensions = sorted({d for r in records if isinstance(r["human"], dict) for d in r["human"]})
    missing = {
        d: sum(1 for r in records if isinstance(r["human"], dict) and r["human"].get(d) is None) for d in dimensions
    }
    if not dimensions:
        missing = {"human": sum(1 for r in records if r["human"] is None)}
    blank = {
        "hypothesis": sum(1 for r in records if not r["hypothesis"].strip()),
        "reference": sum(1 for r in records if any(not ref.strip() for ref in r["references"])),
    }
    notes = [
        *notes,
        *(
            f"{n} of {len(records)} items have a blank {field} (each metric scores or refuses it: docs, Metrics)"
            for field, n in blank.items()
            if n
        ),
    ]
    return ImportSummary(
        out=out,
        items=len(records),
        systems=len({r["system"] for r in records if r["system"]}),
        documents=len({r["doc_id"] for r in records if "doc_id" in r}),
        references_min=min(ref_counts),
        references_max=max(ref_counts),
        dimensions=tuple(dimensions),
        missing=missing,
        notes=tuple(notes),
    )
