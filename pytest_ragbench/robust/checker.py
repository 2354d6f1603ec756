"""Check perturbed examples against the original: observe (answer), measure, compare to bounds.

Observations are made in batches (one call of ``observe`` for many questions) and
remembered by question, so hypothesis replaying or shrinking an example never asks the
system twice for the same text within an item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.metrics.answer import semantic_similarities
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.render.text import shorten
from pytest_ragbench.robust import properties as props
from pytest_ragbench.robust.perturb import Perturbed
from pytest_ragbench.robust.search import Verdict

ANSWER_SHOWN = 300  # characters of an answer shown with a failure


@dataclass(frozen=True)
class Observation:
    """What the system returned for one question: ranked contexts and the answer text."""

    contexts: tuple[Any, ...]
    text: str | None  # None: retrieval only (BEIR)
    usage: Any = None
    latency_s: float = 0.0

    @property
    def ranking(self) -> list[str]:
        """Context ids in rank order."""
        return [str(c.id) for c in self.contexts]


Observe = Callable[[list[str]], list[Observation]]


def measured(kind: str) -> tuple[str, ...]:
    """The properties checked for a perturbation kind."""
    if kind == "injection":
        return props.INJECTION
    return (*props.RETRIEVAL, *props.ANSWER)


class Checker:
    """Measures perturbed examples against the original observation."""

    def __init__(self, question: str, observe: Observe, *, bounds: dict[str, float],
                 expected: Sequence[str] = (), embedder: Any = None,
                 embedder_problem: str = "no embedder", retrieval_noise: str | None = None
                 ) -> None:
        self.question = question
        # Why the retrieved contexts are not compared (an off-topic question retrieves noise).
        self.retrieval_noise = retrieval_noise
        self.observe = observe
        self.bounds = bounds
        self.expected = tuple(expected)
        self.embedder = embedder
        self.embedder_problem = embedder_problem
        self.memo: dict[str, Observation] = {}
        self.similarities: dict[str, Score] = {}
        self.asked = 0

    @property
    def original(self) -> Observation:
        """The observation of the unperturbed question."""
        self.prefetch([self.question])
        return self.memo[self.question]

    def known(self, question: str) -> bool:
        """True when ``question`` was observed already."""
        return question in self.memo

    def prefetch(self, questions: Sequence[str]) -> None:
        """Observe every question not seen yet, in one batch."""
        todo = [q for q in dict.fromkeys(questions) if q not in self.memo]
        if not todo:
            return
        observations = self.observe(todo)
        if len(observations) != len(todo):
            raise ValueError(f"observed {len(observations)} results for {len(todo)} questions")
        self.asked += len(todo)
        self.memo.update(zip(todo, observations, strict=True))

    def verdict(self, perturbed: Perturbed) -> Verdict:
        """Observe (if needed) and check one example."""
        return self.verdicts([perturbed])[0]

    def verdicts(self, examples: Sequence[Perturbed]) -> list[Verdict]:
        """Observe (in one batch) and check several examples."""
        self.prefetch([self.question, *(p.question for p in examples)])
        self._similarities([self.memo[p.question] for p in examples
                            if "answer_similarity" in measured(p.kind)])
        return [self._verdict(p, self.memo[p.question]) for p in examples]

    def _similarities(self, observations: Sequence[Observation]) -> None:
        original = self.original.text
        texts = [o.text for o in observations if o.text is not None]
        todo = [t for t in dict.fromkeys(texts) if t not in self.similarities]
        if not todo or original is None or self.embedder is None:
            return
        scores = semantic_similarities([(t, original) for t in todo], self.embedder)
        self.similarities.update(zip(todo, scores, strict=True))

    def _answer_similarity(self, observation: Observation) -> Score:
        if observation.text is None or self.original.text is None:
            return Unscored("the system gives no answer text")
        if self.embedder is None:
            return Unscored(self.embedder_problem)
        return self.similarities.get(observation.text, Unscored("not measured"))

    def _measure(self, perturbed: Perturbed, observation: Observation) -> dict[str, Score]:
        original = self.original
        if perturbed.kind == "injection":
            return {"injection_resisted": props.injection_resisted(
                observation.text, perturbed.payload, original.text)}
        if self.retrieval_noise is not None:
            return {**dict.fromkeys(props.RETRIEVAL, Unscored(self.retrieval_noise)),
                    "answer_similarity": self._answer_similarity(observation)}
        depth = max(len(original.ranking), len(observation.ranking))
        return {
            # the system returned fewer than k contexts: its empty slots match nothing
            "rbo": props.rbo(_padded(original.ranking, depth, "original"),
                             _padded(observation.ranking, depth, "perturbed")),
            "jaccard": props.jaccard(original.ranking, observation.ranking),
            "expected_sources_kept": props.expected_sources_kept(
                self.expected, original.contexts, observation.contexts),
            "answer_similarity": self._answer_similarity(observation),
        }

    def _verdict(self, perturbed: Perturbed, observation: Observation) -> Verdict:
        values: dict[str, float] = {}
        unscored: dict[str, str] = {}
        for name, score in self._measure(perturbed, observation).items():
            if isinstance(score, Unscored):
                unscored[name] = score.reason
            else:
                values[name] = float(score)
        broken = tuple(f"{name} = {values[name]:.3g}, needs >= {bound:g}"
                       for name, bound in self.bounds.items()
                       if name in values and values[name] < bound)
        details = {"top-k": f"original {self.original.ranking}; "
                            f"perturbed {observation.ranking}"}
        if observation.text is not None:
            details["answer"] = _shorten(observation.text)
            details["original answer"] = _shorten(self.original.text or "")
        return Verdict(values, unscored, broken, details)


def _padded(ranking: list[str], depth: int, side: str) -> list[Any]:
    return [*ranking, *((side, i) for i in range(len(ranking), depth))]


def _shorten(text: str) -> str:
    return shorten(text, ANSWER_SHOWN)
