"""The Slurm launcher's settings, its own: in a spec's `executor:` block (`OPTIONS`, which the spec reads
through `nlgbench.core.executor_options.LAUNCHERS`) and as `nlgbench run`'s flags (`with_flags`:
partition, GPUs, CPUs, memory, time, ... `--slurm-arg`), checked into one `SlurmOptions`, with the rules
of what may go into the sbatch script (`script_safe`, `slurm_arg`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from nlgbench.core.executor_options import ExecutorOptions, LauncherSettings
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.names import unprintable

SLURM = "slurm"
DEFAULT_TIME_MIN = 60  # a task's time limit when none is given (submitit's own default is 5 minutes)
DEFAULT_POLL_S = 5.0  # how often the watching parent asks Slurm about its tasks
MEM_RE = re.compile(r"^[1-9][0-9]*[KMGTkmgt]?$")  # sbatch --mem: an integer, MiB unless a K/M/G/T suffix
# sbatch options nlgbench sets itself (the array, its logs, the signal submitit asks for, the job
# name it finds its jobs by) or that have an option of their own; --slurm-arg cannot set them.
OWN_OPTIONS = {
    "partition": "partition",
    "time": "time",
    "mem": "mem",
    "cpus-per-task": "cpus_per_cell",
    "gpus-per-node": "gpus_per_cell",
}
MANAGED = {"array", "output", "error", "open-mode", "signal", "wrap", "parsable", "job-name"}
# The further sbatch options a spec may set: where and how long a task runs and who pays for it,
# never what it runs or in which environment (sbatch's --export, --chdir or --get-user-env would let
# a spec, which is data, preload code on the node). Exact names only: sbatch also takes any
# unambiguous prefix of an option (--exp for --export). `--slurm-arg` on the command line, the
# user's own hand, may set any option but those above.
SPEC_SLURM_OPTIONS = (
    "account",
    "qos",
    "comment",
    "reservation",
    "mail-type",
    "mail-user",
    "constraint",
    "nodes",
    "exclude",
    "nodelist",
    "exclusive",
    "gres",
    "gpus",
    "gpus-per-task",
    "cpus-per-gpu",
    "mem-per-cpu",
    "mem-per-gpu",
    "tmp",
    "licenses",
)


@dataclass(frozen=True)
class SlurmOptions:
    """A Slurm sweep's settings, per task: `gpus_per_cell` to CUDA cells only (default 1; CPU cells
    ask for no GPU), `time` in minutes, `mem` as sbatch's --mem (`16G`), `max_parallel` the array's
    `%K` throttle, `slurm_args` further sbatch options (`account`, `qos`, `constraint`, ...; a value
    True is a bare flag), `poll_seconds` how often the parent asks Slurm about its tasks."""

    partition: str | None = None
    gpus_per_cell: int | None = None
    cpus_per_cell: int | None = None
    mem: str | None = None
    time: int = DEFAULT_TIME_MIN
    max_parallel: int | None = None
    slurm_args: dict[str, str | bool] = field(default_factory=dict)
    poll_seconds: float = DEFAULT_POLL_S


def on_slurm(executor: ExecutorOptions | None) -> bool:
    """Whether these executor options run the cells on Slurm."""
    return executor is not None and executor.kind == SLURM


def slurm_options(executor: ExecutorOptions) -> SlurmOptions:
    """The Slurm settings the executor options carry (the defaults where they carry none)."""
    found = executor.settings.get(SLURM)
    return found if isinstance(found, SlurmOptions) else SlurmOptions()


def _count(raw: Any, where: str, minimum: int) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < minimum:
        raise UserError(f"{where} must be an integer >= {minimum}, got {raw!r}")
    return raw


def _mem(raw: Any, where: str) -> str:
    text = str(raw).strip()
    if isinstance(raw, bool) or not MEM_RE.match(text):
        raise UserError(
            f"{where} must be sbatch's --mem: an integer with an optional K, M, G or T suffix (16G, 8000M), got {raw!r}"
        )
    return text


def script_safe(text: str, where: str) -> str:
    """`text` unchanged if it can go into one line of an sbatch script as one value; else one line
    naming the character. A control character (newline, carriage return, tab, NUL, escape, ...)
    would end the `#SBATCH` line and start a line of shell; a backslash is an escape to Slurm's
    directive parser, even inside the quotes around the value."""
    bad = next((c for c in text if not c.isprintable() or c == "\\"), None)
    if bad is not None:
        what = "a backslash" if bad == "\\" else unprintable(bad)
        raise UserError(
            f"{where}: {text!r} holds {what}, which cannot go into the sbatch script (a value there "
            "must be one plain line)"
        )
    return text


def shown(text: str) -> str:
    """`text` as an error message shows it: as written, or quoted when it holds a character (a
    newline, ...) that would break the message's one line."""
    return text if text.isprintable() else repr(text)


