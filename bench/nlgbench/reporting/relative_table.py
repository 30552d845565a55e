"""The numbers a report shows, as records and as rows of text: quality per cell, the baselines,
Table 3 (relative.{csv,md,tex}: quality retained and speed-up against the baseline), Table 4's inputs (the measured
quantities per encoder; the table itself: quantities_table.py) and the bootstrap intervals of plotted
points (the trade-off table: tradeoff_table.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.data.items import HUMAN
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.foundations.devicenames import CPU, CUDA
from nlgbench.foundations.errors import unknown_name
from nlgbench.reporting.encoder_lookup import find_encoder_label
from nlgbench.reporting.markup import TextTable
from nlgbench.reporting.quality import QualityOptions
from nlgbench.runs.csvfiles import NO_COUNTER
from nlgbench.runs.rundata import RunData
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, percentile_interval
from nlgbench.statistics.correlation import canonical_method
from nlgbench.statistics.levels import canonical_level, left_out_note, quality_note, too_small_groups
from nlgbench.statistics.speedup import speedup

if TYPE_CHECKING:
    import pandas as pd


def with_quality(run: RunData, options: QualityOptions, cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """The run's cells (or `cells`, some of them) with a `quality` column recomputed from segment
    scores, `lps_left_out`: the language pairs too small for the level (see
    nlgbench.statistics.levels.too_small_groups), and `quality_note`: why quality is undefined ('' when defined);
    a metric without a model has no model memory (blank, not the process's growth)."""
    options.check()
    df = (run.cells if cells is None else cells).copy()
    segments = [run.segments(c) for c in df["cell_id"]]
    options.check_segments(segments)
    df["quality"] = [options.value(seg) for seg in segments]
    free = df["encoder"] == NO_ENCODER
    for column in ("rss_growth_mb", "cuda_peak_allocated_mb"):  # a metric without a model has no model memory
        if column in df:
            df[column] = df[column].astype(float).where(~free)
    df["lps_left_out"] = [tuple(too_small_groups(seg, options.level)) for seg in segments]
    df["quality_note"] = [
        quality_note(seg, options.method, options.level, options.threshold) if not math.isfinite(q) else ""
        for seg, q in zip(segments, df["quality"], strict=True)
    ]
    return df


def left_out_notes(df: pd.DataFrame, level: str) -> list[str]:
    """Per dataset, the line naming the language pairs its cells leave out of the level's mean."""
    by_dataset = {d: lps for d, lps in zip(df["dataset"], df["lps_left_out"], strict=True) if lps}
    return [f"{dataset}: {left_out_note(level, lps)}" for dataset, lps in by_dataset.items()]


def undefined_quality_notes(df: pd.DataFrame) -> list[str]:
    """One line per cell whose quality is undefined, with the reason (these are not plotted)."""
    return [
        f"quality n/a for {r['metric']} / {r['encoder']} / {r['dataset']} / {r['device']}: {r['quality_note']}"
        for _, r in df.iterrows()
        if not math.isfinite(r["quality"])
    ]


# ----------------------------------------------------------------------------- what a table's quality is


def human_words(df: pd.DataFrame) -> str:
    """The human dimension(s) the cells' quality correlates with, in words: 'human dimension relevance';
    several (each cell's first, data of different kinds): 'human dimensions human, coherence'."""
    dims = list(dict.fromkeys(df["human_dim"])) if "human_dim" in df and len(df) else []
    if not dims:
        return "human dimension unknown"
    if dims == [HUMAN]:  # the dataset's one human score needs no dimension's name
        return "the dataset's human scores"
    return f"human dimension {dims[0]}" if len(dims) == 1 else f"human dimensions {', '.join(dims)}"


CUT = re.compile(r"(?P<name>.+)\[:(?P<n>\d+)\]")  # nlgbench.core.labels.dataset_label's `wmt16[:100]`
SAMPLE = re.compile(r"(?P<name>.+)\[~(?P<n>\d+),seed=(?P<seed>-?\d+)\]")  # and its `wmt17[~100,seed=0]`


def dataset_plain(label: str) -> str:
    """A dataset label in words without slice notation: `wmt16[:100]` -> 'wmt16 (first 100 per pair)',
    `wmt17[~50,seed=0]` -> 'wmt17 (50 per pair, seed 0)'."""
    if m := CUT.fullmatch(label):
        return f"{m['name']} (first {m['n']} per pair)"
    if m := SAMPLE.fullmatch(label):
        return f"{m['name']} ({m['n']} per pair, seed {m['seed']})"
    return label


def resampling_words(run: RunData, options: QualityOptions, df: pd.DataFrame) -> str:
    """What the bootstrap (and compare's paired tests) resample for these cells' quality
    (`QualityOptions.unit_label`; it depends on the data, e.g. documents or sources under
    `--resample both`): one unit, or 'dataset: unit' per dataset where they differ."""
    units = {str(d): options.unit_label(run.segments(c)) for d, c in zip(df["dataset"], df["cell_id"], strict=True)}
    distinct = list(dict.fromkeys(units.values()))
    if len(distinct) <= 1:
        return distinct[0] if distinct else "nothing (no cells)"
    return "; ".join(f"{dataset_plain(d)}: {u}" for d, u in units.items())


def quality_columns_of(options: QualityOptions) -> dict[str, str]:
    """The `level` and `method` columns of a table whose rows carry this quality (canonical names)."""
    return {"level": canonical_level(options.level), "method": canonical_method(options.method)}


def test_words(options: QualityOptions) -> str:
    """compare's test of a difference in quality, in words (the trade-off table's p)."""
    if options.test == "permutation":
        return f"{options.test_label} test, each segment's two standardized metric scores swapped at random"
    return f"{options.test_label} test, over the intervals' resamples"


def relative_note(quality: str, human: str, means: bool) -> str:
    """The note under Table 3 (relative.md, index.html): which quality, what retained and speed-up
    are, the mean rows where the table has any; intervals and tests are the trade-off table's."""
    return (
        f"quality = {quality}, against {human}; retained = quality / the baseline encoder's quality on the same "
        "dataset; speed-up = median baseline ms/segment / median ms/segment"
        + ("; mean rows: the mean over the datasets of one kind of human score" if means else "")
        + ". Intervals and tests: the trade-off table."
    )


def own_encoders(baselines: dict[str, Reference]) -> dict[str, str]:
    """Each metric's baseline encoder where its reference is one of its own cells (Table 3 compares
    within a metric only)."""
    return {m: ref.encoder for m, ref in baselines.items() if ref.metric == m}


def pareto_front(times: Sequence[float], qualities: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats (as fast or faster and as good or better,
    strictly better in one), ordered by time."""
    pts = [
        (t, q, i)
        for i, (t, q) in enumerate(zip(times, qualities, strict=True))
        if math.isfinite(t) and math.isfinite(q)
    ]
    front = []
    for t, q, i in pts:
        dominated = any((t2 <= t and q2 >= q) and (t2 < t or q2 > q) for t2, q2, _ in pts)
        if not dominated:
            front.append((t, i))
    return [i for _, i in sorted(front)]


@dataclass(frozen=True)
class Reference:
    """The cell a metric's rows are compared with: its metric (the metric itself, or another: a cheap
    model-free one) and its encoder (NO_ENCODER for a metric without a model)."""

    metric: str
    encoder: str


def reference_name(metric: str, encoder: str, group: str, names: Names = DEFAULT_NAMES) -> str:
    """A group's reference in words: its encoder (the group's own metric), a model-free metric's name,
    or 'metric encoder'."""
    if encoder == NO_ENCODER:
        return names(metric)
    return names(encoder) if metric == group else f"{names(metric)} {names(encoder)}"


def modelled_metrics(df: pd.DataFrame) -> list[str]:
    """The metrics with an encoder, in the run's order; every metric where none has one."""
    metrics = [str(m) for m in dict.fromkeys(df["metric"])]
    with_model = [m for m in metrics if (df[df["metric"] == m]["encoder"] != NO_ENCODER).any()]
    return with_model or metrics


