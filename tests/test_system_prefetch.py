"""Prefetching answers ahead of the items, and the embedded default system."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("bm25s", reason="needs the extra 'embed'")

from pytest_ragbench.errors import ModelCallError
from pytest_ragbench.run.prefetch import Prefetcher, answer_many
from pytest_ragbench.systems.default import NO_ANSWER, EmbeddedSystem, extractive_answer
from pytest_ragbench.systems.openai_client import OpenAICompatibleClient
from pytest_ragbench.systems.prompts import SYSTEM_INSTRUCTION
from pytest_ragbench.systems.protocols import Answer, AnswerRequest, Context, System
from pytest_ragbench.systems.retrievers import BM25Retriever
from pytest_ragbench.testing import LoopbackServer
from tests.helpers import four_documents

DOCS = four_documents()


class CountingBM25(BM25Retriever):
    """The real BM25 retriever, counting how it is called."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.singles = 0

    def retrieve_many(self, queries: Sequence[str], *args: Any, **kw: Any) -> list[list[Context]]:
        self.batches.append(len(queries))
        return super().retrieve_many(queries, *args, **kw)

    def retrieve(self, query: str, *args: Any, **kw: Any) -> list[Context]:
        self.singles += 1
        return super().retrieve_many([query], *args, **kw)[0]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(latency_s=0.1) as srv:
        yield srv


@pytest.fixture
def retriever() -> CountingBM25:
    bm25 = CountingBM25()
    bm25.index(DOCS)
    return bm25


def test_jobs_run_concurrently_within_the_limit_and_results_go_by_key() -> None:
    active, peak, lock = 0, 0, threading.Lock()

    async def job(i: int) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        await asyncio.sleep(0.05)
        with lock:
            active -= 1
        if i == 3:
            raise ValueError("job 3 failed")
        return i * i

    def blocking(i: int) -> str:
        time.sleep(0.02)
        return f"sync {i}"

    prefetcher = Prefetcher(concurrency=4)
    try:
        for i in range(12):
            prefetcher.submit(f"k{i}", lambda i=i: job(i))  # type: ignore[misc]
        prefetcher.submit("s", lambda: blocking(7))
        prefetcher.submit("k0", lambda: job(99))  # a key is submitted once
        assert prefetcher.result("s") == "sync 7"
        assert [prefetcher.result(f"k{i}") for i in range(12) if i != 3] == [
            i * i for i in range(12) if i != 3]
        with pytest.raises(ValueError, match="job 3 failed"):
            prefetcher.result("k3")
        assert peak == 4
        assert prefetcher.stats() == {"submitted": 13, "finished": 13, "failed": 1, "pending": 0}
        assert "k5" in prefetcher and "zz" not in prefetcher
    finally:
        prefetcher.close()


def test_coroutine_function_jobs_run_on_the_loop() -> None:
    async def job() -> str:
        return threading.current_thread().name

    prefetcher = Prefetcher(concurrency=2)
    try:
        prefetcher.submit("a", job)
        assert prefetcher.result("a") == "ragbench-prefetch"
    finally:
        prefetcher.close()


def test_answers_are_prefetched_concurrently_after_one_batch_retrieval(
        server: LoopbackServer, retriever: CountingBM25) -> None:
    client = OpenAICompatibleClient(server.url, "m", concurrency=8)
    system = EmbeddedSystem(retriever, client, top_k=2)
    questions = {f"item{i}": AnswerRequest(f"question {i} about the Eiffel Tower")
                 for i in range(24)}
    prefetcher = Prefetcher(concurrency=8)
    try:
        prefetcher.submit_answers(system, questions)
        answers = {key: prefetcher.result(key, timeout=30) for key in questions}
        assert retriever.batches == [24] and retriever.singles == 0
        assert server.max_in_flight == 8
        for key, request in questions.items():
            answer = answers[key]
            assert answer.text == f"echo: {request.question}"
            assert answer.contexts[0].id == "d1"
            assert answer.usage.total_tokens > 0 and answer.latency_s >= 0.1
        # an item that was not prefetched is answered directly
        direct = prefetcher.answer("other", system, AnswerRequest("Who created Python?"))
        assert direct.contexts[0].id == "d2"
    finally:
        prefetcher.close()
        client.close()


