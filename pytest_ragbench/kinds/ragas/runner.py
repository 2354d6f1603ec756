"""``ragas[<id>]``: RAGAS metrics on a NormalizedSample record (README "Case formats").

Where the answer and the contexts come from:

- both in the sample: scored as given; nothing is asked.
- contexts but no answer: the system under test answers from the sample's contexts when
  it has ``answer_from(question, contexts, history=None)`` (kinds/passages.py); otherwise
  the generator (``ragbench_llm``: ``--ragbench-llm-url``, else the local SmolLM2) does,
  with the RAG prompt (:func:`~pytest_ragbench.systems.prompts.rag_messages`). Without
  any generator the answer is extracted from those contexts, as the embedded system
  does. The evidence (``answer from``) says which.
- no contexts: the system under test (``ragbench_system``) retrieves and answers; its
  contexts are scored (an answer given in the sample is kept).

Metrics, each against the reference named here:

- with a judge (``--ragbench-judge-url``), through ragas (:mod:`pytest_ragbench.metrics.judged`):
  ``faithfulness`` (answer vs contexts), ``answer_relevancy`` (answer vs question, local
  embedder), ``context_precision`` and ``context_recall`` (contexts vs ``ground_truth``).
  Without a judge these four are unscored with the reason "no judge configured" —
  never failures, never zeros.
- always, without a judge:
  ``semantic_similarity`` (cosine of the local embedder's vectors of answer and
  ``ground_truth``), ``token_f1`` (SQuAD token F1, answer vs ``ground_truth``), ``rouge``
  (ROUGE-L F1, answer vs ``ground_truth``, ragas RougeScore), ``lexical_faithfulness``
  (ROUGE-1 precision of the answer against its contexts: the share of the answer's words
  found there, a stand-in for faithfulness) and ``lexical_context_recall`` (ROUGE-1 recall
  of ``ground_truth`` against the contexts: the share of the reference's words found
  there, a stand-in for context recall).

ragas's NonLLMContextPrecision/Recall are not used here: they compare retrieved contexts
with reference contexts, but a NormalizedSample's contexts are its reference contexts and,
when present, also the contexts that are answered from (comparing them with themselves
always gives 1.0); when the system retrieves, the sample has no reference contexts.

- ``fact_recall``, when the sample gives ``expected_facts``: the share of them the answer
  (generated, or the sample's own) states (:mod:`.facts`); item threshold 1.

An empty answer fails the item. Thresholds: no other per-item defaults — every score depends
on a 135M-parameter generator's answer to one question, which is noisy per item — and
aggregate gates in ``test_cases/ragbench.toml`` with the measured values beside them.

Model work runs ahead of the items (:func:`plan_ahead`, the kind's ``plan_ahead``): the
first ``ragas`` item of a session starts the generation and judge calls of every selected
``ragas`` item on the session loop (bounded by ``--ragbench-concurrency``; on an xdist
worker those of its own items); each item then takes its own result. For one of several
named systems each item does its own work.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragbench.cases.model import RagasCase
from pytest_ragbench.config.settings import get_config
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import agenerate, call_usage, usage_of
from pytest_ragbench.kinds.facts import missing_text, record_facts
from pytest_ragbench.kinds.passages import (
    acall_answer_from,
    describe_answerer,
    passage_system,
    record_answerer,
)
from pytest_ragbench.metrics import semantic_similarity, token_f1
from pytest_ragbench.metrics.context import rouge
from pytest_ragbench.metrics.judged import JUDGED_METRICS, JudgedScores, ajudged_result
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.metrics.repeated import JudgeSettings, evidence_lines, outcome_judge
from pytest_ragbench.run.prefetch import Prefetcher
from pytest_ragbench.systems.checks import require
from pytest_ragbench.systems.default import extractive_answer
from pytest_ragbench.systems.fixtures import describe
from pytest_ragbench.systems.prompts import ANSWER_MAX_TOKENS, rag_messages, shorten
from pytest_ragbench.systems.protocols import Answer, Context

GENERATOR_MAX_TOKENS = ANSWER_MAX_TOKENS  # as the embedded system's answers
EVIDENCE_CONTEXT_CHARS = 240
EVIDENCE_ANSWER_CHARS = 600


@dataclass(frozen=True)
class Supplied:
    """The answer and contexts an item is scored on, and where they came from."""

    answer: str
    contexts: tuple[str, ...]
    source: str
    usage: dict[str, Any] = field(default_factory=dict)
    by_system: bool = True  # False: the sample or ragbench_llm gave the answer


@dataclass(frozen=True)
class Evaluation:
    """What the model work of one item produced."""

    supplied: Supplied
    judged: JudgedScores


@dataclass
class Models:
    """The session's judge, embedder and generator (the generator looked up when needed)."""

    judge: Any
    embedder: Any
    settings: JudgeSettings = field(default_factory=JudgeSettings)
    generator: Any = None
    no_generator_reason: str = ""
    generator_resolved: bool = False
    max_tokens: int = GENERATOR_MAX_TOKENS

    def resolve_generator(self, item: ItemRun) -> None:
        """Look up ``ragbench_llm`` once; a skip (no generator at all) leaves it None."""
        if self.generator_resolved:
            return
        try:
            self.generator = item.fixture("ragbench_llm")
        except pytest.skip.Exception as exc:
            self.generator, self.no_generator_reason = None, str(exc.msg)
        self.generator_resolved = True
        if self.generator is not None:
            require(item.request, "ragbench_llm", self.generator)


