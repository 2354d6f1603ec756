"""Judge-based RAGAS metrics: faithfulness, answer relevancy, context precision and recall.

Computed by ragas 0.4.3's own metric classes (``ragas.metrics.collections``), not
re-implemented: ragas writes the prompts, names the structured reply it expects and
computes the score. :mod:`.ragas_bridge` puts our judge behind ragas's LLM interface
(so judge calls go through the judge's response cache, retries and concurrency limit)
and our embedder behind its embeddings interface (answer relevancy).

- ``faithfulness`` — ragas Faithfulness: the share of the answer's statements that the
  judge finds supported by the contexts.
- ``answer_relevancy`` — ragas AnswerRelevancy: the judge writes the question the answer
  answers; the cosine of its embedding with the real question's (0 when the judge finds
  the answer noncommittal). Strictness 1: see :func:`.ragas_bridge.metric`.
- ``context_precision`` — ragas ContextPrecision (with reference): average precision of
  the contexts the judge finds useful for arriving at the reference answer.
- ``context_recall`` — ragas ContextRecall: the share of the reference answer's
  statements the judge attributes to the contexts.

No judge: every metric is ``Unscored(NO_JUDGE)`` and ragas is not imported. A judge call
that fails, a reply that is not JSON, or JSON that does not fit ragas's model (asked once
more with another seed first) makes that metric ``Unscored`` with the reason; the other
metrics still score. ragas's NaN (no statements found) becomes ``Unscored`` too, so NaN
never escapes; a value outside the metric's range (verdicts other than 0/1) as well.

Repeated judging (``settings``, :class:`~.repeated.JudgeSettings`): each metric is computed
``samples`` times, sample ``i`` asking every judge call with seed ``i`` at the settings'
temperature; the score is the mean of the scored samples and ``JudgedScores.samples``
keeps every one (only for the metrics the judge was asked about: a metric missing its
inputs is unscored without a call and without samples).

:func:`judged_scores` is synchronous: ragas runs on a private event loop and each judge
call is the judge's blocking ``generate`` in a worker thread (the OpenAI-compatible
client runs it on its own loop, under its own concurrency limit). It refuses to run
inside a running event loop, which it would block. :func:`ajudged_scores`
awaits the judge's ``agenerate``; call it on the loop the judge's client lives on
(``ragbench_loop``) to score many items concurrently under one limit.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_ragbench.errors import ModelCallError
from pytest_ragbench.heavy_imports import import_whole
from pytest_ragbench.metrics.registry import Score, UnknownMetricError, Unscored, parse_metric
from pytest_ragbench.metrics.repeated import JudgeSettings, combine

if TYPE_CHECKING:
    from pytest_ragbench.systems.protocols import Embedder, Judge

T = TypeVar("T")

NO_JUDGE = "no judge configured"
JUDGED_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")

# What an undefined (NaN) ragas score means, per metric.
_NAN_REASONS = {
    "faithfulness": "the judge found no statements in the answer (faithfulness undefined)",
    "context_recall": "the judge classified no statements of the reference (context_recall "
                      "undefined)",
}
# ragas's context precision divides by (hits + 1e-10): round that epsilon away.
_DIGITS = 9


@dataclass
class JudgedScores:
    """Scores by metric name, the judge usage behind them, and every sample of each."""

    scores: dict[str, Score]
    usage: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[Score]] = field(default_factory=dict)


def judged_scores(names: Sequence[str], *, question: str, answer: str,
                  contexts: Sequence[str], reference: str | None, judge: Judge | None,
                  embedder: Embedder | None,
                  settings: JudgeSettings | None = None) -> dict[str, Score]:
    """Score ``names`` (among :data:`JUDGED_METRICS`) through ragas with ``judge``."""
    return judged_result(names, question=question, answer=answer, contexts=contexts,
                         reference=reference, judge=judge, embedder=embedder,
                         settings=settings).scores


async def ajudged_scores(names: Sequence[str], *, question: str, answer: str,
                         contexts: Sequence[str], reference: str | None, judge: Judge | None,
                         embedder: Embedder | None,
                         settings: JudgeSettings | None = None) -> dict[str, Score]:
    """Async :func:`judged_scores`: awaits the judge's ``agenerate`` when it has one."""
    result = await ajudged_result(names, question=question, answer=answer, contexts=contexts,
                                  reference=reference, judge=judge, embedder=embedder,
                                  settings=settings)
    return result.scores


def judged_result(names: Sequence[str], *, question: str, answer: str,
                  contexts: Sequence[str], reference: str | None, judge: Judge | None,
                  embedder: Embedder | None,
                  settings: JudgeSettings | None = None) -> JudgedScores:
    """Like :func:`judged_scores`, with the judge's usage and every sample."""
    wanted = _check_names(names)
    if judge is None:
        return JudgedScores(dict.fromkeys(wanted, Unscored(NO_JUDGE)))
    return _run_blocking(_score_all(wanted, question=question, answer=answer,
                                    contexts=contexts, reference=reference, judge=judge,
                                    embedder=embedder, use_async=False,
                                    settings=settings or JudgeSettings()))


