"""bert_score 0.3.13's public calls over nlgbench: a bert_score script runs with its import changed
from `bert_score` to `nlgbench.bert_score`, and returns the same (P, R, F) torch tensors.

`score(cands, refs, ...)` and `BERTScorer(...)` take bert_score's arguments in its order and are thin
shells over `nlgbench.Scorer` (the metric is `nlgbench.metrics.bertscore`, tested equal to bert_score
to 1e-5): `model_type` is any registered name, Hub id or local folder, `num_layers` the hidden layer
whose output is used (0: the embeddings), `lang` picks bert_score's model for a language
(`nlgbench.encoders.languages`) where `model_type` is not given. References may be lists of texts:
each candidate keeps the best P, R and F over its references, each on its own, as bert_score does.
`score(..., idf=True)` computes idf over that call's references (all of them, as bert_score);
`BERTScorer(idf=True)` over `idf_sents` or `compute_idf(sents)`, fixed for the scorer's life.

The encoder runs on the fastest exact backend installed (`backend="auto"`, the default): on first use of
a model on a machine, torch, ONNX Runtime and OpenVINO (float32) encode a calibration batch, those whose
F is within 1e-5 of torch's are timed, and the fastest is kept for that model, CPU and library versions
(one line on stderr says which; the hash names it). `backend="torch"` (or `NLGBENCH_BACKEND=torch`)
keeps to torch; bert_score has no such argument, so a script that never names it gets the default.

Where nlgbench differs, by choice:

- Padding: bert_score multiplies the similarity matrix by the padding mask, so a padding position
  counts as similarity 0 and wins a token's max where all its real cosines are negative (unrelated
  sentences at some layers): its score then depends on the batch. nlgbench keeps padding out of the
  max (docs/reference/metrics.md, BERTScore); on ordinary pairs the two agree.
- The hash (`return_hash=True`, `BERTScorer.hash`) is nlgbench's signature string (metric,
  encoder@revision, layer, idf, rescaling digest, reference use, versions), not bert_score's
  `model_L6_no-idf_version=...` format.
- `num_layers=None`: the layer nlgbench's encoder registry holds for BERTScore (bert_score's
  `model2layers` value for the models both know); a model without one needs `num_layers` (bert_score
  raises a KeyError for a model outside its table).
- `rescale_with_baseline=True` without `baseline_path` uses the baseline `nlgbench baseline` stored for
  the model; bert_score's packaged files are not shipped here: give `baseline_path=` one of them
  (`.../bert_score/rescale_baseline/en/roberta-large.tsv`). `lang` is not required for rescaling, and
  a baseline not found is an error, not bert_score's warning followed by unrescaled scores.
- `verbose=True` prints bert_score's "calculating scores..." and "done in ..." lines; `score` draws
  nlgbench's tqdm bar on stderr too (a `BERTScorer` fixes its display when built: no bar).
- `nthreads` is accepted and unused: idf is computed in this process. `use_fast_tokenizer` is accepted
  and unused: nlgbench loads transformers' default tokenizer of the model (the fast one where it has
  one). `BERTScorer.score`'s `batch_size` is accepted; the constructor's is used (it changes speed and
  memory only).
- Refused in one line (`UserError`) rather than approximated: `all_layers=True` (nlgbench scores one
  layer per scorer: call once per `num_layers`), `idf` as a precomputed dict, and `plot_example`.
  Bad arguments (no model, different numbers of candidates and references) are one-line `UserError`s,
  not bert_score's AssertionError.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from nlgbench.api import Scorer
from nlgbench.encoders.languages import lang_encoder
from nlgbench.encoders.registry import EncoderRef, default_layer, registry
from nlgbench.foundations.arguments import check_arguments
from nlgbench.foundations.callers import warn_caller
from nlgbench.foundations.errors import UserError
from nlgbench.metrics.texts import References, as_list, check_texts, check_tokens

if TYPE_CHECKING:
    import torch

__all__ = ["BERTScorer", "plot_example", "score"]

PRF = tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]
PLOT_REFUSAL = (
    "plot_example is not provided by nlgbench.bert_score: nlgbench's scorer returns scores, not the token "
    "similarity matrix bert_score draws; use bert_score.plot_example for the figure"
)


def _model(model_type: str | None, lang: str | None) -> str:
    """The model as bert_score picks it: `model_type` when given, else `lang`'s model (its Hub id)."""
    if model_type is None and lang is None:
        raise UserError("give model_type or lang (as bert_score): e.g. model_type='all-MiniLM-L6-v2' or lang='en'")
    if model_type is None:
        return registry().get(lang_encoder(str(lang))).hub_id
    if not isinstance(model_type, str) or not model_type.strip():
        raise UserError(f"model_type must be a registered name, a Hub id or a local folder, got {model_type!r}")
    return model_type


