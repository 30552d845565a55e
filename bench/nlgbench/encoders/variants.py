"""Encoder variants built from any loaded model: early exit, dynamic int8 quantisation, dtype.

Early exit follows DeeBERT (Xin et al., 2020): each input stops at the first layer where
it is "done" and later layers pass its state through unchanged, so a metric reading layer L
gets the exit layer's representation. "Done" is (a) the checkpoint's exit (highway)
classifier being confident, entropy < threshold, where the checkpoint has such heads, or
(b) otherwise the representation settling: the mean relative change of the token states
from the previous layer, ||h_l - h_{l-1}|| / ||h_{l-1}||, below the threshold. Exited
inputs are dropped from the batch for the remaining layers, which is where time is saved.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nlgbench.encoders.registry import DTYPE_NAMES
from nlgbench.foundations.devicenames import is_cuda
from nlgbench.foundations.errors import UserError

DTYPES: dict[str, torch.dtype] = dict(zip(DTYPE_NAMES, (torch.float32, torch.float16, torch.bfloat16), strict=True))

# ----------------------------------------------------------------------------- exit heads


@dataclass
class ExitHead:
    """DeeBERT highway head after one layer: tanh(pooler(h[CLS])) -> classifier logits."""

    pool_w: torch.Tensor
    pool_b: torch.Tensor
    cls_w: torch.Tensor
    cls_b: torch.Tensor

    def entropy(self, first_token: torch.Tensor) -> torch.Tensor:
        """Entropy of the exit classifier's prediction per input, from the first token's state [B, D]."""
        x = first_token.to(self.pool_w.dtype)
        pooled = torch.tanh(x @ self.pool_w.T + self.pool_b)
        logp = torch.log_softmax(pooled @ self.cls_w.T + self.cls_b, dim=-1)
        return -(logp.exp() * logp).sum(-1)


_HIGHWAY = re.compile(r"(?:^|\.)encoder\.highway\.(\d+)\.(pooler\.dense|classifier)\.(weight|bias)$")


def exit_heads(folder: Path | None) -> dict[int, ExitHead]:
    """Exit heads in a checkpoint's weight files, by layer (1-based); empty when it has none."""
    if folder is None:
        return {}
    parts: dict[int, dict[str, torch.Tensor]] = {}
    for path in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("pytorch_model*.bin")):
        state = _read_state(path)
        for key, tensor in state.items():
            m = _HIGHWAY.search(key)
            if m:
                parts.setdefault(int(m.group(1)) + 1, {})[f"{m.group(2)}.{m.group(3)}"] = tensor.float()
    heads = {}
    for layer, p in parts.items():
        need = ("pooler.dense.weight", "pooler.dense.bias", "classifier.weight", "classifier.bias")
        if all(k in p for k in need):
            heads[layer] = ExitHead(*(p[k] for k in need))
    return heads


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(path, map_location="cpu", weights_only=True)


# ----------------------------------------------------------------------------- early exit


