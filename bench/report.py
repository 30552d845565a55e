"""`nlgbench report DIR`: the efficiency-quality trade-off of a run folder, for people to read.

Writes DIR/report/: runtime-vs-quality and memory-vs-quality plots per device (one panel per
metric, Pareto front drawn, baseline starred; the study's Figures 1-3), the baseline-relative
table (quality retained and speed-up per dataset and averaged; Table 3) as Markdown, LaTeX and
CSV, the correlation matrix of the measured quantities averaged over metrics (Table 4), and
an offline index.html showing all of it. A cell whose quality is undefined (constant human or
metric scores, too few segments) shows "n/a" with the reason and is left out of the plots.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from nlgbench import fmt
from nlgbench.errors import UserError, unknown_name
from nlgbench.labels import NO_ENCODER
from nlgbench.rundata import RunData, load_run
from nlgbench.stats import (GROUPING, LEVEL_ALIASES, LEVELS, METHODS, Segments, canonical_level, has_docs, has_systems,
                            left_out_note, quality, quality_note, speedup, too_small_lps)
from nlgbench.tables import markdown

QUANTITIES = {  # Table 4's measured quantities: column -> readable name
    "cpu_ms": "CPU time", "gpu_ms": "GPU time", "memory_mb": "memory", "params": "parameters",
    "disk_mb": "disk", "quality": "quality",
}


@dataclass(frozen=True)
class QualityOptions:
    """Which correlation measures quality: method x level (see nlgbench.stats; the level's old
    names `pooled` and `lp_mean` are accepted)."""

    method: str = "pearson"
    level: str = "global"
    threshold: float = 0.0

    def check(self) -> None:
        if self.method not in METHODS:
            raise unknown_name("correlation method", self.method, METHODS)
        try:
            canonical_level(self.level)
        except ValueError:
            raise unknown_name("correlation level", self.level, (*LEVELS, *LEVEL_ALIASES)) from None
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise UserError(f"--threshold must be a number >= 0 (kendall_like's human score difference), got {self.threshold}")

    def check_segments(self, segments: Sequence[Segments]) -> None:
        """The system level needs system names and the item level document ids: one line when
        none of the cells has them."""
        level = canonical_level(self.level)
        if level == "system" and not any(has_systems(seg) for seg in segments):
            raise UserError("system-level correlation needs datasets with system names (e.g. wmt21); "
                            "these cells have none (use --level global or segment)")
        if level == "item" and not any(has_docs(seg) for seg in segments):
            raise UserError("item-level correlation needs datasets with document ids (a doc_id field); "
                            "these cells have none (use --level global or segment)")

    @property
    def label(self) -> str:
        """E.g. 'kendall (segment, by lp)', 'pearson (global)': the method, the level and its grouping."""
        level = canonical_level(self.level)
        grouping = "" if GROUPING[level] == "none" else f", by {GROUPING[level]}"
        return f"{self.method.replace('_', '-')} ({level}{grouping})"


def with_quality(run: RunData, options: QualityOptions) -> pd.DataFrame:
    """The run's cells with a `quality` column recomputed from segment scores, `lps_left_out`:
    the language pairs too small for the level (see nlgbench.stats.too_small_lps), and
    `quality_note`: why quality is undefined ('' when it is defined)."""
    options.check()
    df = run.cells.copy()
    segments = [run.segments(c) for c in df["cell_id"]]
    options.check_segments(segments)
    df["quality"] = [quality(seg, options.method, options.level, options.threshold) for seg in segments]
    df["lps_left_out"] = [tuple(too_small_lps(seg, options.level)) for seg in segments]
    df["quality_note"] = [quality_note(seg, options.method, options.level, options.threshold) if not math.isfinite(q)
                          else "" for seg, q in zip(segments, df["quality"])]
    return df


def left_out_notes(df: pd.DataFrame, level: str) -> list[str]:
    """Per dataset, the line naming the language pairs its cells leave out of the level's mean."""
    by_dataset = {d: lps for d, lps in zip(df["dataset"], df["lps_left_out"]) if lps}
    return [f"{dataset}: {left_out_note(level, lps)}" for dataset, lps in by_dataset.items()]


def undefined_quality_notes(df: pd.DataFrame) -> list[str]:
    """One line per cell whose quality is undefined, with the reason (these are not plotted)."""
    return [f"quality n/a for {r['metric']} / {r['encoder']} / {r['dataset']} / {r['device']}: {r['quality_note']}"
            for _, r in df.iterrows() if not math.isfinite(r["quality"])]


