"""The distillation leakage guard: a student made by `nlgbench distill` records hashes of every
training reference and (reference, candidate) pair (`training_texts.sha256`, beside `distill.json`);
a sweep that would evaluate it on data sharing them is refused (`guard_spec`, run by every sweep
before any cell) and each cell checks again on the data it loaded (`guard_cell`). The launchers and the
worker run it, so it is execution's; `nlgbench distill` (a higher layer) writes the record with
this module's hashing (`training_hashes`, `TEXTS_FILE`).

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
from typing import TYPE_CHECKING, Any, Literal

from nlgbench.encoders.registry import ResolvedEncoder, resolve_encoder
from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec
    from nlgbench.data.items import Dataset, Item

DISTILL_FILE = "distill.json"
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
    """A student folder's distill.json, or None where it has none (not made by `nlgbench distill`)."""
    path = Path(student_dir) / DISTILL_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read the distillation record ({exc})") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a distillation record (a JSON object)")
    return record


def overlaps(student_dir: Path, datasets: Sequence[Dataset], name: str | None = None) -> list[str]:
    """Per dataset sharing texts with the student's training pairs, one line saying how many of its
    items have a reference that was a training reference, or are a training (reference, candidate)
    pair (texts compared in Unicode NFC with whitespace normalised); [] for a folder without distill.json. `name`:
    what the spec called the student, where that is not its folder."""
    record = read_record(student_dir)
    if record is None:
        return []
    label = str(student_dir) if name is None or name == str(student_dir) else f"{name} ({student_dir})"
    forms = recorded_forms(record, Path(student_dir) / DISTILL_FILE)
    path = Path(student_dir) / str(record.get("data", {}).get("texts_file", TEXTS_FILE))
    try:
        seen = set(path.read_text(encoding="utf-8").split())
    except OSError as exc:
        raise UserError(
            f"{path}: cannot read the student's training-text hashes ({exc.strerror or exc}); "
            "the leakage guard needs them"
        ) from None
    lines = []
    for ds in datasets:
        hits = overlapping_items(seen, ds, forms)
        if hits:
            first = hits[0]
            lines.append(
                f"student {label} was distilled on texts of evaluation dataset {ds.name!r}: "
                f"{len(hits)} of {len(ds.items)} items have a reference (or reference-hypothesis pair) "
                "of its training pairs "
                f"(first: lp={first.lp!r} seg_id={first.seg_id!r} system={first.system!r}); "
                "distil on other data, or rerun nlgbench distill with --allow-overlap to accept it"
            )
    return lines


def check_leakage(student_dir: Path, datasets: list[Dataset], name: str | None = None) -> list[str]:
    """The leakage guard: problems (one line each) when the student's training pairs overlap an
    evaluation dataset; none when its distill.json records `allow_overlap` (`--allow-overlap`) or
    the folder has no distill.json."""
    record = read_record(student_dir)
    if record is None or record.get("allow_overlap"):
        return []
    return overlaps(student_dir, datasets, name)


def student_folder(name: str) -> Path | None:
    """The real folder of a model name when it is a distilled student (has distill.json): a local
    folder, or the cached snapshot of a registry name / Hub id (`models import` copies distill.json
    there), so a student is recognised under any name it is run by."""
    return distilled_folder(resolve_encoder(name))


def distilled_folder(model: ResolvedEncoder) -> Path | None:
    """`student_folder` of a model already resolved: its local snapshot where that holds distill.json."""
    folder = model.snapshot
    return folder if folder is not None and (folder / DISTILL_FILE).is_file() else None


def check_spec_leakage(spec: SweepSpec) -> list[str]:
    """`check_leakage` for every model a spec loads that is a distilled student (under whatever
    name), against every dataset of the spec (loaded as the cells load them)."""
    students = {name: folder for name, model in spec.models.items() if (folder := distilled_folder(model)) is not None}
    if not students:
        return []
    datasets = [ref.load() for ref in spec.datasets]
    return [line for name, folder in students.items() for line in check_leakage(folder, datasets, name)]


def guard_spec(spec: SweepSpec) -> None:
    """Refuse a sweep that evaluates a distilled student on data it was trained on (one line); every
    entry point (CLI, API, local and Slurm) runs it through `nlgbench.execution.sweep.run`."""
    leaks = check_spec_leakage(spec)
    if leaks:
        raise UserError(leaks[0] + (f" (and {len(leaks) - 1} more)" if len(leaks) > 1 else ""))


def guard_cell(model_names: Sequence[str], dataset: Dataset) -> str:
    """The guard inside a cell, on the dataset the cell loaded: raises (the cell fails) on a leak,
    else says what was checked, for result.json's `scorer.leakage_guard`."""
    notes = []
    for name in model_names:
        folder = student_folder(name)
        if folder is None:
            continue
        record = read_record(folder) or {}
        if record.get("allow_overlap"):
            notes.append(f"{name}: distilled with --allow-overlap, not checked")
            continue
        leaks = check_leakage(folder, [dataset], name)
        if leaks:
            raise UserError(leaks[0])
        notes.append(f"{name}: distilled student, no overlap with {dataset.name}")
    return "; ".join(notes) if notes else "no distilled student"
