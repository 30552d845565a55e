"""`nlgbench baseline`: BERTScore's rescaling baselines of an encoder, computed from a plain-text corpus
as bert_score computed its own (`nlgbench.metrics.baselines`), stored where `rescale_with_baseline`
finds them and printed in bert_score's baseline file format."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlgbench.encoders.languages import lang_choice, lang_encoder
from nlgbench.encoders.registry import parse_encoder_ref
from nlgbench.execution.progress import command_progress
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import check_output_file, read_lines, write_output
from nlgbench.measurement.devices import auto_device
from nlgbench.metrics import DEFAULT_ENCODER
from nlgbench.metrics.baselines import compute_baseline


def cmd_baseline(args: argparse.Namespace) -> int:
    if args.out:
        check_output_file(Path(args.out), "--out")
    if args.lang and args.encoder:
        raise UserError("give --lang or --encoder, not both: --lang picks the encoder (as bert_score's lang=)")
    if Path(args.corpus).is_dir():
        raise UserError(f"corpus {args.corpus} is a folder: give a text file, one sentence a line")
    if not Path(args.corpus).exists():
        raise UserError(f"corpus file not found: {args.corpus}")
    if not Path(args.corpus).is_file():
        raise UserError(f"corpus {args.corpus} is not a regular file (a FIFO or a device: not read)")
    name = lang_encoder(args.lang) if args.lang else args.encoder or DEFAULT_ENCODER
    if args.lang:
        print(lang_choice(args.lang), file=sys.stderr)
    texts = read_lines(Path(args.corpus))
    device = auto_device(args.device)
    print(f"baseline of {name}: loading the model on {device}", file=sys.stderr, flush=True)
    with command_progress("baseline") as progress:  # a bar with its ETA on a terminal, a line per tenth elsewhere
        table, stored, replaced = compute_baseline(
            parse_encoder_ref(name, "--encoder"), texts, args.pairs, args.seed, device, args.batch_size, progress
        )
    if replaced is not None:
        print(replaced_line(name, stored, replaced), file=sys.stderr)
    sys.stdout.write(table)
    if args.out:
        write_output(Path(args.out), table, "--out")
    print(
        f"baseline of {name} from {args.pairs} random pairs (seed {args.seed}) of {args.corpus}: stored in the "
        f"cache ({stored.name}), where rescale_with_baseline=true finds it"
        + (f"; written to {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    return 0


def replaced_line(name: str, stored: Path, old: Mapping[str, Any]) -> str:
    """The one line saying a cached baseline was replaced, and what it had been computed from."""
    corpus, pairs, seed = old.get("corpus_sha256"), old.get("pairs"), old.get("seed")
    was = (
        f"computed from a corpus of sha256 {corpus[:12]}..., {pairs} pairs, seed {seed}"
        if isinstance(corpus, str)
        else "its record unreadable"
    )
    return f"replaced the cached baseline of {name} ({stored.name}; {was})"
