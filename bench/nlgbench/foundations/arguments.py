"""The Python API's argument checks, made at its boundary: one UserError naming the argument, the type it takes
and what was given (never a TypeError from deep inside); sequences taken in their own order, and a set or a
mapping refused, since a set's order can differ from one process to the next (and with it pairs and digests)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, MappingView, Set
from os import PathLike
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nlgbench.foundations.errors import UserError

Kind = Literal["string", "number", "flag"]

#: what each kind takes (numpy's numbers too; a bool is an int to Python, never a number here) and its name
_KINDS: dict[Kind, tuple[tuple[type, ...], str]] = {
    "string": ((str,), "a string"),
    "number": ((numbers.Real,), "a number"),
    "flag": ((bool, np.bool_), "True or False"),
}


def shown(value: object) -> str:
    """`value` in a message: its type and a short repr (`int 3`, `str 'x'`), or None."""
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def check_arguments(kind: Kind, /, *, optional: bool = False, **values: object) -> None:
    """Each of `values` (argument name -> value) is of `kind` (or None where `optional`); else one UserError,
    e.g. "convention must be a string, got None"."""
    types, described = _KINDS[kind]
    for name, value in values.items():
        if value is None and optional:
            continue
        is_bool = isinstance(value, (bool, np.bool_))
        if not isinstance(value, types) or (is_bool and kind != "flag"):
            raise UserError(f"{name} must be {described}{' or None' if optional else ''}, got {shown(value)}")


def ordered(name: str, values: Iterable[Any], what: str) -> list[Any]:
    """`values` as a list, in its own order: any list, tuple, array or generator (and a dict's views, which keep
    its insertion order); one UserError for one string, a set, a mapping or a value that is no iterable."""
    if isinstance(values, str):
        raise UserError(f"{name} must be {what}, not one string")
    if isinstance(values, Set) and not isinstance(values, MappingView):
        raise UserError(
            f"{name} must be {what}, not a {type(values).__name__}: a set has no order of its own (it can differ "
            "from one run to the next); pass a list (sorted(...) where the order does not matter)"
        )
    if isinstance(values, Mapping):
        raise UserError(
            f"{name} must be {what}, not a {type(values).__name__}: pass a list (list(d.values()) for its values)"
        )
    try:
        return list(values)
    except TypeError:
        raise UserError(f"{name} must be {what}, got {type(values).__name__}") from None


def optional_sequence(name: str, values: Iterable[Any] | None) -> list[Any] | None:
    """`values` as a list (`ordered`), or None where not given."""
    return None if values is None else ordered(name, values, "a sequence")


def number_list(name: str, values: Iterable[Any]) -> list[Any]:
    """`values` (`ordered`) where every item is a number (int, float, bool, numpy's); one UserError naming the
    first item that is not, 1-based (a string such as '0.5' too: a column read as text is no score), or where
    the items are rows of numbers (a 2-D array, whose numbers would be taken as one long row)."""
    out = ordered(name, values, "a sequence of numbers")
    try:
        array = np.asarray(out)
    except ValueError:  # items of different shapes (a list among numbers)
        array = np.asarray(out, dtype=object)
    numeric = array.dtype.kind in "biuf"  # then each item is a number: no loop over a long array
    if numeric and array.ndim != 1 and len(out):
        raise UserError(f"{name} must be a sequence of numbers, one per segment, got {array.ndim} dimensions")
    if not numeric:
        for i, value in enumerate(out):
            if not isinstance(value, (numbers.Real, np.bool_)):
                raise UserError(f"{name} item {i + 1} is {shown(value)}, not a number")
    return out


def path_argument(name: str, value: str | PathLike[str], what: str) -> Path:
    """A str or path-like argument as a Path; one clear error naming the argument otherwise."""
    if not isinstance(value, (str, PathLike)):
        raise UserError(f"{name} must be {what}, got {type(value).__name__}")
    return Path(value)
