"""The argparse of every `nlgbench` command, one function per command (`distill`'s many options in
`nlgbench.cli.distill_parser`; YAML-valued option values in `nlgbench.cli.values`). Each leaf command
sets `handler`, its key in `nlgbench.cli.COMMANDS`, which `main` imports only after parsing."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nlgbench.cli.distill_parser import add_distill_arguments
from nlgbench.cli.values import Parser, Spelling
from nlgbench.data.importers import FORMATS
from nlgbench.data.importers.summeval import ANNOTATORS
from nlgbench.data.importers.table import TABLE_FIELDS
from nlgbench.foundations.version import __version__
from nlgbench.statistics.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAX_RESAMPLES, MIN_RESAMPLES
from nlgbench.statistics.correlation import METHODS
from nlgbench.statistics.levels import LEVELS

# `--backend`'s values: nlgbench.encoders.registry's AUTO and BACKENDS, written out so that `--help` does not
# import the registry (tests/test_backend_auto.py checks that they agree)
BACKEND_CHOICES = ("auto", "torch", "onnxruntime", "openvino")

EXIT_STATUSES = (
    "exit status: 0 every cell ok (other commands: done); 1 some cell not ok (run: see results.csv); "
    "2 usage or input error (one line on stderr); 130 interrupted (Ctrl-C: run the same "
    "command again to resume); 141 the output's reader left (a closed pipe)"
)

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[Parser]  # what add_subparsers returns


def build_parser() -> argparse.ArgumentParser:
    """The `nlgbench` parser: every command, each leaf with its `handler` (a key of COMMANDS); every value a
    string, never `--` or blank (`nlgbench.cli.values.Parser`)."""
    p = Parser(
        prog="nlgbench", description="Efficiency-quality benchmarks of NLG evaluation metrics.", epilog=EXIT_STATUSES
    )
    p.add_argument("--version", action="version", version=f"nlgbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        _add_example,
        _add_run,
        _add_status,
        _add_collect,
        _add_score,
        _add_baseline,
        _add_list,
        _add_models,
        _add_datasets,
        _add_distill,
        _add_report,
        _add_compare,
        _add_import_scores,
        _add_repair,
    ):
        add(sub)
    return p


def _add_example(sub: Commands) -> None:
    ex = sub.add_parser(
        "example",
        help="list the example sweep specs, or print one (nlgbench example quickstart > q.yaml)",
        description="Without NAME: the bundled example specs, one line each. With NAME: that spec's YAML on "
        "stdout (or into a new file with --out), to run with `nlgbench run`.",
    )
    ex.add_argument("name", nargs="?", help="the example's name (quickstart, similarity, ...)")
    ex.add_argument("--out", metavar="FILE", help="write the spec into FILE, a new file (never overwritten)")
    ex.set_defaults(handler="example")


def _add_run(sub: Commands) -> None:
    run = sub.add_parser("run", help="run a sweep spec (resumes: finished cells are skipped)", epilog=EXIT_STATUSES)
    run.add_argument("spec", help="sweep spec YAML")
    run.add_argument("--out", help="output folder (default reports/<spec name>)")
    run.add_argument("--force", action="store_true", help="rerun cells that are already finished")
    run.add_argument("--dry-run", action="store_true", help="list the cells and missing models, run nothing")
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another nlgbench process holds the output folder, wait for it (default: exit 2)",
    )
    cluster = run.add_argument_group(
        "executor",
        "where cells run: local (default; one after another on this machine) or slurm (one job array "
        "task per unfinished cell, through submitit; the run folder must be on a file system the nodes share). "
        "Also settable in the spec's executor: block; these flags override it",
    )
    cluster.add_argument("--executor", help="local or slurm (default: the spec's executor, else local)")
    cluster.add_argument("--partition", help="Slurm partition")
    cluster.add_argument("--gpus-per-cell", type=int, help="GPUs per CUDA cell (default 1; CPU cells ask for none)")
    cluster.add_argument("--cpus-per-cell", type=int, help="CPUs per cell (default: the spec's threads)")
    cluster.add_argument("--mem", help="memory per cell, as sbatch's --mem (16G)")
    cluster.add_argument("--time", type=int, help="time limit per cell in minutes (default 60)")
    cluster.add_argument("--max-parallel", type=int, help="at most this many cells at once (the job array's %%K)")
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further sbatch option (account=abc, qos=high, constraint=a100; KEY alone for a flag). Unlike "
        "a spec's slurm_args, which take only resource and accounting options (account, qos, constraint, "
        "gres, nodelist, ...), this may set any sbatch option nlgbench does not set itself, --export and "
        "--chdir included: it is your own command line",
    )
    cluster.add_argument("--poll-seconds", type=float, help="how often to ask Slurm about the tasks (default 5)")
    cluster.add_argument(
        "--cancel-on-exit",
        action="store_true",
        help="Ctrl-C cancels the submitted jobs (default: they keep running; collect them later)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="print the final summary as one JSON object (out, ok, not_ok, cells); progress goes to stderr",
    )
    run.set_defaults(handler="run")


def _add_status(sub: Commands) -> None:
    st = sub.add_parser("status", help="where a run folder's cells are: recorded, or pending/running/failed on Slurm")
    st.add_argument("dir", help="run folder")
    st.add_argument("--json", action="store_true", help="print one JSON object: counts and every recorded cell")
    st.set_defaults(handler="status")


def _add_collect(sub: Commands) -> None:
    col = sub.add_parser("collect", help="record the cells finished Slurm tasks left in DIR/cells/ into the store")
    col.add_argument("dir", help="run folder")
    col.set_defaults(handler="collect")


def _add_score(sub: Commands) -> None:
    sc = sub.add_parser("score", help="score a candidates file against a references file, one text per line")
    sc.add_argument("-c", "--candidates", required=True, help="hypotheses, one per line")
    sc.add_argument(
        "-r",
        "--references",
        nargs="+",
        action="extend",
        metavar="FILE",
        help="references, one per line (metrics that need them); several files (-r a.txt b.txt, or -r repeated): "
        "several references per line, used as the metric's rule or --option reference_policy=... says",
    )
    sc.add_argument("-s", "--sources", help="sources, one per line (reference-free metrics)")
    sc.add_argument("--metric", default="bertscore", help="a registered metric (default bertscore)")
    sc.add_argument(
        "--encoder",
        help="encoder name, Hub id or local folder (default all-MiniLM-L6-v2; "
        "none for metrics that run no model: sentbleu, chrf, rouge1, rouge2, rougeL)",
    )
    sc.add_argument(
        "--lang",
        help="bertscore: bert_score's model for this language instead of --encoder (en: roberta-large, "
        "zh: bert-base-chinese, others: bert-base-multilingual-cased)",
    )
    sc.add_argument("--aligner", help="wmd, rwmd or wcd (metrics with an aligner)")
    sc.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a metric option, e.g. idf=true, rescale_with_baseline=true, baseline_path=FILE",
    )
    sc.add_argument(
        "--idf-sents",
        metavar="FILE",
        help="with --option idf=true: compute idf from this corpus (one text per line), not from the references",
    )
    sc.add_argument("--device", default="auto", help="auto (CUDA where available, else cpu), cpu, cuda, cuda:N")
    sc.add_argument("--batch-size", type=int, default=64)
    sc.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        help="the encoder's inference backend (default auto: of torch, ONNX Runtime and OpenVINO the fastest that "
        "scores equal to torch, measured once per model and machine; torch to keep to torch)",
    )
    sc.add_argument("--out", help="CSV file (default: stdout): line, score, further outputs")
    for names, spelling in (
        (("--model", "--model_type", "-m"), "--encoder NAME (a registered name, Hub id or local folder)"),
        (("--num_layers", "-l"), "--option layer=N (the layer whose output is used)"),
        (("--idf",), "--option idf=true (and --idf-sents FILE for a fixed idf corpus)"),
        (("--rescale_with_baseline",), "--option rescale_with_baseline=true (and --option baseline_path=FILE)"),
    ):
        sc.add_argument(*names, action=Spelling, spelling=spelling)
    sc.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (signature, n, mean, corpus score where the metric has one, and the outputs "
        "unless --out) instead of the CSV",
    )
    sc.set_defaults(handler="score")


def _add_baseline(sub: Commands) -> None:
    bl = sub.add_parser(
        "baseline",
        help="compute BERTScore's rescaling baselines of an encoder from a text corpus (rescale_with_baseline)",
        description="The mean BERTScore P, R and F (idf off) of random pairs of two different lines of CORPUS at "
        "every layer, as bert_score computed its baselines; stored in the cache under the model's content "
        "fingerprint, where rescale_with_baseline finds it, and printed in bert_score's baseline file format. "
        "Progress goes to stderr: a bar with its ETA on a terminal, else a line per tenth of the pairs "
        "(NLGBENCH_PROGRESS=1 or 0 forces either).",
    )
    bl.add_argument("corpus", help="plain text, one sentence per line (blank lines skipped)")
    bl.add_argument("--encoder", help="encoder name, Hub id or local folder (default all-MiniLM-L6-v2)")
    bl.add_argument("--lang", help="bert_score's model for this language instead of --encoder")
    bl.add_argument("--pairs", type=int, default=10_000, help="random pairs (default 10000; bert_score used 1M)")
    bl.add_argument("--seed", type=int, default=0, help="seed of the pairs' draw (default 0)")
    bl.add_argument("--device", default="auto", help="auto (CUDA where available, else cpu), cpu, cuda, cuda:N")
    bl.add_argument("--batch-size", type=int, default=64)
    bl.add_argument("--out", help="also write the baseline file here")
    bl.set_defaults(handler="baseline")


def _add_list(sub: Commands) -> None:
    lst = sub.add_parser("list", help="list encoders, metrics, aligners or datasets")
    lst.add_argument("what", choices=["encoders", "metrics", "aligners", "datasets"], action=_ListHandler)
    lst.add_argument("--json", action="store_true", help="print a JSON list of objects (one per row) instead")


class _ListHandler(argparse.Action):
    """`list WHAT`: each listing is its own command (`list WHAT` in COMMANDS), so that `list datasets`
    does not load what `list aligners` needs (torch, POT)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.handler = f"list {values}"


