"""What a worker imports before it is ready to load (its start-up, results.csv's `startup_s`): torch,
transformers' auto classes and the modules every model load pulls in, the modeling modules of the
cell's architectures, and the libraries the correlation uses. A sweep's fork server imports them once
for all its cells (`nlgbench.execution.forkserver`); a plain worker imports them at its start
(`nlgbench.execution.worker`). Either way the cell's `load_s` is building the model and reading its
weights, never importing libraries: with transformers 5, `transformers.modeling_utils` and the modules
beside it (torch.distributed, torch._dynamo, sympy) cost far more than building a small model
(docs/concepts/measurement.md).

Importing runs no torch op (nothing starts torch's thread pools or CUDA: a forked child could not use
them). A module that cannot be imported is skipped here: the cell that needs it meets the error itself.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Sequence

from nlgbench.core.cell import CellConfig
from nlgbench.encoders.registry import BACKEND_MODULES, NO_ENCODER, resolve_encoder
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import get_metric

LIBRARIES = (
    "torch",
    "transformers",
    "transformers.models.auto.configuration_auto",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
    "transformers.modeling_utils",  # with the next three: what any model's module imports
    "transformers.activations",
    "transformers.masking_utils",
    "transformers.modeling_layers",
    "safetensors.torch",
    "scipy.stats",  # the correlations of every cell
)


def cell_models(cell: CellConfig) -> list[str]:
    """The models a cell loads: its encoder (unless `none`) and those its metric's options name."""
    info = get_metric(cell.metric)
    return [
        *([cell.encoder.name] if cell.encoder.name != NO_ENCODER else []),
        *(str(cell.options[k]) for k in info.model_options if cell.options.get(k)),
    ]


def architecture_modules(models: Iterable[str]) -> list[str]:
    """transformers' modeling module of each model whose config.json is local (a folder, a cached
    snapshot): `transformers.models.<model_type>.modeling_<model_type>`; others are left out."""
    out: list[str] = []
    for name in models:
        try:
            folder = resolve_encoder(name).snapshot
            config = json.loads((folder / "config.json").read_text(encoding="utf-8")) if folder else {}
        except (OSError, ValueError, UserError):
            continue
        model_type = config.get("model_type") if isinstance(config, dict) else None
        if isinstance(model_type, str) and model_type.replace("-", "_").isidentifier():
            module = model_type.replace("-", "_")
            out.append(f"transformers.models.{module}.modeling_{module}")
    return list(dict.fromkeys(out))


def backend_modules(cell: CellConfig) -> list[str]:
    """The inference backend's libraries a cell imports (NNCF only to compress int8 weights)."""
    backend = cell.encoder.backend
    if backend is None:
        return []
    return [m for m in BACKEND_MODULES[backend] if m != "nncf" or cell.encoder.quantize]


def startup_modules(cells: Sequence[CellConfig]) -> list[str]:
    """Every module the `cells` import before loading: LIBRARIES, their inference backends' libraries
    and their models' architectures."""
    backends = [m for cell in cells for m in backend_modules(cell)]
    return list(
        dict.fromkeys([*LIBRARIES, *backends, *architecture_modules(m for cell in cells for m in cell_models(cell))])
    )


def import_modules(names: Iterable[str]) -> None:
    """Import `names` (those already imported cost nothing); one that fails is skipped."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # an older transformers without the module, a broken optional library
            continue
