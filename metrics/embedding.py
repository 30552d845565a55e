"""Shared encoding step of the token-embedding metrics: unique texts, length-sorted batches
prepared ahead of the model (tokenised and padded in a background thread on CUDA), corpus idf.

Keeping the device busy: the model waits for nothing but its inputs, so `embed_texts` tokenises
and pads batch k+1 (`prepared_batches`, run by a `Prefetcher`) while the model encodes batch k.
Its phases still add up: `tokenize` is the time the encoding loop waited for inputs (tokenisation
that was not hidden), `encode` the rest of the loop, and `tokenize_overlapped` the background
tokenisation that ran hidden behind other work (not part of the sum; see `OVERLAPPED`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

# POT at the import of the embedding metrics, as when the aligners' module imported it at its top (it now
# defers it, for the spec checks): a cell's worker imports it in its start-up, before the memory baseline
# and the fork server's fork, not in the cell's first pass.
import ot  # noqa: F401
import torch

from nlgbench.data.items import Item
from nlgbench.encoders.registry import EncoderRef
from nlgbench.encoders.runtime import Encoder, load_encoder
from nlgbench.encoders.tokenization import Tokenized
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.devicenames import is_cuda
from nlgbench.metrics.alignment import get_aligner
from nlgbench.metrics.base import PhaseTimer, ScorerBase
from nlgbench.metrics.common import greedy_match, group_sorted, idf_table

T = TypeVar("T")


class LayerOptions(Protocol):
    @property
    def layer(self) -> int | None: ...


L = TypeVar("L", bound=LayerOptions)

# Items scored per chunk: embeddings of one chunk's unique texts are kept, then freed.
CHUNK_ITEMS = 2048
# Texts tokenised at a time when inputs are prepared in a background thread (at least; see
# `slice_size`): the first slice is the only tokenisation the model must wait for.
TOKENIZE_SLICE = 512
# Prepared batches the background thread may hold ready (a slice's worth: while it tokenises the
# next slice, the model has these to run; kilobytes of pinned memory each).
PREFETCH_DEPTH = 16
# Phases whose name ends so ran in the background, hidden behind other phases: reported, but not
# part of the sum of a repeat's phases (which adds up to its wall time).
OVERLAPPED = "_overlapped"

Embedded = tuple[Tokenized, torch.Tensor]  # a text's tokens and hidden states


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """Consecutive slices of CHUNK_ITEMS items (bounds the memory held by embeddings)."""
    for start in range(0, len(items), CHUNK_ITEMS):
        yield items[start : start + CHUNK_ITEMS]


def corpus_idf(encoder: Encoder, texts: Sequence[str]) -> tuple[dict[int, float], float]:
    """`idf_table` over the encoder's token ids of `texts` (one corpus side: references or hypotheses)."""
    return idf_table([t.ids for t in encoder.tokenize(list(texts), ids_only=True)])


@dataclass
class SidedIdf:
    """idf over all references and, separately, over all hypotheses (MoverScore's and BaryScore's corpus state).

    Before `fit` (idf off) there are no tables: every token weighs 1.
    """

    reference: dict[int, float] | None = None
    hypothesis: dict[int, float] | None = None
    unseen_reference: float = 1.0
    unseen_hypothesis: float = 1.0

    def fit(self, encoder: Encoder, items: Sequence[Item]) -> None:
        self.reference, self.unseen_reference = corpus_idf(encoder, [it.reference for it in items])
        self.hypothesis, self.unseen_hypothesis = corpus_idf(encoder, [it.hypothesis for it in items])


# ----------------------------------------------------------------------------- inputs prepared ahead


@dataclass
class PreparedBatch:
    """One model batch, ready to run: positions of its texts in the list given to
    `prepared_batches`, their tokens, the padded ids and mask (`Encoder.pad`), and where its real
    tokens lie in the flattened batch (B x T; pinned on CUDA like the ids: `embed_flat` copies it
    without waiting for the device)."""

    index: list[int]
    tokens: list[Tokenized]
    ids: torch.Tensor
    mask: torch.Tensor
    real: torch.Tensor


