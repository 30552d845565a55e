"""The checks a sweep passes before any cell runs (`Launcher.run`, and `run --dry-run`): the spec's
devices exist on this machine, every dataset loads, and no metric meets a blank text (or one its
encoder's tokenizer leaves without a token it weighs) or several references it defines no value for.
One line each, instead of cells that all fail."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from nlgbench.core.datawarnings import blank_text_warnings
from nlgbench.data.items import Dataset, item_name
from nlgbench.foundations.errors import UserError
from nlgbench.measurement.devices import check_device
from nlgbench.metrics import get_metric
from nlgbench.metrics.base import no_reference_policy
from nlgbench.metrics.tokenless import Tokenizers, tokenless_refusal

if TYPE_CHECKING:
    from nlgbench.core.spec import MetricEntry, SweepSpec


def check_devices(spec: SweepSpec) -> None:
    """Every device of the spec exists on this machine (a local sweep, or its --dry-run): one line,
    before any cell, instead of cells that all fail (`cuda` on a CPU-only machine). Slurm sweeps are
    not checked here: their cells run on other nodes."""
    for device in dict.fromkeys(spec.devices):
        try:
            check_device(device)
        except UserError as exc:
            raise UserError(f"spec devices: {exc} (on a cluster: --executor slurm)") from None


def check_datasets(spec: SweepSpec, *, catalogue: bool = True) -> tuple[SweepSpec, dict[str, int]]:
    """Load every dataset of the spec once (`catalogue=False`: own files and hf datasets only, as --dry-run) and
    check that no metric meets a blank text where it defines no value for one (`MetricInfo.blank_rule`;
    those it scores are warned about here and recorded with each cell), and that a one-reference metric
    without a reference_policy meets no item with several references (refused here, before any model
    loads, not inside its cells). Returns the spec to run, in which a `sample` that draws every item is
    dropped (its cells are the whole dataset's, labelled so, not `[~n]`), and items per dataset."""
    sizes, refs = {}, []
    tokenizers = Tokenizers()  # each model's tokenizer once, for every dataset
    for ref in spec.datasets:
        if not catalogue and ref.name is not None:  # an hf dataset loads: its content hash is in the cell id
            refs.append(ref)
            continue
        ds = ref.load()
        blank_warnings = check_blank_texts(spec, ds, ref.label, tokenizers)
        most = max((len(it.references) for it in ds.items), default=1)
        for entry in spec.metrics if most > 1 else []:
            if get_metric(entry.metric).needs_reference_policy(entry.options):
                raise UserError(f"dataset {ref.label}: {no_reference_policy(entry.metric, most)}")
        for warning in [*ds.warnings, *blank_warnings]:  # e.g. a head subset of a file sorted by human score
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        if ref.sample is not None and ds.drawn_whole:
            whole = replace(ref, sample=None)
            print(
                f"warning: {ref.label} draws every item of the dataset: its cells are {whole.label}'s",
                file=sys.stderr,
                flush=True,
            )
            ref = whole
        refs.append(ref)
        sizes[ref.label] = len(ds.items)
    return replace(spec, datasets=refs), sizes


def check_blank_texts(spec: SweepSpec, ds: Dataset, label: str, tokenizers: Tokenizers | None = None) -> list[str]:
    """Refuse (one line naming the dataset, the metric and the item) a blank text where one of the
    spec's metrics defines no value for it (`MetricInfo.blank_rule`), and there a text that each encoder's
    tokenizer leaves without a token the metric weighs (`MetricInfo.weighed_tokens`: the tokenizer alone,
    for a model on this machine; `tokenizers` keeps them); the warnings on the blank texts it scores,
    prefixed with the metric's name, each once."""
    out: list[str] = []
    tokenizers = tokenizers if tokenizers is not None else Tokenizers()
    for entry in spec.metrics:
        rule = get_metric(entry.metric).blank_rule(entry.options)
        refused = rule.refusal(entry.metric, ds.items, lambda _, i: f"item {item_name(ds.items[i])}")
        refused = refused or _tokenless(entry, ds, tokenizers)
        if refused is not None:
            raise UserError(f"dataset {label}: {refused}")
        out += [f"{entry.metric}: {warning}" for warning in blank_text_warnings(ds, rule)]
    return list(dict.fromkeys(out))


def _tokenless(entry: MetricEntry, ds: Dataset, tokenizers: Tokenizers) -> str | None:
    """The line refusing the first item with a text that one of the entry's encoders leaves without a token
    its metric weighs, where the metric refuses a blank text (`tokenless_refusal`); None if there is none."""
    for encoder in entry.encoders:
        refused = tokenless_refusal(
            get_metric(entry.metric),
            entry.options,
            encoder,
            ds.items,
            tokenizers,
            lambda _, i, __: f"item {item_name(ds.items[i])}",
        )
        if refused is not None:
            return refused
    return None
