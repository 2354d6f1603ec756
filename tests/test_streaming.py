"""Streaming latency (``--ragbench-stream``): time to first token and inter-token latency.

The generator streams from the real llama-cpp-python server (``tests/llama_server.py``,
SmolLM2 on 127.0.0.1); a system's ``astream`` is timed as its chunks arrive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import csv
import io
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.systems.openai_client import OpenAICompatibleClient
from pytest_ragbench.systems.protocols import Answer, Context
from pytest_ragbench.systems.streaming import StreamClock, stream_answer
from pytest_ragbench.testing import LoopbackServer
from tests.llama_server import LlamaServer, llama_server  # noqa: F401  (the fixture)
from tests.project import RagbenchProject

MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow."}]


def test_the_generator_streams_the_same_text_with_its_timings(
        llama_server: LlamaServer) -> None:  # noqa: F811
    streaming = OpenAICompatibleClient(llama_server.url, "smollm2", stream=True, max_tokens=16)
    plain = OpenAICompatibleClient(llama_server.url, "smollm2", max_tokens=16)
    try:
        streamed = streaming.generate(MESSAGES)
        whole = plain.generate(MESSAGES)
    finally:
        streaming.close()
        plain.close()
    # greedy decoding: the joined deltas are the reply a plain call gets
    assert streamed.text and streamed.text == whole.text
    assert whole.ttft_s is None and whole.itl_s is None
    assert streamed.ttft_s is not None and streamed.itl_s is not None
    assert 0 < streamed.ttft_s < streamed.latency_s
    assert streamed.itl_s > 0
    # the first token, then the others one gap apart, fit in the whole call
    tokens = len(streamed.text.split())
    assert streamed.ttft_s + (tokens - 1) * streamed.itl_s < streamed.latency_s * 1.01
    statuses = llama_server.statuses()
    assert statuses[200] >= 2


def test_a_stream_cut_short_is_asked_again(llama_server: LlamaServer) -> None:  # noqa: F811
    """llama-cpp-python's server ends a stream with [DONE] when another request arrives."""
    story = [{"role": "user", "content": "Write a long story about a cat and a dog."}]
    streaming = OpenAICompatibleClient(llama_server.url, "smollm2", stream=True, max_tokens=80,
                                       backoff_base_s=0.2)
    other = OpenAICompatibleClient(llama_server.url, "smollm2", max_tokens=80)
    try:
        answered = llama_server.statuses()[200]
        pool = concurrent.futures.ThreadPoolExecutor(1)
        future = pool.submit(streaming.generate, story)
        deadline = time.monotonic() + 60
        # the server logs a streamed reply when it starts; 80 tokens then take over a second
        while llama_server.statuses()[200] == answered and time.monotonic() < deadline:
            time.sleep(0.02)
        other.generate(MESSAGES, max_tokens=4)  # arrives while it streams: cuts it short
        streamed = future.result(120)
        pool.shutdown()
        whole = other.generate(story)
    finally:
        streaming.close()
        other.close()
    assert streaming.stats()["retries"] == 1  # the cut reply was not taken as the answer
    assert streamed.attempts == 2
    assert streamed.text == whole.text and len(streamed.text.split()) >= 30


def test_the_clock_measures_the_first_chunk_and_the_mean_gap() -> None:
    clock = StreamClock()
    clock.started = 10.0
    clock.arrivals = [10.5, 10.7, 11.1]
    assert clock.ttft_s == pytest.approx(0.5)
    assert clock.itl_s == pytest.approx(0.3)  # gaps 0.2 and 0.4
    clock.chunk("")  # no text, no token
    assert clock.chunks == 3
    clock.arrivals = [10.5]
    assert clock.itl_s is None


class Streamer:
    """A system that streams its answer in timed chunks, then gives its contexts."""

    def __init__(self, first_s: float, gap_s: float) -> None:
        self.first_s, self.gap_s = first_s, gap_s
        self.histories: list[object] = []

    async def astream(self, question: str, history: object = None) -> AsyncIterator[object]:
        self.histories.append(history)
        await asyncio.sleep(self.first_s)
        for word in ("Paris ", "is ", "the ", "capital."):
            yield word
            await asyncio.sleep(self.gap_s)
        yield Answer("", (Context("france", "Paris is the capital of France.", 1.0),))