@dataclass
class ExitState:
    """Per-batch bookkeeping shared by the wrapped layers."""

    threshold: float
    heads: dict[int, ExitHead]
    mask: torch.Tensor | None = None  # [B, T] padding mask of the running batch
    active: torch.Tensor | None = None  # [B] bool: still running
    exit_layer: torch.Tensor | None = None  # [B] layer at which each input stopped
    states: list[torch.Tensor] = field(default_factory=list)  # hidden states per layer, full batch
    tuple_out: bool = False  # whether this architecture's layers return (hidden, ...) rather than hidden

    @property
    def criterion(self) -> str:
        return "entropy" if self.heads else "change"

    def start(self, mask: torch.Tensor, num_layers: int) -> None:
        self.mask = mask
        self.active = torch.ones(mask.shape[0], dtype=torch.bool, device=mask.device)
        self.exit_layer = torch.full((mask.shape[0],), num_layers, dtype=torch.long, device=mask.device)
        self.states = []

    def done(self, layer: int, new: torch.Tensor, old: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Which of `rows` stop after `layer`, given their new and previous states."""
        if self.heads:
            head = self.heads.get(layer)
            if head is None:
                return torch.zeros(len(rows), dtype=torch.bool, device=new.device)
            return head.entropy(new[:, 0]).to(new.device) < self.threshold
        if layer < 2:  # the first layer's change from the embeddings says nothing about settling
            return torch.zeros(len(rows), dtype=torch.bool, device=new.device)
        assert self.mask is not None
        m = self.mask[rows].to(new.dtype)
        change = (new - old).float().norm(dim=-1) / old.float().norm(dim=-1).clamp_min(1e-12)
        return (change * m).sum(-1) / m.sum(-1) < self.threshold


class ExitLayer(torch.nn.Module):
    """Wraps one transformer layer: runs it on the inputs still active, passes the others through."""

    def __init__(self, inner: torch.nn.Module, index: int, state: ExitState) -> None:
        super().__init__()
        self.inner = inner
        self.index = index  # 1-based layer number
        self.state = state

    def forward(self, hidden: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        st = self.state
        assert st.active is not None and st.exit_layer is not None
        if self.index == 1:
            st.states = [hidden]
        batch = hidden.shape[0]
        rows = st.active.nonzero().squeeze(1)
        out = hidden.clone()
        if len(rows):
            sub = [_rows(a, rows, batch) for a in args]
            subk = {k: _rows(v, rows, batch) for k, v in kwargs.items()}
            result = self.inner(hidden[rows], *sub, **subk)
            st.tuple_out = isinstance(result, tuple)
            new = result[0] if st.tuple_out else result
            out[rows] = new
            stop = st.done(self.index, new, hidden[rows], rows)
            st.active[rows[stop]] = False
            st.exit_layer[rows[stop]] = self.index
        st.states.append(out)
        return (out,) if st.tuple_out else out  # the form the model's own loop expects


def _rows(value: Any, rows: torch.Tensor, batch: int) -> Any:
    """Select the running inputs of a per-batch tensor argument (masks, position bias); others as they are."""
    if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[0] == batch and batch > 1:
        return value[rows]
    return value


def install_early_exit(stack: torch.nn.ModuleList, threshold: float, heads: dict[int, ExitHead]) -> ExitState:
    """Replace each layer of `stack` in place by its ExitLayer wrapper; returns the shared state."""
    state = ExitState(threshold=threshold, heads=heads)
    for i in range(len(stack)):
        stack[i] = ExitLayer(stack[i], i + 1, state)
    return state


# ----------------------------------------------------------------------------- int8 and dtype


def quantize_int8(model: torch.nn.Module, device: str) -> torch.nn.Module:
    """Dynamic int8 quantisation of every nn.Linear (weights int8, activations quantised on the fly); CPU only."""
    if is_cuda(device):
        raise UserError(f"quantize: int8 is dynamic CPU quantisation; device {device!r} is not supported")
    with warnings.catch_warnings():  # torch.ao is deprecated in favour of torchao, but still the CPU path in 2.13
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _packed(model: torch.nn.Module) -> list[torch.Tensor]:
    """Weights and biases held packed by quantised linear layers (not in `parameters()`)."""
    out = []
    for module in model.modules():
        # a quantised linear layer's `weight` and `bias` are methods unpacking `_packed_params`
        weight = getattr(module, "weight", None)
        if getattr(module, "_packed_params", None) is not None and callable(weight):
            out.append(weight())
            unpack_bias = getattr(module, "bias", None)
            bias = unpack_bias() if callable(unpack_bias) else None
            if bias is not None:
                out.append(bias)
    return out


def count_params(model: torch.nn.Module) -> int:
    """Parameters run, counting the packed weights of quantised linear layers too."""
    return sum(p.numel() for p in model.parameters()) + sum(t.numel() for t in _packed(model))


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes the weights take in memory at their run precision (int8 weights 1 byte, bf16 2, ...)."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *_packed(model)])


def check_dtype(name: str, device: str) -> torch.dtype:
    """The torch dtype of a spec's `dtype`, refusing half precision where the device cannot run it."""
    dtype = DTYPES[name]
    if dtype is torch.float32:
        return dtype
    try:
        a = torch.ones(4, 4, dtype=dtype, device=device)
        (a @ a).sum().item()
    except (RuntimeError, TypeError) as exc:
        raise UserError(f"dtype {name} is not supported on device {device!r}: {' '.join(str(exc).split())}") from None
    return dtype
