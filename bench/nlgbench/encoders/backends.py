"""Inference backends for token-embedding encoders: the encoder exported once to ONNX
(its hidden states as outputs, dynamic batch and length), cached, and run by ONNX Runtime or
OpenVINO instead of torch.

FrugalScore's cross-encoder runs on a backend the same way, its export's one output the regression
logit of a (hypothesis, reference) pair (`export_cross_encoder`, `BackendRunner.logits`).

A spec asks for one with the encoder variant `backend:` (`torch`, the default, `onnxruntime`,
`openvino`), combinable with `num_layers` / the metric's layer (the export holds only the layers
kept), `quantize: int8` (ONNX Runtime's dynamic quantisation of the exported graph; OpenVINO's
int8 weight compression through NNCF) and, for OpenVINO, `dtype: bf16` (its bf16 inference
precision, where the CPU has bf16 instructions). The export is cached under
`NLGBENCH_CACHE/exports/<key>`, the key hashing the model folder's content fingerprint, the layers kept, the
opset, the exporter and the library versions; its record (`export.json`) holds the sha256 of each
file written, checked on reuse, so a damaged export is made again rather than loaded. Exporting is
timed apart (into the cell's context, `CellContext.exports`: the cell's `timing.export_s`), never
inside load or ms/segment.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlgbench.encoders.hfcache import content_fingerprint, local_snapshot
from nlgbench.encoders.registry import BACKEND_EXTRAS, BACKEND_MODULES, TORCH, EncoderRef, backend_version
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.devicenames import cuda_index, is_cuda
from nlgbench.foundations.digests import cached_file_sha256, file_sha256, remember_sha256
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.package import cache_root

OPSET = 17
EXPORTER = "torch.onnx.export(dynamo=False)"  # the TorchScript exporter: several times quicker than dynamo's
EXPORTS_FOLDER = "exports"
MODEL_FILE = "model.onnx"  # the fp32 export
ORT_INT8_FILE = "model.int8.onnx"  # ONNX Runtime's dynamic int8 quantisation of it
OV_INT8_FILE = "openvino.int8.xml"  # OpenVINO IR with int8-compressed weights (its .bin beside it)
META_FILE = "export.json"


def require(backend: str) -> None:
    """Import the backend's libraries, or one line naming the extra that installs them."""
    for module in BACKEND_MODULES[backend]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise UserError(
                f"backend {backend} needs the package {module!r}: pip install 'nlgbench[{BACKEND_EXTRAS[backend]}]'"
            ) from None


def check_backend_device(backend: str, device: str) -> None:
    """ONNX Runtime runs on CUDA only where its CUDA provider is installed; OpenVINO here runs on the CPU."""
    if backend == TORCH or not is_cuda(device):
        return
    if backend == "onnxruntime":
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise UserError(
                f"backend onnxruntime on {device}: this onnxruntime has no CUDA provider "
                "(install onnxruntime-gpu), or run the cell on cpu"
            )
        return
    raise UserError(f"backend {backend} runs on the CPU here; device {device!r} is not supported")


# ----------------------------------------------------------------------------- export and its cache


HIDDEN_STATES = "hidden_states"  # an encoder's export: every kept layer's hidden states
LOGITS = "logits"  # a cross-encoder's export: its classification head's output


def export_key(fingerprint: str, layers: int, backend: str, quantize: str | None, graph: str = HIDDEN_STATES) -> str:
    """The cache key of an export: what changes the exported graph or its run (`graph`: what it outputs)."""
    import onnx
    import transformers

    payload = {
        "weights": fingerprint,
        "layers": layers,
        "opset": OPSET,
        "exporter": EXPORTER,
        "attention": "eager",  # the traced attention (nlgbench.encoders.runtime exports the eager one)
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "backend": backend,
        "backend_version": backend_version(backend),
        "quantize": quantize,
    }
    if backend == "openvino" and quantize:
        payload["nncf"] = importlib.metadata.version("nncf")
    if graph != HIDDEN_STATES:  # (absent for encoders, so their keys, and caches, stay as they were)
        payload["graph"] = graph
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def export_folder(key: str) -> Path:
    return cache_root() / EXPORTS_FOLDER / key


def run_file(folder: Path, backend: str, quantize: str | None) -> Path:
    """The file the backend loads from an export folder."""
    if quantize and backend == "onnxruntime":
        return folder / ORT_INT8_FILE
    if quantize and backend == "openvino":
        return folder / OV_INT8_FILE
    return folder / MODEL_FILE


def cached_export(key: str, backend: str, quantize: str | None) -> Path | None:
    """The export folder of `key` when it is complete (its record is written last) and intact (every file
    the record lists has the sha256 recorded when it was written), else None. A damaged one (a file cut
    short or changed since) is removed, with one line saying so, for the caller to export it again."""
    folder = export_folder(key)
    if not (folder / META_FILE).is_file() or not run_file(folder, backend, quantize).is_file():
        return None
    damage = export_damage(folder)
    if damage is None:
        return folder
    print(f"nlgbench: cached export {folder} is damaged ({damage}); exporting it again", file=sys.stderr)
    discard(folder)
    return None