def model_free_metrics(df: pd.DataFrame) -> list[str]:
    """The metrics without a model (sentBLEU, chrF, ROUGE), in the run's order."""
    return [str(m) for m in dict.fromkeys(df["metric"]) if (df[df["metric"] == m]["encoder"] == NO_ENCODER).all()]


def choose_baselines(df: pd.DataFrame, baseline: str | None) -> dict[str, Reference]:
    """Each metric's reference (per metric with an encoder; per metric where none has one):
    `baseline` as METRIC[:ENCODER] is every metric's one reference (the metric's encoder with the
    most parameters where ENCODER is not given); as an encoder label, each metric's own cells of
    it; by default each metric's encoder with the most parameters."""
    metrics = modelled_metrics(df)
    if baseline is not None and (ref := _metric_reference(df, baseline)) is not None:
        return dict.fromkeys(metrics, ref)
    out: dict[str, Reference] = {}
    for metric in metrics:
        group = df[df["metric"] == metric]
        if baseline is not None:
            found = find_encoder_label(baseline, list(dict.fromkeys(group["encoder"])))
            if found is not None:  # a Hub id names its registry name's cells too
                out[metric] = Reference(metric, found)
            continue
        out[metric] = Reference(metric, _largest(group))
    if baseline is not None and not out:
        raise unknown_name("baseline encoder or metric", baseline, sorted({*df["encoder"], *df["metric"]}))
    return out