class PlainSystem:
    """A user system with nothing but a synchronous ``answer``."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.05)
        with self.lock:
            self.active -= 1
        turns = len(history or ())
        return Answer(text=f"{question} after {turns} turns")


def test_a_plain_system_is_answered_in_threads() -> None:
    system = PlainSystem()
    assert isinstance(system, System)
    answers = answer_many(system, [f"q{i}" for i in range(10)],
                          histories=[[{"role": "user", "content": "x"}]] * 10, concurrency=3)
    assert [a.text for a in answers] == [f"q{i} after 1 turns" for i in range(10)]
    assert system.peak == 3


def test_close_cancels_what_is_pending(server: LoopbackServer) -> None:
    server.fail(*["hang"] * 4)
    client = OpenAICompatibleClient(server.url, "m", timeout_s=30, concurrency=2)
    prefetcher = Prefetcher(concurrency=2)
    try:
        for i in range(6):
            prefetcher.submit(str(i), lambda i=i: client.agenerate(  # type: ignore[misc]
                [{"role": "user", "content": str(i)}]))
        time.sleep(0.2)
        started = time.perf_counter()
        prefetcher.close()
        assert time.perf_counter() - started < 5
        assert prefetcher.stats()["pending"] == 0
    finally:
        client.close()


def test_default_system_prompt_has_the_seed_003_shape(server: LoopbackServer,
                                                      retriever: CountingBM25) -> None:
    client = OpenAICompatibleClient(server.url, "m")
    system = EmbeddedSystem(retriever, client, top_k=2)
    try:
        history = [{"role": "user", "content": "Tell me about Paris."},
                   {"role": "assistant", "content": "Paris is the capital of France."}]
        answer = system.answer("When was the Eiffel Tower completed?", history)
        messages = server.requests[0]["messages"]
        assert messages[0] == {"role": "system", "content": SYSTEM_INSTRUCTION}
        assert messages[1]["role"] == "user"
        assert messages[1]["content"].startswith("Document: Tower\nThe Eiffel Tower is in Paris.")
        assert len(messages) == 1 + len(answer.contexts) + 2 + 1
        assert messages[-3:-1] == history
        assert messages[-1] == {"role": "user", "content": "When was the Eiffel Tower completed?"}
        assert answer.sql is None and answer.latency_s > 0
        json.dumps(answer.to_dict())
        assert Answer.from_dict(answer.to_dict()) == answer
        assert "generator m at" in system.describe()
    finally:
        client.close()


def test_model_errors_reach_the_item(retriever: CountingBM25) -> None:
    with LoopbackServer() as srv:
        srv.fail("401")
        client = OpenAICompatibleClient(srv.url, "m")
        prefetcher = Prefetcher(2)
        try:
            prefetcher.submit_answers(EmbeddedSystem(retriever, client),
                                      {"a": AnswerRequest("Python?"), "b": AnswerRequest("Tea?")})
            results = []
            for key in ("a", "b"):
                try:
                    results.append(prefetcher.result(key).text)
                except ModelCallError as exc:
                    results.append(f"error: {exc}")
            assert sum(r.startswith("error: ") and "HTTP 401" in r for r in results) == 1
            assert sum(r.startswith("echo: ") for r in results) == 1
        finally:
            prefetcher.close()
            client.close()


def test_extractive_answers_without_a_generator(retriever: CountingBM25) -> None:
    system = EmbeddedSystem(retriever, None, no_generator_reason="no generator configured")
    answer = system.answer("When was the Eiffel Tower completed?")
    assert "completed in 1889" in answer.text
    assert answer.contexts[0].id == "d1" and answer.usage.total_tokens == 0
    assert "extractive" in system.describe() and "no generator configured" in system.describe()
    assert system.answer("zzz qqq").text == NO_ANSWER  # nothing retrieved: it declines
    assert asyncio.run(system.aanswer("Who created Python?")).text.startswith("Python was created")
    assert extractive_answer("anything", []) == NO_ANSWER


def test_a_system_is_given_prior_turns_as_plain_role_content_dicts(tmp_path: Any) -> None:
    """Case turns (Turn objects) reach a system as the dicts the README documents."""
    from pytest_ragbench.cases.model import Turn
    from pytest_ragbench.config.settings import RagbenchConfig
    from pytest_ragbench.kinds import ItemRun

    seen: list[Any] = []

    class Recording:
        def answer(self, question: str, history: Any = None) -> Answer:
            seen.append([(turn.get("role"), turn.get("content")) for turn in history or ()])
            return Answer("ok")

    turns = (Turn(role="user", content="Who won?"), Turn(role="assistant", content="Denver."))
    expected = [("user", "Who won?"), ("assistant", "Denver.")]
    answer_many(Recording(), ["And then?"], [list(turns)])  # prefetched
    item = ItemRun(RagbenchConfig(rootpath=tmp_path), {"ragbench_system": Recording()}, {})
    item.answer("And then?", turns)  # asked directly
    item.answer("First question?")
    assert seen == [expected, expected, []]
    assert AnswerRequest("q", turns) == AnswerRequest("q", tuple(dict(m) for m in (
        {"role": "user", "content": "Who won?"}, {"role": "assistant", "content": "Denver."})))
