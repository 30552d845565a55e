"""`nlgbench report DIR`: the efficiency-quality trade-off of a run folder, for people to read and
for papers to print.

Writes DIR/report/ (or `--out`):

- per device and dataset, runtime-, model-memory- and peak-memory-vs-quality figures (PNG, PDF,
  SVG; `--format`) at a paper's column width (`--column`, `--figure-width`): one panel per metric,
  every encoder in its own colour and marker throughout, the 95% bootstrap interval of each quality
  as a vertical bar, the timed repeats' spread as a horizontal bar, the Pareto front, the baseline
  ringed, metrics without a model (chrF, sentBLEU, ROUGE) as grey diamonds in every panel, labels
  covering nothing; a figure of the mean over datasets only for datasets of one kind of human score
  (`score_type`: DA, MQM, a named dimension), titled as such; each figure's caption in index.html,
  and the kinds `--figures` names (runtime by default) in figures.tex, one LaTeX `figure` float per
  figure (nlgbench.reporting.figures.drawing);
- the trade-off table (`tradeoff.{md,tex,csv}`): per metric x dataset x device, each encoder's and
  each model-free metric's quality with its interval, quality retained with its paired-bootstrap
  interval, speed-up with its range and the p-value of the chosen test against the baseline
  (`--baseline`: an encoder, or METRIC[:ENCODER] for one reference of all), the numbers
  `nlgbench compare` prints;
- the baseline-relative table (`relative.{md,csv}`, quality retained and speed-up per dataset, with a
  mean per kind of human score where there are several datasets of it; the study's Table 3), the
  correlation matrix of the measured quantities, each r with n, the encoders behind it, and its 95%
  Fisher z interval (`quantities.*`; Table 4; nlgbench.reporting.quantities_table), and an offline
  index.html showing all of it, titled with the sweep spec's name and saying when, with which
  versions, on which machine and with which threads and batch sizes the cells ran
  (nlgbench.reporting.runinfo). Every table's note (the .md's last line, the .tex's % lines,
  index.html) and the CSVs' columns where rows carry a quality name the human dimension, the level
  and method, the unit resampled and the test;
- `cells.jsonl` and `metric_scores.csv` (nlgbench.runs.rundata.write_published), `run.json`
  (nlgbench.runs.provenance: the spec's name, when each cell was recorded): what report and compare
  need to run again from this folder alone, without human scores or texts (each cell's data
  warnings included, so the page's "Warnings" section is the same on a fresh clone).

A cell whose quality is undefined (constant human or metric scores, too few segments) shows "n/a"
with the reason and is left out of the plots.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nlgbench.core.labels import DEFAULT_NAMES, Names
from nlgbench.core.signature import recorded_signature
from nlgbench.foundations.files import write_atomic
from nlgbench.reporting.compare import select_metrics
from nlgbench.reporting.figures.drawing import FigureFile, write_figures
from nlgbench.reporting.figures.style import DEFAULT_FIGURES, FigureOptions
from nlgbench.reporting.markup import html_table, markdown, markdown_text
from nlgbench.reporting.published import metric_names
from nlgbench.reporting.quality import DEFAULT_QUALITY, QualityOptions
from nlgbench.reporting.quantities_table import quantity_correlations, quantity_csv, quantity_note, quantity_rows
from nlgbench.reporting.relative_table import (
    QualityIntervals,
    Reference,
    choose_baselines,
    human_words,
    left_out_notes,
    own_encoders,
    per_encoder_rows,
    reference_name,
    relative_note,
    relative_rows,
    relative_table,
    resampling_words,
    test_words,
    undefined_quality_notes,
    with_energy,
    with_quality,
)
from nlgbench.reporting.runinfo import run_info
from nlgbench.reporting.tex_files import preview_document, quantities_latex, tradeoff_latex
from nlgbench.reporting.tradeoff_table import tradeoff_note, tradeoff_rows, tradeoff_table
from nlgbench.reporting.webpage import SORT_SCRIPT, STYLE, figures_html, run_html, without_empty_columns
from nlgbench.runs.folder import check_links, own_folder, report_dir
from nlgbench.runs.provenance import read_provenance, write_provenance
from nlgbench.runs.rundata import RunData, write_published
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Table:
    """One of the report's tables as text, and the note printed with it ('' for none)."""

    header: list[str]
    rows: list[list[str]]
    note: str = ""


