"""A feature-head student: a linear head over what one BERTScore pass of a frozen light encoder computes.

The features of a pair (hypothesis h, reference r), all from the token states of one layer:
BERTScore P, R, F1 without idf (Zhang et al. 2020, Eqs. 1-3, special tokens weight 0), the cosine of
the two texts' mean-pooled vectors (mean over the non-special tokens, then unit norm), the log of the
ratio of their token counts and its absolute value, and a low-dimensional projection of COMET's pair
features |h - r| and h * r of the unit pooled vectors (Rei et al. 2020), each family projected on its
own principal axes fitted on the training pairs; the features of one or several layers of the pass
(the last, or the middle one and the last: chosen in fitting). The head standardises them and applies a ridge
regression fitted on human scores (`nlgbench.distillation.headfit`). Its cost is the BERTScore pass
plus a few hundred multiply-adds per pair.

The student folder holds the encoder cut to the layer read (config, weights, tokenizer) and
`head.json` (`HEAD_FILE`), which this module reads and checks; `FeatureHeadScorer` scores with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlgbench.data.items import Item
from nlgbench.data.training_texts import DISTILL_FILE
from nlgbench.encoders.hfcache import HEAD_FILE, local_snapshot
from nlgbench.encoders.registry import EncoderRef, resolve_source
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.digests import file_sha256
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import OptionsT, PhaseTimer, ScorerBase, Scores
from nlgbench.metrics.common import weight_table
from nlgbench.metrics.embedding import FlatEmbedding, Workspace, chunks, embed_flat, greedy_match_pairs

HEAD_FORMAT = 1  # head.json's layout version
BASE_FEATURES = ("precision", "recall", "f1", "cosine", "log_length_ratio", "abs_log_length_ratio")
PROJECTED = ("abs_difference", "product")  # COMET's |h - r| and h * r of the unit pooled vectors


def family(layer: int, name: str) -> str:
    """The key of a projected family of one layer, e.g. `L3.product`."""
    return f"L{layer}.{name}"


@dataclass
class PairFeatures:
    """The features of n pairs before projection, as float64 arrays: `base` [n, 6 m] (`BASE_FEATURES`
    of each of the m layers in `layers`, in that order) and each layer's projected families [n, D]
    (`families`, keyed by `family`)."""

    layers: list[int]
    base: np.ndarray
    families: dict[str, np.ndarray]

    @staticmethod
    def concat(parts: Sequence[PairFeatures], layers: Sequence[int], width: int) -> PairFeatures:
        """The parts' rows one after the other (no parts: zero rows)."""
        keys = [family(layer, name) for layer in layers for name in PROJECTED]
        if not parts:
            return PairFeatures(
                list(layers), np.zeros((0, len(BASE_FEATURES) * len(layers))), {k: np.zeros((0, width)) for k in keys}
            )
        return PairFeatures(
            list(layers),
            np.concatenate([p.base for p in parts]),
            {k: np.concatenate([p.families[k] for p in parts]) for k in keys},
        )

    def take(self, rows: np.ndarray) -> PairFeatures:
        return PairFeatures(self.layers, self.base[rows], {k: v[rows] for k, v in self.families.items()})

    def select(self, layers: Sequence[int]) -> PairFeatures:
        """The features of a subset of the layers."""
        columns = [
            j * len(BASE_FEATURES) + c
            for layer in layers
            for j in [self.layers.index(layer)]
            for c in range(len(BASE_FEATURES))
        ]
        keys = [family(layer, name) for layer in layers for name in PROJECTED]
        return PairFeatures(list(layers), self.base[:, columns], {k: self.families[k] for k in keys})


def pooled_texts(
    states: torch.Tensor, weights: torch.Tensor, start: torch.Tensor, length: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each text's mean of its weighted token states, unit norm [n, D] (a zero vector for a text without
    weighed tokens), and its weighed token count [n]. `states` [N, D] packs text i's tokens at rows
    `start[i]` to `start[i] + length[i]` (`FlatEmbedding`), in any order of texts."""
    order = torch.argsort(start)
    owner = torch.repeat_interleave(order, length[order])
    sums = torch.zeros(len(start), states.shape[1], dtype=states.dtype, device=states.device)
    sums.index_add_(0, owner.to(states.device), states * weights.unsqueeze(1))
    counts = torch.zeros(len(start), dtype=states.dtype, device=states.device).index_add_(
        0, owner.to(states.device), weights
    )
    means = sums / counts.clamp(min=1.0).unsqueeze(1)
    return means / means.norm(dim=1, keepdim=True).clamp(min=1e-12), counts


def pair_features(
    prf: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    pooled: torch.Tensor,
    counts: torch.Tensor,
    hyp: torch.Tensor,
    ref: torch.Tensor,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer's features of pairs (hyp[i], ref[i]) (text positions) from their BERTScore P, R, F1 and
    the texts' unit pooled vectors and token counts: the base features [n, 6] and |h - r|, h * r [n, D];
    a count of 0 counts as 1 in the length ratio."""
    h, r = pooled[hyp], pooled[ref]
    ratio = torch.log(counts[hyp].clamp(min=1.0) / counts[ref].clamp(min=1.0))
    base = torch.stack([*prf, (h * r).sum(1), ratio, ratio.abs()], dim=1)
    return base.double().cpu().numpy(), (h - r).abs().double().cpu().numpy(), (h * r).double().cpu().numpy()


