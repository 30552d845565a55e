"""Every label a person reads for a cell: dataset, metric (with its aligner and non-default
options), the one-line cell label of progress lines and the results.csv columns.

One owner, so that the sweep's progress lines, results.csv, reports, compare and tables name a
cell the same way. Encoder labels are `EncoderRef.label` (nlgbench.encoders.registry: a local model
folder by its name, never by a path of the machine); `check_encoder_labels` keeps one label per model
in a sweep. Functions take plain values; the metric registry says which options are defaults.
`Names` is what a reader sees of a label: the author's name for it, or its short form.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.names import refuse_control, refuse_name
from nlgbench.metrics import metric_names, option_defaults

NO_ALIGNER = "none"  # results.csv's aligner column for metrics without one


def dataset_label(
    name: str | None, path: str | None, max_segments: int | None, sample: tuple[int, int] | None = None
) -> str:
    """A catalogue name or the file's stem, with the cut or the sample: `wmt16`, `my[:10]`, `wmt17[~100,seed=0]`."""
    base = name if name else Path(path or "").stem
    if sample:
        return base + f"[~{sample[0]},seed={sample[1]}]"
    return base + (f"[:{max_segments}]" if max_segments else "")


def aligner_label(aligner: str | None) -> str:
    """The aligner column: the aligner's name, or `none`."""
    return aligner or NO_ALIGNER


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)} items]" if len(value) > 3 else "[" + ";".join(map(str, value)) + "]"
    return str(value)


def options_label(metric: str, options: Mapping[str, Any] | None) -> str:
    """The metric options that differ from the metric's defaults, `key=value,...` ('' if none):
    cells that differ only in options (SentSim's token_part, ...) must not share a label. The defaults are
    read from the metric's options class alone (`option_defaults`), so labelling a run's cells imports no
    metric's libraries (torch); a harness option a metric does not take is never in a checked cell's options."""
    if metric not in metric_names() or not options:
        return ""
    defaults = option_defaults(metric)
    return ",".join(f"{k}={_short(v)}" for k, v in sorted(options.items()) if k in defaults and v != defaults[k])


def metric_label(metric: str, aligner: str | None, options: str = "") -> str:
    """`moverscore (rwmd)` for metrics run with an aligner, else the metric name; non-default
    options (`options_label`) in brackets: `sentsim[token_part=wmd]`."""
    name = f"{metric}[{options}]" if options else metric
    return name if aligner in ("", NO_ALIGNER, None) else f"{name} ({aligner})"


def cell_label(
    metric: str,
    options: Mapping[str, Any],
    encoder: str,
    aligner: str | None,
    dataset: str,
    device: str,
    batch_size: int,
) -> str:
    """The sweep's one-line name of a cell: `bertscore | all-MiniLM-L6-v2 | wmt16 | cpu | bs64`
    (the aligner, when there is one, after the encoder)."""
    parts = [metric_label(metric, None, options_label(metric, options)), encoder]
    if aligner:
        parts.append(aligner)
    return " | ".join(parts + [dataset, device, f"bs{batch_size}"])


def imported_label(metric: str, encoder: str, dataset: str) -> str:
    """The name of a cell whose scores came from another tool (import-scores); `encoder` is its label."""
    return f"{metric} | {encoder} | {dataset} | imported"


def distinct_dataset_labels(labels: Sequence[str], identities: Sequence[str]) -> list[str]:
    """Dataset labels made distinct: where one label (a file's stem, e.g. `summeval`) stands for
    different contents (`identities`: a file's sha256, '' for catalogue data), each gets its short
    hash, `summeval@3fa2c1d0`; labels of a single content stay as they are."""
    contents: dict[str, set[str]] = {}
    for label, identity in zip(labels, identities, strict=True):
        contents.setdefault(label, set()).add(identity)
    return [
        f"{label}@{identity.removeprefix('sha256:')[:8]}" if len(contents[label]) > 1 and identity else label
        for label, identity in zip(labels, identities, strict=True)
    ]


def check_encoder_labels(encoders: Sequence[EncoderRef], where: str) -> None:
    """One label, one model: two different encoders of a sweep (name or variant) that would share a
    label (two folders `run1/student` and `run2/student`, a folder named like a registered model, a
    `label:` given twice) are refused with one line, instead of merging in results.csv and reports.
    Their cell ids differ either way (the name and the weights fingerprint). A label unfit to be a
    name (`refuse_name`: a folder named `=cmd` or holding an escape, such a `label:`) is refused too."""
    seen: dict[str, EncoderRef] = {}
    for enc in encoders:
        refuse_name(enc.label, "the encoder label", where)
        other = seen.setdefault(enc.label, enc)
        if (other.name, other.variant()) != (enc.name, enc.variant()):
            raise UserError(
                f"{where}: encoders {other.name!r} and {enc.name!r} would both be labelled {enc.label!r} in "
                f"results and reports; give one a label: {{name: {enc.name}, label: OTHER-NAME}}"
            )


def plain_encoder(enc: EncoderRef, where: str) -> EncoderRef:
    """`enc`, or one line naming `where` when its label (a local folder's name, a Hub id) holds a
    control character (`refuse_control`): `nlgbench score` and the API print the label in their
    summary and signature, and a sweep writes it into every output."""
    refuse_control(enc.label, "the encoder label", where)
    return enc


