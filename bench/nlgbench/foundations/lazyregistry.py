"""Named registries of metrics, aligners, encoders and datasets: one lazy pattern for all four.

Modelled on lm-evaluation-harness's `Registry`: an entry is registered as an object, or
lazily as a dotted import path (`package.module:attribute`) or a loader function, and is
resolved on first `get`; every resolved entry is type-checked; an unknown name is a
one-line `UserError` naming the closest registered ones ("did you mean").

Users extend the encoder registry and the dataset catalogue with their own YAML files
(`UserFiles`): named by an environment variable (several paths joined by `os.pathsep`)
or by a sweep spec; entries in later files replace same-named earlier ones.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.files import refuse_special_file

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one kind by name; lazy entries are imported or loaded on first `get`."""

    def __init__(self, kind: str, entry_type: type[T]) -> None:
        self.kind = kind  # "metric", "aligner", "encoder", "dataset": used in error messages
        self.entry_type = entry_type
        self._loaders: dict[str, Callable[[], object]] = {}
        self._resolved: dict[str, T] = {}
        self._paths: dict[str, str] = {}  # the dotted path each entry registered by one was registered under

    def register(self, name: str, entry: T) -> None:
        """Register a ready entry (replacing any entry of that name)."""
        self._resolved[name] = self._checked(name, entry)
        self._loaders.pop(name, None)
        self._paths.pop(name, None)

    def register_lazy(self, name: str, target: str | Callable[[], object]) -> None:
        """Register an entry resolved on first `get`: a dotted path `module:attribute`, or a loader."""
        self._loaders[name] = (lambda: import_object(target)) if isinstance(target, str) else target
        self._resolved.pop(name, None)
        if isinstance(target, str):
            self._paths[name] = target
        else:
            self._paths.pop(name, None)

    def path(self, name: str) -> str | None:
        """The dotted path the entry `name` was registered under (resolved or not), without importing it;
        None for an entry registered as an object or a loader, or not registered."""
        return self._paths.get(name)

    def get(self, name: str) -> T:
        """The entry `name`, resolved and type-checked; UserError with the closest names if unknown."""
        if name in self._resolved:
            return self._resolved[name]
        if name not in self._loaders:
            raise unknown_name(self.kind, name, self.names())
        entry = self._checked(name, self._loaders[name]())
        del self._loaders[name]
        self._resolved[name] = entry
        return entry

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted({*self._resolved, *self._loaders})

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) for every name, sorted; resolves lazy entries."""
        return [(name, self.get(name)) for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._resolved or name in self._loaders

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _checked(self, name: str, entry: object) -> T:
        if not isinstance(entry, self.entry_type):
            raise UserError(
                f"{self.kind} {name!r}: registered entry is a {type(entry).__name__}, not a {self.entry_type.__name__}"
            )
        return entry


def import_object(path: str) -> object:
    """The object a dotted path names: `package.module:attribute`, or the module for `package.module`."""
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    obj: object = module
    for part in attribute.split(".") if attribute else []:
        obj = getattr(obj, part)
    return obj


# Bounds on a YAML document as read, aliases expanded: the largest packaged file (encoders.yaml) holds
# under 600 values and no packaged file nests over 7 deep, so these leave real files a wide margin while an alias bomb
# (a few hundred bytes expanding to a billion values) or thousands of nested brackets are refused
# at once, instead of exhausting memory or Python's recursion limit later.
MAX_YAML_DEPTH = 64
MAX_YAML_VALUES = 200_000


class UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a mapping with a repeated key (PyYAML would keep the last
    value silently, so a spec's second `repeats:` would quietly win), nesting deeper than
    MAX_YAML_DEPTH and documents whose aliases expand to more than MAX_YAML_VALUES values. Merge
    keys (`<<`) may still be overridden."""

    nesting = 0  # the depth of the node being composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """A node, refused past MAX_YAML_DEPTH levels (before the composer's recursion gets that deep)."""
        if self.nesting >= MAX_YAML_DEPTH:
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
        self.nesting += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.nesting -= 1

    def compose_document(self) -> yaml.Node | None:
        """The document's root node, refused when its aliases expand it past the bounds."""
        root = super().compose_document()
        if root is not None:
            expanded_size(root, 1, {})
        return root

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"repeated key {key!r} (first at line {first_line[key] + 1})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, depth: int, sizes: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, levels) of `node` with every alias expanded, `depth` being its own level; a
    ComposerError when it passes MAX_YAML_DEPTH or MAX_YAML_VALUES (an alias to an enclosing node
    nests without end). `sizes` holds each node's result once, so shared nodes are measured once."""
    known = sizes.get(id(node))
    if known is None:
        if depth > MAX_YAML_DEPTH:
            problem = f"nested deeper than {MAX_YAML_DEPTH} levels with its aliases expanded"
            raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        values, levels = 1, 1
        for child in children:
            child_values, child_levels = expanded_size(child, depth + 1, sizes)
            values, levels = values + child_values, max(levels, child_levels + 1)
            if values > MAX_YAML_VALUES:
                problem = f"expands to more than {MAX_YAML_VALUES:,} values through its aliases (*name)"
                raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
        known = sizes[id(node)] = values, levels
    if depth + known[1] - 1 > MAX_YAML_DEPTH:
        problem = f"nested deeper than {MAX_YAML_DEPTH} levels with its aliases expanded"
        raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
    return known


def load_yaml(text: str) -> Any:
    """A YAML document read safely (plain data only), a repeated mapping key being an error."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line's tail: ` at line L, column C: problem (context started at ...)`."""
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and cmark:
        problem += f" ({context} started at line {cmark.line + 1}, column {cmark.column + 1})"
    return f"{at}: {problem}"


def read_registry_file(path: Path, key: str, what: str) -> dict[str, Any]:
    """The `key` mapping (name -> entry) of a YAML registry file; one-line UserError naming the file otherwise.

    `what` names the file's kind in messages, e.g. "encoder registry", "dataset catalogue".
    """
    refuse_special_file(path, f"the {what}")  # a FIFO would block the read, a device never end
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path} is not valid YAML{yaml_problem(exc)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
        raise UserError(f"{what} {path} has no {key!r} mapping (name -> entry)")
    return doc[key]


@dataclass
class UserFiles:
    """A user's own registry files for one kind: those in `$env_var`, then those added by specs. A
    cell's worker gets them in its config (`CellConfig.registry_files`), not through its environment."""

    env_var: str  # e.g. NLGBENCH_ENCODERS
    added: list[Path] = field(default_factory=list)  # files named by sweep specs in this process

    def paths(self) -> list[Path]:
        """The files in merge order (environment first, then specs), each once."""
        listed = os.environ.get(self.env_var, "").split(os.pathsep)
        from_env = [Path(p).expanduser().resolve() for p in listed if p.strip()]
        return list(dict.fromkeys(from_env + self.added))

    def add(self, path: Path) -> None:
        """Merge `path` over the registry from now on (a spec's file, already checked by the caller)."""
        path = path.expanduser().resolve()
        if path not in self.added:
            self.added.append(path)