def encode_features(
    encoder: Encoder,
    layers: Sequence[int],
    items: Sequence[Item],
    batch_size: int,
    timer: PhaseTimer,
    workspace: Workspace | None = None,
) -> PairFeatures:
    """The features of every (hypothesis, reference) item at each of `layers`: each chunk's distinct
    texts embedded once (`embed_flat`, raw states of the layers side by side), then per layer pooled,
    unit-normed and matched as BERTScore in batches of `batch_size` pairs of similar lengths
    (`greedy_match`). The model is timed as `encode`, the rest as `match`."""
    workspace = workspace if workspace is not None else Workspace()
    parts: list[PairFeatures] = []
    width = 0
    for chunk in chunks(items):
        texts = [t for it in chunk for t in (it.reference, it.hypothesis)]
        flat = embed_flat(encoder, texts, list(layers), batch_size, timer, workspace=workspace)
        with timer.phase("match"):
            width = flat.states.shape[1] // len(layers) if len(flat.states) else 0
            size = max(len(encoder.tokenizer), int(flat.ids.max()) + 1 if len(flat.ids) else 0)
            weights = weight_table(size, encoder.special_ids, None, 0.0)[flat.ids].to(flat.states.device)
            empty = flat.length <= encoder.specials_added
            hyp = torch.tensor([flat.texts[it.hypothesis] for it in chunk], dtype=torch.long)
            ref = torch.tensor([flat.texts[it.reference] for it in chunk], dtype=torch.long)
            bases, families = [], {}
            for j, layer in enumerate(layers):
                states = flat.states[:, j * width : (j + 1) * width]
                pooled, counts = pooled_texts(states, weights, flat.start, flat.length)
                unit = FlatEmbedding(
                    flat.texts,
                    states / states.norm(dim=1, keepdim=True).clamp(min=1e-12),
                    flat.ids,
                    flat.start,
                    flat.length,
                )
                prf = greedy_match_pairs(unit, weights, empty, hyp, ref, batch_size)
                base, families[family(layer, PROJECTED[0])], families[family(layer, PROJECTED[1])] = pair_features(
                    prf, pooled, counts, hyp, ref
                )
                bases.append(base)
            parts.append(PairFeatures(list(layers), np.hstack(bases), families))
    return PairFeatures.concat(parts, layers, width)


@dataclass
class FeatureHead:
    """The fitted head: the encoder layers it reads; per projected family (`family`: a layer's |h - r|
    or h * r) its centre [D] and principal axes [k, D]; the standardisation (`mean`, `scale`) and ridge
    weights (`coef`, `intercept`) of the design matrix `design` builds ([m (6 + 2k)] columns, named by
    `feature_names`)."""

    layers: list[int]
    centres: dict[str, list[float]]
    axes: dict[str, list[list[float]]]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    format: int = HEAD_FORMAT
    kind: str = "ridge"

    @property
    def families(self) -> list[str]:
        return [family(layer, name) for layer in self.layers for name in PROJECTED]

    @property
    def components(self) -> int:
        return len(self.axes[self.families[0]])

    @property
    def feature_names(self) -> list[str]:
        base = [f"L{layer}.{name}" for layer in self.layers for name in BASE_FEATURES]
        return [*base, *(f"{key}_pc{j + 1}" for key in self.families for j in range(self.components))]

    @property
    def params(self) -> int:
        """Numbers the head applies: centres, axes, standardisation, weights and intercept."""
        projected = sum(len(self.centres[key]) * (1 + self.components) for key in self.families)
        return projected + len(self.mean) + len(self.scale) + len(self.coef) + 1

    def design(self, features: PairFeatures) -> np.ndarray:
        """The unstandardised design matrix: the base features, then each family's projection."""
        columns = [features.base]
        for key in self.families:
            columns.append((features.families[key] - np.asarray(self.centres[key])) @ np.asarray(self.axes[key]).T)
        return np.hstack(columns)

    def predict(self, features: PairFeatures) -> np.ndarray:
        standard = (self.design(features) - np.asarray(self.mean)) / np.asarray(self.scale)
        return standard @ np.asarray(self.coef) + self.intercept

    def to_dict(self) -> dict[str, Any]:
        return {"feature_names": self.feature_names, **asdict(self)}


