"""The embedded default system: the session's retriever plus a generator, or an extractive answer.

Imported only when ``ragbench_system`` is first used. Retrieval for many questions is
done in one batch by :meth:`EmbeddedSystem.prepare`; answers then run concurrently
through :meth:`EmbeddedSystem.aanswer` when the generator is asynchronous.

Two choices of a RAG application are made here (what they measured on the bundled cases
is recorded in test_cases/ragbench.toml):

- A follow-up question is retrieved together with the user's earlier turns: a follow-up
  alone ("How fast do they play?") often names nothing the documents are about.
- The system declines without generating when the best dense similarity of the retrieval
  query is below :data:`DECLINE_BELOW`: a small local generator answers anything it is
  asked (a recipe, a joke). The cut-off lies midway between the top similarities of
  off-topic, gibberish and injection-only questions and that of the lowest answerable
  question. Out-of-scope questions close to the corpus are left to the generator.

With a ``speller`` (the fixtures pass a :class:`.spelling.VocabularySpeller` built from the
indexed documents), the question and the user's earlier turns are spelling-corrected
before anything else: the corrected text is retrieved, checked for a decline and given to
the generator (or the extractive answer): typos, dropped and doubled characters then keep
far more robustness items, and few correctly spelt questions change (both
recorded in test_cases/ragbench.toml).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pytest_ragbench.systems.prompts import ANSWER_MAX_TOKENS, rag_messages
from pytest_ragbench.systems.protocols import Answer, Context, Generator, Retriever, as_messages

NO_ANSWER = "I don't know: the documents do not cover this question."
DECLINE_BELOW = 0.22  # best dense cosine of the retrieval query; see the module docstring
# Contexts given to the generator (all top_k are returned and scored): prompt processing
# is most of the local generator's time, so it reads fewer than are scored (prompt sizes
# in test_cases/ragbench.toml); the extractive answer reads 3 as well.
GENERATOR_K = 3
RERANK_K = 10  # candidates retrieved before re-ranking (seed 004: broad 10, keep top_k)
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORDS_TEXT = """a an and are as at be by did do does for from had has have how i in is it its
of on or that the their there this to was were what when where which who whom why will with you
your can could should would me my we our they them he she his her"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


class Speller(Protocol):
    """Corrects the spelling of a text, like :class:`.spelling.VocabularySpeller`."""

    def correct(self, text: str) -> str:
        """Return ``text`` with its misspelt words corrected."""
        ...