def write_report(
    folder: Path,
    baseline: str | None = None,
    options: QualityOptions = DEFAULT_QUALITY,
    human: str | None = None,
    metric: str | None = None,
    aligner: str | None = None,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    figure_options: FigureOptions = DEFAULT_FIGURES,
    labels: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
) -> Path:
    """Write DIR/report/ (or `out_dir`) and return the path of its index.html; `baseline` is an
    encoder label or METRIC[:ENCODER] (`choose_baselines`); `human` names the human dimension
    (data with several), default each cell's first; `metric` and `aligner` select metrics as
    `nlgbench.reporting.compare.select_metrics`; `figure_options` the figures' width, formats and
    the kinds figures.tex takes; `labels` the names to show for encoders and metrics (`--label`),
    over the specs' `labels:` maps, over the metrics' published spellings (BERTScore, chrF)."""
    figure_options.check()
    run = RunData.open(folder, human)
    picked = select_metrics(run.cells, metric, aligner)
    options.check()
    cells = run.cells if picked is None else run.cells[run.cells["metric"].isin(picked)]
    df = with_quality(run, options, cells)
    check_links(folder)
    out = own_folder(report_dir(folder) if out_dir is None else out_dir)
    baselines = choose_baselines(df, baseline)
    names = Names({**metric_names(df["metric"]), **read_provenance(run).labels, **(labels or {})})
    names.check([*df["encoder"], *df["metric"]], "--label")
    intervals = QualityIntervals(run, options, n_resamples, seed)
    figures = write_figures(df[~df["imported"]], out, options, baselines, intervals, figure_options, names)
    trade = write_tradeoff(out, run, df, baselines, options, n_resamples, seed, names)
    relative = write_relative(out, df, own_encoders(baselines), options, names)
    quantities = write_quantities(out, df, f"{options.label}, against {human_words(df)}")
    write_atomic(out / "preview.tex", preview_document())
    write_published(run, out)
    write_provenance(run, out)
    index = out / "index.html"
    page = index_html(
        folder, run, df, options, baselines, figures, trade, relative, quantities, n_resamples, seed, names
    )
    write_atomic(index, page)
    return index


def write_tradeoff(
    out: Path,
    run: RunData,
    df: pd.DataFrame,
    baselines: dict[str, Reference],
    options: QualityOptions,
    n_resamples: int,
    seed: int,
    names: Names = DEFAULT_NAMES,
) -> Table:
    """tradeoff.{csv,md,tex}: the trade-off table (`nlgbench.reporting.tradeoff_table.tradeoff_table`);
    the CSV with full labels, the others with `names`."""
    trade = tradeoff_table(run, df, baselines, options, n_resamples, seed)
    write_atomic(out / "tradeoff.csv", trade.to_csv(index=False))
    header, rows = tradeoff_rows(trade, n_resamples, names)
    note = tradeoff_note(trade, options, n_resamples, seed)
    write_atomic(out / "tradeoff.md", markdown(header, rows) + f"\n{markdown_text(note)}\n")
    write_atomic(out / "tradeoff.tex", tradeoff_latex(trade, note, n_resamples, names))
    return Table(header, rows, note)


def write_relative(
    out: Path,
    df: pd.DataFrame,
    baselines: dict[str, str],
    options: QualityOptions,
    names: Names = DEFAULT_NAMES,
) -> Table:
    """relative.{csv,md}: Table 3, quality retained and speed-up against each metric's baseline
    encoder, with the means over datasets of one kind of human score; the CSV with full labels, the
    Markdown with `names`. No LaTeX float: the trade-off table holds its numbers with intervals (an
    earlier report's relative.tex is removed)."""
    rel = relative_table(df, baselines, options)
    write_atomic(out / "relative.csv", rel.to_csv(index=False))
    (out / "relative.tex").unlink(missing_ok=True)
    header, rows = relative_rows(rel, names)
    means = bool(len(rel)) and bool(rel["dataset"].astype(str).str.startswith("mean").any())
    note = relative_note(options.label, human_words(df), means)
    write_atomic(out / "relative.md", markdown(header, rows) + f"\n{markdown_text(note)}\n")
    return Table(header, rows, note)