def test_a_systems_astream_is_timed_and_its_answer_kept() -> None:
    system = Streamer(first_s=0.2, gap_s=0.05)
    started = time.perf_counter()
    answer = asyncio.run(stream_answer(system, "Capital of France?",
                                       [{"role": "user", "content": "hi"}]))
    took = time.perf_counter() - started
    assert answer.text == "Paris is the capital."
    assert [c.id for c in answer.contexts] == ["france"]
    assert system.histories == [[{"role": "user", "content": "hi"}]]
    assert answer.ttft_s is not None and answer.itl_s is not None
    assert 0.2 <= answer.ttft_s < answer.latency_s <= took
    assert 0.05 <= answer.itl_s < 0.2


def test_astream_yielding_something_else_is_a_clear_error() -> None:
    class Wrong:
        async def astream(self, question: str, history: object = None
                          ) -> AsyncIterator[object]:
            yield 42

    with pytest.raises(TypeError, match=r"Wrong.astream yielded int: expected text chunks"):
        asyncio.run(stream_answer(Wrong(), "q"))


# -- a streamed reply of an HTTP service (--ragbench-system-url) -------------------------------

def test_a_streamed_service_reply_is_timed_as_it_arrives(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from pytest_ragbench.adapters.http_service import HttpServiceSystem, ServiceSpec
    from tests.rag_service import serve
    from tests.test_system_url import ANSWER, CONTEXTS, REQUEST, write_corpus

    def ask(url: str, question: str) -> Answer:
        spec = ServiceSpec.read(url, request=REQUEST, answer=ANSWER, contexts=CONTEXTS)
        service = HttpServiceSystem(spec, timeout_s=10.0, max_retries=0)
        try:
            return service.answer(question)
        finally:
            service.close()

    question = "PACED When was the Eiffel Tower completed?"
    with serve(write_corpus(tmp_path / "corpus"), "keyword", tmp_path / "log.jsonl") as url:
        streamed = ask(url + "/rag/stream", question)
        whole = ask(url + "/rag", question)
    assert streamed.text == whole.text and len(streamed.text.split()) >= 3
    assert [c.id for c in streamed.contexts] == [c.id for c in whole.contexts]
    assert whole.ttft_s is None and whole.itl_s is None  # one JSON reply: nothing to time
    # the service waits 0.2 s before its first event, then 0.05 s between events
    assert streamed.ttft_s is not None and streamed.itl_s is not None
    assert 0.2 <= streamed.ttft_s < streamed.latency_s
    assert 0.045 <= streamed.itl_s < 0.2


# -- whole sessions ------------------------------------------------------------------------------

STREAMING_SYSTEM = '''
import asyncio

import pytest
from pytest_ragbench.protocols import Answer, Context

PASSAGE = Context("tower", "The Eiffel Tower was completed in 1889.", 0.9,
                  {"source": "tower.md"})


class Streaming:
    top_k = 1

    def answer(self, question, history=None):
        return Answer("Not streamed: it was completed in 1889.", (PASSAGE,))

    async def astream(self, question, history=None):
        await asyncio.sleep(0.15)
        for piece in ("It was ", "completed ", "in 1889."):
            yield piece
            await asyncio.sleep(0.04)
        yield Answer("", (PASSAGE,))


@pytest.fixture(scope="session")
def ragbench_system():
    return Streaming()
'''

VECTOR_CASES = """kind: vector
thresholds: {}
cases:
  - id: tower
    question: When was the Eiffel Tower completed?
    ground_truth: It was completed in 1889.
    expected_sources: [tower.md]
  - id: tower-again
    question: In which year was the Eiffel Tower finished?
    ground_truth: In 1889.
    expected_sources: [tower.md]
"""


def test_a_systems_astream_gives_the_items_ttft_and_itl(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).conftest(STREAMING_SYSTEM)
    project.cases("tower.yaml", VECTOR_CASES)
    args = ("--ragbench", "-q", "-p", "no:cacheprovider")
    plain = project.runpytest_subprocess(*args)
    plain.assert_outcomes(passed=2)
    for item in project.items():
        assert "ttft_ms" not in item["metrics"] and "itl_ms" not in item["metrics"]
        assert item["answers"][0]["text"].startswith("Not streamed")

    streamed = project.runpytest_subprocess(*args, "--ragbench-stream", "-n", "2")
    streamed.assert_outcomes(passed=2)
    for item in project.items():
        metrics = item["metrics"]
        assert item["answers"][0]["text"] == "It was completed in 1889."
        assert metrics["source_hit@1"] == 1.0  # the contexts of the Answer yielded last
        assert 150.0 <= metrics["ttft_ms"] < 1000.0 * item["answers"][0]["latency_s"]
        assert 40.0 <= metrics["itl_ms"] < 150.0
    assert project.results()["config"]["stream"] is True


def _ragcsv_rows() -> str:
    rows = [("Paris", "France", "Paris is the capital of France.",
             "What is the capital of France?"),
            ("Rome", "Italy", "Rome is the capital of Italy.", "What is the capital of Italy?"),
            ("Madrid", "Spain", "Madrid is the capital of Spain.",
             "What is the capital of Spain?")]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for expected, title, text, question in rows:
        fragments = repr([{"page_content": text, "metadata": {"title": title}}])
        writer.writerow([expected, fragments, "", "2024-01-01", question])
    return buffer.getvalue()


def test_ragcsv_rows_stream_from_llama_cpp_and_are_exported(
        pytester: pytest.Pytester, llama_server: LlamaServer) -> None:  # noqa: F811
    """TTFT and ITL of each row's answer, the quantile blocks, and ragcsv_rows.csv.

    One process: the generator's stream and the judge's call of the row before may meet
    at the server, which cuts the stream short; the client asks again (at most once a row).
    """
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", _ragcsv_rows())
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-no-cache",
        "--ragbench-stream", "--ragbench-llm-url", llama_server.url,
        "--ragbench-judge-url", llama_server.url, "--ragbench-max-tokens=24",
        "--ragbench-concurrency", "1", "--ragbench-timeout=600")
    result.assert_outcomes(passed=3)
    items = project.items_by_case()
    for case in ("capitals:1", "capitals:2", "capitals:3"):
        metrics = items[case]["metrics"]
        # the answer's first chunk came before the row's answer and grade were done
        assert 0 < metrics["ttft_ms"] < metrics["total_time_ms"]
        assert metrics["itl_ms"] > 0
    block = project.results()["ragcsv"][""]
    for name in ("total_time_ms", "ttft_ms", "itl_ms"):
        assert block[name]["n"] == 3
        assert block[name]["min"] <= block[name]["p50"] <= block[name]["max"]
    result.stdout.fnmatch_lines(["=== RAGCSV Eval TTFT (n=3) ===", "  min:  *ms",
                                 "=== RAGCSV Eval ITL (n=3) ==="], consecutive=False)
    assert_exported(project, items)


