"""`nlgbench report` (plots and tables of a run folder) and `nlgbench compare` (candidate vs baseline)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nlgbench.core.labels import Names, label_option
from nlgbench.core.result import json_safe
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.compare import check_bootstrap, compare, render
from nlgbench.reporting.figures.style import COLUMN_WIDTHS, DEFAULT_FIGURES, FigureOptions
from nlgbench.reporting.quality import QualityOptions
from nlgbench.reporting.report import write_report
from nlgbench.runs.provenance import read_provenance
from nlgbench.runs.rundata import RunData


def cmd_report(args: argparse.Namespace) -> int:
    index = write_report(
        _run_folder(args.dir),
        baseline=args.baseline,
        options=_quality_options(args),
        human=args.human,
        metric=args.metric,
        aligner=args.aligner,
        figure_options=_figure_options(args),
        labels=_labels(args),
        out_dir=Path(args.out) if args.out else None,
    )
    print(f"report: {index}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    check_bootstrap(args.resamples, args.seed)  # before the run folder is read
    labels = _labels(args)
    run = RunData.open(_run_folder(args.dir), args.human)
    names = Names({**read_provenance(run).labels, **labels})
    names.check([*run.cells["encoder"], *run.cells["metric"]], "--label")  # report's rule, before any bootstrap
    result = compare(
        run,
        args.candidate,
        args.baseline,
        args.metric,
        _quality_options(args),
        n_resamples=args.resamples,
        seed=args.seed,
        aligner=args.aligner,
        candidate_metric=args.candidate_metric,
        baseline_metric=args.baseline_metric,
        names=names,
    )
    # undefined values as null; the JSON keeps the full labels
    print(json.dumps(json_safe(result), indent=2) if args.json else render(result, names))
    return 0


def _quality_options(args: argparse.Namespace) -> QualityOptions:
    options = QualityOptions(
        method=args.correlation,
        level=args.level,
        threshold=args.threshold,
        resample=args.resample,
        test=getattr(args, "test", "bootstrap"),
        convention=args.convention,
        perm_test=getattr(args, "perm_test", "scores"),
    )
    options.check()
    return options


def _figure_options(args: argparse.Namespace) -> FigureOptions:
    """--column or --figure-width, --format, --titles and --figures, checked before the run folder is read."""
    width = COLUMN_WIDTHS[args.column] if args.column else args.figure_width
    formats = tuple(f.strip().lower() for f in str(args.format).split(",") if f.strip())
    kinds = tuple(f.strip().lower() for f in str(args.figures).split(",") if f.strip())
    options = FigureOptions(DEFAULT_FIGURES.width if width is None else width, formats, args.titles, kinds)
    options.check()
    return options


def _labels(args: argparse.Namespace) -> dict[str, str]:
    """Every `--label FULL=SHORT`, checked before the run folder is read; one label given two names
    is refused (the last would win unseen)."""
    labels: dict[str, str] = {}
    for text in args.label or []:
        full, short = label_option(text)
        if labels.setdefault(full, short) != short:
            raise UserError(f"--label: {full!r} is given two names, {labels[full]!r} and {short!r}")
    return labels


def _run_folder(raw: str) -> Path:
    folder = Path(raw)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    return folder