def write_quantities(out: Path, df: pd.DataFrame, quality: str) -> Table:
    """quantities.{csv,md,tex}: Table 4, the correlation of the measured quantities, each r with its n
    and 95% interval (`nlgbench.reporting.quantities_table`); `quality` names what its quality column(s)
    hold. A table with no row is not written (an earlier report's files removed): its note says why."""
    matrix = quantity_correlations(df)
    (out / "quantities_n.csv").unlink(missing_ok=True)  # older reports' n summed over metrics: now in the CSV
    note = quantity_note(matrix, quality)
    header, rows = quantity_rows(matrix)
    if not rows:
        for ext in ("csv", "md", "tex"):
            (out / f"quantities.{ext}").unlink(missing_ok=True)
        return Table([], [], note)
    write_atomic(out / "quantities.csv", quantity_csv(matrix).to_csv(index=False))
    write_atomic(out / "quantities.md", markdown(header, rows) + f"\n{markdown_text(note)}\n")
    write_atomic(out / "quantities.tex", quantities_latex(matrix, note))
    return Table(header, rows, note)


def summary_html(
    run: RunData,
    df: pd.DataFrame,
    options: QualityOptions,
    baselines: dict[str, Reference],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    names: Names = DEFAULT_NAMES,
) -> str:
    """index.html's first paragraph: the cells, the quality, the human scores, what the intervals and
    the test resample, the baselines, where the cells were read from (the machine: `run_html`)."""
    kinds = ", ".join(f"{d}: {k}" for d, k in dict(zip(df["dataset"], df["score_type"], strict=True)).items())
    refs = ", ".join(f"{names(m)}: {reference_name(r.metric, r.encoder, m, names)}" for m, r in baselines.items())
    return (
        f"<p>{len(df)} finished cells; quality = {html.escape(options.label)} with human judgments "
        f"({html.escape(', '.join(dict.fromkeys(df['human_dim'])))}); kinds of human score: {html.escape(kinds)}; "
        f"95% percentile bootstrap intervals (figures, trade-off table) resampling "
        f"{html.escape(resampling_words(run, options, df))} ({n_resamples} resamples, seed {seed}); "
        f"p against the baseline (trade-off table): {html.escape(test_words(options))}; "
        f"baselines: {html.escape(refs)}. "
        f"Read from {html.escape(run.source.name if run.source else 'results.sqlite')}.</p>"
    )


def unstable_timing_notes(run: RunData, cell_ids: Iterable[str]) -> list[str]:
    """A note naming the reported cells whose timing varies by more than 5% over the repeats (CV;
    results.csv column `timing_unstable`), with the advice to rerun them; none where no cell does."""
    labels = [run.results[c].label for c in dict.fromkeys(cell_ids) if (t := run.results[c].timing) and t.unstable]
    if not labels:
        return []
    return [
        f"Timing varies by more than 5% over the repeats (CV) in {len(labels)} cell(s): {', '.join(labels)}. "
        "Rerun them on a quieter machine before comparing their speed."
    ]


def warnings_html(run: RunData, cell_ids: Iterable[str]) -> list[str]:
    """index.html's "Warnings" section: each reported cell's data warnings (result.json `warnings`),
    cell label -> warning; nothing where no cell has any."""
    rows = [[run.results[c].label, w] for c in dict.fromkeys(cell_ids) for w in run.results[c].warnings]
    if not rows:
        return []
    return [
        "<h2>Warnings</h2>",
        "<p>What the run warned about the data behind these cells' figures (result.json <code>warnings</code>, "
        "results.csv column <code>warnings</code>).</p>",
        html_table(["cell", "warning"], rows, "Data warnings per cell", 2),
    ]