def export_damage(folder: Path) -> str | None:
    """What is wrong with a complete export folder's files, by its record's digests; None if nothing."""
    try:
        recorded = json.loads((folder / META_FILE).read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return f"{META_FILE} cannot be read"
    if not isinstance(recorded, dict) or not recorded:
        return f"{META_FILE} records no file digests"
    for name, digest in sorted(recorded.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if cached_file_sha256(path) != digest:
            return f"{name} differs from the file written"
    return None


def discard(folder: Path) -> None:
    """Remove an export folder: renamed aside first (one step), so no other process finds it half removed."""
    aside = folder.with_name(f".{folder.name}.damaged.{os.getpid()}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:  # another process removed it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def export(model: Any, sample: tuple[Any, Any], layers: int, key: str, backend: str, quantize: str | None) -> Path:
    """Export the encoder `model` (torch, eval mode, truncated to `layers`) to the cache as `key`: the
    fp32 graph whose outputs h0..hL are the hidden states (embeddings, then each of the L = `layers`),
    quantised as asked (`export_graph`)."""
    inputs = {"input_ids": sample[0], "attention_mask": sample[1]}
    return export_graph(HiddenStates(model), inputs, [f"h{i}" for i in range(layers + 1)], key, backend, quantize)


def export_cross_encoder(model: Any, sample: dict[str, Any], key: str, backend: str, quantize: str | None) -> Path:
    """Export a sequence classifier (FrugalScore's student; torch, eval mode) to the cache as `key`: its
    inputs those of `sample` (input_ids, attention_mask and, where its tokenizer gives them, token_type_ids),
    its one output the logits [B, labels]."""
    return export_graph(Logits(model, list(sample)), sample, [LOGITS], key, backend, quantize)


def export_graph(
    module: torch.nn.Module, sample: dict[str, Any], outputs: list[str], key: str, backend: str, quantize: str | None
) -> Path:
    """Trace `module` on `sample` (its inputs by name, batch and length dynamic) to ONNX, quantised as asked,
    into the cache as `key`. Built in a temporary folder and renamed into place, so an interrupted export
    is never used; a concurrent export of the same key keeps the first one."""
    start = time.perf_counter()
    root = cache_root() / EXPORTS_FOLDER
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    inputs = list(sample)
    try:
        axes = {n: {0: "batch", 1: "tokens"} for n in inputs}
        axes.update({n: {0: "batch", 1: "tokens"} for n in outputs if n != LOGITS})
        if LOGITS in outputs:
            axes[LOGITS] = {0: "batch"}
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python branches it records as constants
            torch.onnx.export(
                module,
                tuple(sample.values()),
                str(tmp / MODEL_FILE),
                input_names=inputs,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        module.eval()  # the exporter may leave modules in training mode
        if quantize and backend == "onnxruntime":
            _quantize_ort(tmp / MODEL_FILE, tmp / ORT_INT8_FILE)
        elif quantize and backend == "openvino":
            _compress_openvino(tmp / MODEL_FILE, tmp / OV_INT8_FILE)
        files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        seconds = time.perf_counter() - start
        meta = {"key": key, "inputs": inputs, "outputs": outputs, "export_s": seconds, "files": files}
        (tmp / META_FILE).write_text(json.dumps(meta))
        target = export_folder(key)
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished the same export first: keep its
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            for name, digest in files.items():  # its reuse checks these without reading them again
                remember_sha256(target / name, digest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def cached_or_exported(
    ref: EncoderRef,
    source: str,
    layers: int,
    graph: str,
    device: str,
    exporter: Callable[[], Callable[[str], Path]],
    where: str,
    context: CellContext,
) -> BackendRunner:
    """The runner of `ref.backend` for the model at `source`: its export from the cache where the model's
    files are on disk and the cache holds it (no weights read), else made now. `exporter()` reads the
    weights (downloading them where needed) and returns the writer of the export under a key, which is
    taken only then: a Hub model's folder may have held its config but not its weights. `where` begins
    the error line of a model with no files on disk. The export's seconds (0.0 when the cache held it)
    are recorded in the cell's `context`."""
    backend = ref.backend
    assert backend is not None

    def key(folder: Path) -> str:
        return export_key(content_fingerprint(folder), layers, backend, ref.quantize, graph)

    folder = local_snapshot(source)
    found = cached_export(key(folder), backend, ref.quantize) if folder is not None else None
    if found is not None:
        context.exports.append(0.0)
    else:
        write = exporter()
        folder = local_snapshot(source)  # downloaded by `from_pretrained` if it was not there
        if folder is None:
            raise UserError(f"{where}: backend {backend} needs the model's files on disk")
        name = key(folder)
        start = time.perf_counter()
        found = write(name)
        context.exports.append(time.perf_counter() - start)
        del write  # and with it torch's weights: the cell runs the export
    return load_runner(found, backend, ref.quantize, ref.dtype, torch.get_num_threads(), device)


class HiddenStates(torch.nn.Module):
    """The model as the exporter traces it: (input_ids, attention_mask) -> every hidden state."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return tuple(out.hidden_states)


class Logits(torch.nn.Module):
    """A sequence classifier as the exporter traces it: its inputs, in the order of `names` -> logits."""

    def __init__(self, inner: torch.nn.Module, names: list[str]) -> None:
        super().__init__()
        self.inner = inner
        self.names = names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.inner(**dict(zip(self.names, inputs, strict=True))).logits


def _quantize_ort(src: Path, dst: Path) -> None:
    """ONNX Runtime's dynamic quantisation: int8 weights of every MatMul (per output channel: half the
    error of one scale per tensor on MiniLM's hidden states, at the same speed), activations per batch."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # its pre-processing hint
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True)


def _compress_openvino(src: Path, dst: Path) -> None:
    """OpenVINO's int8 path for transformers: NNCF's int8 weight compression (asymmetric, per channel)."""
    import nncf
    import openvino as ov

    nncf.set_log_level(logging.ERROR)  # its per-layer statistics table would land in the cell's output
    core = ov.Core()
    model = core.read_model(str(src))
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        compressed = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)  # (and its progress bar)
    ov.save_model(compressed, str(dst), compress_to_fp16=False)


# ----------------------------------------------------------------------------- running it


@dataclass
class BackendRunner:
    """A loaded backend model: hidden states of chosen layers for a padded batch (numpy in, torch out)."""

    backend: str
    path: Path
    session: Any
    outputs: list[str]
    inputs: list[str]  # the graph's inputs by name (input_ids, attention_mask[, token_type_ids])
    device: str = "cpu"  # where its outputs are handed over (ONNX Runtime's CUDA provider runs there)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the model files the backend loaded (the graph's weights at their stored precision)."""
        files = [self.path, self.path.with_suffix(".bin")]
        return sum(f.stat().st_size for f in files if f.is_file())

    def hidden_states(self, input_ids: Any, attention_mask: Any, layers: Sequence[int]) -> list[Any]:
        """[B, T, D] float32 torch tensors, on the cell's device, of the requested hidden states."""
        feed = {"input_ids": _int64(input_ids), "attention_mask": _int64(attention_mask)}
        if self.backend == "onnxruntime":
            arrays = self.session.run([self.outputs[i] for i in layers], feed)
        else:
            result = self.session(feed)  # OpenVINO: its output buffers are reused by the next call
            arrays = [np.array(result[i], copy=True) for i in layers]
        return [torch.from_numpy(a).to(self.device) for a in arrays]

    def logits(self, batch: dict[str, Any]) -> Any:
        """A cross-encoder export's logits [B, labels], float32 torch on the cell's device, for a padded batch
        (torch tensors by input name; those the graph does not take are left out)."""
        if self.outputs != [LOGITS]:
            raise ValueError(f"{self.path} is an encoder's export (hidden states), not a cross-encoder's")
        feed = {name: _int64(batch[name]) for name in self.inputs}
        if self.backend == "onnxruntime":
            (array,) = self.session.run([LOGITS], feed)
        else:
            array = np.array(self.session(feed)[0], copy=True)
        return torch.from_numpy(array).to(self.device)


def _int64(tensor: Any) -> np.ndarray:
    return tensor.cpu().numpy().astype(np.int64, copy=False)


def ort_providers(device: str) -> list[Any]:
    """ONNX Runtime's execution providers for a cell's device: CUDA's (that GPU) first on `cuda[:N]`."""
    if not is_cuda(device):
        return ["CPUExecutionProvider"]
    return [("CUDAExecutionProvider", {"device_id": cuda_index(device)}), "CPUExecutionProvider"]


def load_runner(
    folder: Path, backend: str, quantize: str | None, dtype: str | None, threads: int, device: str = "cpu"
) -> BackendRunner:
    """Open an export for `backend` with `threads` intra-op threads (the cell's), on the CPU, or for ONNX
    Runtime on a CUDA `device` through its CUDA provider (`check_backend_device` refused it where absent)."""
    path = run_file(folder, backend, quantize)
    meta = json.loads((folder / META_FILE).read_text())
    outputs = meta["outputs"]
    inputs = meta.get("inputs", ["input_ids", "attention_mask"])  # (exports made before cross-encoders)
    if backend == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(path), options, providers=ort_providers(device))
        if is_cuda(device) and "CUDAExecutionProvider" not in session.get_providers():
            raise UserError(f"backend onnxruntime on {device}: its CUDA provider did not load (see onnxruntime-gpu)")
        return BackendRunner(backend, path, session, outputs, inputs, device)
    import openvino as ov

    core = ov.Core()
    precision = "bf16" if dtype == "bf16" else "f32"
    if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        raise UserError("backend openvino: dtype bf16 needs a CPU with bf16 instructions; this one has none")
    # f32 explicitly: on a CPU with bf16 instructions OpenVINO would otherwise run in bf16
    config = {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads}
    return BackendRunner(backend, path, core.compile_model(str(path), "CPU", config), outputs, inputs, device)