def _layer(model: str, num_layers: int | None) -> int:
    """`num_layers` as given, else the registry's BERTScore layer for the model; one line where it has none."""
    if num_layers is not None:
        if not isinstance(num_layers, int) or isinstance(num_layers, bool):
            raise UserError(f"num_layers must be an integer (the layer whose output is used), got {num_layers!r}")
        return num_layers
    layer = default_layer(EncoderRef(model), "bertscore")
    if layer is None:
        raise UserError(
            f"num_layers is needed for {model!r}: nlgbench's registry holds no BERTScore layer for it (bert_score's "
            "model2layers table has the tuned layer of the models it knows); give num_layers=N"
        )
    return layer


def _idf_flag(idf: Any) -> bool:
    """bert_score's `idf`: True or False; its precomputed dict is refused in one line."""
    if isinstance(idf, dict):
        raise UserError(
            "idf as a precomputed dict is not taken by nlgbench.bert_score: give idf=True (idf over the "
            "references) or BERTScorer(idf=True, idf_sents=corpus)"
        )
    check_arguments("flag", idf=idf)
    return bool(idf)


def _check_common(all_layers: Any, rescale_with_baseline: Any) -> None:
    check_arguments("flag", all_layers=all_layers, rescale_with_baseline=rescale_with_baseline)
    if all_layers:
        raise UserError(
            "all_layers=True is not provided by nlgbench.bert_score: nlgbench scores one layer per scorer; "
            "call score once per num_layers"
        )


def _options(layer: int, idf: bool, rescale_with_baseline: bool, baseline_path: str | None) -> dict[str, Any]:
    """nlgbench's BERTScore options, the rescaling ones only when rescaling (as bert_score reads `baseline_path`)."""
    options: dict[str, Any] = {"layer": layer, "idf": idf}
    if rescale_with_baseline:
        options["rescale_with_baseline"] = True
        if baseline_path is not None:
            options["baseline_path"] = str(baseline_path)
    return options


def _pairs(cands: Iterable[str], refs: References) -> tuple[list[str], list[Any]]:
    """The candidates and references as lists of the same length; one line naming both otherwise."""
    hyps = as_list("cands", cands)
    references = as_list("refs", refs, "a list of strings (or of lists of strings)")
    if len(hyps) != len(references):
        raise UserError(
            f"cands has {len(hyps)} items but refs has {len(references)}: give one reference (or list) each"
        )
    return hyps, references


def _tensors(columns: tuple[list[float], list[float], list[float]]) -> PRF:
    """P, R and F as bert_score returns them: three float32 tensors of shape (N,) on the CPU."""
    import torch

    p, r, f = (torch.tensor(column, dtype=torch.float32) for column in columns)
    return p, r, f


@contextmanager
def _announced(verbose: bool, refs: list[Any]) -> Iterator[None]:
    """bert_score's two lines around the scoring where `verbose` asks for them, on stdout: "calculating
    scores..." and "done in S seconds, N sentences/sec" (N: the (candidate, reference) pairs, as bert_score)."""
    if verbose:
        print("calculating scores...")
    start = time.perf_counter()
    yield
    if verbose:
        seconds = time.perf_counter() - start
        pairs = sum(1 if isinstance(group, str) else len(group) for group in refs)
        print(f"done in {seconds:.2f} seconds, {pairs / seconds:.2f} sentences/sec")


def score(
    cands: Iterable[str],
    refs: References,
    model_type: str | None = None,
    num_layers: int | None = None,
    verbose: bool = False,
    idf: bool = False,
    device: str | None = None,
    batch_size: int = 64,
    nthreads: int = 4,
    all_layers: bool = False,
    lang: str | None = None,
    return_hash: bool = False,
    rescale_with_baseline: bool = False,
    baseline_path: str | None = None,
    use_fast_tokenizer: bool = False,
    backend: str | None = None,
) -> PRF | tuple[PRF, str]:
    """BERTScore's (P, R, F) per candidate, float32 tensors of shape (N,), as bert_score's `score`; with
    `return_hash=True` `((P, R, F), signature)`. The model loads on every call (use `BERTScorer` to load it
    once); the texts are checked before it loads. Where it differs from bert_score: the module's docstring."""
    check_arguments("flag", verbose=verbose, return_hash=return_hash)
    _check_common(all_layers, rescale_with_baseline)
    use_idf = _idf_flag(idf)
    model = _model(model_type, lang)
    layer = _layer(model, num_layers)
    options = _options(layer, use_idf, rescale_with_baseline, baseline_path)
    hyps, references = _pairs(cands, refs)
    check_texts("bertscore", hyps, references, None, **options)  # before the model loads
    check_tokens("bertscore", model, None, hyps, references, None, **options)
    where = "auto" if device is None else device
    scorer = Scorer(
        "bertscore", model, device=where, batch_size=batch_size, verbose=verbose, backend=backend, **options
    )
    with _announced(verbose, references):
        out = _tensors(scorer.score_prf(hyps, references))
    return (out, scorer.signature) if return_hash else out


