"""`nlgbench distill`: a FrugalScore-style student from any teacher cell (Kamal Eddine et al., 2022).

1. **Pairs**: (reference, candidate) pairs from pairs files (JSONL / TSV with `reference` and
   `candidate`), catalogue datasets or own-data files (every reference x hypothesis of their items),
   optionally a seeded subset (`max_pairs`) and synthetic candidates (`nlgbench.distillation.augment`).
2. **Teacher labels**: the teacher metric scores every pair through the code a sweep cell runs
   (spec checks, `MetricInfo.make`, corpus state prepared over all pairs, then `score`), in chunks
   for progress. Labels are cached under `$NLGBENCH_CACHE/distill/` by the sha256 of the pairs,
   the teacher's config and the versions that change scores (as a cell id), so a rerun does not
   relabel. Device and batch size are not in the key (they change scores by rounding only).
3. **Student** (`nlgbench.distillation.student`): any checkpoint, optionally cut to K layers, trained as a
   one-output cross-encoder regressor on `[CLS] candidate [SEP] reference [SEP]` (the order of
   `metrics/frugalscore.py`, which scores it) with MSE, early stopping on validation MSE. The
   split is by reference (no reference on both sides). The target is the teacher's score, negated
   for a lower-is-better teacher (the student, like the `frugalscore` metric, is higher-is-better).
4. **Output**: a model folder (config, tokenizer, safetensors) usable as an encoder of
   `frugalscore` by path, with `distill.json` (teacher, data hashes, hyper-parameters,
   validation MSE and Pearson with the teacher, times) and `training_texts.sha256` (hashes of
   every training reference and pair), which the leakage guard (`nlgbench.core.leakage`) compares with
   evaluation datasets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgbench.foundations.errors import UserError
from nlgbench.core.leakage import DISTILL_FILE, TEXTS_FILE, training_hashes
from nlgbench.distillation.student import BAR_INTERVAL, INPUT_ORDER, TrainConfig, Trained, check_student, train_student

if TYPE_CHECKING:
    from nlgbench.encoders.registry import EncoderRef

FORMAT = 1  # distill.json's layout version
PAIR_FIELDS = ("reference", "candidate")

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    reference: str
    candidate: str
    origin: str  # the source's name, or `augment:<edit>`


@dataclass(frozen=True)
class PairSource:
    """What one `--pairs` value read."""

    name: str
    kind: str  # "pairs file", "catalogue dataset" or "own data file"
    pairs: int
    files: dict[str, str]  # file -> sha256


def read_pairs(source: str) -> tuple[list[Pair], PairSource]:
    """The pairs of one source: a `.jsonl` / `.tsv` pairs file (fields `reference`, `candidate`), an
    own-data file (fields of "Your own data"), or a catalogue dataset's name."""
    from nlgbench.data.dataset import load_dataset, sha256_file

    path = Path(source).expanduser()
    if path.suffix.lower() in (".jsonl", ".tsv") and path.is_file() and _is_pairs_file(path):
        pairs = _read_pairs_file(path)
        return pairs, PairSource(path.stem, "pairs file", len(pairs), {str(path): sha256_file(path)})
    if path.exists() or path.suffix.lower() in (".jsonl", ".tsv"):
        dataset = load_dataset(path=path)  # its own clear errors: missing file, wrong type, bad fields
        kind = "own data file"
    else:
        dataset = load_dataset(source)  # unknown names: the closest catalogue names
        kind = "catalogue dataset"
    pairs = [Pair(ref, it.hypothesis, dataset.name) for it in dataset.items for ref in it.references]
    return pairs, PairSource(dataset.name, kind, len(pairs), dict(dataset.files))


