"""Whole models for the generation-based and learned metrics: seq2seq LMs, causal LMs, cross-encoders.

Token-embedding metrics use `nlgbench.encoders.runtime.Encoder`; these metrics need the model's head
(log-likelihoods, a regression output), so they load the matching Auto class. Variants that
make sense for a whole model apply (`dtype`, `quantize`); layer truncation and early exit do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.encoders.hfcache import disk_bytes, load_options, local_snapshot
from nlgbench.encoders.registry import EncoderRef, resolve_encoder
from nlgbench.encoders.variants import check_dtype, count_params, quantize_int8, weight_bytes
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

    def describe(self) -> dict[str, Any]:
        return {
            "params": count_params(self.model),
            "disk_bytes": self.disk_bytes,
            "source": self.source,
            "variant": self.ref.variant(),
            "weight_bytes": weight_bytes(self.model),
        }


def load_model(ref: EncoderRef, kind: str, device: str, state_dict: str | None = None) -> LoadedModel:
    """Load `ref` as a `kind` model; `state_dict`: a local file of fine-tuned weights put on top."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    if ref.num_layers is not None or ref.early_exit is not None:
        raise UserError(f"{ref.label}: num_layers and early_exit apply to encoders, not to a whole {kind} model")
    if ref.backend is not None:
        raise UserError(f"{ref.label}: backend {ref.backend} runs token-embedding encoders, not a whole {kind} model")
    resolved = resolve_encoder(ref.name)
    found = resolved.kind
    if found is not None and found != kind:
        raise UserError(f"{ref.label} is of kind {found}; this metric needs a {kind} model")
    hf_logging.disable_progress_bar()
    source = resolved.source
    cached = load_options(source)
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, **cached)
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
