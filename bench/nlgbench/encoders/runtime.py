"""The runtime encoder metrics use: tokenizer + model (possibly truncated or a variant) on one device.

Metrics never look at token strings or architectures; they use what `Encoder` exposes:
tokenisation with offsets, special-token ids, a word-start test, hidden states of chosen
layers, the number of layers run, parameters actually run, bytes on disk, and the device.
How a spec names an encoder (`EncoderRef`, the registry) is `nlgbench.encoders.registry`.
`pad_ids` (token ids right-padded into a batch) is here too: the metrics that run whole models use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlgbench.encoders import backendchoice, backends
from nlgbench.encoders.hfcache import content_fingerprint, disk_bytes, load_options, local_snapshot, reach_hub
from nlgbench.encoders.registry import AUTO, TORCH, EncoderRef, check_layers, resolve_source
from nlgbench.encoders.tokenization import Tokenized, model_max_length, tokenize_texts
from nlgbench.encoders.variants import (
    ExitState,
    check_dtype,
    count_params,
    exit_heads,
    install_early_exit,
    quantize_int8,
    weight_bytes,
)
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.devicenames import is_cuda
from nlgbench.foundations.errors import UserError

# Attribute paths of the layer stack in common architectures (bert/roberta/mpnet, distilbert,
# bart encoder, gpt2, xlnet).
_LAYER_PATHS = ("encoder.layer", "transformer.layer", "layers", "h", "layer")


def _get_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _set_path(obj: Any, path: str, value: Any) -> None:
    *head, last = path.split(".")
    for part in head:
        obj = getattr(obj, part)
    setattr(obj, last, value)


@dataclass
class Encoder:
    """A loaded encoder: tokenizer + model (possibly truncated), on one device."""

    ref: EncoderRef
    source: str
    tokenizer: Any
    model: Any
    device: str
    total_layers: int
    layers_run: int
    disk_bytes: int
    special_ids: frozenset[int] = field(default_factory=frozenset)
    exit_state: ExitState | None = None  # set for early-exit variants
    exit_layers: dict[tuple[int, ...], int] = field(default_factory=dict)  # exit layer per input run
    # the backend that runs the model (ONNX Runtime, OpenVINO); `model` is then torch's module
    # for its configuration and parameter count only (on the meta device when the export was cached)
    runner: backends.BackendRunner | None = None
    # `backend: auto`: the backend chosen and what it was chosen on (`ref` keeps `auto`, as the spec wrote it)
    choice: backendchoice.BackendChoice | None = None
    # the cell's context: its token budget and progress hook, and where the texts this encoder cut are recorded
    context: CellContext = field(default_factory=CellContext)

    @property
    def params_run(self) -> int:
        """Parameters of the modules the metric actually runs (truncated stack, no pooler; int8 weights count)."""
        return count_params(self.model)

    def describe(self) -> dict[str, Any]:
        """What runs: parameters, disk, layers, variant, and (early exit) the mean exit layer over inputs run."""
        out: dict[str, Any] = {
            "params": self.params_run,
            "disk_bytes": self.disk_bytes,
            "total_layers": self.total_layers,
            "source": self.source,
            "variant": self.ref.variant(),
            "weight_bytes": self.runner.weight_bytes if self.runner is not None else weight_bytes(self.model),
        }
        if self.runner is not None:
            out["backend"] = self.runner.backend
            out["backend_version"] = backends.backend_version(self.runner.backend)
        if self.choice is not None:  # the variant names the backend run (and so does the signature)
            out["variant"] = {**out["variant"], "backend": self.choice.backend}
            out["backend"] = self.choice.backend
            out["backend_choice"] = self.choice.describe()
        if self.exit_state is not None:
            exits = list(self.exit_layers.values())
            out["exit_criterion"] = self.exit_state.criterion
            out["mean_exit_layer"] = sum(exits) / len(exits) if exits else None
        return out

    @property
    def max_length(self) -> int:
        """Longest input the model accepts (tokens, specials included)."""
        return model_max_length(self.tokenizer, self.model.config)

    @property
    def specials_added(self) -> int:
        """Special tokens the tokenizer adds to one text ([CLS] and [SEP]: 2): a text of no more
        tokens than this is empty (bert_score's test, `mask.sum() == 2`)."""
        return int(self.tokenizer.num_special_tokens_to_add(pair=False))

    def tokenize(self, texts: Sequence[str], *, ids_only: bool = False) -> list[Tokenized]:
        """Tokenise texts (stripped) with special tokens, truncated to the model's maximum length (texts that
        were cut are recorded in the cell's context: `CellContext.truncated`); see
        `nlgbench.encoders.tokenization.tokenize_texts`."""
        return tokenize_texts(self.tokenizer, self.max_length, texts, self.context.truncated, ids_only=ids_only)

    def pad(self, batch: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        """Token id lists right-padded into ids [B, T] and attention mask [B, T] on the CPU; in
        pinned (page-locked) memory when the encoder runs on CUDA, so that `hidden_states` copies
        them to the device without blocking. Cheap to run ahead, off the main thread."""
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids, mask = pad_ids(batch, pad_id)
        if is_cuda(self.device):
            ids, mask = ids.pin_memory(), mask.pin_memory()
        return ids, mask

    def hidden_states(
        self, batch: Sequence[Sequence[int]], layers: Sequence[int], padded: tuple[Any, Any] | None = None
    ) -> tuple[list[Any], Any]:
        """Run the model on a padded batch; returns ([B, T, D] per requested layer on the device, mask [B, T]).

        `padded`: the batch's (ids, mask) from `pad`, when prepared ahead (`nlgbench.metrics.embedding`);
        otherwise padded here. The copy to the device is non-blocking (from pinned memory on CUDA:
        it queues behind the previous batch's kernels instead of waiting for them)."""
        for layer in layers:
            if not 0 <= layer <= self.layers_run:
                raise ValueError(f"layer {layer} out of range 0..{self.layers_run} for {self.ref.label}")
        input_ids, mask = padded if padded is not None else self.pad(batch)
        if self.runner is not None:  # its states on the cell's device, and the mask with them
            return self.runner.hidden_states(input_ids, mask, layers), mask.to(self.device, non_blocking=True)
        input_ids = input_ids.to(self.device, non_blocking=True)
        mask = mask.to(self.device, non_blocking=True)
        if self.exit_state is not None:
            return self._hidden_states_early_exit(batch, input_ids, mask, layers), mask
        only_last = list(layers) == [self.layers_run]
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=not only_last)
        if only_last:
            return [out.last_hidden_state], mask
        return [out.hidden_states[layer] for layer in layers], mask

    def _hidden_states_early_exit(
        self, batch: Sequence[Sequence[int]], input_ids: Any, mask: Any, layers: Sequence[int]
    ) -> list[Any]:
        """Hidden states where each input's layers past its exit repeat the exit layer's state."""
        st = self.exit_state
        assert st is not None
        st.start(mask, self.layers_run)
        with torch.inference_mode():
            self.model(input_ids=input_ids, attention_mask=mask)
        assert st.exit_layer is not None  # set by st.start
        for ids, layer in zip(batch, st.exit_layer.tolist(), strict=True):
            self.exit_layers[tuple(ids)] = layer
        return [st.states[layer] for layer in layers]


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists right-padded with `pad_id`: ids [B, T] and attention mask [B, T] (the rows
    joined into one array and scattered under the mask, in numpy: no Python list per row, and no
    torch tensor built from a Python list, which costs several times more; this runs once per model batch)."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    mask = np.arange(lengths.max()) < lengths[:, None]
    ids = np.full(mask.shape, pad_id, dtype=np.int64)
    ids[mask] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))


