"""The metric contract: what every metric declares and the thin scorer the worker drives.

A metric module has a functional core (pure functions over tensors and arrays), an options
dataclass (the one declaration of its options: names, types, defaults; a packaged metric's in
`nlgbench.metrics.metric_options`, read without importing the metric), a scorer that owns its
models' lifetime (a `ScorerBase` subclass), and an `INFO` (a `MetricInfo`) tying them together.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from nlgbench.data.items import Item, blank_positions
from nlgbench.foundations.cellcontext import CellContext
from nlgbench.foundations.errors import UserError

if TYPE_CHECKING:
    from nlgbench.encoders.tokenization import Tokenized

OptionsT = TypeVar("OptionsT")

#: The harness's option for metrics that read references: how to use several references per item.
REFERENCE_POLICY = "reference_policy"
REFERENCE_POLICIES = ("first", "max", "mean")
#: The options the harness applies around a scorer, (type, default) by name: `reference_policy`, for a metric that
#: may read references (`MetricInfo.harness_options`).
HARNESS_OPTIONS: dict[str, tuple[type, Any]] = {REFERENCE_POLICY: (str, None)}
#: What a metric may declare as its own use of several references (`MetricInfo.multi_reference`).
MULTI_REFERENCE = ("max", "mean", "native")


@dataclass
class PhaseTimer:
    """Accumulates wall time per named phase (encode, match, transport ...), synchronising CUDA."""

    sync: Callable[[], None] = lambda: None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def reset(self) -> None:
        self.seconds = {}


@dataclass
class Scores:
    """A metric's per-item outputs: `primary` names the column that is the metric's score;
    `opposite_direction` the columns better in the other direction than the metric (a distance beside
    a similarity), so that the best over several references is taken the right way."""

    primary: str
    columns: dict[str, list[float]]
    opposite_direction: tuple[str, ...] = ()

    @property
    def score(self) -> list[float]:
        return self.columns[self.primary]


class Scorer(Protocol):
    """A metric bound to one encoder; owns the model's lifetime."""

    def prepare(self, items: Sequence[Item]) -> None:
        """Corpus-level state (IDF, normalisation) over the whole dataset, once."""

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        """Score all items; time phases on `timer`."""

    def describe(self) -> dict[str, Any]:
        """What this scorer actually runs: layer, parameters, disk bytes, options."""


@runtime_checkable
class FixedIdf(Protocol):
    """A scorer whose idf can be fixed from a given corpus for its life (bert_score's `idf_sents`)."""

    def fix_idf(self, texts: Sequence[str]) -> None:
        """Compute idf from `texts` now; `prepare` keeps it."""


@runtime_checkable
class CorpusScore(Protocol):
    """A scorer with a corpus-level score beside its segment scores (sacrebleu's corpus BLEU and chrF)."""

    def corpus_score(self) -> dict[str, Any]:
        """The corpus score of the items last scored: `score`, `signature`, `segment_mean`; {} before any."""


class ScorerBase(Generic[OptionsT]):
    """What every scorer holds: its typed options (an instance of `options_class`), device, batch size
    and the cell's context (`CellContext`: token budget, progress hook, the records its models write).

    Subclasses load their models in `__init__` (after calling this one), giving `self.context` to the
    encoders they load, implement `score` and `describe`, and override `prepare` when the metric has
    corpus state.
    """

    options_class: type[OptionsT]

    def __init__(
        self, options: dict[str, Any], device: str, batch_size: int, context: CellContext | None = None
    ) -> None:
        self.options: OptionsT = self.options_class(**options)
        self.device = device
        self.batch_size = batch_size
        self.context = context if context is not None else CellContext()

    def prepare(self, items: Sequence[Item]) -> None:
        """No corpus state."""


