"""An asynchronous client for OpenAI-compatible chat servers, used as generator and judge.

Imported only when ``--ragbench-llm-url`` or ``--ragbench-judge-url`` is given (imports
httpx). Each call: cache lookup (model + messages + parameters), then up to
``max_retries`` retries with exponential backoff and jitter on 429, 5xx, timeouts,
dropped connections and malformed replies, honouring ``Retry-After``; at most
``concurrency`` requests are in flight per client. Only successful replies are cached:
a reply that is not what was asked for raises :class:`~pytest_ragbench.errors.UnusableReply`
and is never stored.

Structured output (a call with ``schema``) is negotiated once per client (one server)
and remembered for the session, trying in turn: ``response_format`` of type
``json_schema`` (OpenAI, vLLM, recent Ollama), of type ``json_object`` with the schema
(llama.cpp's grammar: llama-cpp-python's server answers HTTP 500 to ``json_schema``),
then plain text with the schema in a system message and strict JSON extraction. A reply
that rejects the requested mode (any status whose body names ``response_format`` or
``json_schema``) moves on to the next mode at once instead of being retried. The first
call probes the modes, one attempt each, while the others wait; the lock is held only
for those attempts, never through retries: a probe that fails for another reason (a
timeout, a 500) leaves the mode unsettled, and from then on every call goes on
concurrently in the first mode not refused, retrying on its own, the first success
settling the mode.
The API key is read from the environment, sent in the Authorization header and
nowhere else: not in repr, errors, logs or cache keys. Every reply text and error text is
scrubbed of secrets (the key, URL credentials, tokens a server echoes) as it arrives
(redact.py), so an echo reaches neither the cache nor a report.

With ``stream=True`` (``--ragbench-stream``) a call without a schema asks for
server-sent events (``"stream": true``) and times them (:mod:`.streaming`): the
generation's ``ttft_s`` and ``itl_s``. The deltas are joined into the same text a plain
call gets, cached under the same key (a reply from the cache has no timings); an event
that is not JSON or names an error, or a stream that ends before a ``finish_reason``
(cut short), makes the reply malformed (retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import json
import os
import random
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_ragbench import replies
from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.redact import mask_url, register, register_url, scrub
from pytest_ragbench.replies import DEFAULT_MAX_REPLY_BYTES
from pytest_ragbench.systems.aio import LoopThread
from pytest_ragbench.systems.cache import ResponseCache
from pytest_ragbench.systems.prompts import parse_json_reply, shorten
from pytest_ragbench.systems.protocols import Generation, Message, Usage
from pytest_ragbench.systems.streaming import StreamClock

RETRY_STATUS = frozenset({408, 409, 425, 429})
JSON_INSTRUCTION = "Reply with one JSON object only, no prose, matching this JSON schema:\n"
# Structured-output modes, in the order they are tried.
MODES = ("json_schema", "json_object", "text")
REJECTION_WORDS = ("response_format", "json_schema")
BODY_FACTOR, BODY_FLOOR_BYTES = 64, 128 * 2**20  # the most of a reply's body read
ReplyParser = Callable[[str, str], Any]
"""``parse_reply(text, mode) -> data``: raises ValueError or ModelCallError when unusable."""


@dataclass(frozen=True)
class CallRecord:
    """One logical call: its latency (the successful attempt), wall time and outcome."""

    model: str
    latency_s: float
    wall_s: float
    attempts: int
    cached: bool
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    served_model: str | None = None


class RetriesExhausted(ModelCallError):
    """A call failed on every attempt; ``attempts`` says how many were made."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class _Retry(Exception):
    """An attempt failed in a way worth retrying."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.delay = reason, delay


class _ReplyTooLarge(Exception):
    """The reply's body is larger than the client reads."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class _SchemaRejected(Exception):
    """The server does not accept the requested ``response_format``."""


@dataclass
class _LoopState:
    client: httpx.AsyncClient
    semaphore: asyncio.Semaphore
    negotiation: asyncio.Lock = field(default_factory=asyncio.Lock)


