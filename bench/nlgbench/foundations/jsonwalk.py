"""Walking JSON-ready values (dicts, lists, strings, numbers) to change every string in them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A JSON-ready value with `change` applied to every string in it, mapping keys included."""
    if isinstance(value, dict):
        return {map_strings(k, change): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    return change(value) if isinstance(value, str) else value