def _largest(group: pd.DataFrame) -> str:
    """The encoder with the most parameters among a metric's cells (the first where none is counted)."""
    timed = group.dropna(subset=["params"])
    if len(timed):
        return str(timed.sort_values("params", ascending=False, kind="stable")["encoder"].iloc[0])
    return str(group["encoder"].iloc[0])


def _metric_reference(df: pd.DataFrame, text: str) -> Reference | None:
    """`--baseline METRIC[:ENCODER]` as a reference; None where METRIC is no metric of the run (then
    the text is an encoder label)."""
    metric, colon, encoder = text.partition(":")
    group = df[df["metric"] == metric]
    if not len(group):
        return None
    if not colon:
        return Reference(metric, _largest(group))
    encoders = list(dict.fromkeys(group["encoder"]))
    found = find_encoder_label(encoder, encoders)
    if found is None:
        raise unknown_name(f"encoder of {metric}", encoder, encoders)
    return Reference(metric, found)


def score_types(df: pd.DataFrame) -> pd.Series:
    """Each row's kind of human score (nlgbench.runs.rundata.score_type); one kind for frames without it."""
    import pandas as pd

    return df["score_type"] if "score_type" in df else pd.Series([""] * len(df), index=df.index)


def mean_label(score_type: str) -> str:
    """The dataset column of a mean over the datasets of one kind of human score: 'mean (DA)'."""
    return f"mean ({score_type})" if score_type else "mean"


# ----------------------------------------------------------------------------- Table 3: relative to the baseline