class OpenAICompatibleClient:
    """Chat completions against ``{base_url}/chat/completions`` (base_url usually ends in /v1)."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "RAGBENCH_LLM_API_KEY",
                 concurrency: int = 8, timeout_s: float = 60.0, max_retries: int = 4,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 20.0,
                 max_retry_after_s: float = 120.0, max_tokens: int = 512, seed: int = 0,
                 cache: ResponseCache | None = None, loop: LoopThread | None = None,
                 role: str = "generator",
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, stream: bool = False) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model = self.model_id = model
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None
        register(self._api_key)
        register_url(base_url)
        self.concurrency, self.timeout_s, self.max_retries = concurrency, timeout_s, max_retries
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self.max_tokens, self.seed = max_tokens, seed
        self.cache = cache
        self.role = role
        self.stream = stream  # plain-text calls stream (SSE) and are timed
        self.max_reply_bytes = max_reply_bytes  # of a reply's text, as stored
        # of a reply's body, as read: room for a text over the cap (it is cut), not for any
        self.max_body_bytes = max(BODY_FLOOR_BYTES, BODY_FACTOR * max_reply_bytes)
        self._loop_thread = loop
        self._own_loop = loop is None
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary())
        self._mode: str | None = None  # the negotiated structured-output mode
        self._rejected: set[str] = set()  # modes this server refused
        self._unsettled = False  # a probe failed without a verdict: calls no longer wait
        self.records: list[CallRecord] = []
        self.http_requests = 0

    def __repr__(self) -> str:
        key = "set" if self._api_key else "unset"
        return (f"OpenAICompatibleClient(base_url={mask_url(self.base_url)!r}, "
                f"model={self.model!r}, api_key={key})")

    def describe(self) -> str:
        """Return one line naming the model and server (without credentials)."""
        return f"{self.model} at {mask_url(self.base_url)}"

    @property
    def structured_output(self) -> str | None:
        """The negotiated structured-output mode (:data:`MODES`), None before the first call."""
        return self._mode

    # -- public calls -------------------------------------------------------------------

    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None,
                 **params: Any) -> Generation:
        """Call the model and wait (runs on the client's background loop)."""
        if self._loop_thread is None:
            self._loop_thread = LoopThread(f"ragbench-{self.role}")
        return self._loop_thread.run(self.agenerate(messages, schema=schema, **params))

    async def agenerate(self, messages: Sequence[Message], *,
                        schema: Mapping[str, Any] | None = None,
                        parse_reply: ReplyParser | None = None, temperature: float = 0.0,
                        max_tokens: int | None = None, seed: int | None = None,
                        **extra: Any) -> Generation:
        """Call the model; ``schema`` asks for JSON, parsed into ``Generation.data``.

        ``parse_reply(text, mode)`` replaces the default strict JSON parsing (it gets the
        structured-output mode the reply was made in); what it returns becomes ``data``,
        and a reply it refuses raises UnusableReply and is not cached.
        """
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        params = {"temperature": temperature, "max_tokens": max_tokens or self.max_tokens,
                  "seed": self.seed if seed is None else seed, **extra}
        key = ResponseCache.key(self.model, chat, {**params, "schema": schema})
        hit = self._cached(key, schema, parse_reply)
        if hit is not None:
            self._record(hit, 0.0)
            return hit
        started = time.perf_counter()
        clock = StreamClock() if self.stream and schema is None and parse_reply is None else None
        try:
            payload, latency, attempts, mode = await self._complete(chat, params, schema, clock)
            text, size = replies.cut(_content(payload), self.max_reply_bytes)
            text = scrub(text)
        except ModelCallError as exc:
            message = self._scrub(str(exc))
            attempts = exc.attempts if isinstance(exc, RetriesExhausted) else 1
            self.records.append(CallRecord(self.model, 0.0, time.perf_counter() - started,
                                           attempts, False, error=message))
            raise ModelCallError(message) from None
        generation = Generation(text=text, model=self.model,
                                usage=Usage.from_dict(payload.get("usage")), latency_s=latency,
                                attempts=attempts, served_model=_served_model(payload),
                                ttft_s=clock.ttft_s if clock else None,
                                itl_s=clock.itl_s if clock else None)
        if schema is not None or parse_reply is not None:
            try:
                if size is not None:  # a cut reply is not the whole answer: never parsed
                    raise ValueError(f"the reply has {size:,} bytes, more than "
                                     f"{replies.INI} ({self.max_reply_bytes:,})")
                data = _parse(text, mode, schema, parse_reply)
            except (ValueError, ModelCallError) as exc:
                message = self._scrub(f"{self.role} call to model {self.model!r}: {exc}")
                self.records.append(CallRecord(self.model, latency,
                                               time.perf_counter() - started, attempts, False,
                                               generation.usage, error=message))
                raise UnusableReply(message, reply=text, generation=generation) from None
            generation = dataclasses.replace(generation, data=data)
        if self.cache is not None:
            self.cache.put(key, {"text": text, "usage": generation.usage.to_dict(),
                                 "data": generation.data, "mode": mode,
                                 "served_model": generation.served_model})
        self._record(generation, time.perf_counter() - started)
        return generation

    def _cached(self, key: str, schema: Mapping[str, Any] | None,
                parse_reply: ReplyParser | None) -> Generation | None:
        """The cached reply of ``key``; one the parser now refuses counts as a miss."""
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        data = hit.get("data")
        if parse_reply is not None:
            try:
                data = _parse(str(hit.get("text", "")), str(hit.get("mode") or "text"), schema,
                              parse_reply)
            except (ValueError, ModelCallError):
                return None
        served = hit.get("served_model")
        return Generation(text=hit["text"], model=self.model,
                          usage=Usage.from_dict(hit.get("usage")), latency_s=0.0,
                          cached=True, data=data, attempts=0,
                          served_model=served if isinstance(served, str) else None)

    def stats(self) -> dict[str, Any]:
        """Return call counts, cache hits, errors, tokens and mean latency."""
        records = list(self.records)
        live = [r for r in records if not r.cached and r.error is None]
        return {
            "calls": len(records),
            "http_requests": self.http_requests,
            "structured_output": self._mode,
            "cache_hits": sum(r.cached for r in records),
            "errors": sum(r.error is not None for r in records),
            "retries": sum(max(r.attempts - 1, 0) for r in records),
            "prompt_tokens": sum(r.usage.prompt_tokens for r in records),
            "completion_tokens": sum(r.usage.completion_tokens for r in records),
            "mean_latency_s": sum(r.latency_s for r in live) / len(live) if live else None,
            "served_models": dict(Counter(r.served_model for r in records if r.served_model)),
        }

    async def aclose(self) -> None:
        """Close the HTTP connections of the running loop."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.aclose()

    def close(self) -> None:
        """Close every connection pool, and the background loop if the client owns it."""
        for loop, state in list(self._states.items()):
            if loop.is_running() and not loop.is_closed():
                future = asyncio.run_coroutine_threadsafe(state.client.aclose(), loop)
                with contextlib.suppress(Exception):  # a stuck pool is dropped anyway
                    future.result(5)
        self._states.clear()
        if self._own_loop and self._loop_thread is not None:
            self._loop_thread.close()
            self._loop_thread = None

    # -- internals ----------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            limits = httpx.Limits(max_connections=self.concurrency,
                                  max_keepalive_connections=self.concurrency)
            client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits)
            state = _LoopState(client, asyncio.Semaphore(self.concurrency))
            self._states[loop] = state
        return state

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _scrub(self, text: str) -> str:
        return scrub(text)

    def _record(self, generation: Generation, wall: float) -> None:
        self.records.append(CallRecord(self.model, generation.latency_s, wall,
                                       generation.attempts, generation.cached, generation.usage,
                                       served_model=generation.served_model))

    async def _complete(self, chat: list[dict[str, str]], params: Mapping[str, Any],
                        schema: Mapping[str, Any] | None, clock: StreamClock | None = None
                        ) -> tuple[dict[str, Any], float, int, str]:
        """One call in the negotiated mode; returns the payload, latency, attempts, mode.

        ``clock``: stream the reply (a call without a schema) and time its chunks.
        """
        body: dict[str, Any] = {"model": self.model, "messages": chat, **params}
        if schema is None:
            if clock is not None:  # usage comes in a last event where the server can send it
                body = {**body, "stream": True, "stream_options": {"include_usage": True}}
            payload, latency, attempts = await self._post(body, schema_requested=False,
                                                          clock=clock)
            return payload, latency, attempts, "text"
        failed: _Retry | None = None  # this call's first attempt, made while probing
        if self._mode is None and not self._unsettled:
            async with self._state().negotiation:  # the first call probes, others wait
                if self._mode is None and not self._unsettled:
                    probed = await self._probe(body, schema)
                    if not isinstance(probed, _Retry):
                        return probed
                    failed = probed
        while True:
            mode = self._mode or next(m for m in MODES if m not in self._rejected)
            try:
                payload, latency, attempts = await self._post(
                    _in_mode(mode, body, schema), mode != "text", failed)
            except _SchemaRejected:
                self._rejected.add(mode)  # refused while unsettled: the next mode, at once
                failed = None
                continue
            if self._mode is None:
                self._mode = mode
            return payload, latency, attempts, mode

    async def _probe(self, body: dict[str, Any], schema: Mapping[str, Any]
                     ) -> tuple[dict[str, Any], float, int, str] | _Retry:
        """One attempt in each mode in turn, until one is answered (kept for the session).

        A refused mode moves on to the next; a failure that is no refusal (a timeout, a
        500) ends the probing with the mode unsettled and is returned, as the first
        attempt of the call that made it.
        """
        url, state = f"{self.base_url}/chat/completions", self._state()
        for mode in MODES:
            if mode in self._rejected:
                continue
            try:
                payload, latency = await self._attempt(state, url, _in_mode(mode, body, schema),
                                                       mode != "text")
            except _SchemaRejected:
                self._rejected.add(mode)
                continue
            except _Retry as failure:
                self._unsettled = True
                return failure
            self._mode = mode
            return payload, latency, 1, mode
        raise AssertionError("the text mode is never refused")  # pragma: no cover

    async def _post(self, body: Mapping[str, Any], schema_requested: bool,
                    failed: _Retry | None = None, clock: StreamClock | None = None
                    ) -> tuple[dict[str, Any], float, int]:
        """The request with its retries; ``failed``: a first attempt already made, failed."""
        url = _endpoint(self.base_url)
        state = self._state()
        attempt = 0
        if failed is not None:
            attempt = 1
            await self._before_retry(failed, attempt)
        while True:
            attempt += 1
            try:
                payload, latency = await self._attempt(state, url, body, schema_requested,
                                                       clock)
                return payload, latency, attempt
            except _Retry as retry:
                await self._before_retry(retry, attempt)

    async def _before_retry(self, retry: _Retry, attempt: int) -> None:
        """Wait before the next attempt, or raise when there is to be none."""
        if attempt > self.max_retries:
            raise RetriesExhausted(
                f"{self.role} call to model {self.model!r} at {mask_url(self.base_url)} "
                f"failed after {attempt} attempts: {retry.reason}", attempt) from None
        delay = retry.delay
        if delay is not None and delay > self.max_retry_after_s:
            raise ModelCallError(
                f"{self.role} call to model {self.model!r} at {mask_url(self.base_url)}: "
                f"{retry.reason}; the server asks to wait {delay:.0f} s, more than "
                f"{self.max_retry_after_s:.0f} s") from None
        await asyncio.sleep(self._backoff(attempt) if delay is None else delay)

    async def _attempt(self, state: _LoopState, url: str, body: Mapping[str, Any],
                       schema_requested: bool, clock: StreamClock | None = None
                       ) -> tuple[dict[str, Any], float]:
        async with state.semaphore:
            self.http_requests += 1
            started = time.perf_counter()
            if clock is not None:
                clock.restart()  # a retry's chunks alone are timed
            try:
                response = await asyncio.wait_for(self._read(state, url, body, clock),
                                                  self.timeout_s)
            except _ReplyTooLarge as exc:  # asking again would bring the same
                raise ModelCallError(f"{self.role} call to model {self.model!r} at "
                                     f"{mask_url(self.base_url)}: the reply is over "
                                     f"{exc.limit:,} bytes, not read") from None
            except (TimeoutError, httpx.TimeoutException):
                raise _Retry(f"no reply within {self.timeout_s:g} s") from None
            except httpx.TransportError as exc:
                raise _Retry(f"connection error ({type(exc).__name__}: {exc})") from None
            latency = time.perf_counter() - started
        status = response.status_code
        if status == 200:
            try:
                payload = response.json()
                _content(payload)
            except (ValueError, ModelCallError) as exc:
                raise _Retry(f"malformed reply ({shorten(scrub(str(exc)))}): "
                             f"{shorten(scrub(response.text))!r}") from None
            return payload, latency
        reason = f"HTTP {status}: {shorten(scrub(response.text))!r}"  # scrubbed before cut
        if schema_requested and any(word in response.text for word in REJECTION_WORDS):
            raise _SchemaRejected(reason)  # whatever the status: llama.cpp's server says 500
        if status in RETRY_STATUS or status >= 500:
            raise _Retry(reason, _retry_after(response.headers))
        raise ModelCallError(f"{self.role} call to model {self.model!r} at "
                             f"{mask_url(self.base_url)} failed: {reason}")

    async def _read(self, state: _LoopState, url: str, body: Mapping[str, Any],
                    clock: StreamClock | None = None) -> httpx.Response:
        """POST and read the reply, never more than :attr:`max_body_bytes` of it.

        A streamed reply (server-sent events) is timed on ``clock`` and returned as the
        one JSON reply its events add up to (:meth:`_read_events`).
        """
        async with state.client.stream("POST", url, json=body,
                                       headers=self._headers()) as streamed:
            kind = streamed.headers.get("content-type", "").split(";")[0].strip().lower()
            if clock is not None and streamed.status_code == 200 \
                    and kind == "text/event-stream":
                payload = await self._read_events(streamed, clock)
                return httpx.Response(200, json=payload, request=streamed.request)
            chunks, size = [], 0
            async for chunk in streamed.aiter_bytes():  # decompressed
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise _ReplyTooLarge(self.max_body_bytes)
                chunks.append(chunk)
        headers = [(k, v) for k, v in streamed.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length")]
        return httpx.Response(streamed.status_code, headers=headers, content=b"".join(chunks),
                              request=streamed.request)

    async def _read_events(self, streamed: httpx.Response, clock: StreamClock
                           ) -> dict[str, Any]:
        """The chat completion an SSE stream adds up to, each delta timed as it arrives."""
        size, pieces = 0, []
        joined: dict[str, Any] = {}
        finished: str | None = None
        async for line in streamed.aiter_lines():
            size += len(line) + 1
            if size > self.max_body_bytes:
                raise _ReplyTooLarge(self.max_body_bytes)
            if not line.startswith("data:"):
                continue  # blank lines, comments (": ping"), event names
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                event = json.loads(data)
            except json.JSONDecodeError:
                return {"event": data}  # malformed: no choices, retried
            if not isinstance(event, dict) or "error" in event:
                return event if isinstance(event, dict) else {"event": event}
            choices = event.get("choices") or []
            first = choices[0] if isinstance(choices, list) and choices \
                and isinstance(choices[0], dict) else {}
            delta = first.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str):
                clock.chunk(text)
                pieces.append(text)
            for key in ("model", "usage"):
                if event.get(key):
                    joined[key] = event[key]
            if first.get("finish_reason"):
                finished = first["finish_reason"]
        if finished is None:
            # cut short (llama-cpp-python's server ends a stream with [DONE] when another
            # request arrives): no choices, so the reply is malformed and asked again
            return {"event": f"the stream ended before a finish_reason, after "
                             f"{len(pieces)} chunks: {''.join(pieces)!r}"}
        joined["choices"] = [{"index": 0, "finish_reason": finished,
                              "message": {"role": "assistant", "content": "".join(pieces)}}]
        return joined

    def _backoff(self, attempt: int) -> float:
        return backoff_s(attempt, self.backoff_base_s, self.backoff_max_s)


def backoff_s(attempt: int, base_s: float, max_s: float) -> float:
    """Exponential backoff with equal jitter: half fixed, half random."""
    ceiling = min(max_s, base_s * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _endpoint(base_url: str) -> str:
    """``{base_url}/chat/completions``, keeping a query of the base URL (``/v1?key=...``)."""
    base, mark, query = base_url.partition("?")
    return f"{base.rstrip('/')}/chat/completions{mark}{query}"


def _in_mode(mode: str, body: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The request body asking for ``schema`` in structured-output ``mode``."""
    if mode == "json_schema":
        return {**body, "response_format": {
            "type": "json_schema",
            "json_schema": {"name": str(schema.get("title") or "reply"), "schema": dict(schema)}}}
    if mode == "json_object":
        return {**body, "response_format": {"type": "json_object", "schema": dict(schema)}}
    instruction = {"role": "system",
                   "content": JSON_INSTRUCTION + json.dumps(schema, sort_keys=True)}
    return {**body, "messages": [*body["messages"], instruction]}


def _parse(text: str, mode: str, schema: Mapping[str, Any] | None,
           parse_reply: ReplyParser | None) -> Any:
    """The reply's data: ``parse_reply``'s, else the strictly parsed JSON object."""
    if parse_reply is not None:
        return parse_reply(text, mode)
    return parse_json_reply(text, schema)


def _served_model(payload: dict[str, Any]) -> str | None:
    """The reply's ``model``: the model the server says answered (None when it says none)."""
    served = payload.get("model")
    if not isinstance(served, str) or not served.strip():
        return None
    return served.strip()[:200]


def _content(payload: Any) -> str:
    """Return ``choices[0].message.content`` or raise ModelCallError naming what is wrong."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ModelCallError("reply has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise ModelCallError("choices[0].message.content is not a string")
    return content


def _retry_after(headers: httpx.Headers) -> float | None:
    """Read ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