def pareto_front(times: Sequence[float], qualities: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats (as fast or faster and as good or better,
    strictly better in one), ordered by time."""
    pts = [(t, q, i) for i, (t, q) in enumerate(zip(times, qualities)) if math.isfinite(t) and math.isfinite(q)]
    front = []
    for t, q, i in pts:
        dominated = any((t2 <= t and q2 >= q) and (t2 < t or q2 > q) for t2, q2, _ in pts)
        if not dominated:
            front.append((t, i))
    return [i for _, i in sorted(front)]


def choose_baselines(df: pd.DataFrame, baseline: str | None) -> dict[str, str]:
    """The baseline encoder of each metric: the one asked for, else the one with the most parameters."""
    out = {}
    for metric, group in df.groupby("metric", sort=False):
        encoders = list(dict.fromkeys(group["encoder"]))
        if baseline is not None:
            if baseline in encoders:
                out[metric] = baseline
            continue
        timed = group.dropna(subset=["params"])
        out[metric] = str(timed.sort_values("params", ascending=False)["encoder"].iloc[0]) if len(timed) else encoders[0]
    if baseline is not None and not out:
        raise unknown_name("baseline encoder", baseline, sorted(set(df["encoder"])))
    return out


def relative_table(df: pd.DataFrame, baselines: dict[str, str]) -> pd.DataFrame:
    """Table 3: per metric x encoder x device, per dataset and the mean over datasets, quality,
    quality retained (quality / baseline quality) and speed-up (`nlgbench.stats.speedup`: median
    baseline time / median time)."""
    rows = []
    for (metric, device), group in df.groupby(["metric", "device"], sort=False):
        if metric not in baselines:
            continue
        base = group[group["encoder"] == baselines[metric]].set_index("dataset")
        for encoder, enc_rows in group.groupby("encoder", sort=False):
            per = []
            for _, r in enc_rows.iterrows():
                b = base.loc[r["dataset"]] if r["dataset"] in base.index else None
                retained = r["quality"] / b["quality"] if b is not None else np.nan
                speed = speedup(b["ms_per_segment_repeats"], r["ms_per_segment_repeats"]).value if b is not None else np.nan
                per.append({"metric": metric, "encoder": encoder, "device": device, "dataset": r["dataset"],
                            "baseline": baselines[metric], "quality": r["quality"], "retained": retained,
                            "ms_per_segment": r["ms_per_segment"], "speedup": speed})
            rows += per
            rows.append({"metric": metric, "encoder": encoder, "device": device, "dataset": "mean",
                         "baseline": baselines[metric],
                         **{k: float(np.nanmean([p[k] for p in per])) if any(np.isfinite(p[k]) for p in per) else np.nan
                            for k in ("quality", "retained", "ms_per_segment", "speedup")}})
    return pd.DataFrame(rows)


def per_encoder(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4's inputs: per metric x encoder, the quantities averaged over datasets."""
    rows = []
    for (metric, encoder), g in df.groupby(["metric", "encoder"], sort=False):
        cpu, gpu = g[g["device"] == "cpu"], g[g["device"] == "cuda"]
        rows.append({
            "metric": metric, "encoder": encoder,
            "cpu_ms": cpu["ms_per_segment"].mean() if len(cpu) else np.nan,
            "gpu_ms": gpu["ms_per_segment"].mean() if len(gpu) else np.nan,
            "memory_mb": cpu["peak_rss_mb"].mean() if len(cpu) else gpu["cuda_peak_allocated_mb"].mean(),
            "params": g["params"].mean(), "disk_mb": g["disk_mb"].mean(), "quality": g["quality"].mean(),
        })
    return pd.DataFrame(rows)


def quantity_correlations(df: pd.DataFrame, min_encoders: int = 3) -> tuple[pd.DataFrame, int]:
    """Table 4: Pearson correlation between the measured quantities across encoders, computed per
    metric (metrics with at least `min_encoders` encoders) and averaged over metrics."""
    enc = per_encoder(df)
    mats = []
    for _, g in enc.groupby("metric", sort=False):
        if len(g) >= min_encoders:
            mats.append(g[list(QUANTITIES)].astype(float).corr(method="pearson", min_periods=min_encoders).to_numpy())
    names = list(QUANTITIES.values())
    if not mats:
        return pd.DataFrame(np.nan, index=names, columns=names), 0
    with np.errstate(invalid="ignore"), _quiet():
        mean = np.nanmean(np.stack(mats), axis=0)
    return pd.DataFrame(mean, index=names, columns=names), len(mats)


class _quiet:
    """Silence numpy's 'mean of empty slice' warning (an all-NaN cell stays NaN, which is what we want)."""

    def __enter__(self) -> None:
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)


# ----------------------------------------------------------------------------- plots