def prepared_batches(
    encoder: Encoder,
    texts: Sequence[str],
    batch_size: int,
    tokens: int | None = None,
    slice_texts: int | None = None,
    ids_only: bool = False,
) -> Iterator[PreparedBatch]:
    """`texts` tokenised and padded into model batches, longest first: sorted by token count and
    cut by `group_sorted` (at most `batch_size` texts, or the `tokens` budget).

    `slice_texts=None` tokenises all texts at once: the tightest batches (one global sort). With
    `slice_texts=N` (for a background thread, `embed_texts` on CUDA) the first batch is ready after
    N texts are tokenised, not all: texts are taken longest first by characters (known before
    tokenising), N at a time; what is pending is sorted by token count and cut, and the last,
    possibly part-full batch of a slice waits for the next slice's texts. Batches are then a little
    less tight than under the global sort. Either way
    the batches depend on the texts only. `ids_only`: `Encoder.tokenize`'s (the metric reads ids alone)."""
    if slice_texts is None:
        order = list(range(len(texts)))
        step = max(len(texts), 1)
    else:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)  # stable: ties in input order
        step = slice_texts
    pending: list[tuple[int, Tokenized]] = []
    for start in range(0, len(order), step):
        index = order[start : start + step]
        pending += zip(index, encoder.tokenize([texts[i] for i in index], ids_only=ids_only), strict=True)
        pending.sort(key=lambda pair: len(pair[1].ids), reverse=True)  # stable: ties keep their order
        groups = list(group_sorted([len(tok.ids) for _, tok in pending], batch_size, tokens))
        last = start + step >= len(order)
        for group in groups if last else groups[:-1]:
            toks = [pending[j][1] for j in group]
            ids, mask = encoder.pad([t.ids for t in toks])
            real = mask.flatten().nonzero().squeeze(1)
            real = real.pin_memory() if ids.is_pinned() else real
            yield PreparedBatch([pending[j][0] for j in group], toks, ids, mask, real)
        pending = [] if last or not groups else [pending[j] for j in groups[-1]]


_END = object()  # the producer finished


class Prefetcher(Generic[T]):
    """Iterate `source` in a background thread, up to `depth` items ahead of the consumer.

    A context manager (optimum-benchmark-style tracker): on exit the producer is told to stop and
    joined, whatever happened, so nothing runs on after the block (a tokenizer must never be used
    by two threads at once). An exception in the producer is raised in the consumer. It measures
    `busy_s`, the producer's time inside `source`, and `wait_s`, the consumer's time waiting for
    items; `busy_s - wait_s` ran hidden behind the consumer's own work. With `threaded=False`
    the items are made on demand in the consumer's thread (`wait_s == busy_s`, nothing hidden):
    the same items, in the same order.

    `before_wait` runs (untimed) when the consumer is about to wait because no item is ready:
    `embed_texts` passes the device synchronisation, so that queued GPU work finishes outside the
    wait and `wait_s` is time the device sat idle for want of input. When an item is ready there
    is no synchronisation, and the next batch's kernels queue behind the last ones."""

    def __init__(
        self,
        source: Iterable[T],
        *,
        threaded: bool = True,
        depth: int = PREFETCH_DEPTH,
        before_wait: Callable[[], None] = lambda: None,
    ) -> None:
        self._source = iter(source)
        self.threaded = threaded
        self.before_wait = before_wait
        self.busy_s = 0.0
        self.wait_s = 0.0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False

    def _produce(self) -> None:
        try:
            while not self._stop.is_set():
                start = time.perf_counter()
                try:
                    item: Any = next(self._source)
                except StopIteration:
                    item = _END
                self.busy_s += time.perf_counter() - start
                self._put(item)
                if item is _END:
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def __enter__(self) -> Prefetcher[T]:
        if self.threaded:
            self._thread = threading.Thread(target=self._produce, name="nlgbench-prefetch", daemon=True)
            self._thread.start()
        return self

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        if self.threaded and self._queue.empty():
            self.before_wait()
        start = time.perf_counter()
        try:
            if self.threaded:
                item: Any = self._queue.get()
            else:
                item = next(self._source, _END)
                self.busy_s += time.perf_counter() - start
        finally:
            self.wait_s += time.perf_counter() - start
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def hidden_s(self) -> float:
        """Producer time that ran while the consumer did something else."""
        return max(0.0, self.busy_s - self.wait_s) if self.threaded else 0.0


