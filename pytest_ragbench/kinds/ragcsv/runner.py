"""``ragcsv[<file-stem>:<row>]``: graded answer accuracy on one RAGCSV row (README "Case formats").

The system under test answers the row's question from the row's own fragments when it has
``answer_from(question, contexts, history=None)`` (kinds/passages.py; the fragments as
contexts ``fragment 1``, ... with their metadata). Otherwise the generator
(``ragbench_llm``) does, with the RAG prompt: the system instruction, one user message
``Document: {title}`` + newline + ``{page_content}`` per fragment, then the question
(temperature 0, at most 512 tokens, RAGCSV_MAX_TOKENS's default, or ``--ragbench-max-tokens``); the
answer then does not depend on the system, and rows of several systems share it. The
evidence (``answer from``) says which answered. The judge (``ragbench_judge``)
grades the answer against column 0 from 0 to 100 (at most 16 tokens), asked for
``{"score": <integer>}`` as structured output (:mod:`pytest_ragbench.metrics.grades`): a
reply that is not an integer from 0 to 100 leaves ``accuracy`` unscored with the reply
quoted, and a failed judge call leaves it unscored with the reason; the answer, its time
and the other evidence are kept either way. With ``--ragbench-judge-samples N`` the judge
grades N times (seeds 0..N-1) and ``accuracy`` is the mean grade. Without a judge,
``accuracy`` is the semantic similarity of answer and expected answer × 100
(``ragbench_embedder``), and the evidence (``accuracy_method``) and the summary say so.

``fact_recall``, when the row gives expected facts (column 5): the share of them the
answer states (:mod:`.facts`); item threshold 1.

``total_time_ms`` is the model time of the row: generator plus judge latency (0 for
replies taken from the cache). With ``--ragbench-stream`` the generator's answer streams:
``ttft_ms`` (to its first chunk) and ``itl_ms`` (mean gap between chunks) are the
answer's alone; a reply from the cache has neither. The calls of every selected row are
submitted ahead (:func:`plan_ahead`, the kind's ``plan_ahead``; on an xdist worker those
of its own rows), ``--ragbench-concurrency`` at a time; each item then takes its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragbench.cases.model import RagcsvCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import agenerate, call_usage, calls_usage
from pytest_ragbench.kinds.facts import missing_text, record_facts
from pytest_ragbench.kinds.passages import (
    acall_answer_from,
    describe_answerer,
    passage_system,
    record_answerer,
)
from pytest_ragbench.metrics import Unscored, semantic_similarity
from pytest_ragbench.metrics.grades import agrade
from pytest_ragbench.metrics.repeated import JudgeSettings, combine, evidence_lines, outcome_judge
from pytest_ragbench.run.prefetch import Prefetcher
from pytest_ragbench.systems.prompts import SYSTEM_INSTRUCTION
from pytest_ragbench.systems.protocols import Context

MAX_TOKENS = 512  # RAGCSV_MAX_TOKENS's default
JUDGE_MAX_TOKENS = 16
GRADE_HIGH = 100
JUDGE_INSTRUCTION = ("You are an accuracy evaluator. Compare the actual answer with the "
                     "expected answer and grade its accuracy from 0 to 100: 100 when the "
                     "actual answer states what the expected answer states, 0 when it is "
                     "wrong, unrelated or missing. Reply with the JSON object "
                     '{"score": <integer from 0 to 100>} and nothing else.')
JUDGE_METHOD = "judge grade 0-100"
SIMILARITY_METHOD = "semantic similarity x 100 (no judge configured)"


def answer_messages(case: RagcsvCase) -> list[dict[str, str]]:
    """The RAG prompt for one row: instruction, one message per fragment, the question."""
    messages = [{"role": "system", "content": SYSTEM_INSTRUCTION}]
    messages += [{"role": "user", "content": f"Document: {f.title or ''}\n{f.page_content}"}
                 for f in case.fragments]
    messages.append({"role": "user", "content": case.question})
    return messages


def fragment_contexts(case: RagcsvCase) -> list[Context]:
    """The row's fragments as the contexts given to ``answer_from``."""
    return [Context(id=f"fragment {i}", text=f.page_content, score=1.0,
                    metadata={**dict(getattr(f, "metadata", None) or {}),
                              **({"title": f.title} if f.title else {})})
            for i, f in enumerate(case.fragments, start=1)]


