"""Every packaged metric's options class: the one declaration of its options (names, types, defaults) and of
the rules that depend on them (`MetricOptions`), which its `MetricInfo.options_class` names.

They sit apart from the metrics' modules, which import torch, transformers, POT, sacrebleu or rouge-score, so
that what reads only a metric's options (the labels of a run's cells in `nlgbench report` and `compare`) imports
none of those: `nlgbench.metrics.options_class` hands them out without loading the metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nlgbench.metrics.base import BlankTexts, MetricOptions, TokenRule
from nlgbench.metrics.tokenless import WORD_TOKENS, kept_tokens


@dataclass
class BertScoreOptions(MetricOptions):
    """BERTScore's options; the value of a blank text depends on rescaling."""

    idf: bool = False
    layer: int | None = None
    rescale_with_baseline: bool = False  # P, R, F each (s - b) / (1 - b), as bert_score
    baseline_path: str | None = None  # a baseline file in bert_score's format; None: the cached one

    def blank_texts(self, declared: BlankTexts | None) -> BlankTexts:
        """bert_score/utils.py greedy_cos_idf: an empty candidate or reference ("Empty candidate sentence
        detected; setting raw BERTscores to 0.") gets P = R = 0, and F = 0 where it is NaN; rescaled, as
        bert_score rescales them too, (0 - b) / (1 - b)."""
        value = "(0 - b) / (1 - b) after rescaling" if self.rescale_with_baseline else "0"
        return BlankTexts(
            scored=("hypothesis", "reference"),
            value=f"P = R = F1 = {value} for the pair, as bert_score (with several references the others still count)",
        )


@dataclass
class MoverScoreOptions(MetricOptions):
    """MoverScore's options; its stop words weigh nothing, so they decide which texts keep a token."""

    idf: bool = True
    layer: int | None = None
    stop_words: list[str] | None = None
    n_gram: int = 1
    score_form: str = "one_minus"

    def token_rule(self, declared: TokenRule | None) -> TokenRule:
        """A text weighs something where a token is a word start and not punctuation, special or a stop word
        (`kept_tokens`): '...' has none, nor a text of stop words alone."""
        stop_words = frozenset(w.lower() for w in (self.stop_words or []))
        return TokenRule(
            weighs=lambda tok: any(kept_tokens(tok, stop_words)),
            kept="word-start token other than punctuation, special tokens and stop words",
        )


@dataclass
class BaryScoreOptions:
    """BaryScore's options (`last_layers`: how many of the encoder's last layers make each measure)."""

    last_layers: int = 5
    idf: bool = True
    sinkhorn_regs: list[float] = field(default_factory=list)
    max_iter: int = 1000

    def __post_init__(self) -> None:
        self.sinkhorn_regs = [float(r) for r in self.sinkhorn_regs or []]


BLANK_SCORED = (
    "the log-likelihood of what the tokenizer makes of it (an empty text: its special tokens <s> </s> alone), "
    "as the published BARTScorer"
)


@dataclass
class BartScoreOptions(MetricOptions):
    """BARTScore's options; `faithfulness` makes it read sources, and so refuse a blank one."""

    prompt: str | None = None
    prompt_position: str = "source_suffix"
    faithfulness: bool = False
    state_dict: str | None = None
    max_length: int = 1024

    def blank_texts(self, declared: BlankTexts | None) -> BlankTexts:
        """A blank hypothesis or reference is scored as the published code scores it (specials only); a
        blank source, read only with `faithfulness`, is taken as missing and refused."""
        if self.faithfulness:
            return BlankTexts(
                scored=("hypothesis", "reference"),
                refused=("source",),
                value=BLANK_SCORED,
                reason="a blank source is taken as missing (data without sources), never scored",
            )
        return BlankTexts(scored=("hypothesis", "reference"), value=BLANK_SCORED)


@dataclass
class XMoverScoreOptions:
    """XMoverScore's options: its layer, the cross-lingual remapping and the language model's weight."""

    layer: int = 8
    mapping: str | None = None
    mapping_dir: str | None = None
    n_gram: int = 1
    lm: str | None = None
    lm_weight: float = 0.1


SOURCE_REFUSED = "a blank source is taken as missing (data without sources), never scored"
TRANSPORT_REFUSED = (
    "its token part (token_part: wmd, rwmd or wcd) moves the mass of the text's tokens, and an empty text has none"
)


@dataclass
class SentSimOptions(MetricOptions):
    """SentSim's options; what it reads, its blank-text rule and the tokens it weighs depend on them."""

    against: str = "source"
    token_part: str = "bertscore"
    word_encoder: str | None = None
    layer: int | None = None

    def reads_references(self, needs: tuple[str, ...]) -> bool:
        """Only `against: reference` compares with the reference (default: the source)."""
        return self.against == "reference"

    def blank_texts(self, declared: BlankTexts | None) -> BlankTexts:
        """A blank hypothesis (or reference, `against: reference`) is scored with the BERTScore token part:
        the sentence part is the cosine of the mean-pooled special-token states (what the sentence encoder
        gives an empty text) and the token part F1 = 0 as bert_score; with a transport token part there is
        no value. A blank source is refused."""
        other = "reference" if self.against == "reference" else "source"
        if (self.token_part or "bertscore") != "bertscore":
            return BlankTexts(refused=("hypothesis", other), reason=TRANSPORT_REFUSED)
        value = "the sentence cosine of the mean-pooled special-token states, the token part's F1 = 0 (as bert_score)"
        if other == "reference":
            return BlankTexts(scored=("hypothesis", "reference"), value=value)
        return BlankTexts(scored=("hypothesis",), refused=("source",), value=value, reason=SOURCE_REFUSED)

    def token_rule(self, declared: TokenRule | None) -> TokenRule | None:
        """A transport token part moves the mass of the word encoder's non-special tokens: a text it tokenises
        to special tokens alone has none. The BERTScore part scores such a text as a blank one."""
        if (self.token_part or "bertscore") == "bertscore":
            return None
        return TokenRule(weighs=WORD_TOKENS.weighs, kept=WORD_TOKENS.kept, encoder_option="word_encoder")


@dataclass
class FrugalScoreOptions:
    """FrugalScore's option: each (hypothesis, reference) pair is cut to `max_length` tokens."""

    max_length: int = 512


@dataclass
class SentBleuOptions:
    """`sacrebleu.sentence_bleu`'s keyword arguments, with its defaults (`use_effective_order` always True)."""

    smooth_method: str = "exp"
    smooth_value: float | None = None
    lowercase: bool = False
    tokenize: str = "13a"


@dataclass
class ChrfOptions:
    """`sacrebleu.sentence_chrf`'s keyword arguments, with its defaults (`word_order: 2` is chrF++)."""

    char_order: int = 6
    word_order: int = 0
    beta: int = 2
    remove_whitespace: bool = True
    eps_smoothing: bool = False


@dataclass
class RougeOptions:
    """`RougeScorer`'s option, with its default."""

    use_stemmer: bool = False
