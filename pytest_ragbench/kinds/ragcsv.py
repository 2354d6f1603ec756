"""``ragcsv[<file-stem>:<row>]``: seed 003's graded answer accuracy on one RAGCSV row.

The generator (``ragbench_llm``, or a named system's ``generator``) answers the row's
question from the row's own fragments with seed 003's prompt: the system instruction, one
user message ``Document: {title}`` + newline + ``{page_content}`` per fragment, then the question
(temperature 0, at most 512 tokens, the seed's default). The judge (``ragbench_judge``)
grades the answer against column 0 from 0 to 100 (at most 16 tokens), asked for
``{"score": <integer>}`` as structured output (:mod:`pytest_ragbench.metrics.grades`): a
reply that is not an integer from 0 to 100 leaves ``accuracy`` unscored with the reply
quoted, and a failed judge call leaves it unscored with the reason; the answer, its time
and the other evidence are kept either way. With ``--ragbench-judge-samples N`` the judge
grades N times (seeds 0..N-1) and ``accuracy`` is the mean grade. Without a judge,
``accuracy`` is the semantic similarity of answer and expected answer × 100
(``ragbench_embedder``), and the evidence (``accuracy_method``) and the summary say so.

``total_time_ms`` is the model time of the row: generator plus judge latency (0 for
replies taken from the cache). The first item of a file submits every selected row's
calls at once (``--ragbench-concurrency`` at a time); each item then takes its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragbench.cases.model import RagcsvCase
from pytest_ragbench.items import RunContext
from pytest_ragbench.kinds.answer_common import agenerate, call_usage, calls_usage
from pytest_ragbench.metrics.repeated import JudgeSettings
from pytest_ragbench.records import Outcome
from pytest_ragbench.system.prompts import SYSTEM_INSTRUCTION  # seed 003's instruction

MAX_TOKENS = 512  # seed 003: RAGCSV_MAX_TOKENS
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
    """Seed 003's prompt for one row."""
    messages = [{"role": "system", "content": SYSTEM_INSTRUCTION}]
    messages += [{"role": "user", "content": f"Document: {f.title or ''}\n{f.page_content}"}
                 for f in case.fragments]
    messages.append({"role": "user", "content": case.question})
    return messages


def judge_messages(expected: str, actual: str) -> list[dict[str, str]]:
    """Seed 003's grading prompt."""
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


def run(case: RagcsvCase, context: RunContext) -> Outcome:
    """Answer from the row's fragments, grade the answer, and time it."""
    from pytest_ragbench.metrics import Unscored
    from pytest_ragbench.metrics.repeated import combine, evidence_lines, outcome_judge

    generator = _generator(context)
    judge = context.fixture("ragbench_judge")
    settings = JudgeSettings.from_config(context.config)
    replies = _replies(case, context, generator, judge, settings)
    answer = replies.answer.text.strip()
    evidence: dict[str, Any] = {
        "question": case.question, "expected": case.expected, "got": answer,
        "documents": "\n".join(f"{f.title or '(untitled)'}" for f in case.fragments),
    }
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
        metrics["accuracy"] = _similarity_accuracy(answer, case.expected, context)
    graded = [g.generation for g in replies.grades if g.generation is not None]
    calls = [replies.answer, *graded]
    metrics["total_time_ms"] = 1000.0 * sum(float(g.latency_s or 0.0) for g in calls)
    evidence["cached"] = all(bool(getattr(g, "cached", False)) for g in calls)
    usage = {"generator": call_usage(replies.answer)}
    if judge is not None:
        usage["judge"] = calls_usage(graded)
    # An empty answer fails the item whatever the thresholds: the generator is broken.
    errors = [] if answer else ["the generator returned an empty answer"]
    return Outcome(metrics=metrics, unscored=unscored, errors=errors, evidence=evidence,
                   usage=usage, judge=judged)


def _similarity_accuracy(answer: str, expected: str, context: RunContext) -> float:
    from pytest_ragbench.metrics import Unscored, semantic_similarity

    if not answer:
        return 0.0  # no answer is a wrong answer, not a missing score
    score = semantic_similarity(answer, expected, context.fixture("ragbench_embedder"))
    return 0.0 if isinstance(score, Unscored) else 100.0 * float(score)


def _generator(context: RunContext) -> Any:
    """A named system's own generator when it has one, else ``ragbench_llm``."""
    if context.system_name is not None:
        own = getattr(context.system(), "generator", None)
        if own is not None:
            return own
    return context.fixture("ragbench_llm")


def _replies(case: RagcsvCase, context: RunContext, generator: Any, judge: Any,
             settings: JudgeSettings) -> RowReplies:
    """The row's replies: prefetched with every selected row of the session, or made now."""
    from pytest_ragbench.system.prefetch import Prefetcher

    state = context.session_state(STATE, RagcsvState)
    prefetcher = state.prefetchers.get(context.system_name)
    if prefetcher is None:
        prefetcher = Prefetcher(context.config.concurrency, loop=context.fixture("ragbench_loop"))
        state.prefetchers[context.system_name] = prefetcher
        if context.request is not None:
            context.request.config.add_cleanup(prefetcher.close)
        for nodeid, other in _selected_rows(context):
            prefetcher.submit(nodeid, _job(other, generator, judge, settings))
    key = context.nodeid or case.id
    prefetcher.submit(key, _job(case, generator, judge, settings))  # no-op when submitted
    replies: RowReplies = prefetcher.result(key)
    return replies


def _selected_rows(context: RunContext) -> list[tuple[str, RagcsvCase]]:
    """Every RAGCSV item of this system still in the session.

    None under pytest-xdist, where a worker cannot know which items it will be given.
    """
    request = context.request
    if request is None or hasattr(request.config, "workerinput"):
        return []
    rows = []
    for item in request.session.items:
        case = getattr(item, "case", None)
        if isinstance(case, RagcsvCase) and \
                getattr(item, "system_name", None) == context.system_name:
            rows.append((item.nodeid, case))
    return rows


def _job(case: RagcsvCase, generator: Any, judge: Any, settings: JudgeSettings) -> Any:
    async def job() -> RowReplies:
        from pytest_ragbench.metrics.grades import agrade

        answer = await agenerate(generator, answer_messages(case), MAX_TOKENS)
        if judge is None:
            return RowReplies(answer)
        messages = judge_messages(case.expected, answer.text.strip())
        grades = await asyncio.gather(*(
            agrade(judge, messages, high=GRADE_HIGH, max_tokens=JUDGE_MAX_TOKENS,
                   temperature=settings.temperature, seed=seed) for seed in settings.seeds))
        return RowReplies(answer, list(grades))

    return job