def _is_pairs_file(path: Path) -> bool:
    """Whether a .jsonl / .tsv file holds pairs (its first record or header names `candidate`)."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        first = next((line for line in fh if line.strip()), "")
    if path.suffix.lower() == ".tsv":
        return "candidate" in [name.strip() for name in first.rstrip("\r\n").split("\t")]
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and "candidate" in record


def _read_pairs_file(path: Path) -> list[Pair]:
    """Pairs of a JSONL file (`{"reference": .., "candidate": ..}` per line) or a TSV file with a
    header row naming `reference` and `candidate`; other fields are ignored."""
    from nlgbench.data.dataset import jsonl_records, read_text, tsv_table

    text = read_text(path)  # the data loader's rules: UTF-8, '\n' lines, verbatim TSV fields, no duplicate keys
    records: list[tuple[str, dict[str, Any]]]
    if path.suffix.lower() == ".tsv":
        header, rows = tsv_table(path, text)
        records = [(f"{path} line {number}", dict(zip(header, values))) for number, values in rows]
    else:
        records = list(jsonl_records(path, text))
    pairs = []
    for where, record in records:
        for name in PAIR_FIELDS:
            if not isinstance(record.get(name), str):
                raise UserError(f"{where}: field {name!r} must be text, got {record.get(name)!r}")
        pairs.append(Pair(record["reference"], record["candidate"], path.stem))
    if not pairs:
        raise UserError(f"pairs file {path} has no pairs")
    return pairs


def gather_pairs(sources: Sequence[str], *, max_pairs: int | None, augment: int, seed: int,
                 log: Log = _stderr) -> tuple[list[Pair], list[PairSource], dict[str, int]]:
    """Every source's pairs, blank ones left out and duplicates once; a seeded subset of
    `max_pairs`; then `augment` synthetic candidates per distinct reference. Returns the pairs, the
    sources and counts of what was left out."""
    from nlgbench.distillation.augment import synthetic_candidates

    pairs: list[Pair] = []
    read: list[PairSource] = []
    for source in sources:
        got, info = read_pairs(source)
        pairs += got
        read.append(info)
    counts = {"read": len(pairs)}
    kept = [p for p in pairs if p.reference.strip() and p.candidate.strip()]
    counts["blank"] = len(pairs) - len(kept)
    pairs = _unique(kept)
    counts["duplicate"] = len(kept) - len(pairs)
    if max_pairs is not None and len(pairs) > max_pairs:
        chosen = set(random.Random(f"{seed}/max_pairs").sample(range(len(pairs)), max_pairs))
        pairs = [p for i, p in enumerate(pairs) if i in chosen]
    counts["kept"] = len(pairs)
    if augment:
        made = synthetic_candidates([p.reference for p in pairs], augment, seed)
        before = len(pairs)
        pairs = _unique(pairs + [Pair(s.reference, s.candidate, f"augment:{s.edit}") for s in made])
        counts["synthetic"] = len(pairs) - before
    if not pairs:
        raise UserError(f"no (reference, candidate) pairs in {', '.join(sources)}")
    log(f"pairs: {counts['read']} read from {', '.join(f'{s.name} ({s.pairs})' for s in read)}; "
        f"{counts['blank']} blank and {counts['duplicate']} duplicate left out; {counts['kept']} kept"
        + (f" (seeded subset of max_pairs={max_pairs})" if max_pairs is not None else "")
        + (f"; {counts.get('synthetic', 0)} synthetic candidates added ({augment} per reference)" if augment else "")
        + f"; {len(pairs)} in all")
    return pairs, read, counts


def _unique(pairs: Sequence[Pair]) -> list[Pair]:
    """`pairs` with each (reference, candidate) once, the first kept."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in pairs:
        if (p.reference, p.candidate) not in seen:
            seen.add((p.reference, p.candidate))
            out.append(p)
    return out


def pairs_sha256(pairs: Sequence[Pair]) -> str:
    """The content hash of the pairs' texts in order (their origins are not part of it)."""
    return hashlib.sha256(json.dumps([[p.reference, p.candidate] for p in pairs]).encode("utf-8")).hexdigest()


