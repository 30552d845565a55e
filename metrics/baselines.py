"""BERTScore's baseline rescaling (Zhang et al., 2020, section 6 and bert_score's `rescale_with_baseline`).

A score s of P, R or F becomes (s - b) / (1 - b), b being that output's mean over pairs of unrelated
sentences at the model's layer, so that unrelated texts score about 0 and the scale is easier to read.
The map is linear with a positive slope: rankings, Pearson, Spearman and Kendall correlations are
unchanged; only the values move.

Baselines are read from a file in bert_score's format (`baseline_path`: a CSV with the header
`LAYER,P,R,F` and one row per hidden-state layer, 0 the embeddings), so bert_score's own files and a
user's work as they are, or computed by `nlgbench baseline` from a plain-text corpus as bert_score
computed its own: `pairs` random pairs of two different lines of the corpus (Python's `random.Random(seed)`),
scored with every layer, idf off, the mean of each output per layer. bert_score used 1M pairs of
Common Crawl sentences; the standard error of a mean over 10 000 pairs is 1/100 of the scores'
standard deviation over pairs. A computed baseline is stored in the cache
(`baselines/<fingerprint>.tsv`, in bert_score's format, with a `.json` beside it naming the corpus's
sha256, the pairs and the seed), keyed by the model's content fingerprint (config.json and weight
files, `weights_fingerprint`), where a scorer of the same model finds it when no file is given. The
key is the model's files, not its variant: a quantised or half-precision variant reads the fp32
model's baselines.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlgbench.encoders.hfcache import local_snapshot, weights_fingerprint
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_text, write_atomic
from nlgbench.foundations.package import cache_root
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.common import greedy_match, only_special, pad_tensors, token_weights
from nlgbench.metrics.embedding import embed_texts

BASELINES_FOLDER = "baselines"  # under the cache root
HEADER = ("LAYER", "P", "R", "F")  # bert_score's baseline file
DEFAULT_PAIRS = 10_000
DEFAULT_SEED = 0
PAIRS_PER_CHUNK = 256  # pairs embedded at once (bounds memory: every layer's states are held)


@dataclass(frozen=True)
class Baseline:
    """One layer's baselines of P, R and F, and a short digest of them (the signature's `rescaled:`)."""

    precision: float
    recall: float
    f1: float

    @property
    def digest(self) -> str:
        values = f"{self.precision!r},{self.recall!r},{self.f1!r}"
        return hashlib.sha256(values.encode()).hexdigest()[:7]

    def rescale(self, column: str, values: Sequence[float]) -> list[float]:
        """(s - b) / (1 - b) for every value of the output `column` (precision, recall, f1)."""
        b = {"precision": self.precision, "recall": self.recall, "f1": self.f1}[column]
        return [(s - b) / (1 - b) for s in values]


def parse_baselines(text: str, where: str) -> dict[int, Baseline]:
    """The rows of a baseline file in bert_score's format: layer -> Baseline; one clear error otherwise."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(c.strip() for c in rows[0]) != HEADER:
        raise UserError(
            f"{where}: not a baseline file: its first line must be {','.join(HEADER)} (bert_score's format)"
        )
    out: dict[int, Baseline] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            layer, p, r, f = int(row[0]), *(float(v) for v in row[1:4])
            if len(row) != 4:
                raise ValueError
        except ValueError:
            raise UserError(f"{where} line {number}: expected LAYER,P,R,F (an integer, three numbers)") from None
        if not all(math.isfinite(v) and v < 1 for v in (p, r, f)):
            raise UserError(f"{where} line {number}: each baseline must be a finite number below 1, got {p}, {r}, {f}")
        out[layer] = Baseline(p, r, f)
    return out


def read_baseline(path: Path, layer: int) -> Baseline:
    """Layer `layer`'s baselines from a file in bert_score's format (the row whose LAYER is `layer`,
    the row bert_score takes: its files list layers 0, 1, ... in order)."""
    if not Path(path).is_file():
        raise UserError(f"baseline file not found: {path}")
    table = parse_baselines(read_text(Path(path)), str(path))
    if layer not in table:
        raise UserError(f"{path} has no baseline for layer {layer} (it lists layers {sorted(table)})")
    return table[layer]


def model_fingerprint(source: str) -> str:
    """The content fingerprint of a model's local files (`weights_fingerprint`), the key of its cached
    baseline; one clear error where the model has no local files."""
    folder = local_snapshot(source)
    if folder is None:
        raise UserError(f"{source}: no local model files, so no fingerprint to key a baseline by")
    return weights_fingerprint(folder)