class EmbeddedSystem:
    """Answers a question from the top ``top_k`` contexts of ``retriever``.

    With a ``generator`` the answer is generated with the RAG prompt (systems/prompts.py);
    without one it is extracted from the contexts (the sentences sharing most words with the
    question), and :meth:`describe` says so. Prior user turns join the retrieval query;
    when the retriever has a dense part and its best cosine similarity for that query is
    below ``decline_below``, the answer is :data:`NO_ANSWER` (``None`` turns this off).
    With a ``speller``, :meth:`answer`, :meth:`aanswer` and :meth:`prepare` correct the
    question and earlier user turns once, and every later step uses the corrected text.

    Seed 004's knobs (systems/tuning.py), each off by default: ``min_score`` (drop contexts
    under that cosine similarity), ``recency_weight`` with ``date_field`` (time decay by a
    document date), ``filters`` (metadata filter passed to the retriever),
    ``query_expansion`` (the generator adds search terms), ``rerank`` (``"llm"`` or a
    cross-encoder folder on ``device``) over ``rerank_k`` broad candidates. With any of
    them on, ``rerank_k`` candidates are retrieved and the first ``top_k`` kept.
    """

    def __init__(self, retriever: Retriever, generator: Generator | None = None, *,
                 top_k: int = 5, generator_k: int = GENERATOR_K,
                 max_tokens: int = ANSWER_MAX_TOKENS, no_generator_reason: str = "",
                 decline_below: float | None = DECLINE_BELOW,
                 speller: Speller | None = None, min_score: float | None = None,
                 recency_weight: float = 0.0, date_field: str = "date",
                 filters: Mapping[str, Any] | None = None, query_expansion: bool = False,
                 rerank: str | None = None, rerank_k: int = RERANK_K,
                 device: str = "cpu") -> None:
        self.retriever = retriever
        self.generator = generator
        self.top_k = top_k
        self.generator_k = generator_k
        self.max_tokens = max_tokens
        self.no_generator_reason = no_generator_reason
        self.decline_below = decline_below
        self.speller = speller
        self.min_score = min_score
        self.recency_weight = recency_weight
        self.date_field = date_field
        self.filters = dict(filters) if filters else None
        self.query_expansion = query_expansion
        self.rerank = rerank or None
        self.rerank_k = rerank_k
        self._check_knobs(retriever)
        self._reranker = self._make_reranker(device)
        self._dense = dense_part(retriever) if decline_below is not None else None
        self._retrieved: dict[str, tuple[Context, ...]] = {}
        # the model calls each query's retrieval made, reported with its answer
        self._retrieval_calls: dict[str, tuple[Any, ...]] = {}
        self._confidence: dict[str, float] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddedSystem({self.describe()})"

    def _check_knobs(self, retriever: Retriever) -> None:
        if self.min_score is not None and dense_part(retriever) is None:
            raise ValueError("min_score is a cosine similarity: it needs a retriever with a "
                             "dense part (dense or hybrid)")
        if self.recency_weight < 0:
            raise ValueError(f"recency_weight must be >= 0, got {self.recency_weight}")
        if self.rerank_k < 1:
            raise ValueError(f"rerank_k must be >= 1, got {self.rerank_k}")
        if (self.query_expansion or self.rerank == "llm") and self.generator is None:
            raise ValueError("query expansion and LLM re-ranking need a generator, and this "
                             f"system has none ({self.no_generator_reason or 'not given'})")

    def _make_reranker(self, device: str) -> Any:
        if self.rerank is None:
            return None
        # lazy: only when re-ranking is asked for
        from pytest_ragbench.systems.tuning import CrossEncoderReranker, LlmReranker

        if self.rerank == "llm":
            return LlmReranker(self.generator)
        return CrossEncoderReranker(self.rerank, device=device)

    def knobs(self) -> dict[str, Any]:
        """The seed 004 settings that differ from the defaults (all off by default)."""
        values = {"min_score": self.min_score, "recency_weight": self.recency_weight or None,
                  "filters": self.filters, "query_expansion": self.query_expansion or None,
                  "rerank": self.rerank}
        shown = {k: v for k, v in values.items() if v is not None}
        if self.recency_weight:
            shown["date_field"] = self.date_field
        if self.rerank:
            shown["rerank_k"] = self.rerank_k
        return shown

    def describe(self) -> str:
        """Return one line naming the retriever and the generator (or the extractive fallback)."""
        if self.generator is not None:
            describe = getattr(self.generator, "describe", None)
            how = describe() if callable(describe) else self.generator.model_id
            generator = f"generator {how} reading the top {self.generator_k}"
        else:
            reason = f" ({self.no_generator_reason})" if self.no_generator_reason else ""
            generator = f"extractive answers, no generator{reason}"
        declines = (f", declines below dense similarity {self.decline_below:g}"
                    if self._dense is not None else "")
        spelling = (", corrects spelling against the corpus vocabulary"
                    if self.speller is not None else "")
        knobs = "".join(f", {k}={v!r}" for k, v in self.knobs().items())
        return (f"embedded: {self.retriever!r}, top_k={self.top_k}, {generator}{declines}"
                f"{spelling}{knobs}")

    def read(self, contexts: Sequence[Context]) -> Sequence[Context]:
        """The contexts the generator reads: the first ``generator_k``."""
        return contexts[:self.generator_k]

    def spell(self, text: str) -> str:
        """``text`` with its spelling corrected by the speller (as it is without one)."""
        return text if self.speller is None else self.speller.correct(text)

    def spell_history(self, history: Sequence[Any] | None) -> list[dict[str, str]] | None:
        """Earlier turns as messages, the user's corrected by the speller."""
        if not history:
            return None
        return [{**m, "content": self.spell(m["content"])} if m["role"] == "user" else m
                for m in as_messages(history)]

    def prepare(self, questions: Sequence[str]) -> None:
        """Retrieve the contexts of many questions in one batch (queries embedded together)."""
        queries = [self.spell(q) for q in questions]
        with self._lock:
            todo = [q for q in dict.fromkeys(queries) if q not in self._retrieved]
        if not todo:
            return
        results = self._retrieve_many(todo)
        confidence = self._best_similarities(todo)
        with self._lock:
            for question, contexts in zip(todo, results, strict=True):
                self._retrieved[question] = tuple(contexts)
            self._confidence.update(confidence)

    def contexts(self, question: str) -> tuple[Context, ...]:
        """Return the retrieved contexts of a (corrected) query, from :meth:`prepare` when done."""
        with self._lock:
            found = self._retrieved.get(question)
        if found is None:
            if not self.knobs():
                found = tuple(self.retriever.retrieve(question, top_k=self.top_k))
            else:
                found = self._retrieve_many([question])[0]
        return found

    def _retrieve_many(self, queries: Sequence[str]) -> list[tuple[Context, ...]]:
        """Retrieve, then apply the knobs that are on (systems/tuning.py), keeping top_k."""
        if not self.knobs():
            return [tuple(r) for r in self.retriever.retrieve_many(list(queries),
                                                                   top_k=self.top_k)]
        # lazy: only when a knob is on
        from pytest_ragbench.systems import tuning

        tallies = [tuning.Tally(self.generator) for _ in queries]
        searched = [tuning.expand_query(tally, q) if self.query_expansion else q
                    for q, tally in zip(queries, tallies, strict=True)]
        reorders = bool(self.rerank or self.recency_weight or self.min_score is not None)
        depth = max(self.top_k, self.rerank_k) if reorders else self.top_k
        results = (self.retriever.retrieve_many(searched, top_k=depth, filters=self.filters)
                   if self.filters else self.retriever.retrieve_many(searched, top_k=depth))
        refined = []
        for query, found, tally in zip(queries, results, tallies, strict=True):
            contexts = list(found)
            if self.min_score is not None:
                dense = dense_part(self.retriever)
                contexts = tuning.above(contexts, tuning.cosine_similarities(
                    dense.embedder, query, contexts), self.min_score)
            if self.recency_weight:
                contexts = tuning.by_recency(contexts, self.recency_weight, self.date_field)
            if self._reranker is not None:
                contexts = self._reranker.rerank(query, contexts, tally)
            refined.append(tuple(contexts[:self.top_k]))
            if tally.replies:
                with self._lock:
                    self._retrieval_calls[query] = tuple(tally.replies)
        return refined

    def declines(self, query: str) -> bool:
        """Whether the best dense similarity of a retrieval query is below ``decline_below``."""
        if self._dense is None or self.decline_below is None:
            return False
        with self._lock:
            best = self._confidence.get(query)
        if best is None:
            best = self._best_similarities([query]).get(query, float("-inf"))
        return best < self.decline_below

    def _best_similarities(self, queries: Sequence[str]) -> dict[str, float]:
        if self._dense is None:
            return {}
        rows = self._dense.retrieve_many(list(queries), top_k=1)
        return {q: (float(row[0].score) if row else float("-inf"))
                for q, row in zip(queries, rows, strict=True)}

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Answer one question."""
        started = time.perf_counter()
        question, history = self.spell(question), self.spell_history(history)
        query = retrieval_query(question, history)
        contexts = self.contexts(query)
        if self.declines(query):
            return self._counted(query, Answer(NO_ANSWER, contexts,
                                               latency_s=time.perf_counter() - started))
        if self.generator is None:
            return self._counted(query, Answer(extractive_answer(question, contexts), contexts,
                                               latency_s=time.perf_counter() - started))
        asked = time.perf_counter()
        reply = self.generator.generate(rag_messages(question, self.read(contexts), history),
                                        max_tokens=self.max_tokens)
        return self._counted(query, _generated(reply, contexts, started, asked))

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Answer one question without blocking the event loop."""
        agenerate = getattr(self.generator, "agenerate", None)
        if agenerate is None:
            return await asyncio.to_thread(self.answer, question, history)
        started = time.perf_counter()
        question, history = self.spell(question), self.spell_history(history)
        query = retrieval_query(question, history)
        with self._lock:
            contexts = self._retrieved.get(query)
        if contexts is None:
            contexts = await asyncio.to_thread(self.contexts, query)
        with self._lock:  # known from prepare(): no thread hop needed
            known = self._dense is None or self.decline_below is None or \
                query in self._confidence
        declines = self.declines(query) if known else await asyncio.to_thread(self.declines,
                                                                              query)
        if declines:
            return self._counted(query, Answer(NO_ANSWER, contexts,
                                               latency_s=time.perf_counter() - started))
        asked = time.perf_counter()
        reply = await agenerate(rag_messages(question, self.read(contexts), history),
                                max_tokens=self.max_tokens)
        return self._counted(query, _generated(reply, contexts, started, asked))

    def _counted(self, query: str, answer: Answer) -> Answer:
        """``answer`` with the model calls its query's retrieval made (reported once)."""
        with self._lock:
            calls = self._retrieval_calls.pop(query, ())
        return dataclasses.replace(answer, retrieval_calls=calls) if calls else answer


def _generated(reply: Any, contexts: Sequence[Context], started: float, asked: float) -> Answer:
    """The answer a generator's reply makes; a streamed reply's TTFT counts from ``started``."""
    ttft = getattr(reply, "ttft_s", None)
    return Answer(reply.text.strip(), tuple(contexts), latency_s=time.perf_counter() - started,
                  usage=reply.usage, cached=reply.cached, model=getattr(reply, "model", None),
                  served_model=getattr(reply, "served_model", None),
                  ttft_s=None if ttft is None else asked - started + ttft,
                  itl_s=getattr(reply, "itl_s", None))


def retrieval_query(question: str, history: Sequence[Any] | None = None) -> str:
    """The text retrieved for a question: the user's earlier turns, then the question."""
    earlier = [m["content"] for m in as_messages(history) if m["role"] == "user"]
    return " ".join([*earlier, question]) if earlier else question


def dense_part(retriever: Any) -> Any:
    """The retriever's dense (cosine-scored) part: itself, its ``dense`` member, or None."""
    # lazy: loads numpy
    from pytest_ragbench.systems.retrievers import DenseRetriever

    for candidate in (retriever, getattr(retriever, "dense", None)):
        if isinstance(candidate, DenseRetriever):
            return candidate
    return None


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
