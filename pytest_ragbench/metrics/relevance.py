"""``judge_relevance``: seed 004's LLM-as-judge relevance of retrieved contexts to the query.

The judge rates each retrieved context 0-10 against the query with seed 004's prompt
(0-3 irrelevant, 4-6 partially relevant, 7-10 highly relevant), asked for
``{"score": <integer>}`` (:mod:`.grades`); the metric is the mean grade / 10, in [0, 1].
It is scored only with a judge, and only when every context got a grade: one unusable
reply leaves the item's sample unscored with that reply quoted (a mean over the graded
contexts alone would drift toward whichever contexts the judge could read). Nothing
retrieved leaves it unscored too (relevance of nothing is undefined).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.metrics.grades import Grade, agrade
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.metrics.repeated import JudgeSettings, combine

NAME = "judge_relevance"
HIGH = 10
MAX_TOKENS = 16
NO_JUDGE = "no judge configured"
NOTHING = "nothing was retrieved"


def relevance_messages(query: str, text: str, noun: str = "memory") -> list[dict[str, str]]:
    """Seed 004's relevance prompt for one retrieved ``noun`` (memory, context)."""
    return [{"role": "user", "content": (
        f"Query: {query}\nRetrieved {noun.capitalize()}: {text}\n\n"
        f"Is this {noun} relevant to answering the query?\n"
        "Rate 0-10 where:\n- 0-3: Irrelevant\n- 4-6: Partially relevant\n"
        "- 7-10: Highly relevant\n\n"
        'Reply with the JSON object {"score": <integer from 0 to 10>} and nothing else.')}]


@dataclass(frozen=True)
class Relevance:
    """The item's score, one score per sample, and the grades per context and sample."""

    score: Score
    samples: list[Score] = field(default_factory=list)
    grades: list[list[Grade]] = field(default_factory=list)  # [context][sample]

    def generations(self) -> list[Any]:
        """The calls the judge answered."""
        return [g.generation for row in self.grades for g in row if g.generation is not None]

    def listing(self) -> str:
        """One line per context: its grades (or why not)."""
        lines = []
        for rank, row in enumerate(self.grades, start=1):
            shown = ", ".join(f"unscored ({g.score.reason})" if isinstance(g.score, Unscored)
                              else f"{int(g.score)}" for g in row)
            lines.append(f"[{rank}] {shown} /10")
        return "\n".join(lines)


async def ajudge_relevance(judge: Any, query: str, texts: Sequence[str],
                           settings: JudgeSettings, noun: str = "memory") -> Relevance:
    """Grade every text against ``query``, ``settings.samples`` times each."""
    if judge is None:
        return Relevance(Unscored(NO_JUDGE))
    if not texts:
        return Relevance(Unscored(NOTHING))  # the judge is not asked: no samples
    jobs = [(i, seed) for i in range(len(texts)) for seed in settings.seeds]
    done = await asyncio.gather(*(
        agrade(judge, relevance_messages(query, texts[i], noun), high=HIGH,
               max_tokens=MAX_TOKENS, temperature=settings.temperature, seed=seed)
        for i, seed in jobs))
    grades: list[list[Grade]] = [[] for _ in texts]
    for (i, _), grade in zip(jobs, done, strict=True):
        grades[i].append(grade)
    samples = [_sample([row[s] for row in grades]) for s in range(settings.samples)]
    return Relevance(combine(samples), samples, grades)


def _sample(grades: list[Grade]) -> Score:
    """One sample's score: mean grade / 10, unscored when any context lacks a grade."""
    values: list[float] = []
    for grade in grades:
        if isinstance(grade.score, Unscored):
            return grade.score
        values.append(float(grade.score))
    return sum(values) / (HIGH * len(values))