def relative_table(df: pd.DataFrame, baselines: dict[str, str], options: QualityOptions | None = None) -> pd.DataFrame:
    """Table 3: per metric x encoder x device and dataset, quality, quality retained (quality /
    baseline quality) and speed-up (`nlgbench.statistics.speedup.speedup`: median baseline time / median time);
    a mean row per kind of human score (`mean (DA)`) where the encoder has two or more datasets of it.
    A metric without an encoder (a lexical baseline: its own baseline) has no row: it would only be
    compared with itself (the trade-off table lists it as a baseline). Every row names its quality:
    `human_dim` (the cells' human dimension, where `df` has it) and, with `options`, `level` and `method`."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    df = df.assign(score_type=score_types(df))
    for (metric, device), group in df.groupby(["metric", "device"], sort=False):
        chosen = baselines.get(str(metric), NO_ENCODER)
        if chosen == NO_ENCODER:
            continue
        base = group[group["encoder"] == chosen].set_index("dataset")
        base = base[~base.index.duplicated()]  # two baseline cells of one label: the first, as compare takes
        for encoder, enc_rows in group.groupby("encoder", sort=False):
            per = [_relative_row(r, base, chosen) for _, r in enc_rows.iterrows()]
            for kind in dict.fromkeys(p["score_type"] for p in per):
                same = [p for p in per if p["score_type"] == kind]
                rows += same
                if len(same) < 2:
                    continue  # one dataset: its row is the mean
                rows.append(
                    {
                        "metric": metric,
                        "encoder": encoder,
                        "device": device,
                        "dataset": mean_label(kind),
                        "baseline": chosen,
                        "score_type": kind,
                        "human_dim": "; ".join(dict.fromkeys(p["human_dim"] for p in same)),
                        **{
                            k: float(np.nanmean([p[k] for p in same]))
                            if any(np.isfinite(p[k]) for p in same)
                            else np.nan
                            for k in ("quality", "retained", "ms_per_segment", "speedup")
                        },
                    }
                )
    table = pd.DataFrame(rows, columns=None if rows else RELATIVE_COLUMNS)
    if options is not None:
        table = table.assign(**quality_columns_of(options))
    return table


RELATIVE_COLUMNS = [  # Table 3's columns (`_relative_row`), before the quality's `level` and `method`
    "metric",
    "encoder",
    "device",
    "dataset",
    "baseline",
    "quality",
    "retained",
    "ms_per_segment",
    "speedup",
    "score_type",
    "human_dim",
]


def _relative_row(r: pd.Series, base: pd.DataFrame, baseline: str) -> dict[str, Any]:
    """One cell's row of Table 3 against the baseline's cell of its dataset (`base`, by dataset)."""
    b = base.loc[r["dataset"]] if r["dataset"] in base.index else None
    retained = r["quality"] / b["quality"] if b is not None else np.nan
    speed = speedup(b["ms_per_segment_repeats"], r["ms_per_segment_repeats"]).value if b is not None else np.nan
    return {
        "metric": r["metric"],
        "encoder": r["encoder"],
        "device": r["device"],
        "dataset": r["dataset"],
        "baseline": baseline,
        "quality": r["quality"],
        "retained": retained,
        "ms_per_segment": r["ms_per_segment"],
        "speedup": speed,
        "score_type": r["score_type"],
        "human_dim": r["human_dim"] if "human_dim" in r else "",
    }


def relative_rows(table: pd.DataFrame, names: Names = DEFAULT_NAMES) -> TextTable:
    """Table 3 as text, encoders and metrics under their `names`: 'n/a' for an undefined quality (and
    so its retained share), '-' for what is unknown (no baseline cell, no timing)."""
    header = ["metric", "encoder", "device", "dataset", "quality", "retained", "ms/seg", "speed-up"]
    rows = [
        [
            names(r["metric"]),
            names(r["encoder"]),
            r["device"],
            r["dataset"],
            fmt.number(r["quality"], missing=fmt.UNDEFINED),
            fmt.percent(r["retained"], missing=fmt.UNDEFINED if not math.isfinite(r["quality"]) else fmt.UNKNOWN),
            fmt.number(r["ms_per_segment"], 1),
            fmt.times(r["speedup"]),
        ]
        for _, r in table.iterrows()
    ]
    return header, rows


# ----------------------------------------------------------------------------- Table 4: measured quantities per encoder


def quality_columns(df: pd.DataFrame) -> list[str]:
    """per_encoder's quality column(s): `quality`, or one per kind of human score, `quality (DA)`,
    `quality (MQM)`, where the cells have several (correlations with different kinds of human
    scores are not averaged)."""
    kinds = list(dict.fromkeys(score_types(df)))
    return ["quality"] if len(kinds) <= 1 else [f"quality ({k})" for k in kinds]


def with_energy(run: RunData, df: pd.DataFrame) -> pd.DataFrame:
    """`df` (cells of `run`) with each cell's `energy_j_per_segment` (the mean over its repeats / its
    segments; NaN where not measured) and `energy_counter` (rapl, nvml, none; '' where the cell recorded no energy)."""
    timings = [run.results[c].timing for c in df["cell_id"]]
    per_segment = [
        float(np.mean(t.energy_j)) / n if t is not None and t.energy_j and n else np.nan
        for t, n in zip(timings, df["n_segments"], strict=True)
    ]
    counters = [(t.energy_counter or "") if t is not None else "" for t in timings]
    return df.assign(energy_j_per_segment=per_segment, energy_counter=counters)


def energy_of(cells: pd.DataFrame) -> float | str:
    """The cells' mean joules per segment where a counter measured it; NO_COUNTER where none did
    and some cell recorded that it has none; NaN where no cell recorded energy (older results)."""
    if "energy_j_per_segment" not in cells:
        return np.nan
    measured = cells["energy_j_per_segment"].dropna()
    if len(measured):
        return float(measured.mean())
    return NO_COUNTER if (cells["energy_counter"] == "none").any() else np.nan


def per_encoder(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4's inputs: per metric x encoder, the quantities averaged over datasets (quality per
    kind of human score, `quality_columns`); model memory is RSS growth over the post-import
    baseline on CPU, peak CUDA memory allocated on GPU; peak memory the process peak (peak RSS on
    CPU, peak CUDA memory reserved on GPU); energy per segment on CPU and GPU (`energy_of`, where
    `df` has `with_energy`'s columns)."""
    import pandas as pd

    rows = []
    kinds = score_types(df)
    columns = quality_columns(df)
    for (metric, encoder), g in df.groupby(["metric", "encoder"], sort=False):
        cpu, gpu = g[g["device"] == CPU], g[g["device"] == CUDA]
        qualities = (
            {"quality": g["quality"].mean()}
            if columns == ["quality"]
            else {f"quality ({k})": g[kinds[g.index] == k]["quality"].mean() for k in dict.fromkeys(kinds)}
        )
        rows.append(
            {
                "metric": metric,
                "encoder": encoder,
                "cpu_ms": cpu["ms_per_segment"].mean() if len(cpu) else np.nan,
                "gpu_ms": gpu["ms_per_segment"].mean() if len(gpu) else np.nan,
                "cpu_j": energy_of(cpu),
                "gpu_j": energy_of(gpu),
                "model_mb": cpu["rss_growth_mb"].mean() if len(cpu) else gpu["cuda_peak_allocated_mb"].mean(),
                "peak_mb": cpu["peak_rss_mb"].mean() if len(cpu) else gpu["cuda_peak_reserved_mb"].mean(),
                "params": g["params"].mean(),
                "disk_mb": g["disk_mb"].mean(),
                **qualities,
            }
        )
    return pd.DataFrame(rows)


