"""Whole models for the generation-based and learned metrics: seq2seq LMs, causal LMs, cross-encoders.

Token-embedding metrics use `nlgbench.encoders.runtime.Encoder`; these metrics need the model's head
(log-likelihoods, a regression output), so they load the matching Auto class. Variants that
make sense for a whole model apply (`dtype`, `quantize`); layer truncation and early exit do not.
A cross-encoder may run on an inference backend (`backend: onnxruntime` / `openvino`, with
`quantize: int8`), from an export of its logits made once and cached (`nlgbench.encoders.backends`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nlgbench.encoders import backends
from nlgbench.encoders.backends import BackendRunner
from nlgbench.encoders.hfcache import disk_bytes, load_options, local_snapshot, reach_hub
from nlgbench.encoders.registry import AUTO, EncoderRef, resolve_encoder
from nlgbench.encoders.variants import check_dtype, count_params, quantize_int8, weight_bytes
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError

AUTO_CLASSES = {
    "seq2seq": "AutoModelForSeq2SeqLM",
    "causal-lm": "AutoModelForCausalLM",
    "cross-encoder": "AutoModelForSequenceClassification",
}


@dataclass
class LoadedModel:
    """A tokenizer and model with what the measurement protocol reports."""

    ref: EncoderRef
    source: str
    tokenizer: Any
    model: Any
    device: str
    disk_bytes: int
    # the backend that runs the model; `model` is then torch's skeleton on the meta device
    # (configuration and parameter count)
    runner: BackendRunner | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "params": count_params(self.model),
            "disk_bytes": self.disk_bytes,
            "source": self.source,
            "variant": self.ref.variant(),
            "weight_bytes": self.runner.weight_bytes if self.runner is not None else weight_bytes(self.model),
        }
        if self.runner is not None:
            out["backend"] = self.runner.backend
            out["backend_version"] = backends.backend_version(self.runner.backend)
        return out


def load_model(
    ref: EncoderRef, kind: str, device: str, state_dict: str | None = None, context: CellContext | None = None
) -> LoadedModel:
    """Load `ref` as a `kind` model; `state_dict`: a local file of fine-tuned weights put on top;
    `context`: the cell's, where a backend's export records its seconds (None: a context of its own)."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    if ref.num_layers is not None or ref.early_exit is not None:
        raise UserError(f"{ref.label}: num_layers and early_exit apply to encoders, not to a whole {kind} model")
    if ref.backend == AUTO:  # (the spec refuses it here; a whole model is compared by no calibration: torch)
        ref = replace(ref, backend=None)
    if ref.backend is not None and kind != "cross-encoder":  # (BARTScore's seq2seq model, with its state_dict)
        raise UserError(
            f"{ref.label}: backend {ref.backend} runs token-embedding encoders and cross-encoders, "
            f"not a whole {kind} model"
        )
    resolved = resolve_encoder(ref.name)
    found = resolved.kind
    if found is not None and found != kind:
        raise UserError(f"{ref.label} is of kind {found}; this metric needs a {kind} model")
    hf_logging.disable_progress_bar()
    source = resolved.source
    reach_hub(source)
    cached = load_options(source)
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, **cached)
    if ref.backend is not None:
        return _cross_encoder_on_backend(
            ref, source, tokenizer, device, context if context is not None else CellContext()
        )
    model = getattr(transformers, AUTO_CLASSES[kind]).from_pretrained(source, **cached)
    if kind == "seq2seq" and not getattr(model.config, "is_encoder_decoder", False):
        raise UserError(f"{ref.label} is not an encoder-decoder model; this metric needs a seq2seq model")
    if state_dict is not None:
        path = Path(state_dict).expanduser()
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
        except (OSError, RuntimeError, KeyError) as exc:
            raise UserError(
                f"state_dict {path}: cannot load onto {ref.label}: {' '.join(str(exc).split())[:300]}"
            ) from None
    model.eval()
    if ref.quantize == "int8":
        model = quantize_int8(model, device)
    elif ref.dtype is not None:
        model = model.to(check_dtype(ref.dtype, device))
    model = model.to(device)
    folder = local_snapshot(source)  # looked up after `from_pretrained`, which may have just downloaded it
    size = disk_bytes(folder) if folder else 0
    if state_dict is not None:
        size += Path(state_dict).expanduser().stat().st_size
    return LoadedModel(ref=ref, source=source, tokenizer=tokenizer, model=model, device=device, disk_bytes=size)


def _cross_encoder_on_backend(
    ref: EncoderRef, source: str, tokenizer: Any, device: str, context: CellContext
) -> LoadedModel:
    """A cross-encoder run by `ref.backend`: torch's module built on the meta device (configuration and
    parameter count), the export of its logits taken from the cache, else made now from the weights
    (timed apart, into `context`)."""
    import torch
    import transformers

    backend = ref.backend
    assert backend is not None
    backends.require(backend)
    backends.check_backend_device(backend, device)
    config = transformers.AutoConfig.from_pretrained(source, **load_options(source))
    with torch.device("meta"):
        skeleton = transformers.AutoModelForSequenceClassification.from_config(config)
    skeleton.eval()
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)

    def exporter() -> Callable[[str], Path]:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            source, **load_options(source), attn_implementation="eager"
        )  # the eager attention traces to a graph ONNX Runtime runs faster (`runtime._encoder_model`)
        model.eval()
        sample = tokenizer(
            ["An export sample.", "A second, longer sample sentence."],
            ["Its reference.", "The reference of the second sample."],
            padding=True,
            return_tensors="pt",
        )
        inputs = {n: sample[n] for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample}
        return lambda key: backends.export_cross_encoder(model, inputs, key, backend, ref.quantize)

    runner = backends.cached_or_exported(ref, source, layers, backends.LOGITS, device, exporter, ref.label, context)
    folder = local_snapshot(source)
    return LoadedModel(
        ref=ref,
        source=source,
        tokenizer=tokenizer,
        model=skeleton,
        device=device,
        disk_bytes=disk_bytes(folder) if folder else 0,
        runner=runner,
    )