def slice_size(batch_size: int, tokens: int | None) -> int:
    """Texts tokenised at a time ahead of the model: TOKENIZE_SLICE, or about 8 batches' worth
    when more (8 x batch_size; under a token budget tokens / 4, 8 batches of ~30-token texts), so
    that each slice's batches are still tightly sorted."""
    return max(TOKENIZE_SLICE, 8 * batch_size, (tokens or 0) // 4)


def prefetch_in_thread(device: str) -> bool:
    """Whether model inputs are prepared in a background thread on `device`: on CUDA, where the
    device would otherwise wait for the CPU. On CPU tokenisation and the model share the same
    cores, and inline preparation measured as fast or faster (docs/concepts/measurement.md)."""
    return is_cuda(device)


def encode_unique(
    encoder: Encoder,
    unique: Sequence[str],
    layers: Sequence[int],
    batch_size: int,
    timer: PhaseTimer,
    take: Callable[[PreparedBatch, torch.Tensor], None],
    take_phase: str = "encode",
    ids_only: bool = False,
) -> None:
    """Encode distinct texts in prepared batches (`prepared_batches`, `Prefetcher`) and hand each
    batch with its float32 states to `take`: [B, T, D] for one layer, [B, k, T, D] for k layers.
    `take`'s own time counts in `take_phase` (the metric's work on the states: `match` for BERTScore's
    packing and normalising; not synchronised on CUDA, so queued device work stays in `encode`).

    Phases: `tokenize`, the time the loop waited for inputs (on CUDA with the device idle: it is
    synchronised before a wait, not before every batch); `encode`, the rest of the loop (copies to
    the device, the model, what `take` does); and when threaded `tokenize_overlapped`, tokenisation
    that ran hidden behind the model (not part of the sum that makes up the wall time). Each batch
    is reported to the progress hook of the encoder's cell context."""
    threaded = prefetch_in_thread(encoder.device)
    budget = encoder.context.batch_tokens
    slice_texts = slice_size(batch_size, budget) if threaded else None
    batches = prepared_batches(encoder, unique, batch_size, budget, slice_texts, ids_only)
    done, taking = 0, 0.0
    with timer.phase("encode"), Prefetcher(batches, threaded=threaded, before_wait=timer.sync) as stream:
        for batch in stream:
            states, _ = encoder.hidden_states([t.ids for t in batch.tokens], layers, padded=(batch.ids, batch.mask))
            # half-precision variants: metrics work in float32
            hidden = states[0].float() if len(layers) == 1 else torch.stack(states, dim=1).float()
            start = time.perf_counter()
            take(batch, hidden)
            taking += time.perf_counter() - start
            done += len(batch.index)
            encoder.context.advance("texts encoded", done, len(unique))
    timer.seconds["encode"] -= stream.wait_s + taking
    timer.seconds[take_phase] = timer.seconds.get(take_phase, 0.0) + taking
    timer.seconds["tokenize"] = timer.seconds.get("tokenize", 0.0) + stream.wait_s
    if stream.threaded:
        key = "tokenize" + OVERLAPPED
        timer.seconds[key] = timer.seconds.get(key, 0.0) + stream.hidden_s


def embed_texts(
    encoder: Encoder, texts: Sequence[str], layer: int | Sequence[int], batch_size: int, timer: PhaseTimer
) -> dict[str, Embedded]:
    """Tokens and hidden states of each unique text: [n_tokens, D] for one layer, [k, n_tokens, D] for k layers.

    Texts are deduplicated and encoded in length-sorted batches (`encode_unique`: `batch_size`
    texts, or the token budget of the encoder's cell context), prepared ahead of the model
    (`Prefetcher`): on CUDA in a background thread, TOKENIZE_SLICE texts at a time; on CPU all at
    once, inline. Phases as `encode_unique`."""
    layers = [layer] if isinstance(layer, int) else list(layer)
    unique = list(dict.fromkeys(texts))
    out: dict[int, Embedded] = {}

    def take(batch: PreparedBatch, hidden: torch.Tensor) -> None:
        for row, (i, tok) in enumerate(zip(batch.index, batch.tokens, strict=True)):
            out[i] = (tok, hidden[row, ..., : len(tok.ids), :])

    encode_unique(encoder, unique, layers, batch_size, timer, take)
    return {text: out[i] for i, text in enumerate(unique)}


@dataclass
class FlatEmbedding:
    """Hidden states of distinct texts packed without padding: `states` [N, D] holds every token of
    every text (one layer), text i's tokens at rows `start[i]` to `start[i] + length[i]`; `ids` [N]
    their token ids. Built batch by batch with one mask selection each (`embed_flat`), and read
    batch by batch with one gather (`batch_index`): no Python work per text or per token."""

    texts: dict[str, int]  # text -> its position i
    states: torch.Tensor
    ids: torch.Tensor
    start: torch.Tensor
    length: torch.Tensor

    def batch_index(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Where the tokens of texts `rows` [B] lie, as one padded batch: row indices [B, L] into
        `states` (L: their longest; `states[index]` is the batch [B, L, D], `weights[index]` its
        weights) and the mask [B, L] of real tokens, both on the states' device. Padding positions
        repeat a real row of their text (no copy spent on zeros): read them through the mask
        (`greedy_match`'s masks; weights times the mask)."""
        lengths = self.length[rows]
        steps = torch.arange(int(lengths.max()) if len(rows) else 0)
        mask = steps.unsqueeze(0) < lengths.unsqueeze(1)
        index = self.start[rows].unsqueeze(1) + torch.minimum(steps.unsqueeze(0), lengths.unsqueeze(1) - 1)
        return index.to(self.states.device), mask.to(self.states.device)

    def batch_states(self, index: torch.Tensor) -> torch.Tensor:
        """`states[index]` ([B, L, D]) by an embedding lookup, several times faster than indexing."""
        return torch.nn.functional.embedding(index, self.states)


class Workspace:
    """A growing buffer of rows [capacity, D] that `embed_flat` packs states into, kept by its scorer
    across chunks and repeats: allocating (and first touching) hundreds of megabytes for every chunk
    costs more than the packing itself; the rows are rewritten, never read across calls."""

    def __init__(self) -> None:
        self.rows: torch.Tensor | None = None

    def reserve(self, needed: int, width: int, device: torch.device, keep: int) -> torch.Tensor:
        """The buffer, with room for `needed` rows of `width` on `device` (its first `keep` rows kept
        when it grows: to twice its size, or `needed`)."""
        rows = self.rows
        if rows is None or rows.shape[1] != width or rows.device != device:
            rows = self.rows = torch.empty(needed, width, device=device)
        elif len(rows) < needed:
            grown = torch.empty(max(needed, 2 * len(rows)), width, device=device)
            grown[:keep] = rows[:keep]
            rows = self.rows = grown
        return rows


def embed_flat(
    encoder: Encoder,
    texts: Sequence[str],
    layer: int | Sequence[int],
    batch_size: int,
    timer: PhaseTimer,
    *,
    unit: bool = False,
    workspace: Workspace | None = None,
) -> FlatEmbedding:
    """`embed_texts` for one layer, packed as a `FlatEmbedding` (on the cell's device) into
    `workspace` (a fresh one if None): each model batch's real tokens are selected in one
    operation, and with `unit` divided by their norms while in the cache. The packing counts as
    `match` (the metric's work, not the model's). Several layers are packed side by side: a token's row
    holds layer `layer[0]`'s state, then `layer[1]`'s ... ([N, k D]; `unit` then applies to the whole row)."""
    workspace = workspace if workspace is not None else Workspace()
    layers = [layer] if isinstance(layer, int) else list(layer)
    unique = list(dict.fromkeys(texts))
    ids: list[torch.Tensor] = []
    order: list[int] = []
    lengths: list[torch.Tensor] = []
    filled = 0

    def take(batch: PreparedBatch, hidden: torch.Tensor) -> None:
        nonlocal filled
        mask, real = batch.mask.bool(), batch.real
        if hidden.dim() == 4:  # [B, k, T, D] -> [B, T, k D]: each token's layers side by side
            hidden = hidden.permute(0, 2, 1, 3).reshape(hidden.shape[0], hidden.shape[2], -1)
        rows = workspace.reserve(filled + len(real), hidden.shape[-1], hidden.device, filled)
        part = rows[filled : filled + len(real)]
        where = real.to(hidden.device, non_blocking=True)  # from pinned memory on CUDA: no wait
        torch.index_select(hidden.reshape(-1, hidden.shape[-1]), 0, where, out=part)
        if unit:
            part.div_(part.norm(dim=-1, keepdim=True))
        filled += len(real)
        ids.append(batch.ids.flatten()[real])
        lengths.append(mask.sum(1))
        order.extend(batch.index)

    encode_unique(encoder, unique, layers, batch_size, timer, take, take_phase="match", ids_only=True)
    flat_length = torch.cat(lengths) if lengths else torch.zeros(0, dtype=torch.long)
    flat_start = torch.cumsum(flat_length, 0) - flat_length
    position = torch.tensor(order, dtype=torch.long)
    rows = workspace.rows
    return FlatEmbedding(
        texts={text: i for i, text in enumerate(unique)},
        states=rows[:filled] if rows is not None else torch.zeros(0, 0),
        ids=torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long),
        start=torch.empty_like(flat_start).index_copy_(0, position, flat_start),
        length=torch.empty_like(flat_length).index_copy_(0, position, flat_length),
    )


def greedy_match_pairs(
    flat: FlatEmbedding,
    weights: torch.Tensor,
    empty: torch.Tensor,
    hyp: torch.Tensor,
    ref: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BERTScore P, R, F1 [n] of pairs (hyp[i], ref[i]) (text positions in `flat`, unit-norm states;
    `weights` [N] of its tokens, `empty` [n_texts]), matched `batch_size` pairs of similar lengths at
    a time (least padding, longest first), gathered from the packed states (`greedy_match`)."""
    order = torch.argsort(torch.maximum(flat.length[hyp], flat.length[ref]), descending=True, stable=True)
    columns = [torch.empty(len(hyp), dtype=flat.states.dtype, device=flat.states.device) for _ in range(3)]
    for rows in order.split(batch_size):
        h_index, h_mask = flat.batch_index(hyp[rows])
        r_index, r_mask = flat.batch_index(ref[rows])
        matched = greedy_match(
            flat.batch_states(h_index),
            weights[h_index] * h_mask,
            flat.batch_states(r_index),
            weights[r_index] * r_mask,
            hyp_empty=empty[hyp[rows]],
            ref_empty=empty[ref[rows]],
            padding_repeats=True,
        )
        for column, values in zip(columns, matched, strict=True):
            column[rows.to(column.device)] = values
    return columns[0], columns[1], columns[2]


def embed_pairs(
    encoder: Encoder, pairs: Sequence[tuple[str, str]], layer: int | Sequence[int], batch_size: int, timer: PhaseTimer
) -> Iterator[tuple[Embedded, Embedded]]:
    """The embedded texts of each (a, b) pair, in order; encoded chunk by chunk with `embed_texts`."""
    for chunk in chunks(pairs):
        emb = embed_texts(encoder, [text for pair in chunk for text in pair], layer, batch_size, timer)
        for a, b in chunk:
            yield emb[a], emb[b]


class AlignerScorer(ScorerBase[L]):
    """A scorer comparing token clouds of one encoder layer (`options.layer`) with an aligner (MoverScore,
    XMoverScore)."""

    def __init__(
        self,
        encoder_ref: EncoderRef,
        options: dict[str, Any],
        device: str,
        batch_size: int,
        aligner: str | None = None,
        context: CellContext | None = None,
    ) -> None:
        super().__init__(options, device, batch_size, context)
        self.aligner = get_aligner(aligner or "wmd")
        self.encoder = load_encoder(encoder_ref, device, needed_layer=self.options.layer, context=self.context)
        self.layer = self.encoder.layers_run
