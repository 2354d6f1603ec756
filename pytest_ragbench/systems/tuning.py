"""Seed 004's retrieval knobs for the embedded system, applied to the retrieved candidates.

Each is off by default. In the order the embedded system applies them:

- query expansion: the generator writes search terms for the question; the retrieval
  query is the question followed by them (the call goes through the generator's response
  cache like every model call);
- ``min_score``: a candidate whose cosine similarity to the query is below it is dropped;
- recency: ``score * max(0, 1 - weight * age)``, the age in years of the document's date
  field behind the newest candidate's (seed 004's time decay); undated candidates keep
  their score;
- re-ranking: the broad candidates reordered by a cross-encoder (a sentence-transformers
  CrossEncoder folder) or, without one, by the generator grading each 0-10 (seed 004's
  relevance prompt), best first; the system keeps its ``top_k``.

Imported only when one of them is switched on.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Sequence
from typing import Any

from pytest_ragbench.heavy_imports import import_whole
from pytest_ragbench.systems.protocols import Context

EXPANSION_MAX_TOKENS = 32
RERANK_MAX_TOKENS = 16
_DAYS_PER_YEAR = 365.25


def expansion_messages(question: str) -> list[dict[str, str]]:
    """The prompt asking the generator for search terms (seed 004: synonyms, related words)."""
    return [{"role": "user", "content": (
        "Write up to eight search keywords (synonyms and related terms) that would help find "
        f"documents answering this question. Reply with the keywords only, separated by "
        f"spaces.\n\nQuestion: {question}")}]


class Tally:
    """A generator that keeps every reply it passes on (the model calls of one retrieval)."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.replies: list[Any] = []

    def generate(self, messages: Any, **params: Any) -> Any:
        """The generator's reply, kept."""
        reply = self.generator.generate(messages, **params)
        self.replies.append(reply)
        return reply


def expand_query(generator: Any, question: str) -> str:
    """The question followed by the generator's search terms (the question alone if none)."""
    reply = generator.generate(expansion_messages(question), max_tokens=EXPANSION_MAX_TOKENS)
    terms = " ".join(str(reply.text).split())
    return f"{question} {terms}" if terms else question


def cosine_similarities(embedder: Any, query: str, contexts: Sequence[Context]) -> list[float]:
    """Cosine of the query with each context's text (the embedder's rows are normalised)."""
    if not contexts:
        return []
    vectors = embedder.embed([query, *(str(c.text) for c in contexts)])
    return [float(v) for v in vectors[1:] @ vectors[0]]


def above(contexts: Sequence[Context], similarities: Sequence[float],
          min_score: float) -> list[Context]:
    """The contexts whose similarity is at least ``min_score``, in their order."""
    return [c for c, s in zip(contexts, similarities, strict=True) if s >= min_score]


def as_date(value: Any) -> dt.date | None:
    """A metadata date: a date, a datetime, an ISO text or a year; None when unreadable."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 9999:
        return dt.date(value, 1, 1)
    if isinstance(value, str):
        text = value.strip()
        try:
            return dt.date.fromisoformat(text[:10]) if len(text) >= 10 else \
                dt.date(int(text), 1, 1)
        except ValueError:
            return None
    return None


def by_recency(contexts: Sequence[Context], weight: float,
               date_field: str = "date") -> list[Context]:
    """Rescore by ``score * max(0, 1 - weight * age_in_years)`` and sort, best first."""
    dates = [as_date((c.metadata or {}).get(date_field)) for c in contexts]
    known = [d for d in dates if d is not None]
    if not known or weight == 0:
        return list(contexts)
    newest = max(known)
    rescored = []
    for context, date in zip(contexts, dates, strict=True):
        if date is None:
            rescored.append(context)
            continue
        age = (newest - date).days / _DAYS_PER_YEAR
        factor = max(0.0, 1.0 - weight * age)
        rescored.append(dataclasses.replace(context, score=float(context.score) * factor))
    return sorted(rescored, key=lambda c: -float(c.score))  # stable: ties keep their rank


def llm_grades(generator: Any, query: str, contexts: Sequence[Context]) -> list[int | None]:
    """The generator's 0-10 relevance grade of each context (None for an unreadable reply)."""
    # lazy: only LLM re-ranking grades
    from pytest_ragbench.metrics.grades import GradeError, grade_schema, read_grade
    from pytest_ragbench.metrics.relevance import HIGH, relevance_messages

    grades: list[int | None] = []
    for context in contexts:
        reply = generator.generate(relevance_messages(query, str(context.text), "context"),
                                   schema=grade_schema(HIGH), max_tokens=RERANK_MAX_TOKENS)
        try:
            grades.append(read_grade(str(reply.text), "text", high=HIGH))
        except GradeError:
            grades.append(None)
    return grades


def reorder(contexts: Sequence[Context], scores: Sequence[float | None]) -> list[Context]:
    """Contexts sorted by a new score, best first; an unscored one goes after the scored."""
    ranked = sorted(zip(contexts, scores, strict=True),
                    key=lambda pair: (pair[1] is None, -(pair[1] or 0.0)))
    return [c if s is None else dataclasses.replace(c, score=float(s)) for c, s in ranked]


class LlmReranker:
    """Re-ranks with the generator's 0-10 relevance grade of each candidate."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def describe(self) -> str:
        """One line naming the re-ranker."""
        return "LLM re-ranking with the generator"

    def rerank(self, query: str, contexts: Sequence[Context],
               generator: Any = None) -> list[Context]:
        """``contexts`` best first by the grades of ``generator`` (default: this one's)."""
        grades = llm_grades(generator or self.generator, query, contexts)
        return reorder(contexts, [None if g is None else float(g) for g in grades])


class CrossEncoderReranker:
    """Re-ranks with a sentence-transformers CrossEncoder model folder (loaded on first use)."""

    def __init__(self, model_path: str, device: str = "cpu") -> None:
        self.model_path = model_path
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        """One line naming the re-ranker."""
        return f"cross-encoder re-ranking with {self.model_path}"

    def rerank(self, query: str, contexts: Sequence[Context],
               generator: Any = None) -> list[Context]:
        """``contexts`` best first by the cross-encoder's score of (query, text).

        ``generator`` is not used: a cross-encoder makes no model call.
        """
        if not contexts:
            return []
        with self._lock:
            if self._model is None:
                import_whole("sentence_transformers")
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(self.model_path, device=self.device)
            scores = self._model.predict([(query, str(c.text)) for c in contexts],
                                         show_progress_bar=False)
        return reorder(contexts, [float(s) for s in scores])
