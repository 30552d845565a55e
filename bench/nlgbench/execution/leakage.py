"""The distillation leakage guard: a student made by `nlgbench distill` records hashes of every
training reference and (reference, candidate) pair (`training_texts.sha256`, beside `distill.json`;
the record is `nlgbench.data.training_texts`, which distillation writes and reads too); a sweep that
would evaluate it on data sharing them is refused (`guard_spec`, run by every sweep before any cell)
and each cell checks again on the data it loaded (`guard_cell`). The launchers and the worker run it,
so it is execution's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nlgbench.data.training_texts import DISTILL_FILE, overlapping_items, read_record, recorded_forms, recorded_units
from nlgbench.encoders.registry import ResolvedEncoder, resolve_encoder
from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    from nlgbench.core.spec import SweepSpec
    from nlgbench.data.items import Dataset


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
    seen = recorded_units(student_dir, record)
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
