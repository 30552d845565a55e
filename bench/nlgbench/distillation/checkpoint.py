"""Checkpoints of the student's training, so that `nlgbench distill --resume` continues an interrupted run.

They live in the folder `OUT.partial` beside the output folder `OUT` (`checkpoint_folder`), removed
once the student is written:

- `last.pt`: the whole training state at the last checkpoint: weights, optimizer, schedule, the RNG
  states (torch, numpy, python and the data order's generator), the position (epoch, batch within
  it, that epoch's batch order), the loop's course (validation curve, best so far, pairs seen), the
  configuration's fingerprint, and the name of the best file;
- `best-STEP.pt`: the best weights so far (lowest validation MSE).

Each file is written to a temporary file in the folder and renamed into place; the best file is
written before the `last.pt` naming it, and older best files are removed only after, so an
interruption at any point leaves a consistent pair. Files load with `weights_only=True` (tensors,
numbers, strings, lists, dicts only: no pickled code).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.distillation.config import TrainConfig
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic_with

if TYPE_CHECKING:
    import torch

SUFFIX = ".partial"  # OUT.partial beside OUT
LAST = "last.pt"
FORMAT = 1


@dataclass(frozen=True)
class Checkpoints:
    """Where and how often training is checkpointed, and whether it resumes from there."""

    folder: Path
    every: int | None = None  # optimizer steps between checkpoints; there is one at each validation too
    resume: bool = False


def checkpoint_folder(out: Path) -> Path:
    """The checkpoints of the student written to `out`: `out.partial` beside it."""
    return out.with_name(out.name + SUFFIX)


def check_checkpoints(plan: Checkpoints) -> None:
    """Before any work: `every` is positive, and a run that does not resume finds no checkpoint it would overwrite."""
    if plan.every is not None and plan.every < 1:
        raise UserError(f"checkpoint-every must be >= 1, got {plan.every}")
    if not plan.resume and (plan.folder / LAST).is_file():
        raise UserError(
            f"{plan.folder} holds the checkpoint of an interrupted run: add --resume to continue it, "
            "or delete that folder to start again"
        )


def fingerprint(cfg: TrainConfig, examples: Sequence[tuple[str, str, float]], source: str) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the hyper-parameters, the student, the pairs and their labels
    (the training and validation examples in order, targets included)."""
    digest = hashlib.sha256()
    for ref, cand, y in examples:
        digest.update(json.dumps([ref, cand, float(y)]).encode() + b"\n")
    return {"hyperparameters": asdict(cfg), "student_source": source, "examples_sha256": digest.hexdigest()}


def capture_rng(generator: torch.Generator) -> dict[str, Any]:
    """The RNG states (torch's global one, numpy's, python's, the data order's generator) as plain values."""
    import torch

    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "torch": torch.get_rng_state(),
        "numpy": [kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "python": random.getstate(),
        "order": generator.get_state(),
    }


def restore_rng(state: dict[str, Any], generator: torch.Generator) -> None:
    """Put back the RNG states `capture_rng` took."""
    import torch

    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    generator.set_state(state["order"])


def save_checkpoint(plan: Checkpoints, state: dict[str, Any], best_state: dict[str, Any], best_step: int) -> Path:
    """Write the best weights (if that step's file is not there yet), then `last.pt` naming them, then
    remove older best files; each file atomically. The path of `last.pt`."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    best_name = f"best-{best_step:08d}.pt"
    if not (plan.folder / best_name).is_file():
        _atomic_save({"format": FORMAT, "step": best_step, "model": best_state}, plan.folder / best_name)
    _atomic_save({**state, "format": FORMAT, "best_file": best_name}, plan.folder / LAST)
    for old in plan.folder.glob("best-*.pt"):
        if old.name != best_name:
            old.unlink()
    return plan.folder / LAST


def load_checkpoint(plan: Checkpoints, expected: dict[str, Any]) -> dict[str, Any] | None:
    """The last checkpoint (with its best weights as `best_state`), None where there is none; a
    checkpoint of another configuration is refused with one line naming what differs."""
    import torch

    path = plan.folder / LAST
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        best = torch.load(plan.folder / state["best_file"], map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, KeyError, EOFError) as exc:
        raise UserError(
            f"--resume: cannot read the checkpoint in {plan.folder} ({exc}); delete it to start again"
        ) from None
    if state.get("format") != FORMAT:
        raise UserError(f"--resume: {path} is of another checkpoint format; delete {plan.folder} to start again")
    differs = _differences(state["fingerprint"], expected)
    if differs:
        raise UserError(
            f"--resume: the checkpoint in {plan.folder} was made with another configuration ({', '.join(differs)}); "
            "run with the same options and pairs, or delete that folder to start again"
        )
    state["best_state"] = best["model"]
    return state


def _differences(saved: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """The names of what differs: hyper-parameters one by one, then the student and the pairs/labels."""
    names = []
    for key in sorted(set(saved["hyperparameters"]) | set(expected["hyperparameters"])):
        old, new = saved["hyperparameters"].get(key), expected["hyperparameters"].get(key)
        if old != new:
            names.append(f"{key.replace('_', '-')} {old!r} -> {new!r}")
    if saved["student_source"] != expected["student_source"]:
        names.append("the student")
    if saved["examples_sha256"] != expected["examples_sha256"]:
        names.append("the pairs or their teacher labels")
    return names


def _atomic_save(obj: Any, path: Path) -> None:
    """torch.save into `path` atomically, flushed to disk before the rename (`write_atomic_with`)."""
    import torch

    write_atomic_with(path, lambda fh: torch.save(obj, fh), sync=True)
