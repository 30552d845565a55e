"""A scorer's reproducibility signature, in the style of sacrebleu's and bert_score's: one readable
line, fields in a fixed order, that names what produced a score and so when two scores are
comparable, e.g.

    bertscore|enc:sentence-transformers/all-MiniLM-L6-v2@34bb7e1|L6|idf:no|refs:max|nlgbench:0.2.0|torch:2.13|tf:5.24

Fields: the metric; `enc:` the encoder's source with its revision (the Hub snapshot's commit, else
a fingerprint of a local folder's config, tokenizer and weight files; a local folder by its name,
`model_label`, never by a path of the machine); `L` the layer used; the variant (num_layers,
quantize, dtype, early_exit ...); the metric's options (booleans as yes/no; `idf:sents@` and the
first 7 hex of the sha256 of a fixed idf corpus, `idf_sents`); `rescaled:` and a digest of the
baselines where BERTScore is rescaled (`rescale_with_baseline`); `refs:` how several
references are used; the metric's own library where it has one (`sacrebleu:2.6.0`); then the
versions of nlgbench, torch and transformers (major.minor for the last two)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nlgbench.encoders.hfcache import content_fingerprint, local_snapshot
from nlgbench.encoders.registry import model_label
from nlgbench.foundations.deferred import library_version
from nlgbench.foundations.version import __version__
from nlgbench.metrics.base import REFERENCE_POLICY

# shown as their own fields (layer, references, rescaled: the baselines' digest, not the file's path)
SKIPPED_OPTIONS = {"layer", REFERENCE_POLICY, "rescale_with_baseline", "baseline_path"}


def encoder_revision(source: str) -> str:
    """The revision of a model source: the Hub snapshot's commit (7 hex), else the first 7 hex of a
    local folder's content fingerprint (`nlgbench.encoders.hfcache.content_fingerprint`: the contents of
    every file its loading reads, config, tokenizer and weights; the digest a cell's id and the export
    cache use); '' when neither is found."""
    folder = local_snapshot(source)
    if folder is None:
        return ""
    if folder.parent.name == "snapshots":
        return folder.name[:7]
    return content_fingerprint(folder)[:7]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def signature(metric: str, options: Mapping[str, Any], described: Mapping[str, Any], references: str) -> str:
    """The signature of a scorer: `metric`, its `options` (as given to the metric), the scorer's
    `describe()` (source, layer, variant) and `references` (how several references are used: max,
    mean, first, native, one, none)."""
    fields = [metric]
    source = described.get("source")
    if source:
        revision = encoder_revision(str(source))
        fields.append(f"enc:{model_label(str(source))}" + (f"@{revision}" if revision else ""))
    if described.get("layer") is not None:
        fields.append(f"L{described['layer']}")
    if described.get("student"):  # a distilled student: its kind and its training record's digest
        fields.append(f"student:{described['student']}")
    fields += [f"{k}={_value(v)}" for k, v in sorted((described.get("variant") or {}).items())]
    shown = {k: _value(v) for k, v in options.items() if k not in SKIPPED_OPTIONS and v is not None}
    if described.get("idf_corpus"):  # idf from a fixed corpus (idf_sents), not from each call's references
        shown["idf"] = f"sents@{str(described['idf_corpus'])[:7]}"
    fields += [f"{k}:{v}" for k, v in sorted(shown.items())]
    if described.get("rescaled"):
        fields.append(f"rescaled:{described['rescaled']}")
    fields.append(f"refs:{references}")
    fields += [f"{name}:{v}" for name, v in sorted((described.get("library") or {}).items())]  # sacrebleu, rouge
    fields += [
        f"nlgbench:{__version__}",
        # read without importing them: a cell that runs no model never imports torch
        f"torch:{_major_minor(library_version('torch', 'torch') or 'none')}",
        f"tf:{_major_minor(library_version('transformers', 'transformers') or 'none')}",
    ]
    return "|".join(fields)


def recorded_signature(metric: str | None, scorer: Mapping[str, Any] | None) -> str:
    """The nlgbench signature a cell's result records (`scorer.signature`), '' where there is none:
    imported cells, results written before signatures, and lexical cells written before
    sacrebleu's own string moved to `sacrebleu_signature` (it does not start with the metric). A local
    folder recorded by its path (older signatures) is shown by its name."""
    value = (scorer or {}).get("signature")
    if not (isinstance(value, str) and metric is not None and value.startswith(f"{metric}|")):
        return ""
    return "|".join(_encoder_field(f) if f.startswith("enc:") else f for f in value.split("|"))


def _encoder_field(field: str) -> str:
    """`enc:SOURCE@REV` with SOURCE as labels show it (`model_label`): a folder's path becomes its name."""
    source, at, revision = field.removeprefix("enc:").rpartition("@") if "@" in field else (field[4:], "", "")
    return f"enc:{model_label(source)}{at}{revision}"