def _partition(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip() or any(c.isspace() or not c.isprintable() for c in raw.strip()):
        raise UserError(f"{where} must be a partition name (or a comma-separated list), got {raw!r}")
    return script_safe(raw.strip(), where)


def _poll(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0.1 <= raw <= 3600:
        raise UserError(f"{where} must be a number of seconds between 0.1 and 3600, got {raw!r}")
    return float(raw)


def slurm_arg(key: Any, value: Any, where: str, *, from_spec: bool) -> tuple[str, str | bool]:
    """One further sbatch option: `key` as sbatch spells it (`--` and `_` accepted), its value a
    string, or True for a bare flag (`exclusive`). Options nlgbench sets are refused, and so is any
    character that would not stay inside its `#SBATCH` line (`script_safe`); from a spec, any
    option not in `SPEC_SLURM_OPTIONS`."""
    name = str(key).strip().lstrip("-").replace("_", "-")
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise UserError(f"{where}: {str(key)!r} is not an sbatch option name (e.g. account, qos, constraint)")
    if name in OWN_OPTIONS:
        raise UserError(
            f"{where}: set {name} with the executor's {OWN_OPTIONS[name]!r} "
            f"(--{OWN_OPTIONS[name].replace('_', '-')}), not as a further sbatch option"
        )
    if name in MANAGED:
        raise UserError(
            f"{where}: nlgbench sets sbatch's --{name} itself (one job array task per cell, logs in "
            "DIR/slurm/); leave it out"
        )
    if from_spec and name not in SPEC_SLURM_OPTIONS:
        raise UserError(
            f"{where}: a spec may not set sbatch's --{name} (a spec sets only where, how long and on whose "
            f"account a task runs: {', '.join(SPEC_SLURM_OPTIONS)}); pass it as --slurm-arg on the command "
            "line if you mean it"
        )
    if value is True or value is None:
        return name, True
    if isinstance(value, bool) or isinstance(value, (dict, list)) or not str(value).strip():
        raise UserError(f"{where}: --{name} needs a value (a string or number), or true for a bare flag, got {value!r}")
    return name, script_safe(str(value), where).strip()


def parse_slurm_args(raw: Any, where: str) -> dict[str, str | bool]:
    """The spec's `slurm_args:` mapping (sbatch option -> value)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UserError(f"{where} must be a mapping of sbatch options to values (account: abc), got {raw!r}")
    return dict(slurm_arg(k, v, f"{where}.{shown(str(k))}", from_spec=True) for k, v in raw.items())


def cli_slurm_args(items: Sequence[str]) -> dict[str, str | bool]:
    """`--slurm-arg KEY=VALUE` (or a bare `KEY` for a flag), repeated: the user's own hand, so any
    sbatch option nlgbench does not set itself, not only those a spec may set."""
    out: dict[str, str | bool] = {}
    for item in items:
        key, sep, value = item.partition("=")
        name, parsed = slurm_arg(key, value if sep else True, f"--slurm-arg {shown(item)}", from_spec=False)
        out[name] = parsed
    return out


# The check of each Slurm setting, shared by the spec's executor block and the command line's flags.
SETTING_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "partition": _partition,
    "mem": _mem,
    "poll_seconds": _poll,
    "gpus_per_cell": lambda v, w: _count(v, w, 0),
    "cpus_per_cell": lambda v, w: _count(v, w, 1),
    "time": lambda v, w: _count(v, w, 1),
    "max_parallel": lambda v, w: _count(v, w, 1),
}


def parse_settings(given: Mapping[str, Any], where: str) -> SlurmOptions:
    """The Slurm settings of a spec's `executor:` block (`given`: those set, none None), each checked
    as `WHERE.KEY`; the defaults for the rest."""
    out = SlurmOptions()
    checks: dict[str, Callable[[Any, str], Any]] = {"slurm_args": parse_slurm_args, **SETTING_CHECKS}
    for key, check in checks.items():
        if key in given:
            out = replace(out, **{key: check(given[key], f"{where}.{key}")})
    return out


# What the spec's `executor:` block holds for Slurm (read through `LAUNCHERS`; nlgbench/__init__.py registers it).
OPTIONS = LauncherSettings(
    keys=tuple(f.name for f in fields(SlurmOptions)), examples=("partition", "time"), parse=parse_settings
)


def with_flags(
    executor: ExecutorOptions,
    *,
    partition: str | None = None,
    gpus_per_cell: int | None = None,
    cpus_per_cell: int | None = None,
    mem: str | None = None,
    time: int | None = None,
    max_parallel: int | None = None,
    slurm_args: Sequence[str] = (),
    poll_seconds: float | None = None,
) -> ExecutorOptions:
    """The executor options with `nlgbench run`'s Slurm flags over their Slurm settings. Slurm flags
    on the command line of a local run are refused (they would be silently unused)."""
    given = {
        "partition": partition,
        "gpus_per_cell": gpus_per_cell,
        "cpus_per_cell": cpus_per_cell,
        "mem": mem,
        "time": time,
        "max_parallel": max_parallel,
        "poll_seconds": poll_seconds,
    }
    flags = [k for k, v in given.items() if v is not None] + (["slurm_arg"] if slurm_args else [])
    if flags and not on_slurm(executor):
        raise UserError(
            f"--{flags[0].replace('_', '-')} is a Slurm setting; add --executor slurm "
            "(or kind: slurm in the spec's executor block)"
        )
    out = slurm_options(executor)
    for key, value in given.items():
        if value is not None:
            out = replace(out, **{key: SETTING_CHECKS[key](value, f"--{key.replace('_', '-')}")})
    if slurm_args:
        out = replace(out, slurm_args={**out.slurm_args, **cli_slurm_args(slurm_args)})
    return replace(executor, settings={**executor.settings, SLURM: out})
