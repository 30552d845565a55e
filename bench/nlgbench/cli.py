"""The `nlgbench` command line. Bad input: one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    from nlgbench.reporting.report import QualityOptions


def _cmd_run(args: argparse.Namespace) -> int:
    from nlgbench.core.executor_options import with_cli
    from nlgbench.execution.sweep import run as run_sweep
    from nlgbench.core.spec import load_spec

    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else Path("reports") / spec.name
    executor = with_cli(spec.executor, kind=args.executor, partition=args.partition, gpus_per_cell=args.gpus_per_cell,
                        cpus_per_cell=args.cpus_per_cell, mem=args.mem, time=args.time, max_parallel=args.max_parallel,
                        slurm_args=args.slurm_arg, poll_seconds=args.poll_seconds)
    if args.cancel_on_exit and not executor.on_slurm:
        raise UserError("--cancel-on-exit is for --executor slurm (a local sweep's workers always stop with it)")
    if args.dry_run:
        from nlgbench.core.leakage import guard_spec

        guard_spec(spec)  # as `run` does (nlgbench.execution.sweep.run): no student evaluated on its training data
        from nlgbench.encoders.registry import resolve_source
        from nlgbench.encoders.hfcache import local_snapshot
        from nlgbench.execution.local import check_datasets

        # `run`'s checks before any cell, on the user's own data files (catalogue data is not downloaded here)
        spec, _ = check_datasets(spec, catalogue=False)
        cells = spec.cells()
        for cell in cells:
            print(f"{cell.cell_id}  {cell.label}")
        missing = sorted({resolve_source(name) for name in spec.model_names() if local_snapshot(resolve_source(name)) is None})
        print(f"{len(cells)} cells; models not in the local cache: {', '.join(missing) if missing else 'none'}")
        if executor.on_slurm:
            from nlgbench.execution.slurm import dry_run_text

            print(dry_run_text(spec, out, executor))
        return 0
    results = run_sweep(spec, out, force=args.force, wait=args.wait, executor=executor,
                        cancel_on_exit=args.cancel_on_exit)
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)} ok, {len(bad)} not ok; results: {out / 'results.csv'}"
          + ("; run the same command again to resubmit the cells that are not ok" if bad and executor.on_slurm else ""))
    return 1 if bad else 0


def _cmd_status(args: argparse.Namespace) -> int:
    from nlgbench.execution.slurm import status_text

    print(status_text(Path(args.dir)))
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    from nlgbench.execution.slurm import collect_folder

    print(collect_folder(Path(args.dir)))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    if args.what == "encoders":
        from nlgbench.encoders.registry import registry
        from nlgbench.encoders.hfcache import check_model_folder, checkpoint_params, disk_bytes, local_snapshot

        rows = [("name", "hub_id", "family", "kind", "layers", "local", "params", "disk_mb")]
        for name, e in sorted(registry().items()):
            snap = local_snapshot(e.hub_id)
            local, params, disk = "no", "-", "-"
            if snap:
                try:
                    check_model_folder(snap)
                    local, params, disk = "yes", f"{checkpoint_params(snap) / 1e6:.1f}M", f"{disk_bytes(snap) / 2**20:.1f}"
                except UserError as exc:  # a broken cache entry is listed as such, with why
                    local = "broken"
                    print(f"nlgbench: {name}: {exc}", file=sys.stderr)
            rows.append((name, e.hub_id, e.family, e.kind, str(e.layers or "-"), local, params, disk))
        _table(rows)
    elif args.what == "metrics":
        from nlgbench.metrics import get_metric, metric_names

        rows = [("name", "needs", "better", "corpus_state", "encoders", "references", "options", "description")]
        for name in metric_names():
            m = get_metric(name)
            opts = ", ".join(f"{k}={d!r}" for k, (_, d) in {**m.options, **m.harness_options}.items())
            # how several references per item are used: max / mean over them, native (the library's own), or
            # refuse (set reference_policy); '-' for a metric that reads none
            refs = (m.multi_reference or "refuse") if m.harness_options or m.multi_reference else "-"
            rows.append((name, "+".join(m.needs), "higher" if m.higher_is_better else "lower",
                         "yes" if m.corpus_state else "no", "|".join(m.encoder_kinds), refs, opts, m.description))
        _table(rows)
    elif args.what == "datasets":
        from nlgbench.data.dataset import load_catalogue

        rows = [("name", "format", "language pairs", "items", "description")]
        for name, d in sorted(load_catalogue()["datasets"].items()):
            rows.append((name, d["format"], " ".join(d["language_pairs"]), str(d.get("expected_items", "")), d.get("description", "")))
        _table(rows)
    elif args.what == "aligners":
        from nlgbench.metrics.alignment import ALIGNERS

        rows = [("name", "needs cost matrix", "description")]
        for name, a in sorted(ALIGNERS.items()):
            rows.append((name, "yes" if a.needs_cost else "no", a.description))
        _table(rows)
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())


def _cmd_models_import(args: argparse.Namespace) -> int:
    from nlgbench.encoders.hfcache import import_model

    snap = import_model(Path(args.src), args.as_hub_id)
    print(f"imported {args.src} as {args.as_hub_id}: {snap}")
    return 0


def _cmd_datasets_fetch(args: argparse.Namespace) -> int:
    from nlgbench.data.dataset import dataset_names, fetch, load_dataset
    from nlgbench.foundations.errors import unknown_name

    if args.name not in dataset_names():
        raise unknown_name("dataset", args.name, dataset_names())
    folder = fetch(args.name, progress=print)
    n = len(load_dataset(args.name).items)
    print(f"{args.name}: {n} items in {folder}")
    return 0


def _cmd_repair(args: argparse.Namespace) -> int:
    from nlgbench.runs.repair import describe, repair

    folder = Path(args.dir)
    print(describe(folder, repair(folder)))
    return 0


def _quality_options(args: argparse.Namespace) -> "QualityOptions":
    from nlgbench.reporting.report import QualityOptions

    options = QualityOptions(method=args.correlation, level=args.level, threshold=args.threshold)
    options.check()
    return options


def _run_folder(raw: str) -> Path:
    folder = Path(raw)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    return folder


def _cmd_report(args: argparse.Namespace) -> int:
    from nlgbench.reporting.report import write_report

    index = write_report(_run_folder(args.dir), baseline=args.baseline, options=_quality_options(args), human=args.human,
                         metric=args.metric, aligner=args.aligner)
    print(f"report: {index}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import json

    from nlgbench.core.cell import json_safe
    from nlgbench.reporting.compare import check_bootstrap, compare, render
    from nlgbench.runs.rundata import load_run

    check_bootstrap(args.resamples, args.seed)  # before the run folder is read
    result = compare(load_run(_run_folder(args.dir), args.human), args.candidate, args.baseline, args.metric,
                     _quality_options(args), n_resamples=args.resamples, seed=args.seed, aligner=args.aligner,
                     candidate_metric=args.candidate_metric, baseline_metric=args.baseline_metric)
    print(json.dumps(json_safe(result), indent=2) if args.json else render(result))  # undefined values as null
    return 0


def _cmd_import_scores(args: argparse.Namespace) -> int:
    from nlgbench.foundations import fmt
    from nlgbench.runs.importscores import import_scores

    direction = True if args.lower_is_better else False if args.higher_is_better else None  # None: the metric's
    result = import_scores(Path(args.file), args.dataset, args.metric, args.encoder, Path(args.out),
                           max_segments=args.max_segments, lower_is_better=direction)
    c = result.correlation or {}
    values = ", ".join(f"{k} {fmt.number(c[k], 4, missing=fmt.UNDEFINED)}" for k in ("pearson", "kendall", "pearson_pooled"))
    print(f"imported {result.n_segments} scores as cell {result.cell_id} ({result.label}): {values}"
          + (f" ({c['note']})" if c.get("note") else "") + f"; results: {Path(args.out) / 'results.csv'}")
    return 0


def _read_lines(path: str, what: str) -> list[str]:
    """One text per line (UTF-8), as bert-score's `-r/-c` files, split as the data loader splits: on
    '\n' only, so a text holding U+0085 or U+2028 stays one line and the files stay aligned."""
    from nlgbench.data.dataset import read_text_lines

    if not Path(path).exists():
        raise UserError(f"{what} file not found: {path}")
    return read_text_lines(Path(path))


def _check_out_file(path: str) -> None:
    """`score --out`: a file in an existing, writable folder, checked before the scoring, not after it."""
    out = Path(path)
    if out.is_dir():
        raise UserError(f"--out {path} is a folder; give a file name, e.g. {out / 'scores.csv'}")
    folder = out.parent
    if not folder.is_dir():
        raise UserError(f"--out {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UserError(f"--out {path}: folder {folder} is not writable")


def _option_value(raw: str) -> tuple[str, object]:
    import yaml

    key, sep, value = raw.partition("=")
    if not sep or not key:
        raise UserError(f"--option takes KEY=VALUE, got {raw!r}")
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError:
        raise UserError(f"--option {key}: cannot read the value {value!r}") from None


def _cmd_score(args: argparse.Namespace) -> int:
    import csv
    import statistics

    from nlgbench.api import default_encoder, score_outputs

    if args.out:
        _check_out_file(args.out)
    hyps = _read_lines(args.candidates, "candidates")
    refs = _read_lines(args.references, "references") if args.references else None
    srcs = _read_lines(args.sources, "sources") if args.sources else None
    for what, path, lines in (("references", args.references, refs), ("sources", args.sources, srcs)):
        if lines is not None and len(lines) != len(hyps):
            raise UserError(f"{what} file {path} has {len(lines)} lines but candidates file {args.candidates} has "
                            f"{len(hyps)}: one text per line in each, line N of one with line N of the other")
    options = dict(_option_value(o) for o in args.option)
    outputs = score_outputs(hyps, refs, args.metric, args.encoder, sources=srcs, aligner=args.aligner,
                            device=args.device, batch_size=args.batch_size, **options)
    columns = list(outputs)
    rows = [[i + 1, *(repr(outputs[c][i]) for c in columns)] for i in range(len(hyps))]
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh, lineterminator="\n").writerows([["line", *columns], *rows])
    else:
        csv.writer(sys.stdout, lineterminator="\n").writerows([["line", *columns], *rows])
        sys.stdout.flush()
    finite = [v for v in outputs["score"] if v == v]
    mean = f"{statistics.fmean(finite):.6f}" if finite else "n/a"
    print(f"{len(hyps)} scores ({args.metric}, {args.encoder or default_encoder(args.metric)}), mean {mean}" + (f"; written to {args.out}" if args.out else ""),
          file=sys.stderr)
    return 0


def _add_selection_args(p: argparse.ArgumentParser) -> None:
    """`--metric` and `--aligner` for compare and report (see `nlgbench.reporting.compare.select_metrics`)."""
    p.add_argument("--metric", help="only this metric: its name when one label has it (moverscore), else the label "
                                    "as in the report (e.g. 'moverscore (wmd)')")
    p.add_argument("--aligner", help="only cells run with this aligner (wmd, rwmd, wcd)")


def _add_quality_args(p: argparse.ArgumentParser) -> None:
    from nlgbench.statistics.stats import LEVELS, METHODS

    p.add_argument("--correlation", default="pearson", help=f"quality measure: {', '.join(METHODS)} (default pearson)")
    p.add_argument("--level", default="global",
                   help=f"{', '.join(LEVELS)} (default global: pooled over all segments, the efficiency study's; "
                        "segment: per lp, then the mean; item: per document (doc_id), then the mean; system: per lp over "
                        "system means, then the mean; old names pooled and lp_mean still work)")
    p.add_argument("--threshold", type=float, default=0.0,
                   help="kendall_like: only pairs whose human scores differ by more than this (WMT DARR: 25 raw DA points)")
    p.add_argument("--human", metavar="DIM",
                   help="the human dimension to correlate with (data with several, e.g. relevance); default each cell's first")


EXIT_STATUSES = ("exit status: 0 every cell ok (other commands: done); 1 some cell not ok (run: see results.csv); "
                 "2 usage or input error (one line on stderr); 130 interrupted (Ctrl-C: run the same "
                 "command again to resume); 141 the output's reader left (a closed pipe)")


def build_parser() -> argparse.ArgumentParser:
    from nlgbench.data.importers import add_import_arguments, cmd_import
    from nlgbench.distillation.distill import add_distill_arguments, cmd_distill
    from nlgbench.statistics.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
    from nlgbench.foundations.version import __version__

    p = argparse.ArgumentParser(prog="nlgbench", description="Efficiency-quality benchmarks of NLG evaluation metrics.",
                                epilog=EXIT_STATUSES)
    p.add_argument("--version", action="version", version=f"nlgbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a sweep spec (resumes: finished cells are skipped)", epilog=EXIT_STATUSES)
    run.add_argument("spec", help="sweep spec YAML")
    run.add_argument("--out", help="output folder (default reports/<spec name>)")
    run.add_argument("--force", action="store_true", help="rerun cells that are already finished")
    run.add_argument("--dry-run", action="store_true", help="list the cells and missing models, run nothing")
    run.add_argument("--wait", action="store_true",
                     help="when another nlgbench process holds the output folder, wait for it (default: exit 2)")
    cluster = run.add_argument_group(
        "executor", "where cells run: local (default; one after another on this machine) or slurm (one job array "
        "task per unfinished cell, through submitit; the run folder must be on a file system the nodes share). "
        "Also settable in the spec's executor: block; these flags override it")
    cluster.add_argument("--executor", help="local or slurm (default: the spec's executor, else local)")
    cluster.add_argument("--partition", help="Slurm partition")
    cluster.add_argument("--gpus-per-cell", type=int, help="GPUs per CUDA cell (default 1; CPU cells ask for none)")
    cluster.add_argument("--cpus-per-cell", type=int, help="CPUs per cell (default: the spec's threads)")
    cluster.add_argument("--mem", help="memory per cell, as sbatch's --mem (16G)")
    cluster.add_argument("--time", type=int, help="time limit per cell in minutes (default 60)")
    cluster.add_argument("--max-parallel", type=int, help="at most this many cells at once (the job array's %%K)")
    cluster.add_argument("--slurm-arg", action="append", default=[], metavar="KEY=VALUE",
                         help="a further sbatch option (account=abc, qos=high, constraint=a100; KEY alone for a flag)")
    cluster.add_argument("--poll-seconds", type=float, help="how often to ask Slurm about the tasks (default 5)")
    cluster.add_argument("--cancel-on-exit", action="store_true",
                         help="Ctrl-C cancels the submitted jobs (default: they keep running; collect them later)")
    run.set_defaults(func=_cmd_run)

    st = sub.add_parser("status", help="where a run folder's cells are: recorded, or pending/running/failed on Slurm")
    st.add_argument("dir", help="run folder")
    st.set_defaults(func=_cmd_status)

    col = sub.add_parser("collect", help="record the cells finished Slurm tasks left in DIR/cells/ into the store")
    col.add_argument("dir", help="run folder")
    col.set_defaults(func=_cmd_collect)

    sc = sub.add_parser("score", help="score a candidates file against a references file, one text per line")
    sc.add_argument("-c", "--candidates", required=True, help="hypotheses, one per line")
    sc.add_argument("-r", "--references", help="references, one per line (metrics that need them)")
    sc.add_argument("-s", "--sources", help="sources, one per line (reference-free metrics)")
    sc.add_argument("--metric", default="bertscore", help="a registered metric (default bertscore)")
    sc.add_argument("--encoder", help="encoder name, Hub id or local folder (default all-MiniLM-L6-v2; "
                                      "none for metrics that run no model: sentbleu, chrf, rouge1, rouge2, rougeL)")
    sc.add_argument("--aligner", help="wmd, rwmd or wcd (metrics with an aligner)")
    sc.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a metric option, e.g. idf=true")
    sc.add_argument("--device", default="cpu")
    sc.add_argument("--batch-size", type=int, default=64)
    sc.add_argument("--out", help="CSV file (default: stdout): line, score, further outputs")
    sc.set_defaults(func=_cmd_score)

    lst = sub.add_parser("list", help="list encoders, metrics, aligners or datasets")
    lst.add_argument("what", choices=["encoders", "metrics", "aligners", "datasets"])
    lst.set_defaults(func=_cmd_list)

    models = sub.add_parser("models", help="manage local model weights").add_subparsers(dest="models_cmd", required=True)
    imp = models.add_parser("import", help="place a local model folder into the Hugging Face cache")
    imp.add_argument("src", help="folder with config.json, weights and tokenizer files")
    imp.add_argument("--as", dest="as_hub_id", required=True, help="the Hub id to register it under")
    imp.set_defaults(func=_cmd_models_import)

    ds = sub.add_parser("datasets", help="manage datasets").add_subparsers(dest="datasets_cmd", required=True)
    fetch = ds.add_parser("fetch", help="download a catalogue dataset into the cache (sha256-checked)")
    fetch.add_argument("name")
    fetch.set_defaults(func=_cmd_datasets_fetch)
    imp = ds.add_parser("import", help="turn a downloaded SummEval file, WMT DA folder or CSV/Parquet table into own-data JSONL")
    add_import_arguments(imp)
    imp.set_defaults(func=cmd_import)

    dist = sub.add_parser("distill", help="train a FrugalScore-style student on a teacher metric's scores")
    add_distill_arguments(dist)
    dist.set_defaults(func=cmd_distill)

    rep = sub.add_parser("report", help="plots and tables of a run folder into DIR/report/ (index.html)")
    rep.add_argument("dir", help="run folder (results.sqlite, cells/ or a committed report/)")
    rep.add_argument("--baseline", help="baseline encoder label (default: per metric, the one with most parameters)")
    _add_selection_args(rep)
    _add_quality_args(rep)
    rep.set_defaults(func=_cmd_report)

    cmp_ = sub.add_parser("compare", help="candidate vs baseline encoder: quality difference, significance, speed-up")
    cmp_.add_argument("dir", help="run folder (results.sqlite, cells/ or a committed report/)")
    cmp_.add_argument("--candidate", required=True, help="encoder label, as in results.csv")
    cmp_.add_argument("--baseline", required=True, help="encoder label, as in results.csv")
    _add_selection_args(cmp_)
    cmp_.add_argument("--candidate-metric", help="compare across metrics: the candidate's metric (e.g. frugalscore for a "
                                                  "distilled student; the baseline's is --baseline-metric or --metric)")
    cmp_.add_argument("--baseline-metric", help="compare across metrics: the baseline's metric (e.g. the teacher's bertscore)")
    cmp_.add_argument("--resamples", type=int, default=BOOTSTRAP_RESAMPLES, help=f"bootstrap resamples (default {BOOTSTRAP_RESAMPLES})")
    cmp_.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default {BOOTSTRAP_SEED})")
    cmp_.add_argument("--json", action="store_true", help="print JSON instead of the table")
    _add_quality_args(cmp_)
    cmp_.set_defaults(func=_cmd_compare)

    imp_s = sub.add_parser("import-scores", help="add precomputed segment scores (CSV lp,seg_id,system,score) as a cell")
    imp_s.add_argument("file")
    imp_s.add_argument("--dataset", required=True, help="catalogue name or a data file path")
    imp_s.add_argument("--max-segments", type=int, help="the first N items per language pair, as in a spec")
    imp_s.add_argument("--metric", required=True)
    imp_s.add_argument("--encoder", required=True)
    imp_s.add_argument("--out", required=True, help="run folder to add the cell to")
    direction = imp_s.add_mutually_exclusive_group()  # default: the registered metric's direction, else higher is better
    direction.add_argument("--lower-is-better", action="store_true", help="the scores are distances (lower is better)")
    direction.add_argument("--higher-is-better", action="store_true",
                           help="higher is better, whatever the metric's own direction (e.g. distances stored negated)")
    imp_s.set_defaults(func=_cmd_import_scores)

    rp = sub.add_parser("repair", help="rebuild DIR/results.sqlite from DIR/cells/ (a corrupt store is kept aside)")
    rp.add_argument("dir", help="run folder")
    rp.set_defaults(func=_cmd_repair)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"nlgbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `nlgbench list encoders | head`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # the file system refused a write (disk full, read-only): one line too
        from nlgbench.foundations.files import write_fault

        fault = write_fault(exc)
        if fault is None:
            raise
        print(f"nlgbench: error: {fault}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nlgbench: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