def _add_models(sub: Commands) -> None:
    models = sub.add_parser("models", help="manage local model weights").add_subparsers(
        dest="models_cmd", required=True
    )
    imp = models.add_parser("import", help="place a local model folder into the Hugging Face cache")
    imp.add_argument("src", help="folder with config.json, weights and tokenizer files")
    imp.add_argument("--as", dest="as_hub_id", required=True, help="the Hub id to register it under")
    imp.set_defaults(handler="models import")


def _add_datasets(sub: Commands) -> None:
    ds = sub.add_parser("datasets", help="manage datasets").add_subparsers(dest="datasets_cmd", required=True)
    fetch = ds.add_parser("fetch", help="download a catalogue dataset into the cache (sha256-checked)")
    fetch.add_argument("name")
    fetch.set_defaults(handler="datasets fetch")
    imp = ds.add_parser(
        "import", help="turn a downloaded SummEval file, WMT DA folder or CSV/Parquet table into own-data JSONL"
    )
    add_import_arguments(imp)
    imp.set_defaults(handler="datasets import")


def _add_distill(sub: Commands) -> None:
    dist = sub.add_parser("distill", help="train a FrugalScore-style student on a teacher metric's scores")
    add_distill_arguments(dist)
    dist.set_defaults(handler="distill")


