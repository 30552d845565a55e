"""`nlgbench compare DIR --candidate X --baseline Y`: is the candidate encoder's quality loss real,
and what does it buy? Per metric x dataset x device: the correlation difference and the quality
retained (candidate / baseline) with 95% paired-bootstrap intervals over the level's unit, the
paired bootstrap or permutation test (any method) and Williams' test (Pearson) at the level
compared, speed-up with its spread over repeats, memory ratios (model memory and process peak), and
hardware/library checks. `--metric` takes a metric's label or its name (`moverscore`: one row per
aligner that ran); `--aligner` picks the cells run with one aligner (`select_metrics`; the CLI's
`--metric` / `--aligner`). Encoders are named by label or, for registered models, by Hub id.

An imported cell (device `imported`: scores from another tool, no timing) compares on quality with
the other encoder's cell on any device; what it cannot have (speed-up, memory) prints "-".
A quality that cannot be computed (constant scores, too few segments) prints "n/a" with the
reason among the warnings."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nlgbench.core.cell import IMPORTED
from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.data.items import HUMAN
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations import fmt
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.reporting.encoder_lookup import find_encoder_label
from nlgbench.reporting.markup import markdown
from nlgbench.reporting.quality import DEFAULT_QUALITY, QualityOptions
from nlgbench.runs.provenance import read_provenance
from nlgbench.runs.rundata import RunData, memory_columns
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAX_RESAMPLES, MIN_RESAMPLES
from nlgbench.statistics.correlation import canonical_method, correlation
from nlgbench.statistics.levels import Segments, canonical_level, left_out_note, level_reason
from nlgbench.statistics.resampling import UNIT_LABELS, unit_count
from nlgbench.statistics.significance import WILLIAMS_NOT_AT, paired_from_replicates, williams_by_group
from nlgbench.statistics.speedup import speedup

if TYPE_CHECKING:
    import pandas as pd


def check_bootstrap(n_resamples: int, seed: int, minimum: int = MIN_RESAMPLES) -> None:
    """The bootstrap's settings, checked before any work: `minimum` to MAX_RESAMPLES resamples and a
    seed numpy takes (an integer >= 0). `nlgbench compare --resamples` asks for MIN_RESAMPLES (with 1,
    the "interval" is one draw and can exclude the estimate, and p reads "< 2"); the API's
    `compare` for 1 (tests and `write_report` may take fewer for speed; 0 or fewer is no bootstrap)."""
    if not isinstance(n_resamples, int) or isinstance(n_resamples, bool) or n_resamples < minimum:
        why = (
            f"a 95% bootstrap CI needs at least {MIN_RESAMPLES} resamples (from fewer, each end rests on one or two "
            "draws)"
            if minimum >= MIN_RESAMPLES
            else "a bootstrap needs resamples"
        )
        raise UserError(f"resamples must be an integer >= {minimum}, got {n_resamples!r}: {why}")
    if n_resamples > MAX_RESAMPLES:
        raise UserError(
            f"resamples must be at most {MAX_RESAMPLES}, got {n_resamples}: each resample recomputes the "
            f"correlation over every segment ({MAX_RESAMPLES} take minutes per row), and more would not change "
            "the interval or p visibly"
        )
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be an integer >= 0, got {seed!r}")


def select_metrics(df: pd.DataFrame, metric: str | None = None, aligner: str | None = None) -> list[str] | None:
    """The metric labels (`df['metric']`) that `--metric` and `--aligner` pick; None: all. A metric
    is its label (`moverscore (wmd)`) or its name alone (`moverscore`), which picks every label of
    that name left after the aligner is applied (one row per aligner, each named by its label). An
    aligner alone picks every metric run with it."""
    if metric is None and aligner is None:
        return None
    labels = list(dict.fromkeys(df["metric"]))
    names = (
        dict(zip(df["metric"], df["metric_name"], strict=True))
        if "metric_name" in df
        else {m: m.split(" ")[0] for m in labels}
    )
    aligners = dict(zip(df["metric"], df["aligner"], strict=True)) if "aligner" in df else {}
    if aligner is not None:
        known = sorted(set(aligners.values()))
        labels = [m for m in labels if aligners.get(m) == aligner]
        if not labels:
            raise unknown_name("aligner", aligner, known)
    if metric is None:
        return labels
    if metric in labels:
        return [metric]
    named = [m for m in labels if names.get(m) == metric]
    if named:
        return named
    raise unknown_name("metric", metric, sorted({*labels, *(names[m] for m in labels)}))


def same_segments(cs: Segments, bs: Segments) -> bool:
    """Whether two cells scored the same segments with the same human scores (a paired comparison needs it)."""
    return len(cs) == len(bs) and bool(
        np.array_equal(cs.lp, bs.lp) and np.array_equal(cs.seg_id, bs.seg_id) and np.array_equal(cs.human, bs.human)
    )


def _cell(cells: pd.DataFrame, metric: str, encoder: str, device: str) -> pd.Series | None:
    """The first of `cells` of this metric, encoder and device; None when there is none."""
    found = cells[(cells["metric"] == metric) & (cells["encoder"] == encoder) & (cells["device"] == device)]
    return found.iloc[0] if len(found) else None


def _pairs(
    df: pd.DataFrame, candidate: str, baseline: str, metric_pairs: Sequence[tuple[str, str]]
) -> list[tuple[pd.Series, pd.Series]]:
    """The (candidate, baseline) cells to compare, per (candidate metric, baseline metric) x dataset
    x device in the run's order: the two encoders' cells on that device, or, where one encoder has
    none there, its imported cell (device `imported`) in their place. The two metrics are one label
    except in a cross-metric comparison (a distilled student's frugalscore vs its teacher)."""
    pairs: list[tuple[pd.Series, pd.Series]] = []
    for c_metric, b_metric in metric_pairs:
        both = df[df["metric"].isin([c_metric, b_metric])]
        for _, key in both[["dataset", "device"]].drop_duplicates().iterrows():
            sel = both[both["dataset"] == key["dataset"]]
            c, b = _cell(sel, c_metric, candidate, key["device"]), _cell(sel, b_metric, baseline, key["device"])
            if key["device"] != IMPORTED:
                c = c if c is not None else _cell(sel, c_metric, candidate, IMPORTED)
                b = b if b is not None else _cell(sel, b_metric, baseline, IMPORTED)
                if c is not None and b is not None and c["imported"] and b["imported"]:
                    continue  # both imported: compared once, at device `imported`
            if c is not None and b is not None and not any(c is pc and b is pb for pc, pb in pairs):
                pairs.append((c, b))
    return pairs


def metric_pairs(
    df: pd.DataFrame,
    metric: str | None = None,
    aligner: str | None = None,
    candidate_metric: str | None = None,
    baseline_metric: str | None = None,
) -> list[tuple[str, str]]:
    """The (candidate metric, baseline metric) labels to compare: each selected metric with itself,
    or, when `candidate_metric` / `baseline_metric` is given, that one pair (the other side
    defaulting to `metric`); each side resolved as `select_metrics` and must name one label."""
    if candidate_metric is None and baseline_metric is None:
        selected = select_metrics(df, metric, aligner)
        return [(m, m) for m in (selected if selected is not None else dict.fromkeys(df["metric"]))]

    def one(name: str | None, flag: str) -> str:
        if name is None:
            name = metric
        if name is None:
            raise UserError(
                f"{flag} is missing: a cross-metric comparison names both metrics "
                "(--candidate-metric and --baseline-metric, or --metric for the side not given)"
            )
        labels = select_metrics(df, name, aligner)
        if labels is None or len(labels) != 1:
            raise UserError(f"{flag} {name!r} names {len(labels or [])} metric labels here; give one label")
        return labels[0]

    return [(one(candidate_metric, "--candidate-metric"), one(baseline_metric, "--baseline-metric"))]


def _device(c: Any, b: Any) -> str:
    """A row's device: the cells' device (`imported` for imported cells), `candidate / baseline` when they differ."""
    return str(c["device"]) if c["device"] == b["device"] else f"{c['device']} / {b['device']}"


def compare(
    run: RunData,
    candidate: str,
    baseline: str,
    metric: str | None = None,
    options: QualityOptions = DEFAULT_QUALITY,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    aligner: str | None = None,
    candidate_metric: str | None = None,
    baseline_metric: str | None = None,
    names: Names | None = None,
) -> dict[str, Any]:
    """The comparison as plain data (what --json prints); `metric` and `aligner` as `select_metrics`;
    `candidate_metric` / `baseline_metric` compare across metrics (`metric_pairs`): the row's metric
    reads "candidate metric vs baseline metric". An encoder may be named as `render` shows it
    (`names`; None: the run's own `labels:` map, else the short form), as `find_encoder_label` reads it."""
    check_bootstrap(n_resamples, seed, minimum=1)
    options.check()
    df = run.cells
    encoders = sorted(set(df["encoder"]))
    shown = names if names is not None else Names(read_provenance(run).labels)
    found = {name: find_encoder_label(name, encoders, shown) for name in (candidate, baseline)}
    for name, label in found.items():
        if label is None:
            raise unknown_name("encoder", name, encoders)
    candidate, baseline = str(found[candidate]), str(found[baseline])
    chosen = metric_pairs(df, metric, aligner, candidate_metric, baseline_metric)
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    pairs = _pairs(df, candidate, baseline, chosen)
    segments = {cell_id: run.segments(cell_id) for c, b in pairs for cell_id in (c["cell_id"], b["cell_id"])}
    if segments:
        options.check_segments(list(segments.values()))
    for c, b in pairs:
        key = {
            "metric": c["metric"] if c["metric"] == b["metric"] else f"{c['metric']} vs {b['metric']}",
            "dataset": c["dataset"],
            "device": _device(c, b),
        }
        where = f"{key['metric']} / {key['dataset']}"
        cs, bs = segments[c["cell_id"]], segments[b["cell_id"]]
        if not same_segments(cs, bs):
            warnings.append(f"{where}: the two cells scored different segments; not compared")
            continue
        rows.append(compare_cells(run, c, b, cs, bs, options, n_resamples, seed, key))
        warnings += pair_warnings(rows[-1], c, b, cs, bs, options, where)
    if not rows:
        raise UserError(
            f"no metric x dataset has finished cells of both {candidate!r} and {baseline!r}"
            + (
                f" for metric {', '.join(sorted({m for pair in chosen for m in pair}))}"
                if metric or aligner or candidate_metric or baseline_metric
                else ""
            )
        )
    return {
        "candidate": candidate,
        "baseline": baseline,
        "quality": options.label,
        "method": canonical_method(options.method),
        "level": canonical_level(options.level),
        "human_dims": list(dict.fromkeys(df["human_dim"])),
        "test": options.test_label,
        "resampling": "; ".join(dict.fromkeys(r["resampling"] for r in rows)),
        "bootstrap_resamples": n_resamples,
        "seed": seed,
        "rows": rows,
        "warnings": list(dict.fromkeys(warnings)),
    }


def compare_cells(
    run: RunData,
    c: pd.Series,
    b: pd.Series,
    cs: Segments,
    bs: Segments,
    options: QualityOptions,
    n_resamples: int,
    seed: int,
    key: dict[str, str],
) -> dict[str, Any]:
    """One row of the comparison: candidate cell `c` against baseline cell `b` (their segments `cs`
    and `bs`, the same ones); `key` holds the row's metric, dataset and device. The difference is
    tested at the level compared: the bootstrap resamples the level's unit (options.unit), the
    permutation test (options.test) swaps segments, Williams' test is per group of the level."""
    q_c, q_b = options.value(cs), options.value(bs)
    unit = options.unit(cs)
    n_units, n_inputs = unit_count(cs, unit)
    boot = paired_from_replicates(
        q_c,
        q_b,
        run.replicates(c["cell_id"], options.statistic_key, options.value, n_resamples, seed, unit),
        run.replicates(b["cell_id"], options.statistic_key, options.value, n_resamples, seed, unit),
        n_resamples,
        seed,
    )
    perm = options.permutation(cs, bs, n_resamples, seed) if options.test == "permutation" else None
    speed = speedup(list(b["ms_per_segment_repeats"]), list(c["ms_per_segment_repeats"]))
    (model_col, _), (peak_col, _) = memory_columns(c["device"])

    def ratio(column: str) -> float:
        return float(b[column] / c[column]) if c[column] > 0 and b[column] > 0 else math.nan

    timed = not (c["imported"] or b["imported"])
    return {
        "metric": key["metric"],
        "dataset": key["dataset"],
        "device": key["device"],
        "n": len(cs),
        "quality_candidate": q_c,
        "quality_baseline": q_b,
        "retained": q_c / q_b if q_b else math.nan,
        "retained_ci": [boot.ratio_ci_low, boot.ratio_ci_high],
        "delta": boot.delta,
        "delta_ci": [boot.ci_low, boot.ci_high],
        "test": options.test_label,
        "resampling": UNIT_LABELS[unit],
        "n_units": n_units,
        "n_inputs": n_inputs,
        "unit": unit,
        "p_value": perm.p_value if perm is not None else boot.p_value,
        "p_bootstrap": boot.p_value,
        "p_permutation": perm.p_value if perm is not None else math.nan,
        "p_permutation_candidate_better": perm.p_candidate_better if perm is not None else math.nan,
        "permuted": options.permuted(perm) if perm is not None else "",
        "pearson_pooled_candidate": correlation("pearson", cs.score, cs.human),
        "pearson_pooled_baseline": correlation("pearson", bs.score, bs.human),
        **williams_section(cs, bs, options),
        "speedup": speed.value,
        "speedup_range": [speed.low, speed.high],
        "n_repeats": [len(b["ms_per_segment_repeats"]), len(c["ms_per_segment_repeats"])],
        "memory_ratio": ratio(peak_col) if timed else math.nan,
        "model_memory_ratio": ratio(model_col) if timed else math.nan,
        "lps_left_out": options.too_small(cs),
        **options.left_out(cs, bs),
    }


def williams_section(cs: Segments, bs: Segments, options: QualityOptions) -> dict[str, Any]:
    """Williams' test at the level compared (nlgbench.statistics.significance.williams_by_group):
    `williams_by_group`, and for the row `williams_t`, `p_williams` and `williams_n` when the level
    has one group (global, or one language pair), NaN otherwise; `williams_test` names it or says
    why there is none (item level; a method other than Pearson's r)."""
    level = canonical_level(options.level)
    none: dict[str, Any] = {"williams_t": math.nan, "p_williams": math.nan, "p_williams_observed_direction": math.nan}
    none |= {"williams_n": 0, "williams_by_group": []}
    if canonical_method(options.method) != "pearson":
        return {**none, "williams_test": f"n/a: Williams' test compares Pearson correlations, not {options.method}"}
    if level in WILLIAMS_NOT_AT:
        return {**none, "williams_test": f"n/a: {WILLIAMS_NOT_AT[level]}"}
    groups = williams_by_group(cs, bs, level)
    if not groups:
        return {**none, "williams_test": f"n/a: no {level} level here ({level_reason(cs, level)})"}
    over = {
        "global": "pooled segments",
        "segment": "segments, per language pair",
        "system": "system means, per language pair",
    }
    one = groups[0] if len(groups) == 1 else None
    return {
        "williams_test": f"Williams (Pearson r over {over[level]})",
        "williams_t": one["t"] if one else math.nan,
        "p_williams": one["p"] if one else math.nan,
        "p_williams_observed_direction": one["p_observed_direction"] if one else math.nan,
        "williams_n": one["n"] if one else 0,
        "williams_by_group": groups,
    }


def pair_warnings(
    row: dict[str, Any], c: pd.Series, b: pd.Series, cs: Segments, bs: Segments, options: QualityOptions, where: str
) -> list[str]:
    """The warnings of one compared pair (`where`: 'metric / dataset'): language pairs left out, an
    undefined quality with its reason, hardware or libraries that differ between the two cells."""
    warnings = []
    if row["lps_left_out"]:
        warnings.append(f"{where}: {left_out_note(options.level, row['lps_left_out'])}")
    sides = (("candidate", row["quality_candidate"], cs), ("baseline", row["quality_baseline"], bs))
    notes = {side: options.note(seg) for side, q, seg in sides if not math.isfinite(q)}
    if len(notes) == 2 and notes["candidate"] == notes["baseline"]:
        notes = {"candidate and baseline": notes["candidate"]}
    warnings += [f"{where}: {side} quality n/a: {note}" for side, note in notes.items()]
    if c["imported"] or b["imported"]:
        return warnings  # an imported cell has no hardware or libraries to check
    for side, cell in (("candidate", c), ("baseline", b)):
        if cell.get("timing_unstable", False):
            warnings.append(
                f"{where}: the {side}'s timing varies by more than 5% over its repeats (CV); "
                "rerun it on a quieter machine before comparing speed"
            )
    for field, what in (("cpu_model", "CPU"), ("gpu", "GPU"), ("versions", "library versions"), ("threads", "threads")):
        if c[field] != b[field]:
            warnings.append(
                f"{where}: {what} differ between the two cells (candidate {_show(c[field])}, "
                f"baseline {_show(b[field])}); speed and memory ratios are not like for like"
            )
    return warnings


def _show(value: Any) -> str:
    if isinstance(value, str) and value.startswith("{"):
        return ", ".join(f"{k} {v}" for k, v in json.loads(value).items())
    return str(value) if value not in ("", None) else "none"


def units_text(r: dict[str, Any]) -> str:
    """What a row's bootstrap resampled, counted: '3250 segments', '5 systems x 650 sources'."""
    if "+" in r["unit"]:
        systems, inputs = r["unit"].split("+")
        return f"{r['n_units']} {systems} x {r['n_inputs']} {inputs}"
    return f"{r['n_units']} {r['unit']}"


def _test_word(test: str) -> str:
    return "permutation" if "permutation" in test else "bootstrap"


def test_text(r: dict[str, Any]) -> str:
    """What a row's p-value tested, counted: 'bootstrap: 5 systems', or for the permutation test,
    which swaps each segment's two scores whatever the level, 'permutation: 3250 segment scores swapped'."""
    if r.get("permuted"):
        return f"permutation: {r['permuted']}"
    return f"{_test_word(r['test'])}: {units_text(r)}"


def _williams_cell(r: dict[str, Any]) -> str:
    """The Williams column: p [n], `per lp below` for several groups, `n/a` where it does not apply."""
    if r["williams_test"].startswith("n/a"):
        return fmt.UNDEFINED
    if len(r["williams_by_group"]) > 1:
        return "per lp below"
    if not math.isfinite(r["p_williams"]):
        return fmt.UNDEFINED
    return f"{fmt.p_value(r['p_williams'])} [{r['williams_n']}]"


def williams_lines(result: dict[str, Any]) -> list[str]:
    """Below the table: Williams' test per language pair (rows with several groups) and why it is n/a."""
    lines = []
    for r in result["rows"]:
        where = f"{r['metric']} / {r['dataset']} / {r['device']}"
        if r["williams_test"].startswith("n/a"):
            lines.append(f"Williams, {where}: {r['williams_test']}")
        elif len(r["williams_by_group"]) > 1:
            na = fmt.UNDEFINED
            groups = "; ".join(
                f"{g['group']} t {fmt.number(g['t'], missing=na)}, p {fmt.p_value(g['p'], missing=na)}, n {g['n']}"
                for g in r["williams_by_group"]
            )
            lines.append(f"{r['williams_test']}, {where}: {groups}")
    return [*lines, ""] if lines else []


def render(result: dict[str, Any], names: Names = DEFAULT_NAMES) -> str:
    """The readable table `compare` prints, with a line saying how to read it; encoders and metrics
    under the names the author gave (`names`; the JSON keeps the full labels)."""
    header = [
        "metric",
        "dataset",
        "device",
        "n",
        "baseline",
        "candidate",
        "retained [95% CI]",
        "delta [95% CI]",
        "p [test: units resampled]",
        "p (Williams) [n]",
        "speed-up [range]",
        "memory ratio model / peak",
    ]
    rows = []
    for r in result["rows"]:
        lo, hi = r["delta_ci"]
        retained_lo, retained_hi = r["retained_ci"]
        speed_lo, speed_hi = r["speedup_range"]
        na = fmt.UNDEFINED  # what cannot be computed; fmt.UNKNOWN ('-') for what was not measured
        delta = fmt.signed(r["delta"], missing=na) + (
            f" [{fmt.signed(lo)}, {fmt.signed(hi)}]" if math.isfinite(r["delta"]) else ""
        )
        rows.append(
            [
                names(r["metric"]),
                r["dataset"],
                r["device"],
                str(r["n"]),
                fmt.number(r["quality_baseline"], missing=na),
                fmt.number(r["quality_candidate"], missing=na),
                fmt.percent_ci(r["retained"], retained_lo, retained_hi, missing=na),
                delta,
                f"{fmt.p_value(r['p_value'], result['bootstrap_resamples'], missing=na)} [{test_text(r)}]",
                _williams_cell(r),
                fmt.times_range(r["speedup"], speed_lo, speed_hi),
                "no model"
                if NO_ENCODER in (result["candidate"], result["baseline"])
                else fmt.times(r["model_memory_ratio"])
                + (f" / {fmt.times(r['memory_ratio'])}" if math.isfinite(r["model_memory_ratio"]) else ""),
            ]
        )
    dims = "" if result["human_dims"] == [HUMAN] else f" with human dimension {', '.join(result['human_dims'])}"
    lines = [
        f"candidate {names(result['candidate'])} vs baseline {names(result['baseline'])}; "
        f"quality = {result['quality']}{dims}; "
        f"test: {result['test']}; resampled: {result['resampling']}; {result['bootstrap_resamples']} resamples, "
        f"seed {result['seed']}",
        "",
        markdown(header, rows, html=False).rstrip(),  # for the terminal
        "",
        *williams_lines(result),
        "retained = candidate / baseline quality; delta = candidate - baseline quality (both intervals from the "
        "same paired bootstrap resamples of the units named); p: the named test of delta = 0, two-sided; "
        "Williams: Pearson r at the level compared, n in brackets (per language pair below where there are "
        "several); speed-up = median baseline time / median candidate time per "
        "segment (range: min-max over all pairs of repeats); memory ratio = baseline / candidate memory, "
        "model memory (RSS growth over the post-import baseline on "
        "CPU, peak CUDA memory allocated on GPU) / process peak (peak RSS on CPU, peak CUDA memory reserved on GPU), "
        "one measurement per cell; "
        "n/a: cannot be computed (see the warnings); -: not measured (imported scores have no timing); "
        "device a / b: candidate's / baseline's.",
    ]
    left_out = (f"left out, {names(r['metric'])} / {r['dataset']}: {r['groups_left_out']}" for r in result["rows"])
    lines += [line for line in dict.fromkeys(left_out) if not line.endswith(": ")]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)
