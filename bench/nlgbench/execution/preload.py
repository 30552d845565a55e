"""What a worker imports before it is ready to load (its start-up, results.csv's `startup_s`): for a cell
that loads a model, torch, transformers' auto classes and the modules every model load pulls in, its
inference backend's libraries and the modeling modules of its models' architectures; for every cell
its metric's module and the libraries the correlation uses. Either way the cell's `load_s` is building
the model and reading its weights, never importing libraries: with transformers 5,
`transformers.modeling_utils` and the modules beside it (torch.distributed, torch._dynamo, sympy) cost
far more than building a small model (docs/concepts/measurement.md).

A cell imports, before its memory baseline, exactly what a fresh process running that cell alone
would (`cell_modules`): a plain worker imports its own cell's modules only, and a sweep's fork server
(`nlgbench.execution.forkserver`) imports only what every one of its cells needs (`shared_modules`,
`shared_metrics`), each forked child its own cell's rest. So a cell's memory never counts a
neighbour's libraries (another backend, another architecture).

Importing runs no torch op (nothing starts torch's thread pools or CUDA: a forked child could not use
them). A module that cannot be imported is skipped here: the cell that needs it meets the error itself.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Sequence

from nlgbench.core.cell import CellConfig
from nlgbench.encoders.registry import AUTO, BACKEND_MODULES, NO_ENCODER, installed_backends, resolve_encoder
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
    if backend == AUTO:  # every installed float32 backend loads to be compared, on the first use
        return [m for name in installed_backends() for m in BACKEND_MODULES.get(name, ()) if m != "nncf"]
    return [m for m in BACKEND_MODULES[backend] if m != "nncf" or cell.encoder.quantize]


CORRELATION = ("scipy.stats",)  # the correlations of every cell


def cell_modules(cell: CellConfig) -> list[str]:
    """The modules `cell`'s worker imports at its start, as a fresh process running it alone would:
    for a cell that loads a model LIBRARIES, its inference backend's libraries and its models'
    architectures; for every cell the correlation's libraries."""
    models = cell_models(cell)
    if not models:
        return list(CORRELATION)
    return list(dict.fromkeys([*LIBRARIES, *backend_modules(cell), *architecture_modules(models), *CORRELATION]))


def forked_cells(cells: Sequence[CellConfig]) -> list[CellConfig]:
    """The cells a fork server runs: those that load a model. A model-free cell starts a plain worker
    (no torch to import), so the server may hold what every model cell imports, torch among it."""
    return [cell for cell in cells if cell_models(cell)]


def shared_modules(cells: Sequence[CellConfig]) -> list[str]:
    """The modules every one of `cells` imports at its start (`cell_modules`, in order): what a fork
    server may import for all of them without counting in any cell's memory what that cell alone would not."""
    per_cell = [cell_modules(cell) for cell in cells]
    return [m for m in per_cell[0] if all(m in other for other in per_cell[1:])] if per_cell else []


def shared_metrics(cells: Sequence[CellConfig]) -> list[str]:
    """The metric of `cells` where they all share one (its module then imported once for all), else none."""
    names = {cell.metric for cell in cells}
    return list(names) if len(names) == 1 else []


def import_modules(names: Iterable[str]) -> None:
    """Import `names` (those already imported cost nothing); one that fails is skipped."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # an older transformers without the module, a broken optional library
            continue
