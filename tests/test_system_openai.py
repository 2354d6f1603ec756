"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 with scripted faults."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.openai_client import OpenAICompatibleClient, _retry_after
from pytest_ragbench.testing import LoopbackServer

SECRET = "sk-test-very-secret-4711"
HI = [{"role": "user", "content": "hi"}]
SCHEMA = {"title": "grade", "type": "object", "properties": {"score": {"type": "integer"}},
          "required": ["score"]}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(retry_after="0.3") as srv:
        yield srv


def make_client(server: LoopbackServer, **kw: object) -> OpenAICompatibleClient:
    options: dict[str, object] = {"timeout_s": 0.5, "max_retries": 2, "backoff_base_s": 0.05}
    options.update(kw)
    return OpenAICompatibleClient(server.url, "test-model", **options)  # type: ignore[arg-type]


def test_reply_usage_latency_and_auth_header(server: LoopbackServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBENCH_LLM_API_KEY", SECRET)
    client = make_client(server)
    try:
        reply = client.generate(HI, max_tokens=20)
        assert reply.text == "echo: hi"
        assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
        assert reply.usage.completion_tokens == 2
        assert reply.latency_s > 0 and reply.attempts == 1 and not reply.cached
        assert server.authorizations == [f"Bearer {SECRET}"]
        sent = server.requests[0]
        assert sent["model"] == "test-model" and sent["temperature"] == 0.0
        assert sent["max_tokens"] == 20 and sent["seed"] == 0
        assert SECRET not in repr(client) and "api_key=set" in repr(client)
        assert client.stats()["calls"] == 1
    finally:
        client.close()


def test_no_key_no_header(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGBENCH_LLM_API_KEY", raising=False)
    client = make_client(server)
    try:
        client.generate(HI)
        assert server.authorizations == [None]
    finally:
        client.close()


@pytest.mark.parametrize("fault", ["429", "500", "hang", "malformed", "reset"])
def test_each_fault_is_retried_once_then_succeeds(server: LoopbackServer, fault: str) -> None:
    client = make_client(server)
    server.fail(fault)
    try:
        started = time.perf_counter()
        reply = client.generate(HI)
        elapsed = time.perf_counter() - started
        assert reply.text == "echo: hi" and reply.attempts == 2
        assert len(server.requests) == 2
        if fault == "429":
            assert elapsed >= 0.3  # Retry-After: 0.3 was honoured
        if fault == "hang":
            assert 0.5 <= elapsed < 1.5  # the 0.5 s timeout cut the hanging attempt
        assert client.stats()["retries"] == 1
    finally:
        client.close()


@pytest.mark.parametrize("fault", ["500", "hang", "malformed", "reset"])
def test_a_fault_that_persists_is_one_clear_error_in_bounded_time(server: LoopbackServer,
                                                                   fault: str,
                                                                   tmp_path: Path) -> None:
    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses, timeout_s=0.3)
    server.fail(*[fault] * 3)
    try:
        started = time.perf_counter()
        with pytest.raises(ModelCallError) as info:
            client.generate(HI)
        elapsed = time.perf_counter() - started
        message = str(info.value)
        assert "test-model" in message and server.url in message
        assert "after 3 attempts" in message
        assert elapsed < 3 * 0.3 + 2 * 0.2 + 1.0  # timeouts plus backoffs, never a hang
        assert len(server.requests) == 3
        assert caches.responses.store is not None and caches.responses.store.count() == 0
        # the failure was not cached: the next call reaches the server and succeeds
        assert client.generate(HI).text == "echo: hi"
        assert len(server.requests) == 4
        assert client.stats()["errors"] == 1
    finally:
        client.close()


def test_client_errors_are_not_retried(server: LoopbackServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBENCH_LLM_API_KEY", SECRET)
    client = make_client(server)
    server.fail("401")
    try:
        with pytest.raises(ModelCallError, match="HTTP 401") as info:
            client.generate(HI)
        assert len(server.requests) == 1
        assert SECRET not in str(info.value)
    finally:
        client.close()


def test_a_retry_after_beyond_the_limit_fails_at_once(server: LoopbackServer) -> None:
    server.retry_after = "3600"
    client = make_client(server, max_retry_after_s=5)
    server.fail("429")
    try:
        started = time.perf_counter()
        with pytest.raises(ModelCallError, match="wait 3600 s"):
            client.generate(HI)
        assert time.perf_counter() - started < 1.0
    finally:
        client.close()


def test_retry_after_forms() -> None:
    import email.utils

    import httpx

    assert _retry_after(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert _retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (_retry_after(httpx.Headers({"Retry-After": future})) or 0) <= 30
    assert _retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None


def test_concurrency_limit_holds(server: LoopbackServer) -> None:
    server.latency_s = 0.1
    client = make_client(server, concurrency=3)

    async def many() -> list[str]:
        replies = await asyncio.gather(*(client.agenerate([{"role": "user", "content": str(i)}])
                                         for i in range(12)))
        return [r.text for r in replies]

    try:
        texts = asyncio.run(many())
        assert texts == [f"echo: {i}" for i in range(12)]
        assert server.max_in_flight == 3
    finally:
        client.close()


def test_a_repeated_session_makes_no_model_call(server: LoopbackServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBENCH_LLM_API_KEY", SECRET)
    questions = [[{"role": "user", "content": f"question {i}"}] for i in range(5)]
    first = make_client(server, cache=Caches.open(tmp_path / "cache").responses)
    texts = [first.generate(q).text for q in questions]
    first.close()
    assert len(server.requests) == 5

    second = make_client(server, cache=Caches.open(tmp_path / "cache").responses)
    replies = [second.generate(q) for q in questions]
    second.close()
    assert len(server.requests) == 5  # zero new calls
    assert [r.text for r in replies] == texts and all(r.cached for r in replies)
    assert second.stats()["cache_hits"] == 5 and second.http_requests == 0
    different = make_client(server, cache=Caches.open(tmp_path / "cache").responses)
    different.generate(questions[0], temperature=0.7)  # other parameters: another entry
    different.close()
    assert len(server.requests) == 6
    for file in (tmp_path / "cache").iterdir():
        if file.is_file():
            raw = file.read_bytes()
            assert SECRET.encode() not in raw and b"127.0.0.1" not in raw


def test_structured_output_with_json_schema(server: LoopbackServer) -> None:
    server.reply = '{"score": 87}'
    client = make_client(server)
    try:
        reply = client.generate(HI, schema=SCHEMA)
        assert reply.data == {"score": 87}
        fmt = server.requests[0]["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    finally:
        client.close()


def test_structured_output_falls_back_to_text_when_the_server_rejects_both_modes(
        server: LoopbackServer) -> None:
    server.formats = ()
    server.reply = '```json\n{"score": 42}\n```'  # a code fence is not prose
    client = make_client(server)
    try:
        assert client.generate(HI, schema=SCHEMA).data == {"score": 42}
        kinds = [r.get("response_format", {}).get("type") for r in server.requests]
        assert kinds == ["json_schema", "json_object", None]  # each refusal moved on at once
        assert "JSON schema" in server.requests[2]["messages"][-1]["content"]
        assert client.structured_output == "text"
        client.generate([{"role": "user", "content": "again"}], schema=SCHEMA)
        assert len(server.requests) == 4  # it remembered: no second rejected attempt
        assert client.stats()["retries"] == 0
    finally:
        client.close()


def test_llama_cpp_style_500_on_json_schema_moves_to_json_object_without_retrying(
        server: LoopbackServer) -> None:
    """llama-cpp-python's server answers HTTP 500 naming json_schema; it takes json_object."""
    server.formats, server.reject_status = ("json_object",), 500
    server.reply = '{"score": 7}'
    client = make_client(server, max_retries=4)
    try:
        started = time.perf_counter()
        assert client.generate(HI, schema=SCHEMA).data == {"score": 7}
        assert time.perf_counter() - started < 1.0  # no backoff: a rejection is not retried
        first, second = server.requests
        assert first["response_format"]["type"] == "json_schema"
        assert second["response_format"] == {"type": "json_object", "schema": SCHEMA}
        assert second["messages"] == HI  # the grammar carries the schema: no extra message
        assert client.structured_output == "json_object"
        client.generate([{"role": "user", "content": "again"}], schema=SCHEMA)
        assert [r["response_format"]["type"] for r in server.requests[2:]] == ["json_object"]
        assert client.stats()["structured_output"] == "json_object"
    finally:
        client.close()


def test_concurrent_first_calls_negotiate_once(server: LoopbackServer) -> None:
    server.formats, server.reject_status, server.latency_s = ("json_object",), 500, 0.1
    server.reply = '{"score": 1}'
    client = make_client(server, concurrency=4)

    async def many() -> list[object]:
        return [g.data for g in await asyncio.gather(*(
            client.agenerate([{"role": "user", "content": str(i)}], schema=SCHEMA)
            for i in range(6)))]

    try:
        assert asyncio.run(many()) == [{"score": 1}] * 6
        kinds = [r["response_format"]["type"] for r in server.requests]
        assert kinds.count("json_schema") == 1 and kinds.count("json_object") == 6
    finally:
        client.close()


def test_a_500_that_does_not_name_the_format_is_retried(server: LoopbackServer) -> None:
    server.reply = '{"score": 3}'
    server.fail("500")  # "scripted 500": nothing about response_format
    client = make_client(server)
    try:
        assert client.generate(HI, schema=SCHEMA).data == {"score": 3}
        assert [r["response_format"]["type"] for r in server.requests] == ["json_schema"] * 2
        assert client.structured_output == "json_schema"
    finally:
        client.close()


def test_a_reply_that_is_not_the_json_asked_for_is_unusable_and_not_cached(
        server: LoopbackServer, tmp_path: Path) -> None:
    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses, role="judge")
    try:
        for reply in ("I would rate it highly.", 'Sure! {"score": 42}', "42"):
            server.reply = reply
            with pytest.raises(UnusableReply,
                               match=r"judge call to model 'test-model'.*not one JSON object"
                               ) as info:
                client.generate(HI, schema=SCHEMA)
            assert info.value.reply == reply  # quoted, and kept for the caller
            assert info.value.generation.usage.completion_tokens > 0  # the server answered
        server.reply = json.dumps({"other": 1})
        with pytest.raises(UnusableReply, match="score"):
            client.generate(HI, schema=SCHEMA)
        assert caches.responses.store is not None and caches.responses.store.count() == 0
        assert client.stats()["errors"] == 4
    finally:
        client.close()


def test_a_reply_parser_decides_what_is_cached(server: LoopbackServer, tmp_path: Path) -> None:
    def small(text: str, mode: str) -> int:
        value = int(json.loads(text)["score"])
        if value > 10:
            raise ValueError(f"{value} is off the scale ({mode})")
        return value

    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses)
    try:
        server.reply = '{"score": 90}'
        with pytest.raises(UnusableReply, match=r"90 is off the scale \(json_schema\)"):
            client.generate(HI, schema=SCHEMA, parse_reply=small)
        server.reply = '{"score": 9}'
        assert client.generate(HI, schema=SCHEMA, parse_reply=small).data == 9
        assert caches.responses.store is not None and caches.responses.store.count() == 1
        again = client.generate(HI, schema=SCHEMA, parse_reply=small)
        assert again.cached and again.data == 9 and len(server.requests) == 2

        def stricter(text: str, mode: str) -> int:
            raise ValueError("no longer accepted")

        with pytest.raises(UnusableReply):  # a cached reply the parser refuses is asked again
            client.generate(HI, schema=SCHEMA, parse_reply=stricter)
        assert len(server.requests) == 3
    finally:
        client.close()


def _judge_many(client: OpenAICompatibleClient, n: int) -> list[object]:
    """``n`` structured calls at once, as a kind's items call the judge; errors returned."""
    async def many() -> list[object]:
        return await asyncio.gather(*(
            client.agenerate([{"role": "user", "content": str(i)}], schema=SCHEMA)
            for i in range(n)), return_exceptions=True)

    return asyncio.run(many())


@pytest.mark.parametrize("fault", ["hang", "500"])
def test_a_dead_judge_is_called_concurrently_not_one_call_at_a_time(
        server: LoopbackServer, fault: str) -> None:
    """The negotiation lock is held for one probe, never through a call's retries.

    Six calls at concurrency 8 take about one call's bound (3 attempts of at most 0.5 s,
    and the backoff between them), plus the probe they waited for; held through the
    retries, the lock made them take six bounds, one call after another.
    """
    timeout, retries, requests = 0.5, 2, 6
    server.latency_s = 0.4  # a 500 comes after 0.4 s; a hanging request waits for the timeout
    server.fail(*[fault] * (requests * (retries + 1)))
    client = make_client(server, concurrency=8, timeout_s=timeout, max_retries=retries)
    per_call = (retries + 1) * timeout + 0.05 + 0.1  # attempts plus the longest backoffs
    try:
        started = time.perf_counter()
        outcomes = _judge_many(client, requests)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    assert all(isinstance(o, ModelCallError) and "after 3 attempts" in str(o) for o in outcomes)
    assert len(server.requests) == requests * (retries + 1)  # every call its own retries
    assert [r["response_format"]["type"] for r in server.requests] == \
        ["json_schema"] * len(server.requests)  # nothing was refused: the mode stays
    assert client.structured_output is None
    lasting = timeout if fault == "hang" else server.latency_s  # how long a request is open
    open_at_once = max(sum(a <= t < a + lasting for a in server.arrivals)
                       for t in server.arrivals)
    assert open_at_once >= requests  # 1 or 2 before: one call at a time
    assert elapsed < math.ceil(requests / 8) * per_call + timeout + 1.0  # 6 x per_call before


def test_a_slow_judge_keeps_its_concurrency(server: LoopbackServer) -> None:
    server.latency_s, server.reply = 0.3, '{"score": 1}'
    client = make_client(server, concurrency=8, timeout_s=5)
    try:
        started = time.perf_counter()
        outcomes = _judge_many(client, 17)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    assert [getattr(o, "data", o) for o in outcomes] == [{"score": 1}] * 17
    assert server.max_in_flight == 8
    assert elapsed < 17 * 0.3 / 2  # the probe, then two rounds of eight (5.1 s one by one)


def test_a_probe_that_times_out_leaves_the_mode_to_the_first_success(
        server: LoopbackServer) -> None:
    """Unsettled after a timeout, a refusal still moves each call on, and a success settles."""
    server.formats, server.reject_status = ("json_object",), 500
    server.reply = '{"score": 2}'
    server.fail("hang")  # the probe's json_schema attempt
    client = make_client(server, concurrency=4)
    try:
        outcomes = _judge_many(client, 4)
        assert [getattr(o, "data", o) for o in outcomes] == [{"score": 2}] * 4
        assert client.structured_output == "json_object"
        client.generate([{"role": "user", "content": "later"}], schema=SCHEMA)
        assert server.requests[-1]["response_format"]["type"] == "json_object"
    finally:
        client.close()


def test_the_served_model_is_recorded_and_kept_in_the_cache(server: LoopbackServer,
                                                            tmp_path: Path) -> None:
    server.model = "other-model-7b"  # a server that answers as another model
    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses)
    try:
        reply = client.generate(HI)
        assert (reply.model, reply.served_model) == ("test-model", "other-model-7b")
        again = client.generate(HI)  # from the cache: the served model is remembered
        assert again.cached and again.served_model == "other-model-7b"
        assert client.stats()["served_models"] == {"other-model-7b": 2}
    finally:
        client.close()
    server.model = None
    plain = make_client(server)
    try:
        assert plain.generate([{"role": "user", "content": "x"}]).served_model == "test-model"
    finally:
        plain.close()


@pytest.mark.parametrize(("asked", "served", "different"), [
    ("gpt-4o", "gpt-4o", False),
    ("gpt-4o", "gpt-4o-2024-08-06", False),  # a dated snapshot of the model asked for
    ("gpt-4", "gpt-4-0613", False),
    ("gpt-4", "gpt-4o", True),
    ("gpt-4", "gpt-4-turbo", True),
    ("gpt-4o-mini", "gpt-4o", True),
    ("llama3", "qwen2.5:7b", True),
])
def test_which_served_model_is_another_model(asked: str, served: str, different: bool) -> None:
    from pytest_ragbench import served as served_mod

    assert served_mod.differs(asked, served) is different
    usage = {"judge": {"models": {asked: {served: 3}}}}
    expected = ([f"judge: asked for model {asked!r}, the server answered as {served!r} "
                 "(3 of 3 calls)"] if different else [])
    assert served_mod.mismatches(usage) == expected


def test_a_reply_over_the_cap_is_stored_cut_with_a_note(server: LoopbackServer,
                                                        tmp_path: Path) -> None:
    server.reply = "é" + "x" * 3_000_000  # 3 MB
    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses, max_reply_bytes=1_000_000,
                         timeout_s=60)
    try:
        reply = client.generate(HI)
        kept, note = reply.text.split("\n[... ", 1)
        assert len(reply.text.encode()) == 1_000_000 and kept.startswith("éxx")
        assert note == "cut: the reply has 3,000,002 bytes, ragbench_max_reply_bytes keeps " \
                       "1,000,000]"
        assert client.generate(HI).text == reply.text  # the cut text is what was cached
        store = caches.responses.store
        assert store is not None and store.close() is None
        assert (tmp_path / "responses.sqlite3").stat().st_size < 1_200_000
    finally:
        client.close()


def test_a_structured_reply_over_the_cap_is_unusable_and_not_cached(
        server: LoopbackServer, tmp_path: Path) -> None:
    server.reply = json.dumps({"score": 1, "why": "x" * 2_000_000})
    caches = Caches.open(tmp_path)
    client = make_client(server, cache=caches.responses, max_reply_bytes=1_000_000,
                         timeout_s=60)
    try:
        with pytest.raises(UnusableReply, match=rf"the reply has {len(server.reply):,} bytes, "
                                                r"more than ragbench_max_reply_bytes "
                                                r"\(1,000,000\)"):
            client.generate(HI, schema=SCHEMA)
        assert caches.responses.store is not None and caches.responses.store.count() == 0
    finally:
        client.close()


def test_a_body_over_the_read_limit_is_not_read_nor_asked_again(server: LoopbackServer) -> None:
    server.reply = "x" * 3_000_000
    client = make_client(server, max_reply_bytes=1_000_000, timeout_s=60)
    client.max_body_bytes = 2_000_000  # (64 MB at least in use: kept small here)
    try:
        with pytest.raises(ModelCallError, match="the reply is over 2,000,000 bytes, not read"):
            client.generate(HI)
        assert len(server.requests) == 1
    finally:
        client.close()


@pytest.mark.parametrize(("text", "size"), [
    ("short", None), ("ab" * 600, 1200), ("€" * 400, 1200), ("x" * 4096, 4096),
])
def test_cut_keeps_whole_characters_and_says_so(text: str, size: int | None) -> None:
    from pytest_ragbench.replies import cut, cut_strings

    found, cut_from = cut(text, 1024)
    assert cut_from == size
    if size is None:
        assert found == text
    else:
        kept, note = found.split("\n[... ", 1)
        assert text.startswith(kept) and len(found.encode()) in range(1021, 1025)
        assert note == f"cut: the reply has {size:,} bytes, ragbench_max_reply_bytes keeps 1,024]"
        assert cut(found, 1024) == (found, None)  # cut once, it stays as it is
    assert cut_strings({"a": [text, 3], "b": (text,)}, 1024) == {"a": [found, 3], "b": [found]}
