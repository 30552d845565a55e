"""Structure rules of the package, read from the source (AST): no import loop between nlgbench
modules (function-level imports count), no private name imported across modules, no SQL outside
the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"nlgbench": REPO / "bench" / "nlgbench"}


def modules() -> dict[str, Path]:
    """Installed module name -> source file, as pyproject's package-dir maps them."""
    out: dict[str, Path] = {}
    for package, folder in ROOTS.items():
        for path in sorted(folder.glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, list[str]]]:
    """(imported nlgbench module, names taken from it) for every import statement at any depth."""
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base not in known:
                continue
            names = [a.name for a in node.names]
            submodules = [n for n in names if f"{base}.{n}" in known]
            found += [(f"{base}.{n}", []) for n in submodules]
            rest = [n for n in names if n not in submodules]
            if rest:
                found.append((base, rest))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> modules it imports explicitly. A package's __init__ runs whenever a submodule is
    imported, so only explicit imports of the package count as edges to it."""
    mods = modules()
    return {name: {target for target, _ in imports(name, path, set(mods)) if target != name} for name, path in mods.items()}


def test_the_walker_sees_function_level_and_package_imports() -> None:
    edges = graph()
    assert "nlgbench.api" in edges["nlgbench"]  # nlgbench/__init__ re-exports the API
    assert "nlgbench.execution.sweep" in edges["nlgbench.api"]  # imported inside `run`, not at module level
    assert "nlgbench.metrics" in edges["nlgbench.core.spec"] or "nlgbench.metrics" in edges["nlgbench.api"]


def test_no_import_loop() -> None:
    edges = graph()
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                loops.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert not loops, "import loops: " + "; ".join(" -> ".join(loop) for loop in loops)


def test_no_private_name_imported_across_modules() -> None:
    mods = modules()
    bad = [f"{name} imports {target}.{n}" for name, path in mods.items() for target, names in imports(name, path, set(mods))
           for n in names if n.startswith("_") and not n.startswith("__")]
    assert not bad, bad


SQL = re.compile(r"\bsqlite3\b|\b(SELECT|INSERT INTO|CREATE TABLE|DELETE FROM|UPDATE \w+ SET)\b")


@pytest.mark.parametrize("name", sorted(set(modules()) - {"nlgbench.runs.store"}))
def test_no_sql_outside_the_store(name: str) -> None:
    text = modules()[name].read_text(encoding="utf-8")
    assert not SQL.search(text), f"{name}: SQL or sqlite3 outside nlgbench.runs.store"