def split_by_reference(pairs: Sequence[Pair], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, validation) indices: a seeded `val_fraction` of the distinct references with all
    their pairs is held out, so no reference is seen on both sides."""
    refs = list(dict.fromkeys(p.reference for p in pairs))
    if len(refs) < 2:
        raise UserError(f"the pairs have {len(refs)} distinct reference(s); a held-out split needs at least 2")
    random.Random(f"{seed}/split").shuffle(refs)
    n_val = min(len(refs) - 1, max(1, round(val_fraction * len(refs))))
    held = set(refs[:n_val])
    val = [i for i, p in enumerate(pairs) if p.reference in held]
    train = [i for i, p in enumerate(pairs) if p.reference not in held]
    return train, val


# --------------------------------------------------------------------------- teacher


@dataclass(frozen=True)
class Teacher:
    """The teacher cell's config: metric, options (as a cell runs them), encoder, aligner."""

    metric: str
    options: dict[str, Any]
    encoder: EncoderRef
    aligner: str | None

    @classmethod
    def parse(cls, metric: str, encoder: str | dict[str, Any] | None, options: dict[str, Any],
              aligner: str | None = None) -> Teacher:
        """Checked as a spec's metric entry is (unknown names, options, model kinds: one line)."""
        from nlgbench.api import default_encoder
        from nlgbench.metrics import get_metric
        from nlgbench.core.spec import parse_metric_entry

        info = get_metric(metric)
        if "source" in info.needs:
            raise UserError(f"teacher metric {metric!r} reads sources; distillation pairs are (reference, candidate)")
        if not info.reads_references(options):
            raise UserError(f"teacher metric {metric!r} with these options reads no reference; "
                            "distillation pairs are (reference, candidate)")
        raw: dict[str, Any] = {"metric": metric, "options": dict(options),
                               "encoders": [encoder if encoder is not None else default_encoder(metric)]}
        if aligner is not None:
            raw["aligners"] = [aligner]
        entry = parse_metric_entry(raw, "teacher", Path.cwd())
        return cls(metric, entry.options, entry.encoders[0], entry.aligners[0])

    @property
    def higher_is_better(self) -> bool:
        from nlgbench.metrics import get_metric

        return get_metric(self.metric).higher_is_better

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; a local encoder folder carries its weights fingerprint (as a cell's `inputs`)."""
        from nlgbench.encoders.registry import local_fingerprint

        out: dict[str, Any] = {"metric": self.metric, "options": dict(sorted(self.options.items())),
                               "encoder": self.encoder.to_dict(), "aligner": self.aligner}
        fingerprint = local_fingerprint(self.encoder.name)
        if fingerprint is not None:
            out["inputs"] = {self.encoder.name: "weights:" + fingerprint}
        return out

    @property
    def label(self) -> str:
        from nlgbench.core.labels import metric_label, options_label

        return f"{metric_label(self.metric, self.aligner, options_label(self.metric, self.options))} | {self.encoder.label}"


def labels_key(pairs: Sequence[Pair], teacher: Teacher) -> dict[str, Any]:
    """What the teacher's labels depend on: the pairs, the teacher config and the score versions."""
    from nlgbench.core.cell import metric_versions, score_versions

    return {"pairs_sha256": pairs_sha256(pairs), "teacher": teacher.to_dict(),
            "versions": {**score_versions(), **metric_versions(teacher.metric)}}


def labels_cache_name(key: dict[str, Any]) -> str:
    """The labels' cache file, relative to $NLGBENCH_CACHE (as distill.json records it: no machine path)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    return f"distill/labels-{digest[:20]}.json"


def labels_cache_file(key: dict[str, Any]) -> Path:
    from nlgbench.data.dataset import cache_dir

    return cache_dir() / labels_cache_name(key)


@dataclass
class Labels:
    """The teacher's primary score per pair, and how it was obtained."""

    scores: list[float]
    cached: bool
    seconds: float  # of the labelling run (also when read from the cache)
    device: str
    batch_size: int
    scorer: dict[str, Any]  # the scorer's own description (params, layer, ...)
    cache_file: str  # relative to $NLGBENCH_CACHE


def teacher_labels(pairs: Sequence[Pair], teacher: Teacher, *, device: str, batch_size: int,
                   log: Log = _stderr) -> Labels:
    """The teacher's scores of `pairs`, from the cache when the same pairs, teacher and versions
    were labelled before, else computed (and cached, atomically)."""
    key = labels_key(pairs, teacher)
    path = labels_cache_file(key)
    cached = _read_labels(path, key, len(pairs), log)
    if cached is not None:
        log(f"labels: cache hit, {len(pairs)} teacher scores from {path} (labelled in {cached.seconds:.0f} s "
            f"on {cached.device}); not relabelled")
        return cached
    log(f"labels: {len(pairs)} pairs by {teacher.label} on {device}, batch {batch_size}")
    start = time.perf_counter()
    scores, scorer = _run_teacher(pairs, teacher, device, batch_size)
    labels = Labels(scores, False, time.perf_counter() - start, device, batch_size, scorer, labels_cache_name(key))
    _write_json(path, {"key": key, "labels": scores, "seconds": labels.seconds, "device": device,
                       "batch_size": batch_size, "scorer": scorer})
    log(f"labels: done in {labels.seconds:.0f} s ({len(pairs) / max(labels.seconds, 1e-9):.1f} pairs/s); cached in {path}")
    return labels


def _read_labels(path: Path, key: dict[str, Any], n: int, log: Log) -> Labels | None:
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw["key"] != key or len(raw["labels"]) != n:
            raise ValueError("its key or length differs")
        scores = [math.nan if v is None else float(v) for v in raw["labels"]]
        return Labels(scores, True, float(raw["seconds"]), str(raw["device"]), int(raw["batch_size"]),
                      dict(raw.get("scorer") or {}), labels_cache_name(key))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log(f"labels: ignoring the unreadable cache file {path} ({exc}); labelling again")
        return None


def _run_teacher(pairs: Sequence[Pair], teacher: Teacher, device: str, batch_size: int) -> tuple[list[float], dict[str, Any]]:
    """Score the pairs as a sweep cell does (`MetricInfo.make`, `prepare` over all pairs, `score`),
    in chunks of a few batches so progress shows; returns the primary scores and `describe()`."""
    from tqdm.auto import tqdm

    from nlgbench.data.dataset import Item
    from nlgbench.metrics import get_metric
    from nlgbench.metrics.base import PhaseTimer

    info = get_metric(teacher.metric)
    items = [Item(lp="", seg_id=i + 1, system="", source="", reference=p.reference, hypothesis=p.candidate,
                  human=math.nan) for i, p in enumerate(pairs)]
    extra = {"aligner": teacher.aligner} if info.accepts_aligners else {}
    scorer = info.make(teacher.encoder, teacher.options, device, batch_size, **extra)
    scorer.prepare(items)  # corpus state (idf) over all pairs, as a cell over its whole dataset
    chunk = batch_size * 8
    scores: list[float] = []
    with tqdm(total=len(items), unit="pair", desc="teacher", file=sys.stderr, mininterval=BAR_INTERVAL) as bar:
        for start in range(0, len(items), chunk):
            part = items[start:start + chunk]
            scores += [float(v) for v in scorer.score(part, PhaseTimer()).score]
            bar.update(len(part))
    return scores, _json_ready(scorer.describe())


# --------------------------------------------------------------------------- the whole run


@dataclass
class DistillResult:
    out: Path
    record: dict[str, Any]  # distill.json
    val_pairs: list[Pair]
    val_targets: list[float]
    val_predictions: list[float]


def distill(sources: Sequence[str], teacher: Teacher, cfg: TrainConfig, out: str | os.PathLike[str], *,
            device: str = "cpu", teacher_batch_size: int = 64, augment: int = 0, max_pairs: int | None = None,
            allow_overlap: bool = False, threads: int | None = None, log: Log = _stderr) -> DistillResult:
    """Pairs -> teacher labels (cached) -> trained student -> model folder `out` with distill.json.
    `threads`: CPU threads of torch (None: as torch chooses, all cores)."""
    import torch

    from nlgbench.api import check_device
    from nlgbench.encoders.variants import count_params
    from nlgbench.foundations.version import __version__

    cfg.check()
    check_device(device)  # cpu, or a CUDA device this machine has: before any model loads
    if augment < 0 or (max_pairs is not None and max_pairs < 1) or teacher_batch_size < 1:
        raise UserError("augment must be >= 0, max-pairs and teacher-batch-size >= 1")
    if threads is not None:
        if threads < 1:
            raise UserError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    out = Path(out).expanduser()
    _check_out(out)
    check_student(cfg)

    pairs, read, counts = gather_pairs(sources, max_pairs=max_pairs, augment=augment, seed=cfg.seed, log=log)
    labels = teacher_labels(pairs, teacher, device=device, batch_size=teacher_batch_size, log=log)
    sign = 1.0 if teacher.higher_is_better else -1.0
    rows = [(p, sign * y) for p, y in zip(pairs, labels.scores) if math.isfinite(y)]
    if len(rows) < len(pairs):
        log(f"labels: {len(pairs) - len(rows)} pairs without a finite teacher score left out")
    train_idx, val_idx = split_by_reference([p for p, _ in rows], cfg.val_fraction, cfg.seed)
    train, val = [rows[i] for i in train_idx], [rows[i] for i in val_idx]
    trained = train_student([(p.reference, p.candidate, y) for p, y in train],
                            [(p.reference, p.candidate, y) for p, y in val], cfg, device, log)

    texts = training_hashes([(p.reference, p.candidate) for p, _ in rows])
    texts_text = "".join(h + "\n" for h in texts)
    targets = [y for _, y in rows]

    record = {
        "format": FORMAT, "nlgbench": __version__, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "metric": "frugalscore", "input_order": INPUT_ORDER,
        "teacher": {**teacher.to_dict(), "label": teacher.label, "device": labels.device, "batch_size": labels.batch_size,
                    "higher_is_better": teacher.higher_is_better,
                    "target": "score" if sign > 0 else "-score (the teacher is lower-is-better; the student is higher-is-better)",
                    "scorer": labels.scorer, "versions": labels_key(pairs, teacher)["versions"]},
        "student": {"base": cfg.student, "source": trained.source, "layers": cfg.student_layers or trained.layers,
                    "base_layers": trained.layers, "params": count_params(trained.model),
                    "architecture": type(trained.model).__name__},
        "data": {"sources": [asdict(s) for s in read], "counts": counts, "augment": augment, "max_pairs": max_pairs,
                 "pairs": len(rows), "by_origin": dict(Counter(p.origin for p, _ in rows)),
                 "pairs_sha256": pairs_sha256([p for p, _ in rows]), "train_pairs": len(train), "val_pairs": len(val),
                 "split": f"by reference, {cfg.val_fraction} of them held out, seed {cfg.seed}",
                 "target_range": [min(targets), max(targets)], "texts_file": TEXTS_FILE,
                 "texts_sha256": hashlib.sha256(texts_text.encode()).hexdigest(), "texts": len(texts)},
        "threads": torch.get_num_threads(),
        "labels": {"cached": labels.cached, "seconds": round(labels.seconds, 2), "cache_file": labels.cache_file},
        "hyperparameters": asdict(cfg),
        **trained.record,
        "history": trained.history,
        "allow_overlap": allow_overlap,
    }
    _write_student(out, trained, record, texts_text)
    log(f"student written to {out} (use it as `metric: frugalscore` with `encoders: [{out}]`"
        f"{'' if not allow_overlap else '; --allow-overlap recorded: the leakage guard is off for it'})")
    return DistillResult(out, record, [p for p, _ in val], [y for _, y in val], trained.val_predictions)


def _check_out(out: Path) -> None:
    """`out` may be created or replaced: not a file, not a non-empty folder other than a student's."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the student")
    if out.is_dir() and any(out.iterdir()) and not (out / DISTILL_FILE).is_file():
        raise UserError(f"--out {out} is a non-empty folder without {DISTILL_FILE}; give a new folder "
                        "(only a previous student's folder is replaced)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out.parent}: {exc.strerror or exc}") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise UserError(f"cannot write to {out.parent}: permission denied or read-only")


def _write_student(out: Path, trained: Trained, record: dict[str, Any], texts: str) -> None:
    """The whole folder is written beside `out`, then renamed into place (a previous student there
    is replaced only once the new one is complete)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        trained.model.save_pretrained(tmp)
        trained.tokenizer.save_pretrained(tmp)
        (tmp / TEXTS_FILE).write_text(texts, encoding="utf-8")
        (tmp / DISTILL_FILE).write_text(json.dumps(_json_ready(record), indent=2) + "\n", encoding="utf-8")
        for path in tmp.iterdir():  # plain readable files, whatever the writers' temporary files were made with
            path.chmod(0o644)
        tmp.chmod(0o755)
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    """A JSON file written through a temporary file in its folder, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_json_ready(payload), fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_ready(value: Any) -> Any:
    """NaN/inf -> None, tuples -> lists, recursively (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


# --------------------------------------------------------------------------- CLI


def add_distill_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `nlgbench distill`."""
    t = p.add_argument_group("teacher")
    t.add_argument("--teacher-metric", required=True, help="a registered metric (bertscore, moverscore, ...)")
    t.add_argument("--teacher-encoder", help="its encoder: registered name, Hub id or local folder "
                                             "(default as nlgbench score: all-MiniLM-L6-v2, none for lexical metrics)")
    t.add_argument("--teacher-options", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="the teacher metric's options, e.g. idf=true layer=9 (values read as YAML)")
    t.add_argument("--teacher-aligner", help="wmd, rwmd or wcd (metrics with an aligner)")
    t.add_argument("--teacher-batch-size", type=int, default=64, help="batch size of the labelling (default 64)")
    s = p.add_argument_group("student")
    s.add_argument("--student", required=True, help="the student checkpoint: registered name, Hub id or local folder")
    s.add_argument("--student-layers", type=int, metavar="K", help="keep only its first K layers")
    d = p.add_argument_group("pairs")
    d.add_argument("--pairs", nargs="+", action="extend", required=True, metavar="PAIRS",
                   help="pairs file (.jsonl/.tsv with reference and candidate), own-data file, or catalogue dataset; several allowed")
    d.add_argument("--max-pairs", type=int, metavar="N", help="a seeded random subset of N pairs (before augmentation)")
    d.add_argument("--augment", type=int, default=0, metavar="N",
                   help="N synthetic candidates per distinct reference: word drop, swap, substitution, truncation (default 0)")
    d.add_argument("--allow-overlap", action="store_true",
                   help="record that the student may be evaluated on data overlapping its training pairs (lifts the leakage guard)")
    o = p.add_argument_group("training")
    o.add_argument("--out", required=True, metavar="MODEL_DIR", help="the student's folder (a previous student there is replaced)")
    o.add_argument("--epochs", type=int, default=TrainConfig.epochs, help=f"default {TrainConfig.epochs}")
    o.add_argument("--lr", type=float, default=TrainConfig.lr,
                   help=f"peak learning rate of AdamW, linear warm-up and decay (default {TrainConfig.lr})")
    o.add_argument("--batch-size", type=int, default=TrainConfig.batch_size, help=f"default {TrainConfig.batch_size}")
    o.add_argument("--max-length", type=int, default=TrainConfig.max_length, help="tokens per pair (default 128)")
    o.add_argument("--val-fraction", type=float, default=TrainConfig.val_fraction,
                   help="share of the distinct references held out for validation (default 0.1)")
    o.add_argument("--patience", type=int, default=TrainConfig.patience,
                   help="validations without improvement before stopping, counted after the first epoch "
                        "(default 3; 4 validations per epoch)")
    o.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (teacher and student)")
    o.add_argument("--seed", type=int, default=TrainConfig.seed, help="pairs subset, augmentation, split, head, order (default 0)")
    o.add_argument("--threads", type=int, help="CPU threads (default: all cores)")


def _option(raw: str) -> tuple[str, Any]:
    import yaml

    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--teacher-options takes KEY=VALUE, got {raw!r}")
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        raise UserError(f"--teacher-options {key}: cannot read the value {value!r}") from None


def cmd_distill(args: argparse.Namespace) -> int:
    """Run `nlgbench distill`; one summary line on stdout."""
    teacher = Teacher.parse(args.teacher_metric, args.teacher_encoder, dict(_option(o) for o in args.teacher_options),
                            args.teacher_aligner)
    cfg = TrainConfig(student=args.student, student_layers=args.student_layers, epochs=args.epochs, lr=args.lr,
                      batch_size=args.batch_size, max_length=args.max_length, val_fraction=args.val_fraction,
                      patience=args.patience, seed=args.seed)
    result = distill(args.pairs, teacher, cfg, args.out, device=args.device, teacher_batch_size=args.teacher_batch_size,
                     augment=args.augment, max_pairs=args.max_pairs, allow_overlap=args.allow_overlap,
                     threads=args.threads)
    v, t = result.record["validation"], result.record["training"]
    print(f"distilled {teacher.label} into {result.out}: {result.record['data']['train_pairs']} training / {v['n']} "
          f"validation pairs, val MSE {v['mse']:.5g} (mean predictor {v['mse_constant']:.5g}), Pearson with the teacher "
          f"{v['pearson']:.4f}, trained in {t['seconds']:.0f} s")
    return 0


if __name__ == "__main__":  # `python -m nlgbench.distillation.distill ...`, the same as `nlgbench distill ...`
    parser = argparse.ArgumentParser(prog="nlgbench distill", description="Distil a teacher metric into a FrugalScore student.")
    add_distill_arguments(parser)
    try:
        sys.exit(cmd_distill(parser.parse_args()))
    except UserError as exc:
        print(f"nlgbench: error: {exc}", file=sys.stderr)
        sys.exit(2)