AskSystem = Callable[[], Awaitable[Answer]]


def run(case: RagasCase, item: ItemRun) -> Outcome:
    """Supply what the sample lacks, score it, and report the evidence."""
    models = _models(item)
    stage = _stage(item)
    if stage is not None and item.nodeid in stage:
        evaluation: Evaluation = stage.result(item.nodeid)  # raises the item's error
    else:
        answerer = _answerer(case, item, models)
        shared = item.session_state(_SHARED, dict)
        key = (case.file, case.id)
        if answerer is None and _needs_generator(case) and key in shared:
            evaluation = shared[key]  # ragbench_llm's answer, the same for every system
        else:
            ask = _ask_now(case, item)
            evaluation = item.fixture("ragbench_loop").run(evaluate(case, models, ask,
                                                                       answerer))
            if answerer is None and _needs_generator(case):
                shared[key] = evaluation
    independent = item.system_name is not None and _needs_generator(case) \
        and not evaluation.supplied.by_system
    return outcome(case, evaluation, models.embedder, models,
                   system_independent=independent)


def _answerer(case: RagasCase, item: ItemRun, models: Models) -> Any:
    """For a sample answered from its contexts: the system with ``answer_from``, or None."""
    if not _needs_generator(case):
        return None
    answerer = passage_system(item)
    if answerer is None:
        models.resolve_generator(item)
    record_answerer(item, describe_answerer(answerer, models.generator, item.system_name))
    return answerer


# -- the model work of one item (run ahead by the stage, or in the item) ---------------


async def evaluate(case: RagasCase, models: Models, ask_system: AskSystem | None,
                   answerer: Any = None) -> Evaluation:
    """Get the answer and contexts, then the judged scores (all model calls of one item)."""
    supplied = await supply(case, models, ask_system, answerer)
    judged = await ajudged_result(JUDGED_METRICS, question=case.question,
                                  answer=supplied.answer, contexts=supplied.contexts,
                                  reference=case.ground_truth, judge=models.judge,
                                  embedder=models.embedder, settings=models.settings)
    return Evaluation(supplied, judged)


async def supply(case: RagasCase, models: Models, ask_system: AskSystem | None,
                 answerer: Any = None) -> Supplied:
    """The sample's answer and contexts, with what is missing supplied (module docstring)."""
    if case.contexts and case.answer:
        return Supplied(case.answer, case.contexts, "the sample", by_system=False)
    if case.contexts and answerer is not None:
        reply = await acall_answer_from(answerer, case.question, _as_contexts(case.contexts))
        return Supplied(str(reply.text or "").strip(), case.contexts,
                        f"the system under test ({_name(answerer)}), answer_from the "
                        f"sample's {len(case.contexts)} contexts", usage_of(reply))
    if case.contexts:
        return await _generate(case, models)
    if ask_system is None:
        raise RuntimeError("a sample without contexts needs the system under test")
    reply = await ask_system()
    contexts = tuple(c.text for c in reply.contexts)
    usage = usage_of(reply)
    if case.answer:
        return Supplied(case.answer, contexts, f"the sample; contexts: the system retrieved "
                        f"{len(contexts)}", usage)
    return Supplied(reply.text.strip(), contexts,
                    f"the system under test, from {len(contexts)} retrieved contexts", usage)