def judge_messages(expected: str, actual: str) -> list[dict[str, str]]:
    """The 0-100 grading prompt: expected and actual answer."""
    return [{"role": "system", "content": JUDGE_INSTRUCTION},
            {"role": "user", "content": f"Expected answer: {expected}\n\nActual answer: "
                                        f"{actual}\n\nAccuracy score (0-100):"}]


@dataclass
class RowReplies:
    """The generator's answer and the judge's grades, one per sample (none without a judge)."""

    answer: Any
    grades: list[Any] = field(default_factory=list)


@dataclass
class RagcsvState:
    """The prefetcher of each system in this session."""

    prefetchers: dict[str | None, Any] = field(default_factory=dict)


STATE = pytest.StashKey[RagcsvState]()


def run(case: RagcsvCase, item: ItemRun) -> Outcome:
    """Answer from the row's fragments, grade the answer, and time it."""
    answerer = _answerer(item)
    judge = item.fixture("ragbench_judge")
    settings = JudgeSettings.from_config(item.config)
    replies = _replies(case, item, answerer, judge, settings)
    answer = str(replies.answer.text or "").strip()
    evidence: dict[str, Any] = {
        "question": case.question, "expected": case.expected, "got": answer,
        "answer from": answerer.label,
        "documents": "\n".join(f"{f.title or '(untitled)'}" for f in case.fragments),
    }
    if item.config.ragcsv_debug and case.row == 1:  # RAGCSV_DEBUG: the controller prints it
        evidence["prompt"] = _prompt_text(case, answerer)
    metrics: dict[str, float] = {}
    unscored: dict[str, str] = {}
    judged: dict[str, Any] = {}
    if judge is not None:
        evidence["accuracy_method"] = JUDGE_METHOD
        samples = [g.score for g in replies.grades]
        shown = [g.reply for g in replies.grades]
        evidence["judge_reply"] = shown[0] if len(shown) == 1 else shown
        accuracy = combine(samples)
        if isinstance(accuracy, Unscored):
            unscored["accuracy"] = accuracy.reason
        else:
            metrics["accuracy"] = float(accuracy)
        judged = outcome_judge({"accuracy": samples}, settings, judge)
        if settings.samples > 1:
            evidence["judge samples"] = evidence_lines({"accuracy": samples})
    else:
        evidence["accuracy_method"] = SIMILARITY_METHOD
        metrics["accuracy"] = _similarity_accuracy(answer, case.expected, item)
    missing_facts = record_facts(case.expected_facts, answer, metrics, evidence)
    graded = [g.generation for g in replies.grades if g.generation is not None]
    calls = [replies.answer, *graded]
    metrics["total_time_ms"] = 1000.0 * sum(float(g.latency_s or 0.0) for g in calls)
    for name in ("ttft", "itl"):  # the answer's, when it was streamed (--ragbench-stream)
        value = getattr(replies.answer, f"{name}_s", None)
        if value is not None:
            metrics[f"{name}_ms"] = 1000.0 * float(value)
    evidence["cached"] = all(bool(getattr(g, "cached", False)) for g in calls)
    usage = {"system" if answerer.system is not None else "generator":
             call_usage(replies.answer)}
    if judge is not None:
        usage["judge"] = calls_usage(graded)
    # An empty answer fails the item whatever the thresholds: the answerer is broken.
    who = "the generator" if answerer.system is None else "the system's answer_from"
    errors = [] if answer else [f"{who} returned an empty answer"]
    return Outcome(metrics=metrics, unscored=unscored, errors=errors, evidence=evidence,
                   usage=usage, judge=judged, summary=missing_text(missing_facts),
                   system_independent=answerer.system is None
                   and item.system_name is not None)


def _similarity_accuracy(answer: str, expected: str, item: ItemRun) -> float:
    if not answer:
        return 0.0  # no answer is a wrong answer, not a missing score
    score = semantic_similarity(answer, expected, item.fixture("ragbench_embedder"))
    return 0.0 if isinstance(score, Unscored) else 100.0 * float(score)