def _add_report(sub: Commands) -> None:
    rep = sub.add_parser("report", help="plots and tables of a run folder into DIR/report/ (index.html)")
    rep.add_argument("dir", help="run folder (results.sqlite, cells/ or a committed report/)")
    rep.add_argument(
        "--baseline",
        metavar="ENCODER|METRIC[:ENCODER]",
        help="what each row is compared with: an encoder label (each metric's own cells of it), or one metric's "
        "cell for all rows, e.g. chrf or bertscore:all-mpnet-base-v2 (default: per metric, the encoder with "
        "most parameters)",
    )
    rep.add_argument("--out", metavar="FOLDER", help="write the report into FOLDER (default: DIR/report)")
    _add_selection_args(rep)
    _add_quality_args(rep)
    size = rep.add_mutually_exclusive_group()
    size.add_argument(
        "--column",
        choices=("single", "double"),
        help="figures as wide as a paper's single column (3.3 in, the default) or both columns (6.9 in); "
        "text is 7-9 pt at that width",
    )
    size.add_argument("--figure-width", type=float, metavar="INCHES", help="figure width in inches (2.5 to 20)")
    rep.add_argument(
        "--format",
        default="png,pdf,svg",
        help="figure files to write, comma-separated: png, pdf, svg (default all three; figures.tex takes the PDF)",
    )
    rep.add_argument(
        "--figures",
        default="runtime",
        help="the figures figures.tex sets, comma-separated: runtime, memory, peak_memory (default runtime; "
        "index.html shows all)",
    )
    rep.add_argument(
        "--titles",
        action="store_true",
        help="draw each figure's title inside it (for slides; a paper's caption says it: none by default)",
    )
    rep.set_defaults(handler="report")