def per_encoder_rows(df: pd.DataFrame, names: Names = DEFAULT_NAMES) -> TextTable:
    """`per_encoder` as text, encoders and metrics under their `names`: times in ms, energy in J, memory
    and disk in MiB, parameters in millions."""
    enc = per_encoder(df)
    qcolumns = quality_columns(df)
    header = [
        "metric",
        "encoder",
        "CPU ms/seg",
        "GPU ms/seg",
        "CPU J/seg",
        "GPU J/seg",
        "model memory MiB",
        "peak memory MiB",
        "params (M)",
        "disk MiB",
        *qcolumns,
    ]
    rows = [
        [
            names(r["metric"]),
            names(r["encoder"]),
            fmt.number(r["cpu_ms"], 1),
            fmt.number(r["gpu_ms"], 1),
            fmt.number(r["cpu_j"], 4),  # a text (NO_COUNTER) as it is
            fmt.number(r["gpu_j"], 4),
            fmt.number(r["model_mb"], 0),
            fmt.number(r["peak_mb"], 0),
            fmt.number(r["params"] / 1e6, 1),
            fmt.number(r["disk_mb"], 1),
            *(fmt.number(r[q], missing=fmt.UNDEFINED) for q in qcolumns),
        ]
        for _, r in enc.iterrows()
    ]
    return header, rows


# ----------------------------------------------------------------------------- intervals of plotted points


class QualityIntervals:
    """95% bootstrap intervals of cells' quality, resampling the level's unit (nlgbench.statistics.resampling;
    the resampled qualities kept by the run, `RunData.replicates`, which compare's paired tests reuse). One
    cell's interval is `bootstrap_ci` of its segments with `seed`; a mean over the cells of several
    datasets resamples each dataset on its own stream (seed, seed + 1, ...) and takes the
    percentile interval of the resampled means."""

    def __init__(
        self, run: RunData, options: QualityOptions, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
    ) -> None:
        self.run, self.options, self.n_resamples, self.seed = run, options, n_resamples, seed

    def replicates(self, cell_id: str, seed: int) -> np.ndarray:
        unit = self.options.unit(self.run.segments(cell_id))
        return self.run.replicates(cell_id, self.options, self.options.value, self.n_resamples, seed, unit)

    def interval(self, cell_ids: Sequence[str]) -> tuple[float, float]:
        if len(cell_ids) == 1:
            return percentile_interval(self.replicates(cell_ids[0], self.seed))
        stacked = np.stack([self.replicates(c, self.seed + k) for k, c in enumerate(cell_ids)])
        return percentile_interval(stacked.mean(axis=0))