@dataclass(frozen=True)
class Answerer:
    """Who answers the rows of one system: its ``answer_from``, or the generator."""

    system: Any  # the system with answer_from, or None
    generator: Any  # ragbench_llm when the system has no answer_from
    label: str
    max_tokens: int = MAX_TOKENS

    @property
    def shared(self) -> bool:
        """True when the generator answers: the same answer for every system."""
        return self.system is None


def _answerer(item: ItemRun) -> Answerer:
    """The system's ``answer_from``, else ``ragbench_llm`` (recorded for the report)."""
    system = passage_system(item)
    generator = None if system is not None else item.fixture("ragbench_llm")
    label = describe_answerer(system, generator, item.system_name)
    record_answerer(item, label)
    return Answerer(system, generator, label, item.config.max_tokens or MAX_TOKENS)


def _prompt_text(case: RagcsvCase, answerer: Answerer) -> str:
    """The prompt of the row, as RAGCSV_DEBUG shows it."""
    if answerer.system is not None:
        return (f"answer_from(question={case.question!r}, contexts=[{len(case.fragments)} "
                "fragments])")
    return "\n".join(f"[{m['role']}] {m['content']}" for m in answer_messages(case))


def plan_ahead(items: list[pytest.Item], item: ItemRun) -> None:
    """Submit the answer and grade calls of the RAGCSV ``items`` to come (``ItemKind.plan_ahead``).

    They run at most ``--ragbench-concurrency`` at a time; each row then takes its own.
    """
    answerer = _answerer(item)
    judge = item.fixture("ragbench_judge")
    settings = JudgeSettings.from_config(item.config)
    prefetcher = _prefetcher(item, answerer)
    for queued in items:
        case = getattr(queued, "case", None)
        if isinstance(case, RagcsvCase):
            prefetcher.submit(_key(queued.nodeid, case, answerer),
                              _job(case, answerer, judge, settings))


def _prefetcher(item: ItemRun, answerer: Answerer) -> Prefetcher:
    """The session's prefetcher of this item's system (one for the rows the generator answers).

    Rows answered by the generator are keyed by file and row, not by system, so the rows
    of several systems without ``answer_from`` are answered and graded once.
    """
    state = item.session_state(STATE, RagcsvState)
    owner = None if answerer.shared else item.system_name
    prefetcher: Prefetcher | None = state.prefetchers.get(owner)
    if prefetcher is None:
        prefetcher = Prefetcher(item.config.concurrency, loop=item.fixture("ragbench_loop"))
        state.prefetchers[owner] = prefetcher
        if item.request is not None:
            item.request.config.add_cleanup(prefetcher.close)
    return prefetcher


def _replies(case: RagcsvCase, item: ItemRun, answerer: Answerer, judge: Any,
             settings: JudgeSettings) -> RowReplies:
    """The row's replies: submitted ahead by :func:`plan_ahead`, or asked now."""
    prefetcher = _prefetcher(item, answerer)
    key = _key(item.nodeid or case.id, case, answerer)
    prefetcher.submit(key, _job(case, answerer, judge, settings))  # no-op when submitted
    # taken by this item: its rerun asks again, rows of other systems share the first replies
    replies: RowReplies = prefetcher.result(key, taker=item.nodeid or key)
    return replies


def _key(nodeid: str, case: RagcsvCase, answerer: Answerer) -> str:
    return f"{case.file}#{case.row}" if answerer.shared else nodeid


def _job(case: RagcsvCase, answerer: Answerer, judge: Any, settings: JudgeSettings) -> Any:
    async def job() -> RowReplies:
        answer = await _answer(case, answerer)
        if judge is None:
            return RowReplies(answer)
        messages = judge_messages(case.expected, answer.text.strip())
        grades = await asyncio.gather(*(
            agrade(judge, messages, high=GRADE_HIGH, max_tokens=JUDGE_MAX_TOKENS,
                   temperature=settings.temperature, seed=seed) for seed in settings.seeds))
        return RowReplies(answer, list(grades))

    return job


async def _answer(case: RagcsvCase, answerer: Answerer) -> Any:
    """The system's ``answer_from`` the fragments, or the generator's reply to the RAG prompt."""
    if answerer.system is not None:
        return await acall_answer_from(answerer.system, case.question, fragment_contexts(case))
    return await agenerate(answerer.generator, answer_messages(case), answerer.max_tokens)
