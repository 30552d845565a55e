"""Checkpoints of the student's training, so that `nlgbench distill --resume` continues an interrupted run.

They live in the folder `OUT.partial` beside the output folder `OUT` (`checkpoint_folder`), removed
once the student is written:

- `step-STEP.pt`: the whole training state at an optimizer step: weights, optimizer, schedule, the RNG
  states (torch, numpy, python and the data order's generator), the position (epoch, batch within
  it, that epoch's batch order), the loop's course (validation curve, best so far, pairs seen) and
  the configuration's fingerprint;
- `checkpoint.json` (`INDEX`): which of them is the `last` and which the `best` (the state at the
  validation with the lowest MSE so far: its weights are the best weights), each with its sha256.

A checkpoint writes its state file (atomically, flushed to disk), then the index naming it (the
same way), then removes the state files the index no longer names, so an interruption at any point
leaves an index whose files are all there. `--resume` reads the files the index names only (plain
names of this folder), checks each against its sha256 and its shape before using it, and falls back
to the best state (an earlier step of the same run, so training goes on to the same weights) where
the last one is damaged. Files load with `weights_only=True` (tensors, numbers, strings, lists, dicts
only: no pickled code).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import numpy as np

from nlgbench.data.catalogue import sha256_file
from nlgbench.distillation.config import TrainConfig
from nlgbench.distillation.steplog import Log
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_atomic_with

if TYPE_CHECKING:
    import torch

SUFFIX = ".partial"  # OUT.partial beside OUT
INDEX = "checkpoint.json"  # the last and the best state files, with their sha256
LEGACY = "last.pt"  # the single checkpoint file of format 1 (no index), which --resume does not read
FORMAT = 2  # the index's and each state's `format`: 2 since the index and its best state
STATE_NAME = re.compile(r"step-[0-9]{8}\.pt")  # the only file names an index may give
SHA256 = re.compile(r"[0-9a-f]{64}")
STATE_KEYS = {"format", "fingerprint", "model", "optimizer", "schedule", "rng", "order", "fit"}


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
    if not plan.resume and ((plan.folder / INDEX).is_file() or (plan.folder / LEGACY).is_file()):
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


def save_checkpoint(plan: Checkpoints, state: dict[str, Any]) -> Path:
    """Write the training `state` (its `fit` says the step and the best step) as `step-STEP.pt`, then
    the index naming it as the last and, where it is the best, as the best too (else the best stays
    the one the index named), then remove the state files no longer named. The path written. A Ctrl-C
    meanwhile is held until the checkpoint is whole, then raised (`interrupts_held`)."""
    with interrupts_held():
        return write_checkpoint(plan, state)


def write_checkpoint(plan: Checkpoints, state: dict[str, Any]) -> Path:
    """`save_checkpoint`'s writes, in their order."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    step, best_step = int(state["fit"]["step"]), int(state["fit"]["best_step"])
    name = f"step-{step:08d}.pt"
    last = {"file": name, "sha256": save_state({**state, "format": FORMAT}, plan.folder / name), "step": step}
    if best_step == step:
        best = last
    else:
        best = read_index(plan.folder)["best"]
        if best["step"] != best_step:
            raise RuntimeError(f"the checkpoint index names the best state at step {best['step']}, not {best_step}")
    index = {"format": FORMAT, "last": last, "best": best}
    write_atomic_with(plan.folder / INDEX, lambda fh: fh.write(json.dumps(index, indent=2).encode()), sync=True)
    for old in plan.folder.glob("step-*.pt"):
        if old.name not in (last["file"], best["file"]):
            old.unlink()
    return plan.folder / name


def load_checkpoint(plan: Checkpoints, expected: dict[str, Any], log: Log) -> dict[str, Any] | None:
    """The last checkpoint (with the best state's weights as `best_state`), None where there is none;
    the best checkpoint where the last one does not match its sha256 (said on the log). A damaged,
    foreign or changed checkpoint, or one of another configuration, is refused with one line."""
    folder = plan.folder
    if not (folder / INDEX).is_file():
        if (folder / LEGACY).is_file():
            raise UserError(
                f"--resume: {folder} holds a checkpoint of an older format; delete it to start again (format 1, "
                f"{LEGACY}: this nlgbench resumes format {FORMAT})"
            )
        return None
    index = read_index(folder)
    last, best = index["last"], index["best"]
    chosen = last
    if not intact(folder, last):
        if best["file"] == last["file"] or not intact(folder, best):
            raise UserError(
                f"--resume: the checkpoint {folder / last['file']} does not match the sha256 {INDEX} records "
                "(damaged or changed since it was written), and there is no intact best checkpoint to fall "
                f"back to; delete {folder} to start again"
            )
        log(
            f"checkpoint: {folder / last['file']} does not match the sha256 {INDEX} records (damaged or changed "
            f"since it was written); resuming from the best checkpoint instead, at step {best['step']}"
        )
        chosen = best
    state = load_state(folder, chosen)
    if chosen is best or best["file"] == chosen["file"]:
        best_state = state["model"]
    elif intact(folder, best):
        best_state = load_state(folder, best)["model"]
    else:
        raise UserError(
            f"--resume: the best checkpoint {folder / best['file']} does not match the sha256 {INDEX} records "
            f"(damaged or changed since it was written); delete {folder} to start again"
        )
    differs = _differences(state["fingerprint"], expected)
    if differs:
        raise UserError(
            f"--resume: the checkpoint in {folder} was made with another configuration ({', '.join(differs)}); "
            "run with the same options and pairs, or delete that folder to start again"
        )
    state["best_state"] = best_state
    return state


