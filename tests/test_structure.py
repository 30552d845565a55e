"""Structure rules of the package, read from the source (AST), as docs/architecture.md states them:
every sub-package is one layer and imports only its own or lower layers; no import loop between
modules; nlgbench modules and the standard library are imported at module level (function-level
imports only of the libraries `nlgbench.foundations.deferred` names); no private name imported
across modules; no SQL outside the store; no issue numbers in the package or the tests; rooms that hold what
their name says (`core` only the cell, the figures in one sub-package, no two modules of one file name)."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import pytest

from nlgbench.foundations.deferred import DEFERRED_LIBRARIES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "bench" / "nlgbench"

# Lowest first. `nlgbench` (the package's __init__) sits above them all.
LAYERS = (
    "foundations",
    "statistics",
    "data",
    "encoders",
    "metrics",
    "measurement",
    "core",
    "runs",
    "execution",
    "reporting",
    "distillation",
    "apiwords",
    "api",
    "bert_score",
    "cli",
)


def python_files(folder: Path) -> list[Path]:
    """Every .py under the package, following the folder link nlgbench/metrics -> metrics/."""
    out: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            out += python_files(path)
        elif path.suffix == ".py":
            out.append(path)
    return out


def modules() -> dict[str, Path]:
    """Module name -> source file: the import name is the folder name."""
    out: dict[str, Path] = {}
    for path in python_files(PACKAGE):
        parts = ["nlgbench", *path.relative_to(PACKAGE).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layer(module: str) -> str:
    """A module's layer: its sub-package (or the module itself for the top-level modules and nlgbench.cli)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "nlgbench"