class SpecEntry(Protocol):
    """What `check_spec_labels` reads of a spec's metric entry (`nlgbench.core.spec.MetricEntry`)."""

    metric: str
    options: dict[str, Any]
    encoders: list[EncoderRef]
    aligners: list[str | None]


def check_spec_labels(entries: Sequence[SpecEntry], given: Mapping[str, str], source: str) -> None:
    """A spec's labels, checked when it loads (`--dry-run` included): one label per model
    (`check_encoder_labels`), and no two labels of its cells, or of its `labels:` map, shown under
    one name (`Names.check`, the rule report and compare apply to a run)."""
    check_encoder_labels([enc for entry in entries for enc in entry.encoders], f"{source}.metrics")
    metrics = [
        metric_label(entry.metric, aligner, options_label(entry.metric, entry.options))
        for entry in entries
        for aligner in entry.aligners
    ]
    encoders = [enc.label for entry in entries for enc in entry.encoders]
    Names(given).check([*encoders, *metrics], f"{source}.labels")


# ----------------------------------------------------------------------------- the names a reader sees

SHORT_VARIANTS: dict[str, Callable[[str], str]] = {  # a variant option as a figure or table shows it
    "num_layers": lambda v: f"L{v}",
    "quantize": str,
    "backend": lambda v: {"onnxruntime": "ORT", "openvino": "OV"}.get(v, v),
    "dtype": str,
    "early_exit": lambda v: f"exit {v}",
}


def short_label(label: str) -> str:
    """An encoder label with its variant said the short way a figure has room for:
    `all-MiniLM-L6-v2[num_layers=3]` -> `all-MiniLM-L6-v2 L3`, `m[backend=onnxruntime,quantize=int8]`
    -> `m ORT int8`; a Hub id without its organisation; any other label as it is."""
    base, bracket, rest = label.partition("[")
    if not bracket or not rest.endswith("]"):
        return label.split("/")[-1] if "[" not in label else label
    words = []
    for option in rest[:-1].split(","):
        key, equals, value = option.partition("=")
        if not equals or key not in SHORT_VARIANTS:
            return label
        words.append(SHORT_VARIANTS[key](value))
    return " ".join([base.split("/")[-1], *words])


def seen_as(name: str) -> str:
    """`name` as a reader tells it from another: composed (NFC: `e` + U+0301 is `é`) and without
    invisible format characters (U+200B zero-width space, U+00AD soft hyphen, U+FEFF), which show
    nothing; two names the same here look the same in a table, a figure or the terminal."""
    return "".join(c for c in unicodedata.normalize("NFC", name) if unicodedata.category(c) != "Cf")


@dataclass(frozen=True)
class Names:
    """The names figures, tables (not the CSVs), compare and index.html show for encoders and metrics:
    the author's (`given`: the spec's `labels:` map, `--label FULL=SHORT`), else `short_label`. Cell
    ids, results.csv and the report's CSV files keep the full labels."""

    given: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, label: str) -> str:
        return self.given.get(label) or short_label(label)

    def check(self, labels: Sequence[str], where: str) -> None:
        """Two different labels shown under one name are refused with one line: the rule of report,
        compare and the spec check. The labels are `labels` (a run's or a spec's encoders and
        metrics) and every label a name is given for, so `{A: X, B: X}` is refused even where the
        run has only one of them, and `A=B` where the run has a `B`. Names are compared as a reader
        sees them (`seen_as`)."""
        seen: dict[str, str] = {}
        for label in dict.fromkeys([*labels, *self.given]):
            other = seen.setdefault(seen_as(self(label)), label)
            if other != label:
                raise UserError(f"{where}: {other!r} and {label!r} would both be shown as {self(label)!r}")


def label_map(raw: Any, where: str) -> dict[str, str]:
    """A spec's `labels:` map: a full label (`all-MiniLM-L6-v2[num_layers=3]`, a metric's name) to the
    name figures and tables show; strings only, none with a control character or a spreadsheet
    formula (`refuse_name`). Two labels given one name are refused where the spec is checked
    (`check_spec_labels`)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in raw.items()
    ):
        raise UserError(
            f"{where} must map labels to names, e.g. {{'all-MiniLM-L6-v2[num_layers=3]': 'MiniLM-L6 (3 layers)'}}"
        )
    for label, name in raw.items():
        refuse_control(label, "the label", where)
        refuse_name(name, "the name", where)
    return {k: v.strip() for k, v in raw.items()}


def label_option(text: str) -> tuple[str, str]:
    """`--label FULL=SHORT`, split at the first `=` outside brackets (a variant's `[num_layers=3]`)."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "=" and depth == 0 and text[:i].strip() and text[i + 1 :].strip():
            refuse_control(text[:i].strip(), "the label", "--label")
            refuse_name(text[i + 1 :].strip(), "the name", "--label")
            return text[:i].strip(), text[i + 1 :].strip()
    raise UserError(
        f"--label takes FULL=SHORT, e.g. 'all-MiniLM-L6-v2[num_layers=3]=MiniLM-L6 (3 layers)'; got {text!r}"
    )


DEFAULT_NAMES = Names()  # no name given: each label's short form
