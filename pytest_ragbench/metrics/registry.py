"""What a metric *is*: its name, parameter, range, direction and inputs.

Definitions live here, apart from the code that computes them (``ir``, ``sets``,
``answer``, ``context``). Each metric is registered once by name; a second metric with
the same name or alias (compared case-insensitively) is an error. Parameterised
metrics read naturally: ``nDCG@10``, ``P@5``, or trec_eval's ``ndcg_cut_10``, ``P_5``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from pytest_ragbench.config.perturbations import PERTURBATION_KINDS
from pytest_ragbench.errors import ConfigError, closest

Need = Literal["ids", "scores", "texts", "embeddings", "judge", "database", "time"]
Direction = Literal["higher", "lower", "none"]
Family = Literal["ir", "set", "retrieval", "answer", "check", "grade", "context", "judge",
                 "robustness", "timing"]


@dataclass(frozen=True)
class Unscored:
    """A metric that could not be scored, with the reason (never a silent NaN or zero)."""

    reason: str


Score = float | Unscored
"""What every metric function returns."""


class DuplicateMetricError(ValueError):
    """A metric name or alias is registered twice."""


class UnknownMetricError(ConfigError, ValueError):
    """A metric name that no registered metric answers to."""


@dataclass(frozen=True)
class MetricSpec:
    """The definition of one metric (or one family of cutoff metrics such as ``P@k``).

    ``cutoff`` says whether the metric takes ``@k``: "none", "optional" (``nDCG`` and
    ``nDCG@10``) or "required" (``P@5``). ``trec`` / ``trec_cut`` name the pytrec_eval
    measure without and with a cutoff (``ndcg`` / ``ndcg_cut``); they double as aliases.
    """

    name: str
    family: Family
    description: str
    needs: frozenset[Need]
    low: float = 0.0
    high: float = 1.0
    direction: Direction = "higher"
    cutoff: Literal["none", "optional", "required"] = "none"
    aliases: tuple[str, ...] = ()
    trec: str | None = None
    trec_cut: str | None = None

    @property
    def higher_is_better(self) -> bool:
        """True unless smaller values are better."""
        return self.direction != "lower"

    def plain_names(self) -> tuple[str, ...]:
        """Names that select this metric without a cutoff."""
        if self.cutoff == "required":
            return ()
        return (self.name, *self.aliases, *((self.trec,) if self.trec else ()))

    def cutoff_names(self) -> tuple[str, ...]:
        """Base names that take ``@k`` / ``_k`` / ``.k`` after them."""
        if self.cutoff == "none":
            return ()
        return (self.name, *self.aliases, *((self.trec_cut,) if self.trec_cut else ()))


@dataclass(frozen=True)
class Measure:
    """A metric with its cutoff bound, e.g. ``nDCG@10``."""

    spec: MetricSpec
    k: int | None = None

    @property
    def name(self) -> str:
        """Canonical name: ``nDCG@10``, ``AP``, ``token_f1``."""
        return self.spec.name if self.k is None else f"{self.spec.name}@{self.k}"

    @property
    def trec_request(self) -> str | None:
        """The pytrec_eval measure to request (``ndcg_cut.10``), or None if not an IR metric."""
        if self.k is not None and self.spec.trec_cut:
            return f"{self.spec.trec_cut}.{self.k}"
        return self.spec.trec if self.k is None else None

    @property
    def trec_key(self) -> str | None:
        """The key pytrec_eval returns for this measure (``ndcg_cut_10``)."""
        if self.k is not None and self.spec.trec_cut:
            return f"{self.spec.trec_cut}_{self.k}"
        return self.spec.trec if self.k is None else None

    def check(self, value: float | Unscored) -> Score:
        """Return ``value`` as a float in the declared range, or an :class:`Unscored`.

        NaN becomes ``Unscored``; float noise just outside the range is clipped; a value
        clearly outside the range is a bug in the caller and raises ``ValueError``.
        """
        if isinstance(value, Unscored):
            return value
        value = float(value)
        if math.isnan(value):
            return Unscored(f"{self.name} is undefined (NaN)")
        low, high = self.spec.low, self.spec.high
        slack = 1e-9 * max(1.0, abs(low), abs(high)) if math.isfinite(high) else 1e-9
        if value < low - slack or value > high + slack:
            raise ValueError(f"{self.name} = {value!r} is outside its range [{low}, {high}]")
        return min(max(value, low), high)


_CUTOFF_FORMS = (
    re.compile(r"^(?P<base>.+?)@(?P<k>\d+)$"),  # ir_measures: nDCG@10
    re.compile(r"^(?P<base>.+?)[._](?P<k>\d+)$"),  # trec_eval: ndcg_cut_10, P.5
)


@dataclass
class MetricRegistry:
    """Metric definitions by name; lookups ignore case."""

    _specs: dict[str, MetricSpec] = field(default_factory=dict)
    _plain: dict[str, MetricSpec] = field(default_factory=dict)
    _cut: dict[str, MetricSpec] = field(default_factory=dict)
    # lookup()'s answers: the report asks for the same few names once per item
    _found: dict[str, MetricSpec | None] = field(default_factory=dict, repr=False)

    def adopt(self, spec: MetricSpec) -> MetricSpec:
        """Register ``spec`` unless the very same definition is registered already.

        How a kind brings its own metrics: the hook that declares them runs once per
        session (and per xdist worker), so an equal definition is not a duplicate; a
        different definition under a taken name still is.
        """
        known = self._specs.get(spec.name)
        if known == spec:
            return known
        return self.register(spec)

    def register(self, spec: MetricSpec) -> MetricSpec:
        """Add a metric; raise :class:`DuplicateMetricError` if any of its names is taken."""
        plain = {n.lower() for n in spec.plain_names()}
        cut = {n.lower() for n in spec.cutoff_names()}
        taken = sorted((plain & self._plain.keys()) | (cut & self._cut.keys()))
        if spec.name.lower() in {s.lower() for s in self._specs}:
            taken.append(spec.name)
        if taken:
            raise DuplicateMetricError(f"metric {spec.name!r}: name(s) already registered: "
                                       f"{', '.join(sorted(set(taken)))}")
        self._specs[spec.name] = spec
        self._found.clear()
        self._plain.update(dict.fromkeys(plain, spec))
        self._cut.update(dict.fromkeys(cut, spec))
        return spec

    def get(self, name: str) -> MetricSpec:
        """Return the definition registered under ``name`` or one of its aliases."""
        spec = self._plain.get(name.lower()) or self._cut.get(name.lower())
        if spec is None:
            raise UnknownMetricError(self._unknown(name))
        return spec

    def parse(self, text: str) -> Measure:
        """Parse ``nDCG@10``, ``ndcg_cut_10``, ``P.5``, ``map``, ``token_f1`` into a Measure."""
        name = text.strip()
        spec = self._plain.get(name.lower())
        if spec is not None:
            return Measure(spec)
        for form in _CUTOFF_FORMS:
            match = form.match(name)
            if match and match["base"].lower() in self._cut:
                k = int(match["k"])
                if k < 1:
                    raise UnknownMetricError(f"metric {text!r}: the cutoff must be at least 1")
                return Measure(self._cut[match["base"].lower()], k)
        base = _CUTOFF_FORMS[0].match(name)
        if base and base["base"].lower() in self._plain:
            raise UnknownMetricError(f"metric {text!r}: {base['base']} takes no cutoff")
        if name.lower() in self._cut:
            raise UnknownMetricError(f"metric {text!r} needs a cutoff, e.g. {name}@10")
        raise UnknownMetricError(self._unknown(text))

    def _unknown(self, name: str) -> str:
        close = closest(name, self.names())
        hint = f" (did you mean {close!r}?)" if close else ""
        known = ", ".join(sorted(self._specs))
        return f"unknown metric {name!r}{hint}; known metrics: {known}"

    def names(self) -> list[str]:
        """Every name a metric is known by: canonical names, aliases, ``name@k`` forms."""
        found: list[str] = []
        for spec in self._specs.values():
            found += spec.plain_names()
            if spec.cutoff != "none":
                found += [f"{base}@k" for base in (spec.name, *spec.aliases)]
        return found

    def lookup(self, metric: str) -> MetricSpec | None:
        """The definition of a metric as an item records it (``source_hit@5``), or None.

        ``source_hit@k`` (any cut-off: a threshold, a gate, a comparison of runs at
        different k) is the cut-off metric's definition too.
        """
        if metric not in self._found:
            base, at, k = metric.rpartition("@")
            if at and k == "k" and base.lower() in self._cut:
                self._found[metric] = self._cut[base.lower()]
                return self._found[metric]
            try:
                self._found[metric] = self.parse(metric).spec
            except UnknownMetricError:
                self._found[metric] = None
        return self._found[metric]

    def direction(self, metric: str) -> Direction:
        """Whether larger or smaller values of ``metric`` are better ("none" when unknown)."""
        spec = self.lookup(metric)
        return spec.direction if spec is not None else "none"

    def lower_is_better(self, metric: str) -> bool:
        """True for metrics where smaller is better (timings)."""
        return self.direction(metric) == "lower"

    def __iter__(self) -> Iterator[MetricSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name.lower() in self._plain or name.lower() in self._cut)

    def family(self, family: Family) -> list[MetricSpec]:
        """Every metric of one family, in registration order."""
        return [s for s in self._specs.values() if s.family == family]


def _spec(name: str, family: Family, description: str, needs: Iterable[Need],
          **kw: object) -> MetricSpec:
    return MetricSpec(name, family, description, frozenset(needs), **kw)  # type: ignore[arg-type]


def define_metric(name: str, description: str, *, family: str = "answer",
                  needs: Iterable[str] = ("texts",), low: float = 0.0, high: float = 1.0,
                  direction: Direction = "higher",
                  cutoff: Literal["none", "optional", "required"] = "none",
                  aliases: tuple[str, ...] = ()) -> MetricSpec:
    """A new metric's definition, for a kind's ``metrics`` (registered with the kind).

    ``description`` is the one-line definition ``--ragbench-metrics`` shows; ``low`` and
    ``high`` bound its values (intervals are clipped to them); ``direction`` says whether
    larger (``"higher"``) or smaller (``"lower"``) values are better, which decides how a
    threshold is checked and which way a comparison is better.
    """
    return MetricSpec(name, family, description, frozenset(needs), low=low,  # type: ignore[arg-type]
                      high=high, direction=direction, cutoff=cutoff, aliases=aliases)


INF = math.inf
# The perturbation kinds of --ragbench-perturb, each with its ``<kind>.holds`` metric.
PERTURBATIONS = PERTURBATION_KINDS
IDS: tuple[Need, ...] = ("ids",)

BUILTIN: tuple[MetricSpec, ...] = (
    # IR metrics over ranked lists with graded qrels (computed by pytrec_eval).
    _spec("P", "ir", "precision at k", IDS, cutoff="required", aliases=("Precision",),
          trec_cut="P"),
    _spec("R", "ir", "recall at k", IDS, cutoff="required", aliases=("Recall",),
          trec_cut="recall"),
    _spec("nDCG", "ir", "normalised discounted cumulative gain (linear gain, log2 discount)",
          IDS, cutoff="optional", trec="ndcg", trec_cut="ndcg_cut"),
    _spec("AP", "ir", "average precision (MAP over queries); AP@k is trec_eval's map_cut",
          IDS, cutoff="optional", aliases=("MAP",), trec="map", trec_cut="map_cut"),
    _spec("RR", "ir", "reciprocal rank of the first relevant document (MRR over queries)", IDS,
          aliases=("MRR",), trec="recip_rank"),
    _spec("Rprec", "ir", "precision at rank R, R = number of relevant documents", IDS,
          aliases=("R-Prec", "RPrec"), trec="Rprec"),
    _spec("Success", "ir", "1 if a relevant document is in the top k (hit rate)", IDS,
          cutoff="required", aliases=("Hit", "HitRate"), trec_cut="success"),
    _spec("Bpref", "ir", "binary preference (judged non-relevant above relevant)", IDS,
          trec="bpref"),
    _spec("NumRet", "ir", "number of documents retrieved (summed over queries)", IDS,
          high=INF, direction="none", trec="num_ret"),
    _spec("NumRel", "ir", "number of relevant documents judged (summed over queries)", IDS,
          high=INF, direction="none", trec="num_rel"),
    _spec("NumRelRet", "ir", "number of relevant documents retrieved (summed over queries)",
          IDS, high=INF, trec="num_rel_ret"),
    _spec("NumQ", "ir", "number of queries averaged over", IDS, high=INF, direction="none",
          trec="num_q"),
    # Set-based retrieval metrics of memory scenarios.
    _spec("precision", "set", "share of retrieved items that were expected", IDS),
    _spec("recall", "set", "share of expected items that were retrieved", IDS),
    _spec("f1", "set", "harmonic mean of set precision and recall", IDS,
          aliases=("f1_score",)),
    _spec("relevance_score", "set", "mean similarity score of the retrieved expected items",
          ("ids", "scores"), low=-1.0),
    _spec("top1_accuracy", "set", "1 if the first item retrieved is the expected one "
          "(exact-recall memory scenarios: one expected memory)", IDS),
    _spec("graded_ndcg", "retrieval", "nDCG@k of the retrieved items against the case's graded "
          "relevance (2 contains the answer, 1 related, 0 irrelevant)", IDS),
    # Answer metrics.
    _spec("exact_match", "answer", "SQuAD-normalised exact match", ("texts",), aliases=("em",)),
    _spec("token_f1", "answer", "SQuAD token-overlap F1", ("texts",)),
    _spec("numeric_match", "answer",
          "a number in the answer equals the reference number (units, scale, rounding)",
          ("texts",)),
    _spec("keyword_overlap", "answer",
          "share of the reference's keywords found in the answer (memory scenarios: of the "
          "query's keywords in each retrieved memory, averaged; seed 004's baseline)",
          ("texts",)),
    _spec("entity_mention", "answer",
          "share of the ground-truth data values mentioned in the answer", ("texts",)),
    _spec("fact_recall", "answer",
          "share of the case's expected_facts the answer states (whole words; case, accents, "
          "punctuation and number format ignored: 1,234 = 1234, 12.0 = 12)", ("texts",)),
    _spec("semantic_similarity", "answer", "cosine similarity of the embeddings of the answer "
          "and a reference (the ground truth; for robust items the original question's answer)",
          ("texts", "embeddings"), low=-1.0, aliases=("answer_similarity",)),
    # Context metrics without a judge (ragas).
    _spec("non_llm_context_precision", "context",
          "ragas NonLLMContextPrecisionWithReference (string similarity to reference contexts)",
          ("texts",), aliases=("non_llm_context_precision_with_reference",)),
    _spec("non_llm_context_recall", "context",
          "ragas NonLLMContextRecall (string similarity to reference contexts)", ("texts",)),
    _spec("id_context_precision", "context", "ragas IDBasedContextPrecision", IDS,
          aliases=("id_based_context_precision",)),
    _spec("id_context_recall", "context", "ragas IDBasedContextRecall", IDS,
          aliases=("id_based_context_recall",)),
    _spec("rouge", "context", "ragas RougeScore (rougeL F-measure by default)", ("texts",),
          aliases=("rouge_score",)),
    _spec("bleu", "context", "ragas BleuScore (sacrebleu corpus BLEU / 100)", ("texts",),
          aliases=("bleu_score",)),
    _spec("chrf", "context", "ragas CHRFScore (sacrebleu chrF / 100)", ("texts",),
          aliases=("chrf_score",)),
    # Judge-free stand-ins for faithfulness and context recall (ragas RougeScore, ROUGE-1).
    _spec("lexical_faithfulness", "context",
          "ROUGE-1 precision of the answer against its contexts: share of the answer's words "
          "found in them", ("texts",)),
    _spec("lexical_context_recall", "context",
          "ROUGE-1 recall of the reference answer against the contexts: share of its words "
          "found in them", ("texts",)),
    # Judge metrics (ragas with an LLM judge); computed by metrics.judged.
    _spec("faithfulness", "judge", "ragas Faithfulness", ("texts", "judge")),
    _spec("answer_relevancy", "judge",
          "ragas AnswerRelevancy (mean cosine of judge-written questions to the question)",
          ("texts", "judge", "embeddings"), low=-1.0),
    _spec("context_precision", "judge", "ragas ContextPrecision with reference",
          ("texts", "judge")),
    _spec("context_recall", "judge", "ragas ContextRecall", ("texts", "judge")),
    _spec("judge_relevance", "judge",
          "LLM-as-judge relevance of the retrieved contexts to the query: mean 0-10 grade / 10",
          ("texts", "judge")),
    # The expected sources among the system's contexts (vector, hybrid). k is the k the
    # system was asked for (answer_common.retrieval_k); thresholds, gates and comparisons
    # may say ``source_hit@k`` for any k.
    _spec("source_hit", "retrieval", "1 if a context among the first k comes from an expected "
          "source (metadata['source'], else the context id)", IDS, cutoff="required"),
    _spec("source_recall", "retrieval", "share of the expected sources among the first k "
          "contexts", IDS, cutoff="required"),
    _spec("source_mrr", "retrieval", "1 / rank of the first context from an expected source "
          "(0 when none)", IDS),
    _spec("source_ndcg", "retrieval", "nDCG@k of the contexts' sources, each expected source "
          "relevant at its first rank", IDS, cutoff="required"),
    _spec("top_similarity", "retrieval", "highest cosine similarity of the question to the "
          "first k contexts", ("texts", "embeddings"), low=-1.0),
    _spec("similarity_in_range", "retrieval", "1 if top_similarity lies within the case's "
          "expected_similarity", ("texts", "embeddings")),
    # Checks that hold (1) or not (0).
    _spec("match", "check", "the case's expected SQL returns its ground_truth_data",
          ("database",)),
    _spec("data_match", "check", "a hybrid case's expected SQL returns its ground_truth_data",
          ("database",)),
    _spec("execution_match", "check", "the system's SQL, run read-only, returns the case's "
          "ground_truth_data", ("database",)),
    _spec("correct", "check", "the deciding check of an SQL case holds: execution_match when "
          "the system returns SQL, else every ground-truth value stated", ("database", "texts")),
    _spec("declined", "check", "the answer opens with a refusal (cases that expect a decline)",
          ("texts",)),
    _spec("answered", "check", "the answer is not a refusal (cases that expect an answer)",
          ("texts",)),
    _spec("injection_resisted", "check", "the answer leaves out what an instruction injected "
          "into the question asked for", ("texts",)),
    _spec("value_recall", "answer", "share of the ground_truth_data values the system's answer "
          "states", ("texts",)),
    # Graded answers.
    _spec("accuracy", "grade", "a RAGCSV row's answer graded 0-100 by the judge (without one: "
          "semantic similarity x 100)", ("texts",), high=100.0),
    # Logged production traffic (kinds/traffic): what the app logged, no reference needed.
    _spec("retrieved_count", "retrieval", "passages the app's retriever returned (logged)",
          IDS, high=INF, direction="none"),
    _spec("no_results", "retrieval", "1 when the app's retriever returned nothing (logged)",
          IDS, direction="lower"),
    _spec("mean_similarity", "retrieval", "mean similarity score of the passages the app "
          "retrieved (logged scores)", ("scores",), low=-INF, high=INF),
    _spec("user_feedback", "answer", "the user's feedback: thumbs up 1, down 0, ratings "
          "scaled to [0, 1] (logged)", ("texts",)),
    _spec("latency_ms", "timing", "milliseconds the app took to answer (logged)", ("time",),
          high=INF, direction="lower"),
    # Timings.
    _spec("total_time_ms", "timing", "milliseconds the model calls of the item took",
          ("time",), high=INF, direction="lower"),
    _spec("latency_s", "timing", "seconds the system took to answer, as it reports them",
          ("time",), high=INF, direction="lower"),
    _spec("ttft_ms", "timing", "milliseconds from asking to the first streamed chunk of the "
          "answer (--ragbench-stream)", ("time",), high=INF, direction="lower"),
    _spec("itl_ms", "timing", "mean milliseconds between consecutive streamed chunks of the "
          "answer (--ragbench-stream; two chunks or more)", ("time",), high=INF,
          direction="lower"),
    # Metamorphic properties of perturbed questions (robust); bounds in ``robust.*`` thresholds.
    _spec("rbo", "robustness", "rank-biased overlap (p = 0.9) of the original and perturbed "
          "top-k contexts", IDS),
    _spec("jaccard", "robustness", "Jaccard similarity of the original and perturbed top-k "
          "contexts", IDS),
    _spec("expected_sources_kept", "robustness", "share of the expected sources found for the "
          "original question that stay in the perturbed top k", IDS),
    *(_spec(f"{kind}.holds", "robustness", f"1 if no {kind}-perturbed question broke a "
            "property bound, else 0", ("texts",)) for kind in PERTURBATIONS),
)

REGISTRY = MetricRegistry()
for _builtin in BUILTIN:
    REGISTRY.register(_builtin)


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Register a new metric in the default registry (a duplicate name is an error)."""
    return REGISTRY.register(spec)


def get_metric(name: str) -> MetricSpec:
    """Return the definition of a metric by name or alias."""
    return REGISTRY.get(name)


def parse_metric(text: str) -> Measure:
    """Parse a metric name with its optional cutoff (``nDCG@10``, ``P_5``, ``token_f1``)."""
    return REGISTRY.parse(text)
