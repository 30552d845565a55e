"""A scorer's recipe: what a cell's scorer is made of (metric, encoder, options, aligner), the one place
that builds it (`Recipe.build`, the only caller of a metric's `build`) and the one place its
reproducibility signature is computed (`Recipe.signature`). The worker, the API's `Scorer` and the
distillation teacher each hold one, so a score and its signature come out the same from all three."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgbench.core.cell import CellConfig
from nlgbench.core.signature import signature
from nlgbench.core.spec import parse_metric_entry
from nlgbench.encoders.registry import AUTO, BACKENDS, TORCH, EncoderRef, own_arithmetic
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError
from nlgbench.metrics import default_encoder, get_metric
from nlgbench.metrics.base import REFERENCE_POLICY, MetricInfo, ReferencePolicy, Scorer


@dataclass(frozen=True)
class Recipe:
    """A metric, its encoder, its options as a cell runs them (the metric's own and the harness's
    `reference_policy`) and its aligner (None for a metric that takes none)."""

    info: MetricInfo
    encoder: EncoderRef
    options: dict[str, Any]
    aligner: str | None = None

    @classmethod
    def parse(
        cls,
        metric: str,
        encoder: str | dict[str, Any] | None,
        options: dict[str, Any],
        aligner: str | None,
        where: str,
    ) -> Recipe:
        """Checked as a spec's metric entry is (one line naming `where`); the metric's default encoder where
        `encoder` is None. `reference_policy` is checked beside the entry, so that for a metric that reads no
        references its line says so rather than calling it an unknown key."""
        own = {key: value for key, value in options.items() if key != REFERENCE_POLICY}
        raw: dict[str, Any] = {
            "metric": metric,
            "options": own,
            "encoders": [encoder if encoder is not None else default_encoder(metric)],
        }
        if aligner is not None:
            raw["aligners"] = [aligner]
        entry = parse_metric_entry(raw, where, Path.cwd())
        harness = {REFERENCE_POLICY: options[REFERENCE_POLICY]} if REFERENCE_POLICY in options else {}
        checked = {**entry.options, **harness}
        info = get_metric(metric)
        info.check_options(checked, f"{where}.options")
        return cls(info, entry.encoders[0], checked, entry.aligners[0])

    @classmethod
    def of_cell(cls, config: CellConfig) -> Recipe:
        """The recipe of a sweep cell's scorer."""
        return cls(get_metric(config.metric), config.encoder, config.options, config.aligner)

    @property
    def references(self) -> str:
        """How the scorer uses several references per hypothesis: the reference_policy option, else the
        metric's own rule (max, mean, native); `one` where the metric takes one, `none` without references."""
        if not self.info.reads_references(self.options):
            return "none"
        return str(self.options.get(REFERENCE_POLICY) or self.info.multi_reference or "one")

    def build(self, device: str, batch_size: int, context: CellContext | None = None) -> Scorer:
        """Check the options (as the spec does), build the scorer on the metric's own options, and wrap
        it in `ReferencePolicy` when it reads references but not several of them itself. `context`: the
        cell's, given to a build that takes one (`MetricInfo.takes_context`); a build that does not cannot
        honour a token budget, so a context with one is refused for it."""
        info = self.info
        info.check_options(self.options)
        own = {key: value for key, value in self.options.items() if key not in info.harness_options}
        extra: dict[str, Any] = {"aligner": self.aligner} if info.accepts_aligners else {}
        if context is not None and info.takes_context:
            extra["context"] = context
        elif context is not None and context.batch_tokens is not None:
            raise UserError(
                f"metric {info.name}: its build takes no context argument, so a token budget "
                f"(batch_tokens: {context.batch_tokens}) cannot apply; use batch_size"
            )
        scorer = info.build(self.encoder, own, device, batch_size, **extra)
        policy = self.options.get(REFERENCE_POLICY)
        if not info.reads_references(self.options) or (policy is None and info.multi_reference == "native"):
            return scorer
        return ReferencePolicy(scorer, info.name, info.higher_is_better, declared=info.multi_reference, given=policy)

    def signature(self, described: Mapping[str, Any]) -> str:
        """The reproducibility signature (`nlgbench.core.signature`) of the scorer this recipe built, from its
        `describe()`: what `nlgbench.Scorer.signature`, `nlgbench score` and a sweep cell's result record."""
        signed = {k: v for k, v in self.options.items() if k != REFERENCE_POLICY}
        if self.aligner is not None and self.info.accepts_aligners:
            signed["aligner"] = self.aligner
        return signature(self.info.name, signed, described, self.references)


#: The backend of the API's, `nlgbench.bert_score`'s and `nlgbench score`'s encoders where the caller names
#: none: `auto` unless this variable says another (`torch` keeps every such scorer on torch).
BACKEND_ENV = "NLGBENCH_BACKEND"


def api_encoder(metric: str, encoder: str | dict[str, Any] | None, backend: str | None) -> str | dict[str, Any] | None:
    """The encoder a scorer outside a sweep runs: `backend` where given (an encoder that names another is
    refused); else, for a float32 token-embedding encoder that names none, `$NLGBENCH_BACKEND` or `auto`
    (the fastest exact backend, measured once: `nlgbench.encoders.backendchoice`). Sweep cells keep the
    backend written, being what they measure. Checked afterwards as a spec's encoder (`Recipe.parse`)."""
    if encoder is not None and not isinstance(encoder, (str, dict)):
        return encoder  # (refused by `Recipe.parse`, in the caller's words)
    named = isinstance(encoder, dict) and "backend" in encoder
    raw = dict(encoder) if isinstance(encoder, dict) else {"name": encoder or default_encoder(metric)}
    if backend is not None:
        if not isinstance(backend, str):
            raise UserError(f"backend must be one of torch, onnxruntime, openvino, auto; got {backend!r}")
        if named and raw["backend"] != backend:
            raise UserError(f"encoder names backend {raw['backend']!r} and backend={backend!r} another: give one")
        return {**raw, "backend": backend}
    default = os.environ.get(BACKEND_ENV, "").strip() or AUTO
    if default not in (*BACKENDS, AUTO):
        raise UserError(f"{BACKEND_ENV}={default!r}: must be one of {', '.join((*BACKENDS, AUTO))} (or unset: auto)")
    if named or default == TORCH or "encoder" not in get_metric(metric).encoder_kinds:
        return encoder
    if own_arithmetic(raw.get("quantize"), raw.get("dtype"), raw.get("early_exit")):
        return encoder  # quantised, cast or early-exit: torch's arithmetic, unless a backend is named
    return {**raw, "backend": default}
