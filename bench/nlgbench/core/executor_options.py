"""How a sweep's cells are executed: the spec's `executor:` block, parsed into `ExecutorOptions`: `kind`
(`local`, the default, or a launcher registered in `LAUNCHERS`) and each launcher's own settings. Each
launcher defines and checks its settings beside its code (a `LauncherSettings`, such as
`nlgbench.execution.slurm.options.OPTIONS`); the spec lies below the launchers, so it reads them
through `LAUNCHERS`, which the package fills by name (`nlgbench/__init__.py`): a bad key or value is
refused with the spec, before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from nlgbench.foundations.errors import UserError, closest
from nlgbench.foundations.lazyregistry import Registry

LOCAL = "local"  # the default launcher (the cells one after another on this machine); it has no settings


@dataclass(frozen=True)
class LauncherSettings:
    """One launcher's settings in the `executor:` block: their `keys`, the few a message names as
    examples, and `parse`, which turns the ones given (values not None) into the launcher's options
    (a dataclass, with its defaults for the rest), each checked as `WHERE.KEY`."""

    keys: tuple[str, ...]
    examples: tuple[str, ...]
    parse: Callable[[Mapping[str, Any], str], Any]


# Launcher kind (`kind: slurm`, `--executor slurm`) -> its settings; filled by nlgbench/__init__.py.
LAUNCHERS: Registry[LauncherSettings] = Registry("executor", LauncherSettings)


@dataclass(frozen=True)
class ExecutorOptions:
    """How cells are run: `kind` None is local unless `--executor` names another (a spec may carry its
    cluster settings and still run locally); `settings`: every registered launcher's options, by
    kind, those the block gave checked and the rest their defaults."""

    kind: str | None
    settings: Mapping[str, Any]

    def record(self) -> dict[str, Any]:
        """What a run stores of them (the store's `spec_json`): `kind`, then each launcher's settings,
        in one flat mapping."""
        out: dict[str, Any] = {"kind": self.kind}
        for options in self.settings.values():
            out.update(asdict(options))
        return out


def kinds() -> list[str]:
    """Every executor a spec or `--executor` may name: local, then the registered launchers."""
    return [LOCAL, *LAUNCHERS.names()]


def _unknown(where: str, what: str, raw: Any, valid: Sequence[str]) -> UserError:
    """`WHERE: unknown WHAT 'x'; did you mean 'y'? (valid: ...)`, the closest valid name only."""
    hits = closest(str(raw), valid)
    hint = f"; did you mean {hits[0]!r}?" if hits else ""
    return UserError(f"{where}: unknown {what} {raw!r}{hint} (valid: {', '.join(valid)})")


def _kind(raw: Any, where: str) -> str:
    valid = kinds()
    if raw not in valid:
        raise _unknown(where, "executor", raw, valid)
    return str(raw)


def executor_options(
    kind: str | None = None, given: Mapping[str, Any] | None = None, where: str = ""
) -> ExecutorOptions:
    """`kind` with every launcher's options: from the settings `given` holds for it (values not None,
    checked as `WHERE.KEY`), else its defaults."""
    given = given or {}
    settings = {
        name: launcher.parse({k: given[k] for k in launcher.keys if given.get(k) is not None}, where)
        for name, launcher in LAUNCHERS.items()
    }
    return ExecutorOptions(kind=kind, settings=settings)


def parse_executor(raw: Any, where: str) -> ExecutorOptions:
    """The spec's `executor:` block: an executor's kind, or a mapping with `kind` and launchers' settings."""
    if isinstance(raw, str):
        return executor_options(_kind(raw, where))
    if not isinstance(raw, Mapping):
        examples = ["kind", *(key for _, launcher in LAUNCHERS.items() for key in launcher.examples)]
        raise UserError(
            f"{where} must be {', '.join(repr(k) for k in kinds())} or a mapping ({', '.join(examples)}, ...), "
            f"got {raw!r}"
        )
    valid = {"kind", *(key for _, launcher in LAUNCHERS.items() for key in launcher.keys)}
    for key in raw:
        if key not in valid:
            raise _unknown(where, "key", key, sorted(valid))
    kind = None if raw.get("kind") is None else _kind(raw["kind"], f"{where}.kind")
    return executor_options(kind, raw, where)


def with_kind(base: ExecutorOptions | None, kind: str | None) -> ExecutorOptions:
    """The spec's executor options (or the defaults) with `--executor KIND` over them."""
    out = base or executor_options()
    return out if kind is None else replace(out, kind=_kind(kind, "--executor"))