def _add_compare(sub: Commands) -> None:
    cmp_ = sub.add_parser("compare", help="candidate vs baseline encoder: quality difference, significance, speed-up")
    cmp_.add_argument("dir", help="run folder (results.sqlite, cells/ or a committed report/)")
    cmp_.add_argument("--candidate", required=True, help="encoder label, as in results.csv")
    cmp_.add_argument("--baseline", required=True, help="encoder label, as in results.csv")
    _add_selection_args(cmp_)
    cmp_.add_argument(
        "--candidate-metric",
        help="compare across metrics: the candidate's metric (e.g. frugalscore for "
        "a distilled student; the baseline's is --baseline-metric or --metric)",
    )
    cmp_.add_argument(
        "--baseline-metric", help="compare across metrics: the baseline's metric (e.g. the teacher's bertscore)"
    )
    cmp_.add_argument(
        "--resamples",
        type=int,
        default=BOOTSTRAP_RESAMPLES,
        help=f"bootstrap resamples, and permutations with --test permutation ({MIN_RESAMPLES} to {MAX_RESAMPLES}; "
        f"default {BOOTSTRAP_RESAMPLES})",
    )
    cmp_.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default {BOOTSTRAP_SEED})")
    cmp_.add_argument(
        "--test",
        default="bootstrap",
        help="significance test of the difference: bootstrap (paired, the level's unit resampled) or permutation "
        "(Deutsch et al. 2021 perm-both: each segment's two scores swapped at random)",
    )
    cmp_.add_argument(
        "--perm-test",
        default="scores",
        help="what --test permutation swaps (mt-metrics-eval's perm_test): scores (default; acc_eq re-calibrates "
        "each metric's tie epsilon on every draw) or pairs (acc_eq only, WMT23/24's test: each metric's epsilon "
        "calibrated once on the real scores and kept fixed, the two metrics' verdicts on each pair of translations "
        "of one source swapped at random)",
    )
    cmp_.add_argument("--json", action="store_true", help="print JSON instead of the table")
    _add_quality_args(cmp_)
    cmp_.set_defaults(handler="compare")


def _add_selection_args(p: argparse.ArgumentParser) -> None:
    """`--metric` and `--aligner` for compare and report (see `nlgbench.reporting.compare.select_metrics`)."""
    p.add_argument(
        "--metric",
        help="only this metric: its name (moverscore: every aligner's rows) or a label as in the report "
        "(e.g. 'moverscore (wmd)')",
    )
    p.add_argument("--aligner", help="only cells run with this aligner (wmd, rwmd, wcd)")
    p.add_argument(
        "--label",
        action="append",
        metavar="FULL=SHORT",
        help="show an encoder or a metric under another name in figures, tables and the page (repeatable; "
        "over the spec's labels: map), e.g. 'all-MiniLM-L6-v2[num_layers=3]=MiniLM-L6 (3 layers)'; "
        "CSV files keep the full label",
    )