def test_ragcsv_rows_are_exported_from_the_records_under_xdist(
        pytester: pytest.Pytester) -> None:
    """Workers run the rows; the controller writes every row from the records it got."""
    answers = {"What is the capital of France?": "Paris.", "What is the capital of Italy?":
               "It is Rome.", "What is the capital of Spain?": "Madrid, I think."}
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", _ragcsv_rows())
    with LoopbackServer(lambda body: answers[body["messages"][-1]["content"]],
                        latency_s=0.05) as generator, \
            LoopbackServer('{"score": 80}') as judge:
        result = project.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-no-cache", "-n", "2",
            "--ragbench-llm-url", generator.url, "--ragbench-judge-url", judge.url)
    result.assert_outcomes(passed=3)
    items = project.items_by_case()
    assert_exported(project, items)
    rows = list(csv.DictReader((project.report_dir() / "ragcsv_rows.csv").open()))
    assert [r["answer"] for r in rows] == list(answers.values())
    assert {r["grade"] for r in rows} == {"80"}
    assert {r["ttft_ms"] for r in rows} == {""}  # not streamed: not measured


def assert_exported(project: RagbenchProject, items: dict[str, Any]) -> None:
    """ragcsv_rows.csv holds each row's record: texts, grade and times."""
    path = project.report_dir() / "ragcsv_rows.csv"
    exported = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [(r["file"], r["row"]) for r in exported] == [
        ("capitals", "1"), ("capitals", "2"), ("capitals", "3")]
    for row in exported:
        item = items[f"capitals:{row['row']}"]
        assert row["status"] == "passed"
        assert row["question"] == item["evidence"]["question"]
        assert row["expected"] == item["evidence"]["expected"]
        assert row["answer"] == item["evidence"]["got"] != ""
        assert float(row["grade"]) == pytest.approx(item["metrics"]["accuracy"], abs=1e-3)
        for column, metric in (("total_ms", "total_time_ms"), ("ttft_ms", "ttft_ms"),
                               ("itl_ms", "itl_ms")):
            if metric in item["metrics"]:
                assert float(row[column]) == pytest.approx(item["metrics"][metric], abs=1e-3)
            else:
                assert row[column] == ""
