"""What a report says about the run behind it: its title (the sweep spec's name) and the facts a
reader needs to judge and repeat the numbers: when the cells were recorded, the library versions,
the machine, threads, batch sizes and the timing protocol.

Everything comes from the cells' own records (result.json `environment` and `config`, the store's
or report/run.json's provenance: `nlgbench.runs.provenance`), never from the machine writing the
report. Imported cells (`import-scores`) measured nothing here: they are counted, not described."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nlgbench.core.result import CellResult
from nlgbench.runs.csvfiles import energy_counter_label
from nlgbench.runs.provenance import Provenance

VERSIONS = {"nlgbench": "nlgbench", "torch": "torch", "transformers": "transformers", "pot": "POT", "python": "Python"}
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class RunInfo:
    """The report's title, why it is not a spec name where it is not ('' where it is), and the run's
    facts as (label, text) pairs in the order the page lists them."""

    title: str
    title_note: str
    facts: list[tuple[str, str]]


def distinct(values: Iterable[str], unit: str = "cells") -> str:
    """Values as one text: the value where all agree, else each with how many have it, most first
    ('2 (40 cells); 4 (20 cells)'); NOT_RECORDED for none."""
    counts = Counter(values)
    if not counts:
        return NOT_RECORDED
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{v} ({n} {unit if n != 1 else unit.removesuffix('s')})" for v, n in counts.most_common())


def when(stamps: list[datetime]) -> str:
    """The span of recording times, UTC: '2025-11-25 22:20 UTC', '2025-11-25 22:20 to 23:05 UTC',
    '2025-11-20 09:00 to 2025-11-25 23:05 UTC'."""
    first, last = min(stamps), max(stamps)
    start = first.strftime("%Y-%m-%d %H:%M")
    if first.strftime("%Y-%m-%d %H:%M") == last.strftime("%Y-%m-%d %H:%M"):
        return f"{start} UTC"
    end = last.strftime("%H:%M") if first.date() == last.date() else last.strftime("%Y-%m-%d %H:%M")
    return f"{start} to {end} UTC"


def machine_text(env: dict[str, Any]) -> str:
    """One machine as a cell's environment records it: CPU model, logical cores, memory, GPU (its
    memory and CUDA version)."""
    parts = [str(env.get("cpu_model") or "CPU unknown")]
    if env.get("cpu_cores_logical"):
        parts.append(f"{env['cpu_cores_logical']} logical cores")
    if env.get("memory_total_mb"):
        parts.append(f"{env['memory_total_mb'] / 1024:.0f} GiB RAM")
    if env.get("gpu"):
        details = [f"{env['gpu_memory_mb'] / 1024:.0f} GiB"] if env.get("gpu_memory_mb") else []
        details += [f"CUDA {env['cuda']}"] if env.get("cuda") else []
        parts.append(f"GPU {env['gpu']}" + (f" ({', '.join(details)})" if details else ""))
    else:
        parts.append("no GPU used")
    return ", ".join(parts)


def short_commit(env: dict[str, Any]) -> str:
    """The git commit a cell ran at, 12 hex digits ('-dirty': the work tree had changes)."""
    commit = str(env.get("git_commit") or "")
    if not commit:
        return NOT_RECORDED
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def batch_text(results: list[CellResult]) -> str:
    """The batch sizes per device ('cpu: 64; cuda: 16, 32'), a token budget where one was set."""
    per_device: dict[str, list[str]] = {}
    for r in results:
        cfg = r.config
        size = f"{cfg.batch_tokens} tokens" if cfg.batch_tokens is not None else str(cfg.batch_size)
        per_device.setdefault(cfg.device, []).append(size)
    return "; ".join(
        f"{device}: {', '.join(sorted(set(sizes), key=lambda s: (len(s), s)))}" for device, sizes in per_device.items()
    )


def energy_text(result: CellResult) -> str:
    """The energy counter a cell read and what it read, or 'n/a (no counter)' and why;
    '' for a cell recorded before nlgbench recorded energy."""
    t = result.timing
    if t is None or t.energy_counter is None:
        return ""
    label = energy_counter_label(t.energy_counter)
    return f"{label}: {t.energy_note}" if t.energy_note else label


def title_of(folder: Path, provenance: Provenance, source: str) -> tuple[str, str]:
    """The title (the sweep specs' names) and, where there is none, the folder's name and why."""
    if provenance.spec_names:
        return " + ".join(provenance.spec_names), ""
    if provenance.source:
        why = f"{provenance.source} records no `nlgbench run` of a spec (imported or collected cells only)"
    else:
        why = f"the cells were read from {source}, which does not record the sweep spec's name"
    return folder.name, f"Titled with the run folder's name: {why}."


def run_info(folder: Path, results: list[CellResult], provenance: Provenance, source: str) -> RunInfo:
    """The title and facts of a report on `results` (the reported cells) of the run folder `folder`,
    read from `source` ('results.sqlite', 'report/', 'cells/')."""
    title, note = title_of(folder, provenance, source)
    measured = [r for r in results if not r.imported]
    envs = [r.environment or {} for r in measured]
    stamps = [provenance.recorded_at[r.cell_id] for r in results if r.cell_id in provenance.recorded_at]
    dates = when(stamps) if stamps else f"{NOT_RECORDED} (the folder keeps no record of when its cells ran)"
    if stamps and len(stamps) < len(results):
        dates += f" ({len(results) - len(stamps)} of {len(results)} cells without a date)"
    versions = "; ".join(
        f"{name} {distinct(str(e.get(key) or NOT_RECORDED) for e in envs)}" for key, name in VERSIONS.items()
    )
    threads = distinct(
        (
            "no torch (no model run)"  # a model-free cell's worker never imports torch: torch_threads None
            if "torch_threads" in e and e["torch_threads"] is None
            else f"{e.get('torch_threads', '?')} torch thread{'' if e.get('torch_threads') == 1 else 's'}"
        )
        + (" (all cores)" if r.config.threads is None else f" (spec threads: {r.config.threads})")
        for r, e in zip(measured, envs, strict=True)
    )
    protocol = distinct(f"{r.config.repeats} timed repeats after {r.config.warmup} warm-up pass(es)" for r in measured)
    imported = len(results) - len(measured)
    facts = [
        (
            "cells",
            f"{len(results)} finished"
            + (
                f", {imported} of them imported (scores from a file: no machine, versions or timing)"
                if imported
                else ""
            ),
        ),
        ("run dates", dates),
        ("versions", versions if measured else NOT_RECORDED),
        ("git commit", distinct(short_commit(e) for e in envs)),
        ("machine", distinct(machine_text(e) for e in envs)),
        ("threads", threads),
        ("batch size", batch_text(measured) or NOT_RECORDED),
        ("timing", protocol),
    ]
    energy = [text for text in map(energy_text, measured) if text]
    if energy:  # cells recorded before nlgbench recorded energy say nothing about it: no fact
        facts.append(("energy", distinct(energy)))
    return RunInfo(title, note, facts)
