"""The record of the texts a distilled student was trained on: `nlgbench distill` writes, beside the
student's `distill.json`, `training_texts.sha256` (hashes of every training reference and (reference,
candidate) pair); the leakage guard (`nlgbench.execution.leakage`) and distillation's holdout read
them. It lies here, below both, so neither imports the other for it.

Texts are compared in Unicode normal form NFC (canonical equivalence: the same characters, however
encoded, such as "é" as one code point or as "e" and a combining accent) with whitespace runs as one
space. NFC leaves an NFC text (every ASCII text among them) as it is, so the hashes of such texts are
those recorded before texts were normalised; a student recorded before (distill.json without
`data.texts_form`) is checked with its evaluation texts hashed as NFC, as NFD and as written. Not NFKC:
compatibility forms ("x²" and "x2", "ﬁ" and "fi", "…" and "...") are different texts to a metric."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from nlgbench.data.items import Dataset, Item
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.version import __version__

DISTILL_FILE = "distill.json"
DISTILL_FORMAT = 1  # distill.json's `format`: what this nlgbench writes; a record without one is format 1
TEXTS_FILE = "training_texts.sha256"  # one hash per line: every reference and (reference, candidate) pair seen
Form = Literal["NFC", "NFD"]  # a Unicode normal form the guard hashes texts in
TEXT_FORM: Form = "NFC"  # distill.json's `data.texts_form`: the normal form texts are hashed in
LEGACY_FORMS: tuple[Form | None, ...] = ("NFC", "NFD", None)  # a record without `texts_form`; None: as written


def text_hash(text: str, form: Form | None = TEXT_FORM) -> str:
    """16 hex digits of the sha256 of a text in Unicode normal form `form` (None: as written) with
    whitespace runs as one space."""
    normal = text if form is None else unicodedata.normalize(form, text)
    return hashlib.sha256(" ".join(normal.split()).encode("utf-8")).hexdigest()[:16]


def training_hashes(pairs: Iterable[tuple[str, str]], form: Form | None = TEXT_FORM) -> list[str]:
    """The leakage guard's units of (reference, candidate) pairs, sorted: `r:<hash>` per reference,
    `p:<hash>` per pair (texts in normal form `form`). A candidate alone is not one: short outputs
    ("Thank you.") recur across data sets, and a text scored against another reference is not the
    evaluated pair."""
    pairs = list(pairs)
    refs = {f"r:{text_hash(reference, form)}" for reference, _ in pairs}
    return sorted(
        refs
        | {f"p:{text_hash(text_hash(reference, form) + text_hash(candidate, form))}" for reference, candidate in pairs}
    )


def units_text(units: Sequence[str]) -> str:
    """`training_texts.sha256` as written: one unit a line."""
    return "".join(unit + "\n" for unit in units)


def overlapping_items(units: set[str], dataset: Dataset, forms: Sequence[Form | None] = (TEXT_FORM,)) -> list[Item]:
    """The items of `dataset` with a reference, or a (reference, hypothesis) pair, among the training
    `units` (`training_hashes`), its texts hashed in each of `forms`: what the guard refuses, and what
    distillation's holdout must leave none of."""
    return [
        it
        for it in dataset.items
        if any(
            not units.isdisjoint(training_hashes([(ref, it.hypothesis) for ref in it.references], form))
            for form in forms
        )
    ]


def recorded_forms(record: dict[str, Any], path: Path) -> Sequence[Form | None]:
    """The normal forms to hash evaluation texts in for a student's record: its `data.texts_form`, or,
    for a record made before texts were normalised (hashed as written), NFC, NFD and as written."""
    data = record.get("data")
    form = data.get("texts_form") if isinstance(data, dict) else None
    if form is None:
        return LEGACY_FORMS
    if form != TEXT_FORM:
        raise UserError(
            f"{path}: the training texts were hashed in Unicode form {form!r}; this nlgbench compares {TEXT_FORM} "
            "(a newer version made the student: update nlgbench)"
        )
    return (TEXT_FORM,)


def read_record(student_dir: Path) -> dict[str, Any] | None:
    """A student folder's distill.json, or None where it has none (not made by `nlgbench distill`); its
    format checked (`check_format`; a record without one is format 1)."""
    path = Path(student_dir) / DISTILL_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read the distillation record ({exc})") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a distillation record (a JSON object)")
    check_format(record.get("format", 1), path)
    return record


def check_format(found: Any, path: Path) -> None:
    """One UserError line where a distill.json's `format` is not a format number, or newer than this
    nlgbench reads (naming both), as a run folder's files are refused (`nlgbench.runs.migrate`)."""
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise UserError(f"{path}: format {json.dumps(found)[:40]} is not a distill.json format number")
    if found > DISTILL_FORMAT:
        raise UserError(
            f"{path} is in distill.json format {found}, newer than nlgbench {__version__} reads (format "
            f"{DISTILL_FORMAT}): read it with the nlgbench that wrote it, or a newer one"
        )


def recorded_units(student_dir: Path, record: dict[str, Any]) -> set[str]:
    """The training units the record's `data.texts_file` (default `training_texts.sha256`) holds; one
    line where it cannot be read."""
    path = Path(student_dir) / str(record.get("data", {}).get("texts_file", TEXTS_FILE))
    try:
        return set(path.read_text(encoding="utf-8").split())
    except OSError as exc:
        raise UserError(
            f"{path}: cannot read the student's training-text hashes ({exc.strerror or exc}); "
            "the leakage guard needs them"
        ) from None