def _layer_stack(model: Any) -> tuple[str, Any] | None:
    """(attribute path, ModuleList) of the model's transformer layers, or None."""
    for path in _LAYER_PATHS:
        stack = _get_path(model, path)
        if isinstance(stack, torch.nn.ModuleList) and len(stack) > 0:
            return path, stack
    return None


def _truncate(model: Any, num_layers: int) -> int:
    """Keep only the first `num_layers` (<= the total, checked by the caller) transformer layers, as bert_score
    does; returns the total before."""
    found = _layer_stack(model)
    if found is None:
        raise UserError(f"cannot truncate {type(model).__name__}: no known layer stack")
    path, stack = found
    total = len(stack)
    _set_path(model, path, torch.nn.ModuleList(list(stack)[:num_layers]))
    for attr in ("num_hidden_layers", "n_layer", "n_layers", "encoder_layers"):
        if hasattr(model.config, attr):
            setattr(model.config, attr, num_layers)
    return total


def count_layers(model: Any) -> int:
    found = _layer_stack(model)
    if found is None:
        raise UserError(f"cannot find the layer stack of {type(model).__name__}")
    return len(found[1])


def load_encoder(
    ref: EncoderRef, device: str, needed_layer: int | None = None, context: CellContext | None = None
) -> Encoder:
    """Load tokenizer and model, keep the encoder half of seq2seq models, drop unused layers and pooler.

    `needed_layer`: the deepest layer the metric reads; layers above it are never run, so they
    are dropped (this is what makes "layer 9 of BERT-base" cheaper than the full model).
    With a `backend` (ONNX Runtime, OpenVINO) the kept layers run there, from an export that is
    made once and cached (`nlgbench.encoders.backends`); when it is cached, torch's module is built
    on the meta device (configuration and parameter count, no weights read).
    `context`: the cell's (`nlgbench.foundations.cellcontext`), which records the export's seconds and
    the texts the encoder cuts; None: a context of its own.
    """
    context = context if context is not None else CellContext()
    if ref.backend == AUTO:
        return _load_auto(ref, device, needed_layer, context)
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if ref.backend is not None:
        backends.require(ref.backend)
        backends.check_backend_device(ref.backend, device)
    source = resolve_source(ref.name)
    reach_hub(source)
    tokenizer = AutoTokenizer.from_pretrained(source, **load_options(source))
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"encoder {ref.label}: a fast tokenizer is needed (offsets and word ids)")
    # A backend cell keeps torch's module on the meta device (configuration and parameter count): the
    # weights are read only to export, once, inside `_backend`.
    model, total, keep = _encoder_model(ref, source, needed_layer, meta=ref.backend is not None)
    runner, exit_state = None, None
    if ref.backend is not None:
        runner = _backend(ref, source, tokenizer, keep, needed_layer, device, context)
    folder = local_snapshot(source)
    if ref.backend is None:
        model, exit_state = _apply_variants(model, ref, device, Path(folder) if folder else None)
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    return Encoder(
        ref=ref,
        source=source,
        tokenizer=tokenizer,
        model=model,
        device=device,
        total_layers=total,
        layers_run=keep,
        disk_bytes=disk_bytes(folder) if folder else 0,
        special_ids=frozenset(special),
        exit_state=exit_state,
        runner=runner,
        context=context,
    )