def cached_baseline_file(source: str) -> Path:
    """Where `nlgbench baseline` stores the baseline of the model `source` (it may not exist yet)."""
    return cache_root() / BASELINES_FOLDER / f"{model_fingerprint(source)}.tsv"


def find_baseline(source: str, layer: int, path: str | None) -> Baseline:
    """Layer `layer`'s baseline from `path` when given, else from the cache (computed by `nlgbench
    baseline` for this model's files); one clear line saying how to get one where there is none."""
    if path is not None:
        return read_baseline(Path(path), layer)
    cached = cached_baseline_file(source)
    if not cached.is_file():
        raise UserError(
            f"no baseline for {source}: give baseline_path=FILE (bert_score's format, e.g. one of its "
            f"rescale_baseline/ files) or compute one: nlgbench baseline CORPUS --encoder {source}"
        )
    return read_baseline(cached, layer)


def random_pairs(texts: Sequence[str], pairs: int, seed: int) -> list[tuple[str, str]]:
    """`pairs` (candidate, reference) pairs of two different lines of `texts`, drawn with `random.Random(seed)`."""
    if len(texts) < 2:
        raise UserError(f"a baseline needs at least 2 non-blank lines of text, got {len(texts)}")
    rng = random.Random(seed)
    out = []
    for _ in range(pairs):
        a, b = rng.sample(range(len(texts)), 2)
        out.append((texts[a], texts[b]))
    return out


def pair_scores(encoder: Encoder, pairs: Sequence[tuple[str, str]], batch_size: int) -> torch.Tensor:
    """BERTScore P, R, F (idf off) of each (candidate, reference) pair at every layer 0 .. layers_run:
    a tensor [layers + 1, pairs, 3]."""
    layers = list(range(encoder.layers_run + 1))
    out = []
    for start in range(0, len(pairs), PAIRS_PER_CHUNK):
        chunk = pairs[start : start + PAIRS_PER_CHUNK]
        emb = embed_texts(encoder, [t for pair in chunk for t in pair], layers, batch_size, PhaseTimer())
        weights = {
            text: token_weights(tok.ids, encoder.special_ids, None, 0.0).to(hidden.device)
            for text, (tok, hidden) in emb.items()
        }
        empty = {text: only_special(tok.special) for text, (tok, _) in emb.items()}
        per_layer = []
        for k in layers:
            unit = {text: hidden[k] / hidden[k].norm(dim=-1, keepdim=True) for text, (_, hidden) in emb.items()}
            p, r, f = greedy_match(
                pad_tensors([unit[c] for c, _ in chunk]),
                pad_tensors([weights[c] for c, _ in chunk]),
                pad_tensors([unit[r] for _, r in chunk]),
                pad_tensors([weights[r] for _, r in chunk]),
                hyp_empty=torch.tensor([empty[c] for c, _ in chunk]),
                ref_empty=torch.tensor([empty[r] for _, r in chunk]),
            )
            per_layer.append(torch.stack([p, r, f], dim=-1).cpu())
        out.append(torch.stack(per_layer))
    return torch.cat(out, dim=1)


def baseline_table(encoder: Encoder, texts: Sequence[str], pairs: int, seed: int, batch_size: int) -> str:
    """A baseline file in bert_score's format: per layer the mean P, R and F of `pairs` random pairs."""
    means = pair_scores(encoder, random_pairs(texts, pairs, seed), batch_size).double().mean(dim=1)
    lines = [",".join(HEADER)] + [f"{k},{p!r},{r!r},{f!r}" for k, (p, r, f) in enumerate(means.tolist())]
    return "\n".join(lines) + "\n"


def store_baseline(source: str, table: str, record: dict[str, Any]) -> Path:
    """Keep a computed baseline in the cache under the model's fingerprint, with its record beside it."""
    path = cached_baseline_file(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, table)
    write_atomic(path.with_suffix(".json"), json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def compute_baseline(
    encoder_ref: EncoderRef, texts: Sequence[str], pairs: int, seed: int, device: str, batch_size: int
) -> tuple[str, Path]:
    """`nlgbench baseline`: the baseline file of `encoder_ref` (every layer) from `pairs` random pairs
    of the non-blank lines `texts`, stored in the cache under the model's fingerprint; (table, where)."""
    if pairs < 1 or batch_size < 1:
        raise UserError(f"--pairs and --batch-size must be >= 1, got {pairs} and {batch_size}")
    lines = [text.strip() for text in texts if text.strip()]
    encoder = load_encoder(encoder_ref, device)
    table = baseline_table(encoder, lines, pairs, seed, batch_size)
    corpus = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    record = {"source": encoder.source, "corpus_sha256": corpus, "lines": len(lines), "pairs": pairs, "seed": seed}
    return table, store_baseline(encoder.source, table, record)