def signatures_html(run: RunData, cell_ids: Iterable[str]) -> list[str]:
    """index.html's "Signatures" section: each reported cell's reproducibility signature (result.json
    scorer `signature`, results.csv column `signature`); nothing where no cell has one (imported
    cells, results written before signatures)."""
    signed = {
        c: recorded_signature(run.results[c].config.metric, run.results[c].scorer) for c in dict.fromkeys(cell_ids)
    }
    rows = [[run.results[c].label, str(sig)] for c, sig in signed.items() if sig]
    if not rows:
        return []
    return [
        "<h2>Signatures</h2>",
        "<p>What produced each cell's scores: metric, encoder@revision, layer, variant, options, use of several "
        'references, library versions (README "Signatures"). Equal signatures, comparable scores.</p>',
        html_table(["cell", "signature"], rows, "Reproducibility signature per cell", 2),
    ]


def index_html(
    folder: Path,
    run: RunData,
    df: pd.DataFrame,
    options: QualityOptions,
    baselines: dict[str, Reference],
    figures: list[FigureFile],
    trade: Table,
    relative: Table,
    quantities: Table,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    names: Names = DEFAULT_NAMES,
) -> str:
    """The offline index.html: the run (title from the sweep spec's name, dates, versions, machine,
    batch sizes: `nlgbench.reporting.runinfo`), notes, every figure and every table, with links to
    their files."""
    encoders = Table(*without_empty_columns(per_encoder_rows(with_energy(run, df), names)))
    cell_ids = list(dict.fromkeys(df["cell_id"]))
    source = run.source.name if run.source else "results.sqlite"
    info = run_info(folder, [run.results[c] for c in cell_ids], read_provenance(run), source)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>nlgbench report: {html.escape(info.title)}</title>",
        STYLE + "</head><body>",
        f"<h1>nlgbench report: {html.escape(info.title)}</h1>",
        run_html(info),
        summary_html(run, df, options, baselines, n_resamples, seed, names),
        *[
            f"<p>{html.escape(note)}</p>"
            for note in left_out_notes(df, options.level)
            + undefined_quality_notes(df)
            + unstable_timing_notes(run, df["cell_id"])
        ],
        *warnings_html(run, df["cell_id"]),
        "<h2>Trade-off plots</h2>",
        "<p>Per device and dataset; a mean over datasets only within one kind of human score. Memory: model memory "
        "(RSS growth over the post-import baseline on CPU, peak CUDA memory allocated on GPU) beside the process peak, "
        "in MiB. A click on a figure opens its full-size file (the PDF where one is written).</p>",
        *([] if figures else ["<p>No plot: no measured cell has a defined quality.</p>"]),
        *figures_html(figures),
        "<h2>Trade-off table</h2>",
        f"<p>{html.escape(trade.note)}. Files: <a href='tradeoff.md'>Markdown</a>, <a href='tradeoff.tex'>LaTeX</a>, "
        "<a href='tradeoff.csv'>CSV</a>.</p>",
        html_table(
            trade.header, trade.rows, "Quality retained, speed-up and significance against the baseline encoder", 4
        ),
        "<h2>Relative to the baseline (quality retained, speed-up)</h2>",
        f"<p>{html.escape(relative.note)} Files: <a href='relative.md'>Markdown</a>, "
        "<a href='relative.csv'>CSV</a>.</p>",
        html_table(
            relative.header,
            relative.rows,
            "Quality retained and speed-up per dataset (and the mean per kind of human score)",
            4,
        ),
        "<h2>Per encoder, averaged over datasets</h2>",
        f"<p>quality = {html.escape(options.label)}, against {html.escape(human_words(df))}.</p>",
        html_table(encoders.header, encoders.rows, "Measured quantities"),
        "<h2>Correlation of the measured quantities</h2>",
        *(
            [
                f"<p>{html.escape(quantities.note)} Files: <a href='quantities.md'>Markdown</a>, "
                "<a href='quantities.tex'>LaTeX</a>, <a href='quantities.csv'>CSV</a>.</p>",
                html_table(quantities.header, quantities.rows, "Correlation matrix of measured quantities", 1),
            ]
            if quantities.rows
            else [f"<p>No table written (quantities.*): {html.escape(quantities.note)}</p>"]
        ),
        *signatures_html(run, df["cell_id"]),
        SORT_SCRIPT,
        "</body></html>",
    ]
    return "\n".join(parts)