def _load_auto(ref: EncoderRef, device: str, needed_layer: int | None, context: CellContext) -> Encoder:
    """`backend: auto`: the encoder on the backend `backendchoice.choose` picks for this model and machine
    (measured once, then cached); the encoder keeps `ref` as written, and records the choice."""
    source = resolve_source(ref.name)

    def fingerprint() -> str | None:
        folder = local_snapshot(source)
        return content_fingerprint(folder) if folder is not None else None

    def load(backend: str) -> Encoder:
        return load_encoder(replace(ref, backend=None if backend == TORCH else backend), device, needed_layer, context)

    layers = {"num_layers": ref.num_layers, "needed_layer": needed_layer}
    label = replace(ref, backend=None).label
    encoder, choice = backendchoice.choose(label, fingerprint, layers, needed_layer, device, load)
    if choice.calibration_s:
        context.exports.append(choice.calibration_s)  # timed apart from loading, as the exports it made
    encoder.ref, encoder.choice = ref, choice
    return encoder


def _encoder_model(
    ref: EncoderRef, source: str, needed_layer: int | None, *, meta: bool, export: bool = False
) -> tuple[Any, int, int]:
    """torch's encoder module (the encoder half of a seq2seq model, no pooler, layers above the kept
    ones dropped), the model's total layers and those kept; on the meta device (no weights) if `meta`.
    `export`: with the eager attention, whose traced graph ONNX Runtime runs faster than SDPA's
    (docs/results/backends.md); the same arithmetic."""
    from transformers import AutoConfig, AutoModel

    if meta:
        with torch.device("meta"):
            model = AutoModel.from_config(AutoConfig.from_pretrained(source, **load_options(source)))
    else:
        extra = {"attn_implementation": "eager"} if export else {}
        model = AutoModel.from_pretrained(source, **load_options(source), **extra)
    if hasattr(model, "get_encoder") and getattr(model.config, "is_encoder_decoder", False):
        model = model.get_encoder()
    if getattr(model, "pooler", None) is not None:
        model.pooler = None  # unused by token-level metrics; not counted, not run
    total = count_layers(model)
    check_layers(ref, total, needed_layer, f"encoder {ref.label}")
    keep = ref.num_layers if ref.num_layers is not None else total
    if needed_layer is not None:
        keep = needed_layer  # layers above the deepest one the metric reads are never run
    if keep < total:
        _truncate(model, keep)
    model.eval()
    return model, total, keep


def _backend(
    ref: EncoderRef, source: str, tokenizer: Any, keep: int, needed_layer: int | None, device: str, context: CellContext
) -> backends.BackendRunner:
    """The backend's runner of the kept layers: from the export cache, else exported now (timed apart,
    in `context`)."""
    backend = ref.backend
    assert backend is not None

    def exporter() -> Callable[[str], Path]:
        model, _, _ = _encoder_model(ref, source, needed_layer, meta=False, export=True)  # read the weights
        sample = tokenizer(
            ["An export sample.", "A second, longer sample sentence for the export."],
            padding=True,
            return_tensors="pt",
            return_token_type_ids=False,
        )
        inputs = (sample["input_ids"], sample["attention_mask"])
        return lambda key: backends.export(model, inputs, keep, key, backend, ref.quantize)

    return backends.cached_or_exported(
        ref, source, keep, backends.HIDDEN_STATES, device, exporter, f"encoder {ref.label}", context
    )


def _apply_variants(model: Any, ref: EncoderRef, device: str, folder: Path | None) -> tuple[Any, ExitState | None]:
    """Quantise / cast, move to the device, and wrap the layers for early exit, as the ref asks."""
    if ref.quantize == "int8":
        model = quantize_int8(model, device)
    elif ref.dtype is not None:
        model = model.to(check_dtype(ref.dtype, device))
    model = model.to(device)
    if ref.early_exit is None:
        return model, None
    found = _layer_stack(model)
    if found is None:
        raise UserError(f"encoder {ref.label}: early exit needs a known layer stack")
    heads = exit_heads(Path(folder) if folder else None)
    return model, install_early_exit(found[1], ref.early_exit, heads)
