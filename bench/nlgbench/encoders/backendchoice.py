"""`backend: auto`: the fastest exact inference backend for an encoder on this machine, measured once.

Which backend is fastest depends on the CPU (OpenVINO took 0.49x of torch's time on one 2-vCPU EPYC
and 0.76x on another of the same label), so it is measured, not assumed. On first use of a model
(its content fingerprint) with these layers, this CPU, these threads and these library versions,
every installed exact backend (torch; ONNX Runtime and OpenVINO in float32) loads the encoder and
encodes a fixed calibration batch (`CALIBRATION_PAIRS`): a backend whose F on it (BERTScore's greedy
cosine matching, no idf) differs from torch's by more than `TOLERANCE` is not eligible; of the rest
the fastest by median time over alternated rounds is chosen, torch unless another takes under
`MARGIN` of its time (within timing noise, the reference stays). The choice is cached as JSON under
`NLGBENCH_CACHE/backend-choices/<key>.json` and said in one line on stderr when made. On a GPU the
choice is torch without measuring (ONNX Runtime's CUDA provider and OpenVINO's GPU plugin are not
compared here).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from nlgbench.encoders.registry import BACKENDS, TORCH, installed_backends
from nlgbench.encoders.tokenization import tokenize_texts
from nlgbench.foundations.devicenames import is_cuda
from nlgbench.foundations.files import write_atomic
from nlgbench.foundations.machine import cpu_model
from nlgbench.foundations.package import cache_root


class Encoder(Protocol):
    """What the calibration uses of a loaded encoder (`nlgbench.encoders.runtime.Encoder`)."""

    tokenizer: Any
    layers_run: int

    @property
    def max_length(self) -> int: ...

    def hidden_states(self, batch: Sequence[Sequence[int]], layers: Sequence[int]) -> tuple[list[Any], Any]: ...


E = TypeVar("E", bound=Encoder)

CHOICES_FOLDER = "backend-choices"
CALIBRATION = 2  # the calibration's version (texts, rounds, rule): part of the key, so a change measures again
TOLERANCE = 1e-5  # the largest |F - F_torch| on the calibration batch of an eligible backend
MARGIN = 0.95  # another backend is chosen only where its median time is under this fraction of torch's
ROUNDS = 5  # timed passes per backend, alternated (after one untimed pass each)
BATCH = 64  # texts per model batch in the calibration (the API's default batch size)

# (hypothesis, reference) sentence pairs, 1 to 60 words; the calibration scores each joined to the next
# (`calibration_pairs`): texts of 30 tokens on average (WMT16's segments have 27), from 10 to about 150, so
# that the backends rank as on real data. On the sentences alone (16 tokens) ONNX Runtime ranked first on
# a machine where OpenVINO was the faster on WMT16 (docs/results/backends.md).
CALIBRATION_PAIRS: tuple[tuple[str, str], ...] = (
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("It is raining.", "It rains."),
    ("The meeting was postponed until next week.", "The meeting has been delayed to next week."),
    ("He bought three apples and a loaf of bread.", "He purchased a loaf of bread and three apples."),
    (
        "The government announced new measures to reduce unemployment among young people.",
        "New measures against youth unemployment were announced by the government.",
    ),
    (
        "Scientists have discovered a new species of frog in the rainforest.",
        "A previously unknown frog species was found by researchers in the rain forest.",
    ),
    ("I don't think that's a good idea.", "I do not believe this is a good idea."),
    (
        "The train to Berlin leaves at half past eight from platform four.",
        "The Berlin train departs from platform 4 at 8:30.",
    ),
    (
        "Prices rose sharply in the third quarter, driven by energy costs.",
        "Energy costs pushed prices up steeply in the third quarter.",
    ),
    (
        "She thanked the volunteers who had worked through the night to clear the roads after the storm.",
        "She expressed her gratitude to the volunteers who cleared the roads overnight after the storm.",
    ),
    (
        "The committee will publish its final report in the spring, after hearing evidence from more "
        "than forty witnesses, including several former ministers and senior officials.",
        "After taking evidence from over forty witnesses, among them former ministers and senior civil "
        "servants, the committee is to release its final report in spring.",
    ),
    ("Yes.", "Indeed."),
    ("The museum is closed on Mondays.", "On Mondays the museum does not open."),
    (
        "Police said the driver had been travelling well above the speed limit when the accident happened.",
        "According to the police, the driver was going far faster than allowed at the time of the crash.",
    ),
    (
        "Our results suggest that the effect is smaller than previously reported.",
        "The findings indicate a smaller effect than earlier studies found.",
    ),
    (
        "The software update fixes several security vulnerabilities and improves battery life on older devices.",
        "Several security holes are closed by the update, which also extends battery life on older phones.",
    ),
    ("Where is the nearest pharmacy?", "Where can I find the closest chemist?"),
    (
        "The team lost two games in a row but still leads the league by four points.",
        "Despite two consecutive defeats, the team remains four points clear at the top of the table.",
    ),
    (
        "Local residents have complained for years about the noise from the airport, which operates "
        "flights late into the night and early in the morning, and they now want a ban on night flights.",
        "For years people living nearby have objected to the airport's noise from late-night and early-morning "
        "flights, and they are now demanding that night flights be banned.",
    ),
    (
        "The bridge, built in 1889, will be renovated.",
        "Renovation work is planned for the bridge, which dates from 1889.",
    ),
    ("Negotiations broke down on Friday.", "The talks collapsed on Friday."),
    (
        "The report criticises the lack of coordination between the agencies responsible for flood defence.",
        "Poor coordination among the flood protection agencies is criticised in the report.",
    ),
    (
        "Children under twelve travel free of charge when accompanied by an adult.",
        "Kids below the age of twelve ride for free if an adult is with them.",
    ),
    (
        "The company expects revenue to grow by about five percent next year, less than analysts had forecast.",
        "Revenue is expected to rise around 5% next year, below analysts' expectations, the firm said.",
    ),
    (
        "He was born in a small village in the mountains and moved to the capital when he was sixteen.",
        "Born in a little mountain village, he went to live in the capital at the age of sixteen.",
    ),
    ("Thank you very much for your help.", "Many thanks for helping me."),
    (
        "The vaccine was found to be safe and effective in a trial involving thousands of volunteers.",
        "A trial with thousands of participants showed the vaccine to be safe and to work.",
    ),
    (
        "Turn left at the second traffic light and the hotel is on your right.",
        "At the second set of lights turn left; the hotel will be on the right.",
    ),
    (
        "The novel tells the story of a family torn apart by war and of the daughter who, decades later, "
        "returns to the house where she grew up to uncover what really happened to her father.",
        "The book follows a family divided by war, and a daughter who goes back decades later to her "
        "childhood home to find out the truth about her father's fate.",
    ),
    ("Fewer people are buying newspapers.", "Newspaper sales are falling."),
    (
        "The court rejected the appeal and upheld the original sentence.",
        "The appeal was dismissed and the first sentence confirmed by the court.",
    ),
    (
        "Temperatures are expected to drop below freezing overnight, with snow likely in higher areas.",
        "Overnight temperatures should fall below zero, and snow is probable on higher ground.",
    ),
)


@dataclass(frozen=True)
class BackendChoice:
    """The backend `backend: auto` runs, and what it was chosen on: each backend's median seconds on the
    calibration batch, its max |F - F_torch|, and why any was left out (not installed, failed, unequal)."""

    backend: str
    seconds: dict[str, float] = field(default_factory=dict)
    max_abs_df: dict[str, float] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    measured_now: bool = False  # False: read from the cache (or torch on a GPU, not measured)
    calibration_s: float = 0.0  # seconds the calibration took (timed apart from loading, as exports are)

    def describe(self) -> dict[str, Any]:
        """The JSON form a result records (`backend_choice`)."""
        return {
            "chosen": self.backend,
            "seconds": self.seconds,
            "max_abs_df": self.max_abs_df,
            "left_out": self.left_out,
            "measured_now": self.measured_now,
            "calibration_s": self.calibration_s,
        }

    def summary(self, label: str) -> str:
        """The one line said when the choice is made: the chosen backend, the others' time against torch's."""
        base = self.seconds.get(TORCH)
        ratios = [
            f"{name} {self.seconds[name] / base:.2f}x"
            for name in sorted(self.seconds, key=self.seconds.__getitem__)
            if base and name != TORCH
        ]
        worst = max(self.max_abs_df.values(), default=0.0)
        parts = [f"time against torch's: {', '.join(ratios)}" if ratios else "no other backend to compare"]
        if self.max_abs_df:
            parts.append(f"max |dF| {worst:.1e}")
        parts += [f"{name} left out: {why}" for name, why in sorted(self.left_out.items())]
        return f"nlgbench: backend auto for {label} on this CPU: {self.backend} ({'; '.join(parts)})"


def _version(distribution: str) -> str:
    """The installed version (not `foundations.deferred.library_version`, which reads a loaded module's
    `__version__`: the key must not change with what this process happened to import)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def choice_key(fingerprint: str, layers: Mapping[str, Any], candidates: Sequence[str]) -> str:
    """The cache key of a choice: the model's content, the layers it runs, the CPU, torch's threads, the
    backends compared and every library version that changes their speed or arithmetic."""
    payload = {
        "calibration": CALIBRATION,
        "weights": fingerprint,
        "layers": dict(layers),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "candidates": list(candidates),
        "versions": {name: _version(name) for name in ("torch", "transformers", "onnx", "onnxruntime", "openvino")},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def choice_file(key: str) -> Path:
    return cache_root() / CHOICES_FOLDER / f"{key}.json"


def read_choice(key: str, candidates: Sequence[str]) -> BackendChoice | None:
    """The cached choice of `key`, None where there is none or it cannot be used (unreadable, or naming a
    backend no longer among the candidates): then it is measured again."""
    try:
        raw = json.loads(choice_file(key).read_text(encoding="utf-8"))
        choice = BackendChoice(
            backend=str(raw["backend"]),
            seconds={str(k): float(v) for k, v in raw["seconds"].items()},
            max_abs_df={str(k): float(v) for k, v in raw["max_abs_df"].items()},
            left_out={str(k): str(v) for k, v in raw.get("left_out", {}).items()},
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return choice if choice.backend in candidates else None


def write_choice(key: str, choice: BackendChoice) -> None:
    """Cache a choice (written atomically: a reader never finds half a file)."""
    target = choice_file(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "backend": choice.backend,
        "seconds": choice.seconds,
        "max_abs_df": choice.max_abs_df,
        "left_out": choice.left_out,
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
    }
    write_atomic(target, json.dumps(record, indent=1, sort_keys=True))


# ----------------------------------------------------------------------------- calibration


def calibration_pairs() -> list[tuple[str, str]]:
    """The calibration's pairs: each sentence pair of `CALIBRATION_PAIRS` joined to the next (the last to the first)."""
    following = [*CALIBRATION_PAIRS[1:], CALIBRATION_PAIRS[0]]
    return [(f"{h} {h2}", f"{r} {r2}") for (h, r), (h2, r2) in zip(CALIBRATION_PAIRS, following, strict=True)]


def calibration_f(encoder: Encoder, layer: int) -> tuple[torch.Tensor, Callable[[], object]]:
    """F of each calibration pair at `layer` (greedy cosine matching over all tokens, BERTScore's without
    idf; the quantity the equality rule is stated on), and the pass to time: tokenised once, then every
    text encoded in batches of `BATCH`, shortest first (as the metrics batch them)."""
    texts = [text for pair in calibration_pairs() for text in pair]
    ids = [t.ids for t in tokenize_texts(encoder.tokenizer, encoder.max_length, texts, set(), ids_only=True)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches = [[ids[i] for i in order[k : k + BATCH]] for k in range(0, len(ids), BATCH)]

    def encode() -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for batch in batches:
            (states,), mask = encoder.hidden_states(batch, [layer])
            out.append((states.float().cpu(), mask.cpu()))
        return out

    sorted_rows = []
    for states, mask in encode():
        sorted_rows += [states[i, : int(mask[i].sum())] for i in range(states.shape[0])]
    rows: list[torch.Tensor] = [torch.empty(0)] * len(ids)
    for position, i in enumerate(order):
        rows[i] = sorted_rows[position]
    scores = []
    for hyp, ref in zip(rows[0::2], rows[1::2], strict=True):
        sim = torch.nn.functional.normalize(hyp, dim=-1) @ torch.nn.functional.normalize(ref, dim=-1).T
        precision, recall = sim.max(dim=1).values.mean(), sim.max(dim=0).values.mean()
        scores.append(2 * precision * recall / (precision + recall))

    return torch.stack(scores).double(), encode


def calibrate(encoders: Mapping[str, Encoder], layer: int | None, left_out: Mapping[str, str]) -> BackendChoice:
    """Compare the loaded `encoders` (torch's among them) on the calibration batch at `layer` (None: the
    last one run): F against torch's, then median seconds over `ROUNDS` alternated passes of the eligible
    ones; the choice by the rule above."""
    layer = layer if layer is not None else encoders[TORCH].layers_run
    reference, torch_pass = calibration_f(encoders[TORCH], layer)  # (each one's F is also its untimed first pass)
    passes: dict[str, Callable[[], object]] = {TORCH: torch_pass}
    max_abs_df: dict[str, float] = {}
    dropped = dict(left_out)
    for name, encoder in encoders.items():
        if name == TORCH:
            continue
        f, run = calibration_f(encoder, layer)
        max_abs_df[name] = float((f - reference).abs().max())
        if max_abs_df[name] <= TOLERANCE:
            passes[name] = run
        else:
            dropped[name] = f"F differs from torch's by {max_abs_df[name]:.1e} (> {TOLERANCE:.0e})"
    times: dict[str, list[float]] = {name: [] for name in passes}
    names = list(passes)
    for r in range(ROUNDS):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # each round starts with the next one
            start = time.perf_counter()
            passes[name]()
            times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(values) for name, values in times.items()}
    return BackendChoice(fastest(seconds), seconds, max_abs_df, dropped, measured_now=True)


def fastest(seconds: Mapping[str, float]) -> str:
    """The choice among eligible backends by their median seconds (torch's among them): the fastest, but
    torch unless the fastest takes under `MARGIN` of torch's time."""
    chosen = min(seconds, key=seconds.__getitem__)
    return chosen if chosen == TORCH or seconds[chosen] < MARGIN * seconds[TORCH] else TORCH


def choose(
    label: str,
    fingerprint: Callable[[], str | None],
    layers: Mapping[str, Any],
    layer: int | None,
    device: str,
    load: Callable[[str], E],
) -> tuple[E, BackendChoice]:
    """The encoder on the chosen backend, and the choice: torch on a GPU, and where no other backend is
    installed; the cached choice where there is one; else every installed backend loaded by
    `load(backend)` (exported where needed), calibrated, the choice cached and said in one line.
    `fingerprint()`: the model files' content fingerprint, None while they are not on disk (torch's load
    then fetches them first). A backend that fails to load or export is left out, with its reason, and
    the choice goes on without it."""
    if is_cuda(device):
        return load(TORCH), BackendChoice(TORCH, left_out={"onnxruntime, openvino": "not compared on a GPU"})
    candidates = installed_backends()
    if candidates == [TORCH]:  # nothing to compare: no calibration, no line, nothing cached
        extras = {"onnxruntime, openvino": "not installed (pip install 'nlgbench[onnx,openvino]')"}
        return load(TORCH), BackendChoice(TORCH, left_out=extras)
    loaded: dict[str, E] = {}
    found = fingerprint()
    if found is None:
        loaded[TORCH] = load(TORCH)  # reads (or downloads) the model's files
        found = fingerprint()
    if found is None:  # loaded from somewhere the cache cannot key: torch, each time
        reason = {"onnxruntime, openvino": "the model's files are not in a folder the choice can be keyed by"}
        return loaded[TORCH], BackendChoice(TORCH, left_out=reason)
    key = choice_key(found, layers, candidates)
    cached = read_choice(key, candidates)
    if cached is not None:
        return loaded.get(cached.backend) or load(cached.backend), cached
    left_out = {name: "not installed" for name in BACKENDS if name not in candidates}
    if TORCH not in loaded:
        loaded[TORCH] = load(TORCH)
    for name in candidates[1:]:  # (torch first, then the optional backends)
        try:
            loaded[name] = load(name)
        except Exception as exc:  # noqa: BLE001 (any failure of an optional backend leaves it out, said below)
            left_out[name] = f"did not load: {' '.join(str(exc).split())[:160] or type(exc).__name__}"
    start = time.perf_counter()
    choice = calibrate(loaded, layer, left_out)
    choice = replace(choice, calibration_s=time.perf_counter() - start)
    write_choice(key, choice)
    print(choice.summary(label), file=sys.stderr, flush=True)
    return loaded[choice.backend], choice
