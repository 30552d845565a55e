"""Names as papers print them, for the report's figures, captions and tables: metrics (BERTScore,
chrF, sentBLEU), correlations (Pearson, Kendall), devices (CPU) and datasets ("WMT16, first 30
segments per language pair"); the CSVs and the method notes keep nlgbench's labels."""

from __future__ import annotations

import re
from collections.abc import Iterable

from nlgbench.foundations.devicenames import CPU, is_cuda
from nlgbench.reporting.quality import QualityOptions
from nlgbench.statistics.correlation import canonical_method

METRIC_NAMES = {
    "bertscore": "BERTScore",
    "moverscore": "MoverScore",
    "baryscore": "BaryScore",
    "bartscore": "BARTScore",
    "xmoverscore": "XMoverScore",
    "sentsim": "SentSim",
    "frugalscore": "FrugalScore",
    "sentbleu": "sentBLEU",
    "chrf": "chrF",
    "rouge": "ROUGE",
}
METHOD_NAMES = {
    "pearson": "Pearson",
    "spearman": "Spearman",
    "kendall": "Kendall",
    "kendall_c": "Kendall tau-c",
    "kendall_like_all_pairs": "Kendall-like",
    "darr_kendall": "DARR Kendall",
    "acc_eq": "acc-eq",
    "pairwise_accuracy": "pairwise accuracy",
    "soft_pairwise_accuracy": "soft pairwise accuracy",
}
DATASET_NAMES = {"summeval": "SummEval"}
WMT = re.compile(r"wmt(\d\d)(.*)", re.IGNORECASE)
CUT = re.compile(r"(?P<name>.+)\[:(?P<n>\d+)\]")  # nlgbench.core.labels.dataset_label's `wmt16[:100]`
SAMPLE = re.compile(r"(?P<name>.+)\[~(?P<n>\d+),seed=(?P<seed>-?\d+)\]")  # and its `wmt17[~100,seed=0]`


def metric_name(label: str) -> str:
    """A metric label in its published spelling: `bertscore` -> 'BERTScore', `moverscore (rwmd)` ->
    'MoverScore (rwmd)'; a metric the table does not know as it is."""
    base = re.match(r"[a-z0-9_]+", label)
    if base is None or base[0] not in METRIC_NAMES:
        return label
    return METRIC_NAMES[base[0]] + label[base.end() :]


def metric_names(labels: Iterable[str]) -> dict[str, str]:
    """Each metric label whose published spelling differs, to that spelling (a `Names` map)."""
    return {label: metric_name(label) for label in dict.fromkeys(labels) if metric_name(label) != label}


def method_name(method: str) -> str:
    """A correlation method as papers name it: `pearson` -> 'Pearson'."""
    canonical = canonical_method(method)
    return METHOD_NAMES.get(canonical, canonical.replace("_", " "))


def quality_title(options: QualityOptions) -> str:
    """The quality as axes, tables and notes name it: 'Pearson (global)', 'Kendall (segment, by lp)'."""
    label = options.label
    return method_name(options.method) + label[label.index(" (") :] if " (" in label else label


def device_name(device: str) -> str:
    """`cpu` -> 'CPU', `cuda` -> 'GPU (cuda)', anything else as it is."""
    if device == CPU:
        return "CPU"
    return f"GPU ({device})" if is_cuda(device) else device


def dataset_base(name: str) -> str:
    """A dataset's name as printed: `wmt16` -> 'WMT16', `summeval` -> 'SummEval'."""
    if m := WMT.fullmatch(name):
        return f"WMT{m[1]}{m[2]}"
    return DATASET_NAMES.get(name.lower(), name)


def dataset_name(label: str) -> str:
    """A dataset label as every caption, note and table of the report names it: `wmt16[:30]` ->
    'WMT16, first 30 segments per language pair'; `wmt17[~50,seed=0]` -> 'WMT17, 50 segments per
    language pair drawn with seed 0'; `wmt21` -> 'WMT21'."""
    if m := CUT.fullmatch(label):
        return f"{dataset_base(m['name'])}, first {m['n']} segments per language pair"
    if m := SAMPLE.fullmatch(label):
        return f"{dataset_base(m['name'])}, {m['n']} segments per language pair drawn with seed {m['seed']}"
    return dataset_base(label)


def dataset_short(label: str) -> str:
    """A dataset label without its subset, for a list of datasets: `wmt16[:30]` -> 'WMT16'."""
    if m := CUT.fullmatch(label) or SAMPLE.fullmatch(label):
        return dataset_base(m["name"])
    return dataset_base(label)