async def _generate(case: RagasCase, models: Models) -> Supplied:
    assert case.contexts
    generator = models.generator
    if generator is None:
        contexts = _as_contexts(case.contexts)
        reason = f" ({models.no_generator_reason})" if models.no_generator_reason else ""
        return Supplied(extractive_answer(case.question, contexts), case.contexts,
                        f"extracted from the sample's contexts: no generator{reason}",
                        by_system=False)
    messages = rag_messages(case.question, _as_contexts(case.contexts))
    reply = await agenerate(generator, messages, models.max_tokens)
    usage = call_usage(reply)
    model = getattr(generator, "model_id", type(generator).__name__)
    return Supplied(reply.text.strip(), case.contexts,
                    f"the generator {model} (ragbench_llm; the system has no answer_from), "
                    f"from the sample's {len(case.contexts)} contexts",
                    {"generator": usage}, by_system=False)


def _name(system: Any) -> str:
    return describe(system)


def _as_contexts(texts: tuple[str, ...]) -> list[Context]:
    return [Context(id=f"context {i}", text=text, score=1.0)
            for i, text in enumerate(texts, start=1)]


def _needs_generator(case: RagasCase) -> bool:
    return bool(case.contexts) and not case.answer


def _ask_now(case: RagasCase, item: ItemRun) -> AskSystem | None:
    """For a sample without contexts: the system's (prefetched) answer, asked now."""
    if case.contexts:
        return None
    reply = item.answer(case.question)

    async def answered() -> Answer:
        return reply

    return answered


# -- scoring ---------------------------------------------------------------------------


def outcome(case: RagasCase, evaluation: Evaluation, embedder: Any,
            models: Models | None = None, *, system_independent: bool = False) -> Outcome:
    """The judged scores plus the judge-free ones, with the evidence."""
    supplied = evaluation.supplied
    scores: dict[str, Score] = dict(evaluation.judged.scores)
    scores.update(judge_free_scores(supplied.answer, supplied.contexts, case.ground_truth,
                                    embedder))
    metrics = {n: float(v) for n, v in scores.items() if not isinstance(v, Unscored)}
    unscored = {n: v.reason for n, v in scores.items() if isinstance(v, Unscored)}
    errors = [] if supplied.answer.strip() else [f"the answer is empty (from {supplied.source})"]
    shown = evidence(case, supplied)
    missing_facts = record_facts(case.expected_facts, supplied.answer, metrics, shown)
    judge: dict[str, Any] = {}
    samples = evaluation.judged.samples
    if samples and models is not None:
        judge = outcome_judge(samples, models.settings, models.judge)
        if models.settings.samples > 1:
            shown["judge samples"] = evidence_lines(samples)
    return Outcome(metrics=metrics, unscored=unscored, errors=errors, evidence=shown,
                   usage={**supplied.usage, **evaluation.judged.usage}, judge=judge,
                   summary=missing_text(missing_facts), system_independent=system_independent)


def judge_free_scores(answer: str, contexts: tuple[str, ...], ground_truth: str,
                      embedder: Any) -> dict[str, Score]:
    """Scores that need no judge (module docstring says what each compares)."""
    if not answer.strip():
        empty = Unscored("empty answer")
        scores: dict[str, Score] = dict.fromkeys(
            ("semantic_similarity", "token_f1", "rouge", "lexical_faithfulness"), empty)
    else:
        scores = {"semantic_similarity": semantic_similarity(answer, ground_truth, embedder),
                  "token_f1": token_f1(answer, ground_truth),
                  "rouge": rouge(answer, ground_truth)}
    joined = "\n".join(c for c in contexts if c.strip())
    if not joined:
        none = Unscored("no contexts")
        scores.setdefault("lexical_faithfulness", none)
        scores["lexical_context_recall"] = none
        return scores
    scores.setdefault("lexical_faithfulness",
                      rouge(answer, joined, rouge_type="rouge1", mode="precision"))
    scores["lexical_context_recall"] = rouge(joined, ground_truth, rouge_type="rouge1",
                                             mode="recall")
    return scores