def with_second_model(described: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`described` with the parameters, disk and weight bytes of a second model the scorer runs added in."""
    return {**described, **{key: described[key] + other[key] for key in ("params", "disk_bytes", "weight_bytes")}}


def _value_type(hint: Any) -> type:
    """The type an option's value must have: the annotation without `| None`, without type arguments."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return typing.get_origin(hint) or hint


def _field_default(f: dataclasses.Field[Any]) -> Any:
    """A dataclass field's default value: `default`, else a fresh `default_factory()`."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"option {f.name!r} has no default")


def option_table(options_class: type) -> dict[str, tuple[type, Any]]:
    """option -> (type, default), read from an options dataclass (its fields, in order)."""
    hints = typing.get_type_hints(options_class)
    table: dict[str, tuple[type, Any]] = {}
    for f in dataclasses.fields(options_class):
        table[f.name] = (_value_type(hints[f.name]), _field_default(f))
    return table


#: The item texts a metric may read, in the order messages name them.
READ_FIELDS = ("hypothesis", "reference", "source")


@dataclass(frozen=True)
class BlankTexts:
    """What a metric does with a blank text (empty or whitespace only: an empty system output, an
    empty reference) in each item text it reads, the one declaration of it (`MetricInfo.blank_texts`).

    `scored`: fields where the metric's definition or reference code gives a blank text a value,
    which its scorer computes (`value` says which, in words: docs/reference/metrics.md's table and the warnings
    quote it); a blank text there is scored and warned about. `refused`: fields where it gives none
    (`reason` says why); a blank text there is refused, one line naming the metric and the item,
    before any model loads. A field in neither is not read, so a blank text there changes nothing.
    """

    scored: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    value: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        fields = [*self.scored, *self.refused]
        unknown = [f for f in fields if f not in READ_FIELDS]
        if unknown or len(set(fields)) != len(fields):
            raise ValueError(f"blank texts: fields must be distinct, among {', '.join(READ_FIELDS)}; got {fields}")
        if bool(self.scored) != bool(self.value) or bool(self.refused) != bool(self.reason):
            raise ValueError("blank texts: say the value of scored fields and the reason for refused ones")

    def found(self, items: Sequence[Item]) -> dict[str, list[int]]:
        """Per field this declaration covers (scored, then refused), the 0-based positions of the items
        with a blank text there; fields without one left out."""
        out = {name: blank_positions(items, name) for name in (*self.scored, *self.refused)}
        return {name: positions for name, positions in out.items() if positions}

    def refusal(self, metric: str, items: Sequence[Item], where: Callable[[str, int], str]) -> str | None:
        """The one line refusing the first refused field with a blank text (`where(field, position)`
        names the item: a 1-based line, an item's ids), or None when nothing is refused."""
        found = self.found(items)
        for name in self.refused:
            if name in found:
                positions = found[name]
                more = f", {len(positions)} blank in all" if len(positions) > 1 else ""
                return f"{metric} cannot score a blank {name} ({where(name, positions[0])}{more}): {self.reason}"
        return None


@dataclass(frozen=True)
class TokenRule:
    """Which tokens of a text a metric weighs (`MetricInfo.token_rule`), so that a text its encoder's tokenizer
    leaves none of ('...' where punctuation weighs nothing, U+200B that the tokenizer drops) counts as blank:
    refused where the metric refuses a blank text (`BlankTexts.refused`), one line naming the item and
    the text, before any model loads (`nlgbench.metrics.tokenless`)."""

    weighs: Callable[[Tokenized], bool]  # whether a tokenised text keeps a token the metric weighs
    kept: str  # the tokens it weighs, in words: "no {kept}" ends the refusal's first clause
    encoder_option: str | None = None  # the option naming the model whose tokens these are, where set


class MetricOptions:
    """The base of a metric's options dataclass (`MetricInfo.options_class`) where a rule of the metric depends
    on its options: the class overrides the rule's method, which gets the metric's fixed declaration and
    returns the rule in force (SentSim reads references only with `against: reference`). A metric whose rules
    are fixed needs no base. Rules are asked of options before they are checked (the API's text checks), so
    they read any value without raising, and the class holds no `__post_init__` that could."""

    def reads_references(self, needs: tuple[str, ...]) -> bool:
        """Whether the metric, run with these options, reads the items' references; default as `needs` says."""
        return "reference" in needs

    def blank_texts(self, declared: BlankTexts | None) -> BlankTexts | None:
        """What it does with a blank text in each field it reads; default the fixed `MetricInfo.blank_texts`."""
        return declared

    def token_rule(self, declared: TokenRule | None) -> TokenRule | None:
        """Which tokens it weighs; default the fixed `MetricInfo.token_rule`."""
        return declared


RULES = ("reads_references", "blank_texts", "token_rule")  # the rules an options class may decide


@dataclass(frozen=True)
class MetricInfo:
    """A registered metric: its declaration and how to build its scorer.

    `options_class` (a dataclass) is the one declaration of the metric's options; `options`
    (name -> (type, default)) and the type checks are derived from it. `check_values` holds
    only the constraints types cannot express (ranges, choices, existing files). A metric that reads
    references also takes the harness option `reference_policy` (`harness_options`), which the scorer
    recipe (`nlgbench.core.recipe.Recipe.build`, the one caller of `build`) applies by wrapping the scorer in
    `ReferencePolicy`.
    """

    name: str
    description: str
    needs: tuple[str, ...]  # item fields it reads besides the hypothesis: "reference", "source"
    higher_is_better: bool
    corpus_state: bool
    options_class: type
    accepts_aligners: bool
    # build(encoder_ref, options, device, batch_size[, aligner=][, context=]) -> Scorer; `context` (the cell's
    # `CellContext`) where the build names that parameter (`takes_context`)
    build: Callable[..., Scorer]
    encoder_kinds: tuple[str, ...] = ("encoder",)
    check_values: Callable[[dict[str, Any]], None] | None = None  # raises UserError on bad values
    model_options: dict[str, str] = field(default_factory=dict)  # option naming a further model -> its kind
    # How the metric uses several references per item (its paper / reference code): "max" or "mean"
    # over references, "native" (the scorer reads `Item.references` itself), or None (it cannot:
    # the user sets the option `reference_policy: first|max|mean`).
    multi_reference: str | None = None
    # Distributions (besides torch and transformers) whose version changes the scores: their
    # major.minor joins the ids of this metric's cells (`nlgbench.core.cell.metric_versions`).
    libraries: tuple[str, ...] = ()
    # The rules below are fixed declarations; where one depends on the options (SentSim's `against` and
    # `token_part`), the options class decides it (`MetricOptions`), and whether it reads references
    # follows `MetricOptions.reads_references` (default: "reference" in `needs`).
    # What it does with a blank text in each field it reads (scored as it defines, or refused). None and not
    # decided by the options: every field it reads is refused (`blank_rule`), the safe rule for a metric that
    # declares nothing.
    blank_texts: BlankTexts | None = None
    # Which tokens it weighs, where a text can be left with none although not blank (a transport metric's);
    # None: a blank text is the only text without one (bert_score's [CLS] and [SEP] count), nothing to check.
    token_rule: TokenRule | None = None
    # Options added after cells were recorded (BERTScore's rescale_with_baseline, baseline_path): a cell's
    # options hold them only where set to other than their default, so the ids of existing cells stay.
    held_if_set: tuple[str, ...] = ()
    # The process's warm-up hook: what a process runs once before it measures a cell of this metric (BaryScore
    # compiles its kernels), so that work lands in the worker's start-up, before the memory baseline, not in
    # the first timed pass. Never run at import: a fork server imports metric modules and runs no torch op.
    # Not the protocol's warm-up passes (`nlgbench.measurement.protocol.warm_up`). Default: nothing to do.
    warm_up: Callable[[], None] = field(default=lambda: None)

    def __post_init__(self) -> None:
        if self.multi_reference not in (None, *MULTI_REFERENCE):
            raise ValueError(
                f"metric {self.name}: multi_reference must be one of {', '.join(MULTI_REFERENCE)} "
                f"or None, got {self.multi_reference!r}"
            )

    @property
    def options(self) -> dict[str, tuple[type, Any]]:
        """option -> (type, default), from `options_class`."""
        return option_table(self.options_class)

    @property
    def harness_options(self) -> dict[str, tuple[type, Any]]:
        """Options the harness applies around the scorer (not in `options_class`): `reference_policy`
        for a metric that may read references. A cell's options hold them only where given."""
        may_read = "reference" in self.needs or self.options_decide("reads_references")
        return dict(HARNESS_OPTIONS) if may_read else {}

    def options_decide(self, rule: str) -> bool:
        """Whether the options class decides `rule` (one of `RULES`) itself: overrides `MetricOptions`'s method."""
        cls = self.options_class
        return issubclass(cls, MetricOptions) and getattr(cls, rule) is not getattr(MetricOptions, rule)

    def rules(self, options: dict[str, Any]) -> MetricOptions:
        """`options` (a cell's, checked or not) as the options class, whose methods give the rules in force;
        the base `MetricOptions` (the fixed declarations) for a class that decides none."""
        if not issubclass(self.options_class, MetricOptions):
            return MetricOptions()
        names = self.options  # the options class's fields
        rules: MetricOptions = self.options_class(**{k: v for k, v in options.items() if k in names})
        return rules

    def reads_references(self, options: dict[str, Any]) -> bool:
        """Whether the metric, run with `options`, reads the items' references."""
        return self.rules(options).reads_references(self.needs)

    def weighed_tokens(self, options: dict[str, Any]) -> TokenRule | None:
        """Which tokens the metric, run with `options`, weighs; None where only a blank text has none."""
        return self.rules(options).token_rule(self.token_rule)

    def blank_rule(self, options: dict[str, Any]) -> BlankTexts:
        """What the metric, run with `options`, does with a blank text in each field it reads."""
        declared = self.rules(options).blank_texts(self.blank_texts)
        if declared is not None:
            return declared
        read = ["hypothesis", *(["reference"] if self.reads_references(options) else [])]
        read += ["source"] if "source" in self.needs else []
        return BlankTexts(refused=tuple(read), reason="the metric declares no value for one (MetricInfo.blank_texts)")

    def check_options(self, options: dict[str, Any], where: str = "options") -> None:
        """Unknown names and wrong types, then the metric's value constraints: a one-line UserError naming the
        option."""
        table = {**self.options, **self.harness_options}
        for key, value in options.items():
            if key == REFERENCE_POLICY and key not in table:
                raise UserError(f"{where}: metric {self.name} reads no references, so {key} does not apply")
            if key not in table:
                raise UserError(f"{where}: metric {self.name} has no option {key!r} (valid: {', '.join(table)})")
            typ = table[key][0]
            if value is not None and (not isinstance(value, typ) or (typ is int and isinstance(value, bool))):
                raise UserError(f"{where}.{key} must be {typ.__name__}, got {value!r}")
        policy = options.get(REFERENCE_POLICY)
        if policy is not None:
            if policy not in REFERENCE_POLICIES:
                raise UserError(
                    f"{where}.{REFERENCE_POLICY} must be one of {', '.join(REFERENCE_POLICIES)}, got {policy!r}"
                )
            if not self.reads_references(options):
                raise UserError(
                    f"{where}: metric {self.name} reads no references with these options, "
                    f"so {REFERENCE_POLICY} does not apply"
                )
        if self.check_values is not None:
            try:
                self.check_values(options)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None

    def cell_options(self, given: dict[str, Any], where: str = "options") -> dict[str, Any]:
        """The options a cell runs with: each of the metric's options as given or its default, the
        harness options only where given and the `held_if_set` ones only where set to other than their
        default (so the ids of cells that do not set them stay as they were); checked."""
        out = {
            key: given.get(key, default)
            for key, (_, default) in self.options.items()
            if key not in self.held_if_set or given.get(key, default) != default
        }
        out.update(
            {key: value for key, value in given.items() if key not in self.options}
        )  # harness options (and unknown names)
        self.check_options(out, where)
        return out

    def needs_reference_policy(self, options: dict[str, Any]) -> bool:
        """Whether, run with `options`, the metric cannot score items with several references: it reads
        references, has no rule of its own for several, and the option reference_policy is not set."""
        return self.reads_references(options) and self.multi_reference is None and options.get(REFERENCE_POLICY) is None

    @property
    def takes_context(self) -> bool:
        """Whether `build` takes the cell's context (a parameter named `context`): every packaged metric's
        does; a plugin's written before the context existed may not, and is built without it."""
        try:
            return "context" in inspect.signature(self.build).parameters
        except (TypeError, ValueError):  # a callable without a signature Python can read
            return False


def no_reference_policy(metric: str, most: int) -> str:
    """The one line for a one-reference metric given items with up to `most` references and no policy."""
    return (
        f"{metric} cannot use several references per item (dataset has up to {most}); "
        f"set the option {REFERENCE_POLICY}: {'|'.join(REFERENCE_POLICIES)}"
    )


def one_reference_items(items: Sequence[Item], policy: str) -> tuple[list[Item], list[int]]:
    """Items with one reference each for a one-reference scorer, and how many belong to each input
    item: every (item, reference k) pair for `max` / `mean`, the first reference only for `first`."""
    if policy == "first":
        return [replace(it, references=(it.reference,)) for it in items], [1] * len(items)
    pairs = [replace(it, reference=ref, references=(ref,)) for it in items for ref in it.references]
    return pairs, [len(it.references) for it in items]


def aggregate_references(
    values: Sequence[float], counts: Sequence[int], policy: str, higher_is_better: bool
) -> list[float]:
    """Per item, the values of its consecutive `counts` rows reduced to one: `mean`, or for `max` the
    best (the largest, or the smallest for a lower-is-better metric). NaN stays NaN."""
    array = np.asarray(values, dtype=np.float64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    if policy == "mean":
        reduced = np.add.reduceat(array, starts) / np.asarray(counts, dtype=np.float64)
    elif policy == "max":
        reduced = (np.maximum if higher_is_better else np.minimum).reduceat(array, starts)
    else:
        raise ValueError(f"no aggregation for reference policy {policy!r}")
    return reduced.tolist()


class ReferencePolicy:
    """A one-reference scorer run on items with several references: it scores every (item, reference k)
    pair (corpus state is prepared over all pairs, as bert_score computes idf over all references),
    then reduces each output column per item on its own (`aggregate_references`; `max` takes each
    column's best, as bert_score does for P, R and F); `first` scores the first reference only.
    Where every item has one reference it passes the items straight through."""

    def __init__(
        self, inner: Scorer, metric: str, higher_is_better: bool, *, declared: str | None, given: str | None
    ) -> None:
        self.inner = inner
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.declared = declared  # the metric's own rule (MetricInfo.multi_reference)
        self.given = given  # the option reference_policy, which overrides it
        self.used: str | None = None  # the policy applied, once items with several references were seen

    def policy(self, items: Sequence[Item]) -> str | None:
        """The policy for `items`: None where each has one reference, else the option or the metric's
        own rule; a one-line ValueError where the metric has none and the option is not set."""
        most = max((len(it.references) for it in items), default=1)
        if most == 1:
            return None
        policy = self.given or self.declared
        if policy is None:
            raise ValueError(no_reference_policy(self.metric, most))
        return policy

    def prepare(self, items: Sequence[Item]) -> None:
        policy = self.policy(items)
        if policy is not None:
            self.used = policy
        self.inner.prepare(items if policy is None else one_reference_items(items, policy)[0])

    def score(self, items: Sequence[Item], timer: PhaseTimer) -> Scores:
        policy = self.policy(items)
        if policy is None:
            return self.inner.score(items, timer)
        self.used = policy
        with timer.phase("references"):
            single, counts = one_reference_items(items, policy)
        scores = self.inner.score(single, timer)
        if policy == "first":
            return scores
        with timer.phase("references"):
            columns = {
                name: aggregate_references(
                    values, counts, policy, self.higher_is_better != (name in scores.opposite_direction)
                )
                for name, values in scores.columns.items()
            }
        return Scores(primary=scores.primary, columns=columns, opposite_direction=scores.opposite_direction)

    def describe(self) -> dict[str, Any]:
        """The inner scorer's description, with the reference policy where one was applied."""
        described = self.inner.describe()
        return {**described, REFERENCE_POLICY: self.used} if self.used else described
