"""Streaming latency (``--ragbench-stream``): time to first token and inter-token latency.

The generator streams from the real llama-cpp-python server (``tests/llama_server.py``,
SmolLM2 on 127.0.0.1); a system's ``astream`` is timed as its chunks arrive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from pytest_ragbench.system.openai_client import OpenAICompatibleClient
from pytest_ragbench.system.protocols import Answer, Context
from pytest_ragbench.system.streaming import StreamClock, stream_answer
from tests.llama_server import LlamaServer, llama_server  # noqa: F401  (the fixture)

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
