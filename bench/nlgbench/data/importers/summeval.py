"""SummEval's ``model_annotations.aligned(.paired).jsonl`` (Fabbri et al. 2021): one item per summary,
human = per dimension the mean over the chosen annotator group."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlgbench.data.importers.output import ImportSummary, Record, write_items
from nlgbench.data.text import json_object
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.files import read_lines

#: SummEval's annotator groups: 3 experts and 5 crowd workers (Mechanical Turk) per summary.
ANNOTATORS = {"expert": "expert_annotations", "turker": "turker_annotations"}


def summeval_records(src: str | os.PathLike[str], *, annotators: str = "expert") -> tuple[list[Record], list[str]]:
    """Items of SummEval's ``model_annotations.aligned(.paired).jsonl`` and notes for the user.

    One item per line: seg_id and doc_id = ``id`` (the CNN/DM story), system = ``model_id``,
    hypothesis = ``decoded``, references = ``references`` (CNN/DM highlights first, then 10 crowd
    references), source = ``text`` (only in the *paired* file; else ""), human = per dimension the
    mean over the chosen annotators (``expert``: 3, the usual choice in papers; ``turker``: 5).
    """
    if annotators not in ANNOTATORS:
        raise unknown_name("SummEval annotator group", annotators, ANNOTATORS)
    path = Path(src)
    key = ANNOTATORS[annotators]
    records: list[Record] = []
    first_at: dict[tuple[str, str], int] = {}
    without_text = 0
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        obj = json_object(line, where)
        missing = [k for k in ("id", "model_id", "decoded", "references", key) if k not in obj]
        if missing:
            raise UserError(f"{where}: missing field(s) {', '.join(missing)} (not SummEval's annotation layout?)")
        doc_id, system = _json_text(obj, "id", where), _json_text(obj, "model_id", where)
        if (doc_id, system) in first_at:
            raise UserError(
                f"{where}: duplicate summary id={doc_id!r} model_id={system!r} "
                f"(first at line {first_at[doc_id, system]})"
            )
        first_at[doc_id, system] = number
        if "text" in obj:
            source = _json_text(obj, "text", where)
        else:
            source = ""
            without_text += 1
        records.append(
            {
                "lp": "en",
                "seg_id": doc_id,
                "system": system,
                "doc_id": doc_id,
                "source": source,
                "references": _json_references(obj.get("references"), where),
                "hypothesis": _json_text(obj, "decoded", where),
                "human": _mean_annotations(obj[key], f"{where}: {key}"),
            }
        )
    if not records:
        raise UserError(f"{path} has no summaries")
    dimensions = sorted({d for r in records for d in r["human"]})
    for r in records:  # every item names every dimension; one nobody rated is null
        r["human"] = {d: r["human"].get(d) for d in dimensions}
    notes = []
    if without_text:
        notes.append(
            f"{without_text} lines have no 'text' (the unpaired file?): source left empty; "
            "SummEval's data_processing/pair_data.py adds the CNN/DM articles"
        )
    return records, notes


def import_summeval(
    src: str | os.PathLike[str], out: str | os.PathLike[str], *, annotators: str = "expert"
) -> ImportSummary:
    """Import SummEval's annotation file `src` into the JSONL file `out` (see :func:`summeval_records`)."""
    records, notes = summeval_records(src, annotators=annotators)
    return write_items(records, out, src=src, notes=notes)


def _mean_annotations(value: Any, where: str) -> dict[str, float | None]:
    """Per dimension, the mean of the annotators' scores that are present (null if none is)."""
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: expected a non-empty list of annotations, got {value!r}")
    scores: dict[str, list[float]] = {}
    for index, annotation in enumerate(value):
        if not isinstance(annotation, dict):
            raise UserError(f"{where}[{index}]: expected an object of dimension scores, got {annotation!r}")
        for dim, score in annotation.items():
            scores.setdefault(str(dim), [])
            if score is None:
                continue
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise UserError(f"{where}[{index}].{dim}: score {score!r} is not a finite number")
            scores[str(dim)].append(float(score))
    return {dim: (sum(values) / len(values) if values else None) for dim, values in scores.items()}


def _json_text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise UserError(f"{where}: field {key!r} must be text, got {value!r}")
    return value


def _json_references(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: field 'references' must be a non-empty list of texts")
    return list(value)