def plot_tradeoff(df: pd.DataFrame, device: str, x: str, xlabel: str, quality_label: str,
                  baselines: dict[str, str], path: Path, title: str) -> Path | None:
    """One panel per metric: each encoder at (x averaged over datasets, quality averaged), log x,
    Pareto front (lower x, higher quality) as a dashed step line, the baseline starred. Metrics
    without an encoder (lexical baselines: BLEU, chrF, ROUGE) get no panel of their own but appear
    in every panel as grey diamonds, the cheap anchor. Cells without a positive x or a defined
    quality are left out; None (no file) when nothing is left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    data = df[(df["device"] == device) & (df[x] > 0) & np.isfinite(df["quality"].astype(float))]
    is_anchor = data["encoder"] == NO_ENCODER
    if is_anchor.all():
        is_anchor = ~is_anchor  # only lexical metrics: each gets its own panel
    anchors = data[is_anchor].groupby("metric", sort=False)[[x, "quality"]].mean().reset_index()
    data = data[~is_anchor]
    metrics = list(dict.fromkeys(data["metric"]))
    if not metrics:
        return None
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.2 * nrows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        g = data[data["metric"] == metric].groupby("encoder", sort=False)[[x, "quality"]].mean().reset_index()
        xs, qs = g[x].to_numpy(float), g["quality"].to_numpy(float)
        ax.scatter(xs, qs, s=36, color="tab:blue", zorder=3)
        for k, a in anchors.iterrows():
            ax.scatter([a[x]], [a["quality"]], marker="D", s=30, color="tab:gray", zorder=3,
                       label="lexical baseline" if k == 0 else None)
            ax.annotate(str(a["metric"]), (a[x], a["quality"]), textcoords="offset points", xytext=(4, -10),
                        fontsize=7, color="tab:gray")
        span = float(np.nanmax(qs) - np.nanmin(qs)) or 1.0
        placed: list[tuple[float, float, int]] = []
        for xi, qi, name in sorted(zip(xs, qs, g["encoder"]), key=lambda t: -t[1]):  # top first, lower ones move down
            dy = 4  # points: move the label down while it would sit on a nearby point's label
            while any(abs(qi - pq) < 0.05 * span and abs(np.log10(xi / px)) < 0.6 and pdy == dy for px, pq, pdy in placed):
                dy -= 10
            placed.append((xi, qi, dy))
            ax.annotate(_short(name), (xi, qi), textcoords="offset points", xytext=(4, dy), fontsize=7)
        front = pareto_front(xs, qs)
        if len(front) > 1:
            ax.step(xs[front], qs[front], where="post", linestyle="--", color="tab:orange", label="Pareto front", zorder=2)
        is_base = (g["encoder"] == baselines.get(metric)).to_numpy()
        if is_base.any():
            ax.scatter(xs[is_base], qs[is_base], marker="*", s=220, color="tab:red", label="baseline", zorder=4)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.margins(x=0.3, y=0.15)
        ax.set_title(metric)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(quality_label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.suptitle(f"{title} (each point: mean over datasets)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(name: str) -> str:
    return name.split("/")[-1]


# ----------------------------------------------------------------------------- tables


def relative_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Table 3 as text: 'n/a' for an undefined quality (and so its retained share), '-' for
    what is unknown (no baseline cell, no timing)."""
    header = ["metric", "encoder", "device", "dataset", "quality", "retained", "ms/seg", "speed-up"]
    rows = [[r["metric"], r["encoder"], r["device"], r["dataset"], fmt.number(r["quality"], missing=fmt.UNDEFINED),
             fmt.percent(r["retained"], missing=fmt.UNDEFINED if not math.isfinite(r["quality"]) else fmt.UNKNOWN),
             fmt.number(r["ms_per_segment"], 1), fmt.times(r["speedup"])] for _, r in table.iterrows()]
    return header, rows