def rank(module: str) -> int:
    name = layer(module)
    return len(LAYERS) if name == "nlgbench" else LAYERS.index(name)


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, list[str], bool]]:
    """(imported nlgbench module, names taken from it, inside a function?) for every import
    statement at any depth, plus module names written as strings (`importlib.import_module`
    tables, `runpy.run_module`): deferred imports are edges too."""
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    in_function = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    found: list[tuple[str, list[str], bool]] = []
    for node in ast.walk(tree):
        deferred = id(node) in in_function
        if isinstance(node, ast.Import):
            found += [(a.name, [], deferred) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base not in known:
                continue
            names = [a.name for a in node.names]
            submodules = [n for n in names if f"{base}.{n}" in known]
            found += [(f"{base}.{n}", [], deferred) for n in submodules]
            rest = [n for n in names if n not in submodules]
            if rest:
                found.append((base, rest, deferred))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = node.value.split(":")[0]
            if target in known and target != "nlgbench":
                found.append((target, [], True))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> modules it imports. A package's __init__ runs whenever a submodule is imported,
    so only explicit imports of the package count as edges to it."""
    mods = modules()
    return {name: {t for t, _, _ in imports(name, path, set(mods)) if t != name} for name, path in mods.items()}


def test_every_module_belongs_to_a_layer() -> None:
    stray = [m for m in modules() if layer(m) not in (*LAYERS, "nlgbench")]
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"
    assert {layer(m) for m in modules()} >= set(LAYERS) - {"apiwords", "api", "cli"}


def test_the_walker_sees_deferred_and_package_imports() -> None:
    edges = graph()
    assert "nlgbench.api" in edges["nlgbench"]  # nlgbench/__init__ exports the API
    assert "nlgbench.metrics.base" in edges["nlgbench.metrics.bertscore"]
    assert any(
        t.startswith("nlgbench.execution.worker")
        for m, ts in edges.items()
        if m.startswith("nlgbench.execution.")
        for t in ts
    )  # the worker is started by name (runpy)


def test_layers_import_only_downward() -> None:
    up = sorted(
        f"{m} ({layer(m)}) imports {t} ({layer(t)})" for m, ts in graph().items() for t in ts if rank(t) > rank(m)
    )
    assert not up, "imports from a higher layer:\n" + "\n".join(up)


# Pairs of layers that, though one lies above the other, share nothing but lower layers: what both
# need sits below them (the training-text record of a distilled student: `nlgbench.data.training_texts`).
APART = (("distillation", "execution"),)


@pytest.mark.parametrize("upper, lower", APART)
def test_layers_kept_apart(upper: str, lower: str) -> None:
    crossing = sorted(
        f"{m} imports {t}" for m, ts in graph().items() for t in ts if (layer(m), layer(t)) == (upper, lower)
    )
    assert not crossing, f"{upper} imports {lower}:\n" + "\n".join(crossing)


def test_no_import_loop() -> None:
    edges = graph()
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                loops.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert not loops, "import loops: " + "; ".join(" -> ".join(loop) for loop in loops)


def function_level_imports(path: Path) -> list[str]:
    """Top-level names of every import statement inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(f):
                if isinstance(node, ast.Import):
                    out += [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append("." if node.level else (node.module or "").split(".")[0])
    return out


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_at_module_level(name: str) -> None:
    """nlgbench's own modules and the standard library at the top: the dependency graph is visible."""
    inner = function_level_imports(modules()[name])
    bad = sorted({m for m in inner if m not in DEFERRED_LIBRARIES})
    assert not bad, f"{name} imports {bad} inside a function; only {sorted(DEFERRED_LIBRARIES)} may be deferred"


def test_deferred_libraries_are_third_party() -> None:
    assert not DEFERRED_LIBRARIES & (set(sys.stdlib_module_names) | {"nlgbench"})


def test_no_private_name_imported_across_modules() -> None:
    mods = modules()
    bad = [
        f"{name} imports {target}.{n}"
        for name, path in mods.items()
        for target, names, _ in imports(name, path, set(mods))
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert not bad, bad


SQL = re.compile(r"\bsqlite3\b|\b(SELECT|INSERT INTO|CREATE TABLE|DELETE FROM|UPDATE \w+ SET)\b")


@pytest.mark.parametrize("name", sorted(set(modules()) - {"nlgbench.runs.store"}))
def test_no_sql_outside_the_store(name: str) -> None:
    text = modules()[name].read_text(encoding="utf-8")
    assert not SQL.search(text), f"{name}: SQL or sqlite3 outside nlgbench.runs.store"


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_grab_bag_module(name: str) -> None:
    """No module over 500 lines: a longer one holds several jobs (split it by job)."""
    lines = len(modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= 500, f"{name}: {lines} lines"


TESTS = REPO / "tests"


def suite_files() -> list[Path]:
    """Every .py of the tests: test modules, conftest, helpers and the test-only plugins."""
    return sorted([*TESTS.glob("*.py"), *(TESTS / "plugins").glob("*.py")])


def test_no_test_file_over_500_lines() -> None:
    """The line cap holds for the tests too: a longer test file holds several topics (split it by topic)."""
    long = {path.name: n for path in suite_files() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"test files over 500 lines: {long}"


TIER_PROBES = {
    "subprocess": "import subprocess\n\ndef test_probe():\n    subprocess.run(['true'], check=True)\n",
    "fork": (
        "import os\n\ndef test_probe():\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
    ),
    "model file": "def test_probe(tmp_path):\n    (tmp_path / 'model.safetensors').write_bytes(b'x')\n",
}


@pytest.mark.parametrize("what", sorted(TIER_PROBES))
@pytest.mark.parametrize("tier", ["unit", "component", "integration"])
def test_the_tier_rule_fails_a_test_that_needs_more_than_its_tier(
    pytester: pytest.Pytester, tier: str, what: str
) -> None:
    """A unit test that starts a process or opens a model file fails, as does a component test that starts
    a process; an integration test may do both (tests/tiers.py's audit hook)."""
    pytester.makeconftest(
        "from tiers import pytest_addoption, pytest_collection_modifyitems, tier_guard  # noqa: F401\n"
    )
    pytester.makepyfile(test_probe=f"import pytest\n\npytestmark = pytest.mark.{tier}\n\n" + TIER_PROBES[what])
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--tier", "all")
    refused = tier == "unit" or (tier == "component" and what != "model file")
    if refused:
        result.assert_outcomes(failed=1)
        assert "TierViolation" in result.stdout.str()
    else:
        result.assert_outcomes(passed=1)


def test_every_test_has_one_tier_and_plain_pytest_runs_the_fast_two(pytester: pytest.Pytester) -> None:
    """A test without a tier marker stops the collection; `--tier` picks tiers (default unit, component)."""
    pytester.makeconftest(
        "from tiers import pytest_addoption, pytest_collection_modifyitems, tier_guard  # noqa: F401\n"
    )
    body = "import pytest\n\n" + "".join(
        f"@pytest.mark.{tier}\ndef test_{tier}():\n    pass\n\n"
        for tier in ("unit", "component", "integration", "system")
    )
    pytester.makepyfile(test_tiers=body)
    pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider").assert_outcomes(passed=2, deselected=2)
    pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--tier", "all").assert_outcomes(passed=4)
    pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--tier", "system").assert_outcomes(
        passed=1, deselected=3
    )
    pytester.makepyfile(test_untiered="def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    assert "have no tier marker" in result.stderr.str() + result.stdout.str()
    assert result.ret != 0


ISSUE_NUMBER = re.compile(r"(?<![a-z])issues?[ _-]?#?\d+", re.IGNORECASE)  # `_`: a test's name too


def issue_numbers(files: list[Path], root: Path) -> list[str]:
    """Each line of `files` that names an issue number, as `path:line: text` (path relative to `root`)."""
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_issue_numbers_in_the_package() -> None:
    """Code, comments, docstrings, messages and the packaged examples say what and why, never which
    issue asked for it (the CHANGELOG keeps the history): no `issue N`, `Issue N.M`, `issue-N`, `issue_N`."""
    files = [  # metrics/ and examples/ are links
        Path(folder) / file
        for folder, _, names in os.walk(PACKAGE, followlinks=True)
        for file in sorted(names)
        if Path(file).suffix in {".py", ".yaml"}
    ]
    found = issue_numbers(files, PACKAGE)
    assert not found, "issue numbers in the package:\n" + "\n".join(found)


def test_no_issue_numbers_in_the_tests() -> None:
    """A test's docstring and comments say what it checks, not which issue asked for it."""
    found = issue_numbers(suite_files(), REPO)
    assert not found, "issue numbers in the tests:\n" + "\n".join(found)


# What each room holds, where a name alone would not keep it so: `core` is the cell (the spec and its
# `executor:` block, the cell, its labels, its scorer's recipe, result.json, data warnings, scores.csv, the signature).
ROOMS = {
    "nlgbench.core": {
        "cell",
        "datawarnings",
        "executor_options",
        "labels",
        "recipe",
        "result",
        "scores",
        "signature",
        "spec",
    },
}


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_rooms_hold_what_they_say(package: str) -> None:
    """A module that is not the cell's (the leakage guard, a progress display ...) belongs to the layer
    that runs it, not in `core`: docs/architecture.md, Why a module sits where it does."""
    held = {m.rsplit(".", 1)[1] for m in modules() if m.rsplit(".", 1)[0] == package}
    assert held == ROOMS[package], (
        f"{package} holds {sorted(held - ROOMS[package])}, lacks {sorted(ROOMS[package] - held)}"
    )


def test_figure_modules_in_the_figures_package() -> None:
    """The figure modules are one sub-package, `nlgbench.reporting.figures`, not `figure*` modules beside it."""
    stray = [m for m in modules() if m.startswith("nlgbench.reporting.figure") and m.count(".") == 2]
    assert stray == ["nlgbench.reporting.figures"], stray


def test_module_file_names_tell_modules_apart() -> None:
    """No two modules share a file name (two `registry.py`, two `progress.py`), but the CLI's, which
    are named after their commands (`nlgbench.cli.report` runs `nlgbench.reporting.report`)."""
    by_name: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.stem != "__init__" and not name.startswith("nlgbench.cli."):
            by_name.setdefault(path.stem, []).append(name)
    assert not {k: v for k, v in by_name.items() if len(v) > 1}


# The one module that reads a device name (cpu, cuda, cuda:N): every other asks it (`is_cuda`,
# `cuda_index`, `device_kind`, `known_device`) or the cell's `nlgbench.measurement.devices.Device`.
DEVICE_MODULE = "nlgbench.foundations.devicenames"


def device_ish(node: ast.AST) -> bool:
    """An expression holding a device name or kind: a name or attribute called `*device*`, or a
    `["device"]` lookup (a results column); not torch's `tensor.device.type`."""
    if isinstance(node, ast.Name):
        return "device" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "device" in node.attr.lower()
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and "device" in str(node.slice.value)
    return False


def kind_literal(node: ast.AST) -> bool:
    """A literal naming a device or a set of them: "cpu", "cuda", "cuda:N"."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(kind_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(("cpu", "cuda"))


def device_questions(tree: ast.AST) -> list[int]:
    """Lines that read a device name themselves: `.startswith("cuda")` (or "cpu"), a device compared
    with "cpu" / "cuda" / "cuda:N", a device split at its colon, a device-name pattern (`cuda(:...)`)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            prefix = node.func.attr == "startswith" and any(kind_literal(a) for a in node.args)
            colon = bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == ":"
            split = node.func.attr in {"partition", "rpartition", "split"} and colon and device_ish(node.func.value)
            if prefix or split:
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(device_ish(s) for s in sides) and any(kind_literal(s) for s in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"cuda\(", node.value):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_device_names_are_read_in_one_module() -> None:
    """Whether a device is CUDA, and which GPU, is asked of `nlgbench.foundations.devicenames` (or the cell's
    `Device`), never by parsing the name again: docs/architecture.md, The device."""
    found = [
        f"{name}:{line}"
        for name, path in modules().items()
        if name != DEVICE_MODULE
        for line in device_questions(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "device names read outside " + DEVICE_MODULE + ":\n" + "\n".join(found)


def test_the_device_check_sees_each_form() -> None:
    """The walker above catches every way the package used to ask, and passes torch's own tensor device."""
    asked = [
        'device.startswith("cuda")',
        'self.device == "cpu"',
        'cells["device"] != "cuda"',
        'int(device.partition(":")[2] or 0)',
        're.compile(r"^(cpu|cuda(:\\d+)?)$")',
        'cfg.device in ("cuda", "cuda:0")',
    ]
    assert all(device_questions(ast.parse(code)) == [1] for code in asked), asked
    assert device_questions(ast.parse('x.device.type == "cpu"')) == []
    assert device_questions(ast.parse('torch.load(path, map_location="cpu")')) == []
    assert device_questions(ast.parse('row["device"].split(" / ")')) == []  # a label of two devices


# The one module that builds a scorer from a metric's declaration (`MetricInfo.build`): the worker, the API and
# the distillation teacher each hold a `Recipe` and call its `build`.
RECIPE_MODULE = "nlgbench.core.recipe"


def metric_info_ish(node: ast.AST) -> bool:
    """An expression holding a `MetricInfo`: a name or attribute called `info` / `INFO` (or `*_info`), or a
    `get_metric(...)` call."""
    if isinstance(node, ast.Name):
        return node.id.lower().endswith("info")
    if isinstance(node, ast.Attribute):
        return node.attr.lower().endswith("info")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_metric"


def scorer_builds(tree: ast.AST) -> list[int]:
    """Lines that build a scorer themselves: a `.make(...)` call (the former `MetricInfo.make`), or a metric's
    `build` called on its `MetricInfo`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            made = node.func.attr == "make"
            built = node.func.attr == "build" and metric_info_ish(node.func.value)
            if made or built:
                lines.append(node.lineno)
    return sorted(set(lines))


def test_scorers_are_built_by_the_recipe_alone() -> None:
    """A scorer is built in one place, `Recipe.build` (options checked, context given, `ReferencePolicy`
    around it), and signed by the same recipe: docs/architecture.md, The scorer recipe."""
    found = [
        f"{name}:{line}"
        for name, path in modules().items()
        if name != RECIPE_MODULE
        for line in scorer_builds(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "scorers built outside " + RECIPE_MODULE + ":\n" + "\n".join(found)


def test_the_scorer_build_check_sees_each_form() -> None:
    """The walker above catches the ways the package used to build a scorer, and passes a recipe's build."""
    built = [
        "info.make(cfg.encoder, cfg.options, cfg.device, cfg.batch_size, context, **extra)",
        "self.info.make(entry.encoders[0], self.options, self.device, batch_size, self.context)",
        'get_metric("bertscore").make(ref, {}, "cpu", 2)',
        'INFO.build(ref, {}, "cpu", 2)',
        "self.info.build(ref, own, device, batch_size, **extra)",
        "get_metric(name).build(ref, {}, device, 2)",
    ]
    assert all(scorer_builds(ast.parse(code)) == [1] for code in built), built
    assert scorer_builds(ast.parse('recipe.build("cpu", 4, context)')) == []
    assert scorer_builds(ast.parse("teacher.recipe.build(device, batch_size, CellContext())")) == []