async def ajudged_result(names: Sequence[str], *, question: str, answer: str,
                         contexts: Sequence[str], reference: str | None, judge: Judge | None,
                         embedder: Embedder | None,
                         settings: JudgeSettings | None = None) -> JudgedScores:
    """Like :func:`ajudged_scores`, with the judge's usage and every sample."""
    wanted = _check_names(names)
    if judge is None:
        return JudgedScores(dict.fromkeys(wanted, Unscored(NO_JUDGE)))
    return await _score_all(wanted, question=question, answer=answer, contexts=contexts,
                            reference=reference, judge=judge, embedder=embedder,
                            use_async=True, settings=settings or JudgeSettings())


def _check_names(names: Sequence[str]) -> list[str]:
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in JUDGED_METRICS]
    if unknown:
        raise UnknownMetricError(f"not a judged metric: {', '.join(unknown)} "
                                 f"(judged metrics: {', '.join(JUDGED_METRICS)})")
    return wanted


def _missing_input(name: str, *, question: str, answer: str, contexts: Sequence[str],
                   reference: str | None, embedder: Embedder | None) -> str | None:
    """Why ``name`` cannot be asked at all, or None."""
    if not question.strip():
        return "no question"
    if name in ("faithfulness", "answer_relevancy") and not answer.strip():
        return "no answer"
    if name != "answer_relevancy" and not any(c.strip() for c in contexts):
        return "no contexts"
    if name in ("context_precision", "context_recall") and not (reference or "").strip():
        return "no reference answer"
    if name == "answer_relevancy" and embedder is None:
        return "no embedder configured"
    return None


async def _score_all(names: list[str], *, question: str, answer: str, contexts: Sequence[str],
                     reference: str | None, judge: Judge, embedder: Embedder | None,
                     use_async: bool, settings: JudgeSettings) -> JudgedScores:
    scores: dict[str, Score] = {}
    todo = []
    for name in names:
        missing = _missing_input(name, question=question, answer=answer, contexts=contexts,
                                 reference=reference, embedder=embedder)
        if missing:
            scores[name] = Unscored(missing)  # not asked: no samples
        else:
            todo.append(name)
    if not todo:
        return JudgedScores(scores)
    import_whole("pytest_ragbench.metrics.ragas_bridge")  # ragas: whole or not at all
    # lazy: loads ragas
    from pytest_ragbench.metrics import ragas_bridge

    usage = ragas_bridge.JudgeUsage()
    embeddings = ragas_bridge.EmbedderEmbeddings(embedder) if embedder is not None else None
    kept = [c for c in contexts if c.strip()]

    async def one(name: str, seed: int) -> Score:
        llm = ragas_bridge.JudgeLLM(judge, use_async=use_async, seed=seed,
                                    temperature=settings.temperature, usage=usage)
        metric = ragas_bridge.metric(name, llm, embeddings)
        inputs = ragas_bridge.score_inputs(name, question=question, answer=answer,
                                           contexts=kept, reference=reference or "")
        try:
            result = await metric.ascore(**inputs)
        except ModelCallError as exc:  # the call failed, or the reply did not fit
            return Unscored(str(exc))
        except Exception as exc:  # ragas (or the embedder) choking on a reply: this metric only
            return Unscored(f"ragas could not compute {name}: {type(exc).__name__}: {exc}")
        return _checked(name, float(result.value))

    jobs = [(name, seed) for name in todo for seed in settings.seeds]
    values = await asyncio.gather(*(one(name, seed) for name, seed in jobs))
    samples: dict[str, list[Score]] = {name: [] for name in todo}
    for (name, _), value in zip(jobs, values, strict=True):
        samples[name].append(value)
    scores.update((name, combine(samples[name])) for name in todo)
    return JudgedScores({name: scores[name] for name in names}, {"judge": usage.to_dict()},
                        samples)


def _checked(name: str, value: float) -> Score:
    """Round, map NaN to a reason, refuse values outside the metric's range."""
    measure = parse_metric(name)
    if math.isnan(value):
        return Unscored(_NAN_REASONS.get(name, f"ragas returned NaN for {name}"))
    try:
        return measure.check(round(value, _DIGITS))
    except ValueError:
        low, high = measure.spec.low, measure.spec.high
        return Unscored(f"ragas computed {name} = {value:.4g}, outside [{low:g}, {high:g}]: "
                        "the judge's verdicts were not 0/1")


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a private loop; refuse to block a running loop's thread.

    Blocking an event loop's thread could deadlock: the judge's client may need that very
    loop (``ragbench_loop``) to make its calls.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError("judged_scores() was called from a running event loop; "
                       "await ajudged_scores() instead")