def latex(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 4) -> str:
    """A booktabs tabular; the first `text_columns` columns left-aligned, the rest right-aligned."""
    special = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "_": "\\_", "#": "\\#", "$": "\\$",
               "{": "\\{", "}": "\\}"}

    def esc(text: str) -> str:
        return "".join(special.get(ch, ch) for ch in text)

    lines = ["\\begin{tabular}{" + "l" * text_columns + "r" * (len(header) - text_columns) + "}", "\\toprule",
             " & ".join(esc(h) for h in header) + " \\\\", "\\midrule"]
    lines += [" & ".join(esc(c) for c in r) + " \\\\" for r in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ----------------------------------------------------------------------------- the report


def write_report(folder: Path, baseline: str | None = None, options: QualityOptions = QualityOptions(),
                 human: str | None = None) -> Path:
    """Write DIR/report/ and return the path of its index.html; `human` names the human dimension
    (data with several), default each cell's first."""
    run = load_run(folder, human)
    df = with_quality(run, options)
    out = folder / "report"
    out.mkdir(exist_ok=True)
    baselines = choose_baselines(df, baseline)
    timed = df[~df["imported"]]
    figures = []
    for device in dict.fromkeys(timed["device"]):
        mem = "peak_rss_mb" if device == "cpu" else "cuda_peak_allocated_mb"
        mlabel = "peak RSS MB (log)" if device == "cpu" else "peak CUDA memory allocated MB (log)"
        for kind, x, xlabel in (("Runtime", "ms_per_segment", "ms per segment (median of repeats, log)"),
                                ("Memory", mem, mlabel)):
            title = f"{kind} vs quality, {device}"
            figure = plot_tradeoff(timed, device, x, xlabel, options.label, baselines,
                                   out / f"{kind.lower()}_{device}.png", title)
            if figure is not None:
                figures.append((title, figure))

    rel = relative_table(df, baselines)
    rel.to_csv(out / "relative.csv", index=False)
    header, rows = relative_rows(rel)
    (out / "relative.md").write_text(markdown(header, rows), encoding="utf-8")
    (out / "relative.tex").write_text(latex(header, rows), encoding="utf-8")

    corr, n_metrics = quantity_correlations(df)
    corr.to_csv(out / "quantities.csv")
    cheader = ["", *corr.columns]
    crows = [[name, *(fmt.number(v, 2) for v in corr.loc[name])] for name in corr.index]
    (out / "quantities.md").write_text(markdown(cheader, crows), encoding="utf-8")
    (out / "quantities.tex").write_text(latex(cheader, crows, text_columns=1), encoding="utf-8")

    enc = per_encoder(df)
    eheader = ["metric", "encoder", "CPU ms/seg", "GPU ms/seg", "memory MB", "params (M)", "disk MB", "quality"]
    erows = [[r["metric"], r["encoder"], fmt.number(r["cpu_ms"], 1), fmt.number(r["gpu_ms"], 1), fmt.number(r["memory_mb"], 0),
              fmt.number(r["params"] / 1e6, 1), fmt.number(r["disk_mb"], 1), fmt.number(r["quality"], missing=fmt.UNDEFINED)]
             for _, r in enc.iterrows()]

    env = sorted({(c, g) for c, g in zip(df["cpu_model"], df["gpu"])})
    machine = "; ".join(f"{c}" + (f", GPU {g}" if g else "") for c, g in env if c) or "unknown"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>nlgbench report: {html.escape(folder.name)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
        "td:first-child,td:nth-child(2),th{text-align:left}caption{text-align:left;font-weight:bold}"
        "img{max-width:100%;border:1px solid #ddd}</style></head><body>",
        f"<h1>nlgbench report: {html.escape(folder.name)}</h1>",
        f"<p>{len(df)} finished cells; quality = {html.escape(options.label)} with human judgments "
        f"({html.escape(', '.join(dict.fromkeys(df['human_dim'])))}); "
        f"baselines: {html.escape(', '.join(f'{m}: {e}' for m, e in baselines.items()))}. Machine: {html.escape(machine)}.</p>",
        *[f"<p>{html.escape(note)}</p>" for note in left_out_notes(df, options.level) + undefined_quality_notes(df)],
        "<h2>Trade-off plots</h2>",
        *([] if figures else ["<p>No plot: no measured cell has a defined quality.</p>"]),
        *[f"<figure><img src='{p.name}' alt='{html.escape(t)}'><figcaption>{html.escape(t)}</figcaption></figure>" for t, p in figures],
        "<h2>Relative to the baseline (quality retained, speed-up)</h2>",
        "<p>Files: <a href='relative.md'>Markdown</a>, <a href='relative.tex'>LaTeX</a>, <a href='relative.csv'>CSV</a>.</p>",
        html_table(header, rows, "Quality retained and speed-up per dataset and the mean over datasets"),
        "<h2>Per encoder, averaged over datasets</h2>",
        html_table(eheader, erows, "Measured quantities"),
        "<h2>Correlation of the measured quantities</h2>",
        f"<p>Pearson correlation across encoders, per metric with at least 3 encoders ({n_metrics} here), averaged over "
        "metrics; '-' where a quantity was not measured (e.g. no GPU cells). Files: <a href='quantities.md'>Markdown</a>, "
        "<a href='quantities.tex'>LaTeX</a>, <a href='quantities.csv'>CSV</a>.</p>",
        html_table(cheader, crows, "Correlation matrix of measured quantities"),
        "</body></html>",
    ]
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return index
