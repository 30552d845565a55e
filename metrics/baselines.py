"""BERTScore's baseline rescaling (Zhang et al., 2020, section 6 and bert_score's `rescale_with_baseline`):
the computation of `nlgbench baseline`. The files, their checks and the cache are
`nlgbench.metrics.baseline_files` (no torch there).

A score s of P, R or F becomes (s - b) / (1 - b), b being that output's mean over pairs of unrelated
sentences at the model's layer, so that unrelated texts score about 0 and the scale is easier to read.
The map is linear with a positive slope: rankings, Pearson, Spearman and Kendall correlations are
unchanged; only the values move.

Baselines are read from a file in bert_score's format (`baseline_path`: a CSV with the header
`LAYER,P,R,F` and one row per hidden-state layer, 0 the embeddings), so bert_score's own files and a
user's work as they are, or computed by `nlgbench baseline` from a plain-text corpus as bert_score
computed its own: `pairs` random pairs of two different texts of the corpus (its distinct non-blank
lines, drawn with Python's `random.Random(seed)`), scored with every layer, idf off, the mean of each
output per layer. bert_score used 1M pairs of Common Crawl sentences; the standard error of a mean
over 10 000 pairs is 1/100 of the scores' standard deviation over pairs. A corpus of fewer than two
different lines is refused before the model loads, and one whose pairs give a baseline outside the
bounds (`baseline_files.BOUNDS`: too few different sentences) before anything is written. A computed
baseline is stored in the cache (`baselines/<fingerprint>.tsv`, in bert_score's format, with a
`.json` beside it naming the corpus's sha256, the pairs, the seed and the table's sha256, checked
when the table is used), keyed by the model's content fingerprint (`content_fingerprint`: config,
tokenizer and weight files), where a scorer of the same model finds it when no file is given. The
key is the model's files, not its variant: a quantised or half-precision variant reads the fp32
model's baselines.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.foundations.cellcontext import Progress
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.base import PhaseTimer
from nlgbench.metrics.baseline_files import BOUNDS, HEADER, in_bounds, store_baseline
from nlgbench.metrics.common import greedy_match, only_special, pad_tensors, token_weights
from nlgbench.metrics.embedding import embed_texts

DEFAULT_PAIRS = 10_000
DEFAULT_SEED = 0
PAIRS_PER_CHUNK = 256  # pairs embedded at once (bounds memory: every layer's states are held)


def distinct_texts(texts: Sequence[str]) -> list[str]:
    """The different texts of `texts`, in first-seen order; at least two, else one line: a pair of one
    text twice is no pair of unrelated sentences (it scores 1 and drives the baseline to 1)."""
    distinct = list(dict.fromkeys(texts))
    if len(distinct) < 2:
        raise UserError(
            f"a baseline needs at least 2 different non-blank lines of text (pairs of unrelated sentences), "
            f"got {len(distinct)} different of {len(texts)}"
        )
    return distinct


def random_pairs(texts: Sequence[str], pairs: int, seed: int) -> list[tuple[str, str]]:
    """`pairs` (candidate, reference) pairs of two different texts of `texts` (`distinct_texts`), drawn with
    `random.Random(seed)`."""
    distinct = distinct_texts(texts)
    rng = random.Random(seed)
    out = []
    for _ in range(pairs):
        a, b = rng.sample(range(len(distinct)), 2)
        out.append((distinct[a], distinct[b]))
    return out


PAIRS_DONE = "pairs scored"  # the progress hook's unit of work


def pair_scores(
    encoder: Encoder, pairs: Sequence[tuple[str, str]], batch_size: int, progress: Progress | None = None
) -> torch.Tensor:
    """BERTScore P, R, F (idf off) of each (candidate, reference) pair at every layer 0 .. layers_run:
    a tensor [layers + 1, pairs, 3]; `progress` is told the pairs scored, at the start and after each chunk."""
    layers = list(range(encoder.layers_run + 1))
    out = []
    if progress is not None:
        progress(PAIRS_DONE, 0, len(pairs))
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
        if progress is not None:
            progress(PAIRS_DONE, start + len(chunk), len(pairs))
    return torch.cat(out, dim=1)


def baseline_table(
    encoder: Encoder, texts: Sequence[str], pairs: int, seed: int, batch_size: int, progress: Progress | None = None
) -> str:
    """A baseline file in bert_score's format: per layer the mean P, R and F of `pairs` random pairs; one
    line where a mean lies outside `BOUNDS` (pairs too alike to be unrelated sentences)."""
    scores = pair_scores(encoder, random_pairs(texts, pairs, seed), batch_size, progress)
    means = scores.double().mean(dim=1).tolist()
    for k, row in enumerate(means):
        for name, value in zip(HEADER[1:], row, strict=True):
            if not in_bounds(value):
                raise UserError(
                    f"the corpus gives layer {k} a baseline {name} of {value!r}, outside {BOUNDS}: its pairs are "
                    f"too alike ({len(set(texts))} different lines) to be unrelated sentences; use a corpus of "
                    "many different sentences (nothing was written)"
                )
    lines = [",".join(HEADER)] + [f"{k},{p!r},{r!r},{f!r}" for k, (p, r, f) in enumerate(means)]
    return "\n".join(lines) + "\n"


def compute_baseline(
    encoder_ref: EncoderRef,
    texts: Sequence[str],
    pairs: int,
    seed: int,
    device: str,
    batch_size: int,
    progress: Progress | None = None,
) -> tuple[str, Path, dict[str, Any] | None]:
    """`nlgbench baseline`: the baseline file of `encoder_ref` (every layer) from `pairs` random pairs
    of the different non-blank lines `texts`, stored in the cache under the model's fingerprint;
    (table, where, the record of the cached baseline it replaced or None). A corpus of fewer than two
    different lines is refused before the model loads; a baseline out of bounds before anything is
    written. `progress` (a display's hook) is told the pairs scored once the model has loaded."""
    if pairs < 1 or batch_size < 1:
        raise UserError(f"--pairs and --batch-size must be >= 1, got {pairs} and {batch_size}")
    lines = [text.strip() for text in texts if text.strip()]
    distinct = distinct_texts(lines)
    encoder = load_encoder(encoder_ref, device)
    table = baseline_table(encoder, lines, pairs, seed, batch_size, progress)
    corpus = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    record = {
        "source": encoder.source,
        "corpus_sha256": corpus,
        "lines": len(lines),
        "distinct_lines": len(distinct),
        "pairs": pairs,
        "seed": seed,
    }
    stored, replaced = store_baseline(encoder.source, table, record)
    return table, stored, replaced