class BERTScorer:
    """bert_score's `BERTScorer`: the model loaded once, `.score(cands, refs)` -> (P, R, F) tensors, `.hash`
    (nlgbench's signature), `.compute_idf(sents)`. Arguments as `score`'s; with `idf=True` the idf weights
    come from `idf_sents` or `compute_idf`, fixed for the scorer's life, and scoring without them is
    refused (bert_score: "IDF weights are not computed")."""

    def __init__(
        self,
        model_type: str | None = None,
        num_layers: int | None = None,
        batch_size: int = 64,
        nthreads: int = 4,
        all_layers: bool = False,
        idf: bool = False,
        idf_sents: Iterable[str] | None = None,
        device: str | None = None,
        lang: str | None = None,
        rescale_with_baseline: bool = False,
        baseline_path: str | None = None,
        use_fast_tokenizer: bool = False,
        backend: str | None = None,
    ) -> None:
        _check_common(all_layers, rescale_with_baseline)
        self._idf = _idf_flag(idf)
        self._lang = lang
        self._model_type = _model(model_type, lang)
        self._num_layers = _layer(self._model_type, num_layers)
        self._rescale_with_baseline = bool(rescale_with_baseline)
        self._use_fast_tokenizer = use_fast_tokenizer
        self.batch_size = batch_size
        self.nthreads = nthreads  # accepted, unused: idf is computed in this process
        self.all_layers = False
        self.baseline_path = baseline_path
        self.use_custom_baseline = baseline_path is not None
        options = _options(self._num_layers, self._idf, self._rescale_with_baseline, baseline_path)
        where = "auto" if device is None else device
        self._scorer = Scorer(
            "bertscore", self._model_type, device=where, batch_size=batch_size, backend=backend, **options
        )
        self.device = self._scorer.device
        self._idf_computed = False
        if idf_sents is not None and self._idf:  # without idf bert_score computes the weights and never uses them
            self.compute_idf(idf_sents)

    @property
    def lang(self) -> str | None:
        return self._lang

    @property
    def idf(self) -> bool:
        return self._idf

    @property
    def model_type(self) -> str:
        return self._model_type

    @property
    def num_layers(self) -> int:
        return self._num_layers

    @property
    def rescale_with_baseline(self) -> bool:
        return self._rescale_with_baseline

    @property
    def use_fast_tokenizer(self) -> bool:
        return self._use_fast_tokenizer

    @property
    def hash(self) -> str:
        """nlgbench's signature of this scorer (not bert_score's hash format: the module's docstring)."""
        return self._scorer.signature

    def compute_idf(self, sents: Iterable[str]) -> None:
        """idf weights from `sents`, used by every later `score` (bert_score's `compute_idf`); a second call
        replaces them, with bert_score's warning. With idf off they would never be used: warned."""
        if not self._idf:
            warn_caller("idf is off (idf=False): these weights are not used, as in bert_score")
            return
        if self._idf_computed:
            warn_caller("Overwriting the previous importance weights.")
        self._scorer.fix_idf(sents)
        self._idf_computed = True

    def score(
        self,
        cands: Iterable[str],
        refs: References,
        verbose: bool = False,
        batch_size: int = 64,
        return_hash: bool = False,
    ) -> PRF | tuple[PRF, str]:
        """(P, R, F) per candidate, float32 tensors of shape (N,); with `return_hash=True` `((P, R, F), hash)`."""
        check_arguments("flag", verbose=verbose, return_hash=return_hash)
        if self._idf and not self._idf_computed:
            raise UserError("idf=True but no idf weights: give idf_sents=... or call compute_idf(sents) first")
        hyps, references = _pairs(cands, refs)
        with _announced(verbose, references):
            out = _tensors(self._scorer.score_prf(hyps, references))
        return (out, self.hash) if return_hash else out

    def plot_example(self, candidate: str, reference: str, fname: str = "") -> None:
        """Refused in one line: see `plot_example`."""
        raise UserError(PLOT_REFUSAL)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(hash={self.hash}, batch_size={self.batch_size}, nthreads={self.nthreads})"


def plot_example(
    candidate: str,
    reference: str,
    model_type: str | None = None,
    num_layers: int | None = None,
    lang: str | None = None,
    rescale_with_baseline: bool = False,
    baseline_path: str | None = None,
    use_fast_tokenizer: bool = False,
    fname: str = "",
) -> None:
    """Refused in one line: nlgbench's scorer exposes scores, not the token similarity matrix bert_score draws."""
    raise UserError(PLOT_REFUSAL)
