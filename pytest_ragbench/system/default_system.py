"""The embedded default system: the session's retriever plus a generator, or an extractive answer.

Imported only when ``ragbench_system`` is first used. Retrieval for many questions is
done in one batch by :meth:`EmbeddedSystem.prepare`; answers then run concurrently
through :meth:`EmbeddedSystem.aanswer` when the generator is asynchronous.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from pytest_ragbench.system.prompts import rag_messages
from pytest_ragbench.system.protocols import Answer, Context, Generator, Retriever

NO_ANSWER = "I don't know: the documents do not cover this question."
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORDS_TEXT = """a an and are as at be by did do does for from had has have how i in is it its
of on or that the their there this to was were what when where which who whom why will with you
your can could should would me my we our they them he she his her"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


class EmbeddedSystem:
    """Answers a question from the top ``top_k`` contexts of ``retriever``.

    With a ``generator`` the answer is generated with the seed 003 prompt; without one
    it is extracted from the contexts (the sentences sharing most words with the
    question), and :meth:`describe` says so.
    """

    # No text-to-SQL: sql[<id>] items skip with this reason instead of scoring zero.
    answers_sql = False

    def __init__(self, retriever: Retriever, generator: Generator | None = None, *,
                 top_k: int = 5, max_tokens: int = 256, no_generator_reason: str = "") -> None:
        self.retriever = retriever
        self.generator = generator
        self.top_k = top_k
        self.max_tokens = max_tokens
        self.no_generator_reason = no_generator_reason
        self._retrieved: dict[str, tuple[Context, ...]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddedSystem({self.describe()})"

    def describe(self) -> str:
        """Return one line naming the retriever and the generator (or the extractive fallback)."""
        if self.generator is not None:
            describe = getattr(self.generator, "describe", None)
            how = describe() if callable(describe) else self.generator.model_id
            generator = f"generator {how}"
        else:
            reason = f" ({self.no_generator_reason})" if self.no_generator_reason else ""
            generator = f"extractive answers, no generator{reason}"
        return f"embedded: {self.retriever!r}, top_k={self.top_k}, {generator}"

    def prepare(self, questions: Sequence[str]) -> None:
        """Retrieve the contexts of many questions in one batch (queries embedded together)."""
        with self._lock:
            todo = [q for q in dict.fromkeys(questions) if q not in self._retrieved]
        if not todo:
            return
        results = self.retriever.retrieve_many(todo, top_k=self.top_k)
        with self._lock:
            for question, contexts in zip(todo, results, strict=True):
                self._retrieved[question] = tuple(contexts)

    def contexts(self, question: str) -> tuple[Context, ...]:
        """Return the retrieved contexts of a question (from :meth:`prepare` when done)."""
        with self._lock:
            found = self._retrieved.get(question)
        if found is None:
            found = tuple(self.retriever.retrieve(question, top_k=self.top_k))
        return found

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Answer one question."""
        started = time.perf_counter()
        contexts = self.contexts(question)
        if self.generator is None:
            return Answer(extractive_answer(question, contexts), contexts,
                          latency_s=time.perf_counter() - started)
        reply = self.generator.generate(rag_messages(question, contexts, history),
                                        max_tokens=self.max_tokens)
        return Answer(reply.text.strip(), contexts, latency_s=time.perf_counter() - started,
                      usage=reply.usage)

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Answer one question without blocking the event loop."""
        agenerate = getattr(self.generator, "agenerate", None)
        if agenerate is None:
            return await asyncio.to_thread(self.answer, question, history)
        started = time.perf_counter()
        with self._lock:
            contexts = self._retrieved.get(question)
        if contexts is None:
            contexts = await asyncio.to_thread(self.contexts, question)
        reply = await agenerate(rag_messages(question, contexts, history),
                                max_tokens=self.max_tokens)
        return Answer(reply.text.strip(), contexts, latency_s=time.perf_counter() - started,
                      usage=reply.usage)


def extractive_answer(question: str, contexts: Sequence[Context], max_sentences: int = 2,
                      max_contexts: int = 3) -> str:
    """Pick the sentences of the top contexts that share most words with the question."""
    if not contexts:
        return NO_ANSWER
    wanted = {w for w in _words(question) if w not in _STOPWORDS}
    candidates: list[tuple[int, int, int, str]] = []  # (-overlap, context rank, position, text)
    for rank, context in enumerate(contexts[:max_contexts]):
        for position, sentence in enumerate(_SENTENCE.split(context.text)):
            sentence = sentence.strip().lstrip("#").strip()
            if len(_words(sentence)) < 3:
                continue
            overlap = len(wanted & set(_words(sentence)))
            candidates.append((-overlap, rank, position, sentence))
    if not candidates:
        return contexts[0].text.strip()[:500] or NO_ANSWER
    best = sorted(candidates)[:max_sentences]
    if best[0][0] == 0:  # no shared word: the opening of the best context
        best = [min(candidates, key=lambda c: (c[1], c[2]))]
    return " ".join(text for *_, text in sorted(best, key=lambda c: (c[1], c[2])))


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]