def _add_quality_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--correlation",
        default="pearson",
        help=f"quality measure: {', '.join(METHODS)} (default pearson; docs/concepts/correlation.md says which level "
        "each one has)",
    )
    p.add_argument(
        "--level",
        default="global",
        help=f"{', '.join(LEVELS)} (default global: pooled over all segments, the efficiency study's; "
        "segment: per lp, then the mean; item: per document (doc_id), then the mean, SummEval's summary level "
        "(alias summary); source: per source (lp, seg_id) over its systems' translations, then the mean, WMT's "
        "item-grouped correlation (alias item_grouped); system: per lp over system means, then the mean; old "
        "names pooled and lp_mean still work)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="darr_kendall and kendall_like_all_pairs: only pairs whose human scores differ by more than this "
        "(WMT17-20 DARR: 25 raw DA points; default 0)",
    )
    p.add_argument(
        "--resample",
        default="auto",
        help="what the bootstrap resamples: auto (the level's unit, stratified by lp: at global and segment level "
        "whole sources (all translations of one seg_id) where a source has several translations, else segments; "
        "documents at item level, sources at source level, systems at system level), segments, sources, or both "
        "(systems and inputs, Deutsch et al. 2021 boot-both)",
    )
    p.add_argument(
        "--convention",
        default="nlgbench",
        help="nlgbench (default) or mt-metrics-eval: the WMT Metrics task code's conventions where they differ "
        "(darr_kendall and kendall_like_all_pairs count pairs differing by >= the threshold, tau-like at item and "
        "source level weighted by pairs, pairwise_accuracy pooled over lps, soft_pairwise_accuracy sampled with "
        "its seed); docs/concepts/correlation.md has the table",
    )
    p.add_argument(
        "--human",
        metavar="DIM",
        help="the human dimension to correlate with (data with several, e.g. relevance); default each cell's first",
    )


def _add_import_scores(sub: Commands) -> None:
    imp_s = sub.add_parser(
        "import-scores", help="add precomputed segment scores (CSV lp,seg_id,system,score) as a cell"
    )
    imp_s.add_argument("file")
    imp_s.add_argument("--dataset", required=True, help="catalogue name or a data file path")
    imp_s.add_argument("--max-segments", type=int, help="the first N items per language pair, as in a spec")
    imp_s.add_argument("--metric", required=True)
    imp_s.add_argument("--encoder", required=True)
    imp_s.add_argument("--out", required=True, help="run folder to add the cell to")
    direction = (
        imp_s.add_mutually_exclusive_group()
    )  # default: the registered metric's direction, else higher is better
    direction.add_argument("--lower-is-better", action="store_true", help="the scores are distances (lower is better)")
    direction.add_argument(
        "--higher-is-better",
        action="store_true",
        help="higher is better, whatever the metric's own direction (e.g. distances stored negated)",
    )
    imp_s.set_defaults(handler="import-scores")


def _add_repair(sub: Commands) -> None:
    rp = sub.add_parser("repair", help="rebuild DIR/results.sqlite from DIR/cells/ (a corrupt store is kept aside)")
    rp.add_argument("dir", help="run folder")
    rp.add_argument(
        "--upgrade",
        action="store_true",
        help="also write what an older nlgbench wrote (the store, cells/*/result.json, results.csv) in this "
        "nlgbench's run-folder format (every command reads older formats as they are)",
    )
    rp.set_defaults(handler="repair")


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``nlgbench datasets import FORMAT SRC --out FILE.jsonl``."""
    p.add_argument(
        "format",
        choices=FORMATS,
        help="summeval: model_annotations.aligned.paired.jsonl; "
        "wmt-da: a DAseg-wmtNN folder; table: a .csv, .tsv or .parquet file",
    )
    p.add_argument("src", help="the downloaded file or folder")
    p.add_argument("--out", required=True, help="the JSONL file to write (replaced atomically)")
    p.add_argument(
        "--annotators",
        choices=sorted(ANNOTATORS),
        help="summeval: whose scores to average per dimension (default expert: 3 per summary)",
    )
    p.add_argument(
        "--lp",
        action="append",
        metavar="LP",
        help="wmt-da: only these language pairs (repeatable or comma-separated); "
        "table: the language pair (or domain label) of every row",
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help=f"table: the column of an item field ({', '.join(TABLE_FIELDS)}); references=COL1,COL2,...",
    )
    p.add_argument(
        "--human",
        action="append",
        default=[],
        metavar="DIM=COLUMN",
        help="table: a human dimension and its column (repeatable); empty cells are missing values",
    )
