"""The arguments of `nlgbench distill` (teacher, student, pairs, training), apart from the other commands'
argparse in `nlgbench.cli.parser` because they are many."""

from __future__ import annotations

import argparse

from nlgbench.cli.values import encoder_value
from nlgbench.distillation.config import AUTO, TrainConfig


def add_distill_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `nlgbench distill`, in four groups."""
    _add_teacher_arguments(p.add_argument_group("teacher"))
    _add_student_arguments(p.add_argument_group("student"))
    _add_pairs_arguments(p.add_argument_group("pairs"))
    _add_training_arguments(p.add_argument_group("training"))


def _max_length(raw: str) -> int | str:
    """`--max-length`: a number of tokens or `auto`."""
    if raw == AUTO:
        return raw
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of tokens or {AUTO}, not {raw!r}") from None


def _add_teacher_arguments(t: argparse._ArgumentGroup) -> None:
    t.add_argument(
        "--teacher-metric",
        required=True,
        help="a registered metric (bertscore, moverscore, ...), or human: the --pairs datasets' human scores "
        "(with --student-kind head)",
    )
    t.add_argument(
        "--human",
        metavar="DIM",
        help="with --teacher-metric human: the human dimension to learn (default: the dataset's primary one)",
    )
    t.add_argument(
        "--label-scale",
        choices=("z", "raw"),
        default="z",
        help="with --teacher-metric human: z-scores within each dataset (default), or each dataset's own scale",
    )
    t.add_argument(
        "--teacher-encoder",
        type=encoder_value,
        help="its encoder: registered name, Hub id or local folder, or a variant as a YAML mapping "
        "('{name: all-mpnet-base-v2, backend: onnxruntime}') "
        "(default as nlgbench score: all-MiniLM-L6-v2, none for lexical metrics)",
    )
    t.add_argument(
        "--teacher-options",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="the teacher metric's options, e.g. idf=true layer=9 (values read as YAML)",
    )
    t.add_argument("--teacher-aligner", help="wmd, rwmd or wcd (metrics with an aligner)")
    t.add_argument("--teacher-batch-size", type=int, default=64, help="batch size of the labelling (default 64)")


def _add_student_arguments(s: argparse._ArgumentGroup) -> None:
    s.add_argument("--student", required=True, help="the student checkpoint: registered name, Hub id or local folder")
    s.add_argument("--student-layers", type=int, metavar="K", help="keep only its first K layers")
    s.add_argument(
        "--student-kind",
        choices=("cross-encoder", "head"),
        default="cross-encoder",
        help="cross-encoder (default): FrugalScore's student, fine-tuned on the teacher's scores; head: the "
        "student encoder frozen, a ridge head over the features its BERTScore pass computes, fitted on "
        "human scores (--teacher-metric human)",
    )


def _add_pairs_arguments(d: argparse._ArgumentGroup) -> None:
    d.add_argument(
        "--pairs",
        nargs="+",
        action="extend",
        required=True,
        metavar="PAIRS",
        help="pairs file (.jsonl/.tsv with reference and candidate), own-data file, or catalogue dataset; "
        "several allowed",
    )
    d.add_argument("--max-pairs", type=int, metavar="N", help="a seeded random subset of N pairs (before augmentation)")
    d.add_argument(
        "--augment",
        type=int,
        default=0,
        metavar="N",
        help="N synthetic candidates per distinct reference: word drop, swap, substitution, truncation (default 0)",
    )
    d.add_argument(
        "--random-share",
        type=float,
        default=0.1,
        help="share of random unrelated pairs (a reference, another source's candidate) in the result (default 0.1)",
    )
    d.add_argument(
        "--holdout",
        nargs="+",
        action="extend",
        default=[],
        help="evaluation datasets (names or own-data files; commas allowed) whose every source and reference "
        "text is removed from the pairs before labelling, e.g. wmt15,wmt16,wmt21",
    )
    d.add_argument(
        "--label-shard-size",
        type=int,
        help="pairs per labelling shard, on average (default 512: nlgbench.distillation.shards.SHARD_SIZE); "
        "each is cached as it is labelled, so an interrupted labelling resumes from the shards on disk",
    )
    d.add_argument(
        "--allow-overlap",
        action="store_true",
        help="record that the student may be evaluated on data overlapping its training pairs "
        "(lifts the leakage guard)",
    )


def _add_training_arguments(o: argparse._ArgumentGroup) -> None:
    o.add_argument(
        "--out", required=True, metavar="MODEL_DIR", help="the student's folder (a previous student there is replaced)"
    )
    o.add_argument("--epochs", type=int, default=TrainConfig.epochs, help=f"default {TrainConfig.epochs}")
    o.add_argument(
        "--lr",
        type=float,
        default=TrainConfig.lr,
        help=f"peak learning rate of AdamW, linear warm-up and decay (default {TrainConfig.lr})",
    )
    o.add_argument("--batch-size", type=int, default=TrainConfig.batch_size, help=f"default {TrainConfig.batch_size}")
    o.add_argument(
        "--accumulate",
        type=int,
        default=TrainConfig.accumulate,
        metavar="K",
        help=f"batches per optimizer step: an effective batch of batch-size x K (default {TrainConfig.accumulate})",
    )
    o.add_argument(
        "--max-length",
        type=_max_length,
        default=TrainConfig.max_length,
        metavar="N|auto",
        help="tokens per pair; auto (default): the smallest multiple of 8 covering the 99th percentile "
        "of the training pairs' lengths, capped by the model's maximum",
    )
    o.add_argument(
        "--val-fraction",
        type=float,
        default=TrainConfig.val_fraction,
        help="share of the distinct references held out for validation (default 0.1)",
    )
    o.add_argument(
        "--patience",
        type=int,
        default=TrainConfig.patience,
        help="validations without improvement before stopping, counted after the first epoch "
        "(default 3; 4 validations per epoch)",
    )
    o.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (teacher and student)")
    o.add_argument(
        "--checkpoint-every", type=int, metavar="N", help="checkpoint every N steps too (and at validations)"
    )
    o.add_argument("--resume", action="store_true", help="continue from the checkpoint in MODEL_DIR.partial")
    o.add_argument(
        "--seed", type=int, default=TrainConfig.seed, help="pairs subset, augmentation, split, head, order (default 0)"
    )
    o.add_argument("--threads", type=int, help="CPU threads (default: all cores)")
