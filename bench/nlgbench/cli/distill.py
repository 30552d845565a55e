"""`nlgbench distill`: a FrugalScore-style student trained on a teacher metric's scores
(`nlgbench.distillation.pipeline.distill`); one summary line on stdout."""

from __future__ import annotations

import argparse
import sys

from nlgbench.cli.values import key_value
from nlgbench.distillation.config import TrainConfig
from nlgbench.distillation.humanhead import distill_head
from nlgbench.distillation.pipeline import distill
from nlgbench.distillation.shards import SHARD_SIZE
from nlgbench.distillation.teacher import Teacher
from nlgbench.foundations.errors import UserError

HUMAN = "human"  # --teacher-metric: the datasets' human scores instead of a metric's


def cmd_distill(args: argparse.Namespace) -> int:
    """Run `nlgbench distill`; one summary line on stdout."""
    if args.student_kind == "head" or args.teacher_metric == HUMAN:
        return _distill_head(args)
    options = dict(key_value(o, "--teacher-options") for o in args.teacher_options)
    teacher = Teacher.parse(args.teacher_metric, args.teacher_encoder, options, args.teacher_aligner)
    cfg = TrainConfig(
        student=args.student,
        student_layers=args.student_layers,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        accumulate=args.accumulate,
        max_length=args.max_length,
        val_fraction=args.val_fraction,
        patience=args.patience,
        seed=args.seed,
    )
    try:
        result = distill(
            args.pairs,
            teacher,
            cfg,
            args.out,
            device=args.device,
            teacher_batch_size=args.teacher_batch_size,
            augment=args.augment,
            max_pairs=args.max_pairs,
            allow_overlap=args.allow_overlap,
            threads=args.threads,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            random_share=args.random_share,
            holdout=args.holdout,
            label_shard_size=SHARD_SIZE if args.label_shard_size is None else args.label_shard_size,
        )
    except KeyboardInterrupt:  # labels and checkpoints written so far are whole: the rerun goes on from them
        again = "again" if args.resume else "again with --resume"
        print(f"nlgbench: interrupted; run the same command {again} to continue from where it stopped", file=sys.stderr)
        return 130
    v, t = result.record["validation"], result.record["training"]
    print(
        f"distilled {teacher.label} into {result.out}: {result.record['data']['train_pairs']} training / {v['n']} "
        f"validation pairs, val MSE {v['mse']:.5g} (mean predictor {v['mse_constant']:.5g}), Pearson with the teacher "
        f"{v['pearson']:.4f}, trained in {t['seconds']:.0f} s"
    )
    return 0


def _distill_head(args: argparse.Namespace) -> int:
    """A feature head fitted on human scores; the cross-encoder's training options do not apply."""
    if args.student_kind != "head" or args.teacher_metric != HUMAN:
        raise UserError(
            "a feature head learns from human scores and human scores train a feature head: give "
            "--teacher-metric human with --student-kind head (a cross-encoder imitates a teacher metric)"
        )
    if args.teacher_encoder is not None or args.teacher_options or args.teacher_aligner is not None:
        raise UserError(
            "--teacher-metric human runs no teacher: leave out --teacher-encoder, --teacher-options and "
            "--teacher-aligner"
        )
    result = distill_head(
        args.pairs,
        args.student,
        args.out,
        layers=args.student_layers,
        human=args.human,
        scale=args.label_scale,
        device=args.device,
        batch_size=args.teacher_batch_size,
        threads=args.threads,
        holdout=args.holdout,
        allow_overlap=args.allow_overlap,
    )
    chosen, seconds = result.record["head"]["chosen"], result.record["seconds"]
    print(
        f"fitted a feature head on {result.record['data']['pairs']} human scores into {result.out}: "
        f"{result.record['student']['layers']} layers of {args.student}, features of layers {chosen['layers']}, "
        f"{chosen['components']} axes per family, alpha {chosen['alpha']:.3g}, "
        f"leave-one-pair-out Pearson {chosen['cv_pearson']:.4f}, {seconds['total']:.0f} s"
    )
    return 0
