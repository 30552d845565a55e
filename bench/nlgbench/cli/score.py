"""`nlgbench score`: a candidates file against a references (or sources) file, one text per line,
through `nlgbench.api.Scorer`; one CSV row per line (or one JSON object), and the scorer's
reproducibility signature."""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
import warnings
from pathlib import Path

from nlgbench.api import BlankTextWarning, IdfWarning, Scorer, check_texts, check_tokens
from nlgbench.cli.values import key_value
from nlgbench.encoders.languages import lang_choice
from nlgbench.encoders.registry import NO_ENCODER
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import check_output_file, read_lines, write_output
from nlgbench.metrics import default_encoder


def cmd_score(args: argparse.Namespace) -> int:
    if args.out:
        check_output_file(Path(args.out), "--out")  # before the scoring, not after it
    hyps = _read_lines(args.candidates, "candidates")
    ref_files = [_read_lines(path, "references") for path in args.references or []]
    srcs = _read_lines(args.sources, "sources") if args.sources else None
    given = [("references", path, lines) for path, lines in zip(args.references or [], ref_files, strict=True)]
    for what, path, lines in [*given, *([("sources", args.sources, srcs)] if srcs is not None else [])]:
        if len(lines) != len(hyps):
            raise UserError(
                f"{what} file {path} has {len(lines)} lines but candidates file {args.candidates} has "
                f"{len(hyps)}: one text per line in each, line N of one with line N of the other"
            )
    refs: list[str] | list[list[str]] | None = ref_files[0] if len(ref_files) == 1 else None
    if len(ref_files) > 1:  # each line's references, one per file in the order given (the API's list per hypothesis)
        refs = [list(texts) for texts in zip(*ref_files, strict=True)]
    options = dict(key_value(o, "--option") for o in args.option)
    check_texts(args.metric, hyps, refs, srcs, **options)  # a refused blank line: before the model loads
    check_tokens(args.metric, args.encoder, args.lang, hyps, refs, srcs, **options)  # '...': the tokenizer alone
    idf_sents = _read_lines(args.idf_sents, "--idf-sents") if args.idf_sents else None
    if args.lang and not args.encoder and args.metric == "bertscore":  # before the model loads (or fails to)
        print(lang_choice(args.lang), file=sys.stderr, flush=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BlankTextWarning)
        warnings.simplefilter("always", IdfWarning)
        scorer = Scorer(
            args.metric,
            args.encoder,
            lang=args.lang,
            aligner=args.aligner,
            device=_device(args.metric, args.encoder, args.device),
            batch_size=args.batch_size,
            idf_sents=idf_sents,
            backend=args.backend,
            **options,
        )
        outputs = scorer.score_outputs(hyps, refs, sources=srcs)
    for warning in caught:  # blank lines scored (1-based, as the `line` column), idf from few texts: one line
        if issubclass(warning.category, (BlankTextWarning, IdfWarning)):
            print(f"warning: {warning.message}", file=sys.stderr, flush=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    columns = list(outputs)
    rows = [[i + 1, *(repr(outputs[c][i]) for c in columns)] for i in range(len(hyps))]
    if args.out:
        table = io.StringIO()
        csv.writer(table, lineterminator="\n").writerows([["line", *columns], *rows])
        write_output(Path(args.out), table.getvalue(), "--out")
    finite = [v for v in outputs["score"] if v == v]
    corpus = scorer.corpus  # sentbleu, chrf: sacrebleu's corpus score of these lines
    if args.json:
        summary = {
            "signature": scorer.signature,
            "n": len(hyps),
            "mean": statistics.fmean(finite) if finite else None,
            **({"corpus": corpus} if corpus else {}),
            **({"out": args.out} if args.out else {"outputs": outputs}),
        }
        print(json.dumps(summary, allow_nan=False, default=lambda v: None))
    elif not args.out:
        csv.writer(sys.stdout, lineterminator="\n").writerows([["line", *columns], *rows])
        sys.stdout.flush()
    mean = f"{statistics.fmean(finite):.6f}" if finite else "n/a"
    print(
        f"{len(hyps)} scores ({args.metric}, {scorer.encoder}), segment mean {mean}"
        + (f", corpus {corpus['score']:.6f}" if corpus else "")
        + (f"; written to {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    if corpus:
        print(f"corpus score: sacrebleu's corpus function, signature {corpus['signature']}", file=sys.stderr)
    print(f"signature: {scorer.signature}", file=sys.stderr)
    return 0


def _device(metric: str, encoder: str | None, device: str) -> str:
    """`--device auto` for a metric that runs no model (sentbleu, chrf, rouge*): the CPU, without importing
    torch to look for a GPU the metric would not use (so the command starts as fast as sacrebleu's)."""
    no_model = encoder in (None, NO_ENCODER) and default_encoder(metric) == NO_ENCODER
    return "cpu" if device == "auto" and no_model else device


def _read_lines(path: str, what: str) -> list[str]:
    """One text per line (UTF-8), as bert-score's `-r/-c` files, split as the data loader splits: on
    '\n' only, so a text holding U+0085 or U+2028 stays one line and the files stay aligned."""
    if not Path(path).exists():
        raise UserError(f"{what} file not found: {path}")
    return read_lines(Path(path))
