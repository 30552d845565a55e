"""The one list of imports nlgbench defers to first use: heavy or optional third-party libraries.

Every import of nlgbench's own modules, and of the standard library, sits at the top of its
module, so a module's first lines show what it depends on. The libraries below may instead be
imported inside the function that needs them, so that `nlgbench --help`, `nlgbench list` and
`import nlgbench` do not pay for torch, transformers or matplotlib, and so that an optional
extra (submitit, pyarrow, pynvml, datasets) is needed only by the command that uses it.
tests/test_structure.py holds every function-level import to this list. `require` checks an optional
extra's library before a command starts, naming the extra to install.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

from nlgbench.foundations.errors import UserError

DEFERRED_LIBRARIES = frozenset(
    {
        "torch",  # slow to import; the metrics and encoders import it at their top
        "transformers",  # slow to import; models load through it
        "safetensors",
        "ot",  # POT
        "scipy",  # scipy.stats is slow to import
        "pandas",
        "matplotlib",  # figures of `report` only
        "onnx",  # optional (extras onnx, openvino): inference backends, nlgbench.encoders.backends
        "onnxruntime",
        "openvino",
        "nncf",  # OpenVINO's int8 weight compression
        "tqdm",
        "submitit",  # --executor slurm only
        "pynvml",  # CUDA memory, on a GPU machine only
        "pyarrow",  # parquet tables only
        "datasets",  # optional (extra hf): Hugging Face datasets as a data source, nlgbench.data.hubdata
        "huggingface_hub",  # transformers' Hub client: one request before a model not on disk is loaded
    }
)


def require(library: str, extra: str, purpose: str) -> None:
    """One UserError line naming the extra to install where the optional `library` is missing, so that a
    command checks it before anything runs (found without importing it)."""
    if importlib.util.find_spec(library) is None:
        raise UserError(f"{purpose} needs the package {library!r}: pip install 'nlgbench[{extra}]'")


def library_version(module: str, distribution: str) -> str | None:
    """The version of a deferred library without importing it: its `__version__` where this process
    imported it already, else the installed `distribution`'s; None where it is not installed. So a
    cell that runs no model records the versions without paying for (or counting in its memory) torch."""
    loaded = sys.modules.get(module)
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return str(loaded.__version__)
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