def read_index(folder: Path) -> dict[str, Any]:
    """The checkpoint index, checked: its format, and a `last` and a `best` entry each naming a state
    file of this folder (`step-NNNNNNNN.pt`, nothing else), its sha256 and its step."""
    path = folder / INDEX
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--resume: cannot read {path} ({exc}); delete {folder} to start again") from None
    found = index.get("format") if isinstance(index, dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and found > FORMAT:
        raise UserError(
            f"--resume: {path} is a checkpoint of format {found}, newer than this nlgbench resumes (format "
            f"{FORMAT}); resume it with the nlgbench that wrote it, or delete {folder} to start again"
        )
    if not isinstance(index, dict) or found != FORMAT:
        raise UserError(f"--resume: {path} is not a checkpoint index of this nlgbench; delete {folder} to start again")
    for role in ("last", "best"):
        entry = index.get(role)
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("file"), str)
            and STATE_NAME.fullmatch(entry["file"])
            and isinstance(entry.get("sha256"), str)
            and SHA256.fullmatch(entry["sha256"])
            and isinstance(entry.get("step"), int)
        ):
            raise UserError(
                f"--resume: {path}: its {role!r} entry is not a state file of this folder with its sha256 and step "
                f"({entry!r:.200}); delete {folder} to start again"
            )
    return index


def intact(folder: Path, entry: dict[str, Any]) -> bool:
    """Whether the state file an index entry names is a plain file with the sha256 it records."""
    path = folder / entry["file"]
    return path.is_file() and not path.is_symlink() and sha256_file(path) == entry["sha256"]


def load_state(folder: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """A state file, loaded (`weights_only`) and checked for the shape `save_checkpoint` writes."""
    import torch

    path = folder / entry["file"]
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError) as exc:
        raise UserError(
            f"--resume: cannot read the checkpoint {path} ({exc}); delete {folder} to start again"
        ) from None
    problem = state_problem(state)
    if problem is None and state["fit"].get("step") != entry["step"]:
        problem = f"the state of step {state['fit'].get('step')!r}, where {INDEX} says step {entry['step']}"
    if problem is not None:
        raise UserError(
            f"--resume: {path} is not a training checkpoint of nlgbench distill ({problem}); "
            f"delete {folder} to start again"
        )
    return state


def state_problem(state: Any) -> str | None:
    """What is wrong with the shape of a loaded training state, None where nothing is (the values
    themselves are checked as they are put back into the model, optimizer and loop)."""
    import torch

    if not isinstance(state, dict):
        return f"a {type(state).__name__}, not a dict"
    if set(state) != STATE_KEYS:
        return f"keys {sorted(map(str, state))}, expected {sorted(STATE_KEYS)}"
    if state["format"] != FORMAT:
        return f"format {state['format']!r}, expected {FORMAT}"
    fp = state["fingerprint"]
    if not (
        isinstance(fp, dict)
        and isinstance(fp.get("hyperparameters"), dict)
        and isinstance(fp.get("student_source"), str)
        and isinstance(fp.get("examples_sha256"), str)
    ):
        return "its fingerprint is not hyperparameters, student_source and examples_sha256"
    if not isinstance(state["model"], dict) or not all(isinstance(v, torch.Tensor) for v in state["model"].values()):
        return "its model is not a dict of tensors"
    for key in ("optimizer", "schedule", "fit"):
        if not isinstance(state[key], dict):
            return f"its {key} is not a dict"
    rng = state["rng"]
    if not (
        isinstance(rng, dict)
        and isinstance(rng.get("torch"), torch.Tensor)
        and isinstance(rng.get("order"), torch.Tensor)
        and isinstance(rng.get("numpy"), (list, tuple))
        and len(rng["numpy"]) == 5
        and isinstance(rng.get("python"), (list, tuple))
        and len(rng["python"]) == 3
    ):
        return "its rng is not the torch, numpy, python and order states"
    order = state["order"]
    if order is not None and not (
        isinstance(order, list)
        and all(isinstance(b, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in b) for b in order)
    ):
        return "its order is not a list of batches of pair indices"
    return None


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


class HashingWriter:
    """A binary file that keeps the sha256 of what is written through it."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def save_state(obj: Any, path: Path) -> str:
    """torch.save into `path` atomically, flushed to disk before the rename (`write_atomic_with`); the
    sha256 of the bytes written."""
    import torch

    digests: list[str] = []

    def write(fh: BinaryIO) -> None:
        writer = HashingWriter(fh)
        torch.save(obj, cast(BinaryIO, writer))  # torch calls only its write and flush
        digests.append(writer.digest.hexdigest())

    write_atomic_with(path, write, sync=True)
    return digests[0]


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT while the block runs and raise KeyboardInterrupt after it, if one came: an exception
    raised inside torch's zip writer (a Python write callback) can leave the writer broken or crash
    the process. Only the main thread handles signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if received:
        raise KeyboardInterrupt