def read_head(folder: Path) -> FeatureHead:
    """The head of a student folder, checked: one line naming the file and what is wrong."""
    path = folder / HEAD_FILE
    where = f"feature head {folder.name}/{HEAD_FILE}"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{where} is not valid JSON ({exc}); train the student again") from None
    if not isinstance(raw, dict):
        raise UserError(f"{where} must hold a JSON object, got {type(raw).__name__}")
    if raw.get("format") != HEAD_FORMAT or raw.get("kind") != "ridge":
        raise UserError(
            f"{where}: format {raw.get('format')!r}, kind {raw.get('kind')!r}; this nlgbench reads format "
            f"{HEAD_FORMAT}, kind 'ridge'"
        )
    try:
        layers = [_integer(layer) for layer in raw["layers"]]
        keys = [family(layer, name) for layer in layers for name in PROJECTED]
        if not layers or len(set(layers)) != len(layers):
            raise ValueError(f"layers {raw['layers']!r}: give distinct layers")
        head = FeatureHead(
            layers=layers,
            centres={key: _vector(raw["centres"][key]) for key in keys},
            axes={key: [_vector(row) for row in raw["axes"][key]] for key in keys},
            mean=_vector(raw["mean"]),
            scale=_vector(raw["scale"]),
            coef=_vector(raw["coef"]),
            intercept=_number(raw["intercept"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{where}: a missing or malformed field ({exc}); train the student again") from None
    _check_shapes(head, where)
    return head


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"not a positive integer: {value!r}")
    return value


def _vector(values: Any) -> list[float]:
    if not isinstance(values, list):
        raise ValueError(f"not a list of numbers: {type(values).__name__}")
    return [_number(v) for v in values]


def _check_shapes(head: FeatureHead, where: str) -> None:
    keys = head.families
    width = len(head.centres[keys[0]])
    k = head.components
    sizes = {len(head.centres[key]) for key in keys} | {len(row) for key in keys for row in head.axes[key]}
    columns = len(head.layers) * len(BASE_FEATURES) + len(keys) * k
    if sizes != {width} or {len(head.axes[key]) for key in keys} != {k} or k < 1:
        raise UserError(f"{where}: its projections do not agree in size; train the student again")
    if {len(head.mean), len(head.scale), len(head.coef)} != {columns}:
        raise UserError(f"{where}: mean, scale and coef must have {columns} values each; train the student again")
    if any(s <= 0 for s in head.scale):
        raise UserError(f"{where}: a scale is not positive; train the student again")


def student_folder(encoder_ref: EncoderRef) -> Path:
    """The local folder of a student (a path, or a model imported into the cache)."""
    folder = local_snapshot(resolve_source(encoder_ref.name))
    if folder is None:
        raise UserError(f"encoder {encoder_ref.label}: a feature-head student is a local folder with {HEAD_FILE}")
    return folder


def record_digest(folder: Path) -> str:
    """The first 12 hex of the sha256 of the student's training record (distill.json), '' without one."""
    path = folder / DISTILL_FILE  # the training record beside the head: its digest names the student
    return file_sha256(path)[:12] if path.is_file() else ""


class FeatureHeadScorer(ScorerBase[OptionsT]):
    """A feature-head student: its encoder, cut to the head's layer, and the head (`FeatureHead`). The
    metric that scores with it subclasses it with its options class."""

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: Mapping[str, Any],
        device: str,
        batch_size: int,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(dict(options), device, batch_size, context)
        self.folder = student_folder(encoder_ref)
        self.head = read_head(self.folder)
        self.record = record_digest(self.folder)
        self.encoder = load_encoder(encoder_ref, device, needed_layer=max(self.head.layers), context=self.context)
        width, fitted = int(self.encoder.model.config.hidden_size), len(self.head.centres[self.head.families[0]])
        if fitted != width or max(self.head.layers) > self.encoder.layers_run:
            raise UserError(
                f"feature head {self.folder.name}/{HEAD_FILE}: fitted on layers {self.head.layers} of "
                f"{fitted}-dimensional states, its encoder has {self.encoder.layers_run} layers of {width}; "
                "train the student again"
            )
        self.workspace = Workspace()

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        features = encode_features(self.encoder, self.head.layers, items, self.batch_size, timer, self.workspace)
        with timer.phase("match"):
            values = self.head.predict(features) if len(items) else np.zeros(0)
        return Scores(primary="frugalscore", columns={"frugalscore": values.tolist()})

    def describe(self) -> dict[str, Any]:
        described = self.encoder.describe()
        head_bytes = (self.folder / HEAD_FILE).stat().st_size
        return {
            **described,
            "layer": max(self.head.layers),
            "head_layers": self.head.layers,
            "student": f"head@{self.record}" if self.record else "head",
            "params": described["params"] + self.head.params,
            "head_params": self.head.params,
            "disk_bytes": described["disk_bytes"] + head_bytes,
        }