def evidence(case: RagasCase, supplied: Supplied) -> dict[str, Any]:
    """Question, ground truth, answer and its source, contexts (shortened)."""
    contexts = "\n".join(f"[{i}] {shorten(text, EVIDENCE_CONTEXT_CHARS)}"
                         for i, text in enumerate(supplied.contexts, start=1))
    return {"question": case.question, "ground_truth": case.ground_truth,
            "answer": shorten(supplied.answer, EVIDENCE_ANSWER_CHARS) or "(empty)",
            "answer from": supplied.source, "contexts": contexts or "(none)"}


# -- the session: models and the prefetch stage ---------------------------------------

_MODELS = pytest.StashKey[Models]()
# Evaluations of samples answered by ragbench_llm for a named system without answer_from,
# by (file, case id): made once, shared by the items of the other such systems.
_SHARED = pytest.StashKey[dict[tuple[str, str], Evaluation]]()
_STAGE = pytest.StashKey[Any]()  # the ragas items' Prefetcher, or None


def _models(item: ItemRun) -> Models:
    """The judge and embedder, kept for the session (fixtures are session-scoped)."""
    return item.session_state(_MODELS, lambda: Models(
        judge=item.fixture("ragbench_judge"), embedder=item.fixture("ragbench_embedder"),
        max_tokens=item.config.max_tokens or ANSWER_MAX_TOKENS,
        settings=JudgeSettings.from_config(item.config)))


def _stage(item: ItemRun) -> Any:
    """The session's prefetcher of the ragas items' model work, keyed by node id.

    None before :func:`plan_ahead` has started one; items of one of several named
    systems are never in it (each does its own work).
    """
    if item.request is None:
        return None
    return item.request.config.stash.get(_STAGE, None)


def plan_ahead(items: list[pytest.Item], item: ItemRun) -> None:
    """Start the model work of the ragas ``items`` to come (``ItemKind.plan_ahead``).

    Their generation and judge calls run on the session loop, at most
    ``--ragbench-concurrency`` at a time; each item then takes its own result. Items of
    one of several named systems are left to do their own work.
    """
    if item.request is None or item.system_name is not None:
        return
    config = item.request.config
    todo = {queued.nodeid: case for queued in items
            if isinstance(case := getattr(queued, "case", None), RagasCase)}
    if _STAGE not in config.stash:
        config.stash[_STAGE] = None  # set first: a failing start is not retried per item
        stage = Prefetcher(get_config(config).concurrency, loop=item.fixture("ragbench_loop"))
        config.add_cleanup(stage.close)
        config.stash[_STAGE] = stage
    stage = config.stash[_STAGE]
    if stage is None or not todo:
        return
    models = _models(item)
    answerer = None
    needing = [case for case in todo.values() if _needs_generator(case)]
    if needing:
        answerer = _answerer(needing[0], item, models)
    answers = None
    if any(not case.contexts for case in todo.values()):
        answers = item.fixture("ragbench_prefetch")  # the system's answers, started ahead
    system = item.system() if answers is not None else None
    for nodeid, case in todo.items():
        ask = None if case.contexts else _ask_ahead(nodeid, case, system, answers)
        stage.submit(nodeid, functools.partial(evaluate, case, models, ask, answerer))


def _ask_ahead(nodeid: str, case: RagasCase, system: Any, answers: Any) -> AskSystem:
    """The system's answer for a sample without contexts, from the answer prefetch."""

    async def ask() -> Answer:
        if nodeid in answers:
            reply: Answer = await answers.aresult(nodeid)
            return reply
        aanswer = getattr(system, "aanswer", None)
        if inspect.iscoroutinefunction(aanswer):
            reply = await aanswer(case.question, None)
        else:
            reply = await asyncio.to_thread(system.answer, case.question, None)
        return reply

    return ask
