"""A RAG service over HTTP as the system under test (``--ragbench-system-url=URL``).

Imported only when the flag or its ini key is set (it imports httpx and jmespath).
Each question is one POST of ini ``ragbench_system_request``: a JSON body in which the
string ``"{question}"`` becomes the question and ``"{history}"`` the prior turns as a list
of ``{"role", "content"}`` objects (inside a longer string they are written as text).
The reply is read with JMESPath: ini ``ragbench_system_answer`` (default ``answer``) gives
the answer text, ``ragbench_system_contexts`` (default ``contexts``) the list of contexts,
each an object read by its keys ``id``, ``text`` (or ``content``, ``page_content``),
``score``, ``source`` and ``metadata`` (a multiselect hash renames a service's own keys:
``sources[*].{id: doc_id, text: chunk, score: relevance, source: file}``), or a plain
string. A streamed reply is read whole: server-sent events (``text/event-stream``) or one
JSON object a line (``application/x-ndjson``, ``application/jsonl``): the answer path's
strings of every event are joined (the deltas), the last event giving contexts gives them;
an event that is not JSON is a piece of the answer text. A streamed reply is timed
(:mod:`~pytest_ragbench.systems.streaming`): the answer's ``ttft_s`` is the time from the
request to the first event with answer text, ``itl_s`` the mean gap between such events.

Ini ``ragbench_system_headers`` maps header names to environment variables (``X-Api-Key =
MYAPP_KEY``, or ``Authorization = Bearer ${MYAPP_TOKEN}``); their values are read when the
system is built and sent in the headers only, never written to a report, an error or the
terminal. ``--ragbench-timeout``, ``--ragbench-retries`` and ``--ragbench-concurrency``
bound the calls as they bound the model clients': 429, 5xx, timeouts, dropped connections
and malformed replies are retried with backoff (``Retry-After`` honoured), any other 4xx
fails the item at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import jmespath
from jmespath.exceptions import JMESPathError

from pytest_ragbench.adapters.common import make_context
from pytest_ragbench.errors import ConfigError, ModelCallError
from pytest_ragbench.redact import mask_url, register, scrub
from pytest_ragbench.systems.aio import LoopThread
from pytest_ragbench.systems.openai_client import (
    RETRY_STATUS,
    _LoopState,
    _Retry,
    _retry_after,
    backoff_s,
)
from pytest_ragbench.systems.prompts import shorten
from pytest_ragbench.systems.protocols import Answer, Context, as_messages
from pytest_ragbench.systems.streaming import StreamClock

DEFAULT_REQUEST = '{"question": "{question}", "history": "{history}"}'
DEFAULT_ANSWER = "answer"
DEFAULT_CONTEXTS = "contexts"
STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/jsonl",
                "application/json-seq")
TEXT_KEYS = ("text", "content", "page_content")
_PLACEHOLDER = re.compile(r"\{(question|history)\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ServiceSpec:
    """What to send to the service and how to read its reply (checked when built)."""

    url: str
    request: Any
    answer: Any  # compiled JMESPath expressions
    contexts: Any
    header_env: tuple[tuple[str, str], ...] = ()  # (header, value template with ${VAR})
    answer_text: str = DEFAULT_ANSWER
    contexts_text: str = DEFAULT_CONTEXTS

    @classmethod
    def read(cls, url: str, *, request: str = "", answer: str = "", contexts: str = "",
             headers: Sequence[str] = ()) -> ServiceSpec:
        """Parse the ini values; a bad one is a ConfigError naming its key."""
        template_text = request.strip() or DEFAULT_REQUEST
        try:
            template = json.loads(template_text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"ini ragbench_system_request is not JSON ({exc}): "
                              f"{shorten(template_text)!r}; write the placeholders as strings: "
                              '"{question}", "{history}"') from None
        if "{question}" not in json.dumps(template):
            raise ConfigError("ini ragbench_system_request has no \"{question}\": where does "
                              "the question go?")
        answer_text = answer.strip() or DEFAULT_ANSWER
        contexts_text = contexts.strip() or DEFAULT_CONTEXTS
        return cls(url=url, request=template,
                   answer=_compile("ragbench_system_answer", answer_text),
                   contexts=_compile("ragbench_system_contexts", contexts_text),
                   header_env=tuple(_header_line(line) for line in headers
                                    if line.strip() and not line.strip().startswith("#")),
                   answer_text=answer_text, contexts_text=contexts_text)

    def body(self, question: str, history: Sequence[Any] | None) -> Any:
        """The request body for one question."""
        return _fill(self.request, question, as_messages(history))

    def headers(self) -> dict[str, str]:
        """The headers, their values read from the environment now."""
        values = {}
        for name, template in self.header_env:
            missing = [var for var in _ENV.findall(template) if not os.environ.get(var)]
            if missing:
                raise ConfigError(f"ini ragbench_system_headers: header {name} needs the "
                                  f"environment variable {', '.join(missing)}, which is not set")
            values[name] = _ENV.sub(lambda m: os.environ[m.group(1)], template)
            # whatever the variable is called, its value is a secret from here on
            register(*(os.environ[var] for var in _ENV.findall(template)))
        return values


def _compile(key: str, expression: str) -> Any:
    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        raise ConfigError(f"ini {key}: {expression!r} is not a JMESPath expression: "
                          f"{' '.join(str(exc).split())}") from None


def _header_line(line: str) -> tuple[str, str]:
    """``Name = VAR`` (the whole value from VAR) or ``Name = text with ${VAR}``."""
    name, sep, spec = line.partition("=")
    name, spec = name.strip(), spec.strip()
    if not sep or not name or not spec:
        raise ConfigError(f"ini ragbench_system_headers: expected 'Header-Name = ENV_VAR', "
                          f"got {line.strip()!r}")
    if "${" not in spec:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec):
            raise ConfigError(f"ini ragbench_system_headers: {name}: {spec!r} is not the name "
                              "of an environment variable (write ${VAR} inside a longer value)")
        spec = f"${{{spec}}}"
    return name, spec


def _fill(template: Any, question: str, history: list[dict[str, str]]) -> Any:
    if isinstance(template, str):
        if template == "{question}":
            return question
        if template == "{history}":
            return history
        text = "\n".join(f"{m['role']}: {m['content']}" for m in history)
        return _PLACEHOLDER.sub(lambda m: question if m.group(1) == "question" else text,
                                template)
    if isinstance(template, Mapping):
        return {key: _fill(value, question, history) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, question, history) for value in template]
    return template


# -- reading a reply ----------------------------------------------------------------------------

class _Malformed(Exception):
    """The reply cannot be read as the settings say (retried: it may be a truncated reply)."""


@dataclass
class _Reading:
    """What a reply said so far (one document, or the events of a stream)."""

    spec: ServiceSpec
    pieces: list[str] = field(default_factory=list)
    contexts: list[Context] | None = None
    events: int = 0
    clock: StreamClock | None = None  # a streamed reply: when each piece of text came

    def document(self, data: Any) -> None:
        """A whole JSON reply: the answer must be there."""
        found = self.spec.answer.search(data)
        if found is None:
            raise _Malformed(f"the reply has no answer at {self.spec.answer_text!r} "
                             f"(ini ragbench_system_answer): {shorten(json.dumps(data))!r}")
        self.pieces.append(_as_text(found))
        self._contexts(data)

    def event(self, data: str) -> None:
        """One streamed event: JSON read by the paths, anything else a piece of text."""
        self.events += 1
        if data.strip() == "[DONE]":
            return
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError:
            self._piece(data)
            return
        if isinstance(parsed, str):
            self._piece(parsed)
            return
        found = self.spec.answer.search(parsed)
        if found is not None:
            self._piece(_as_text(found))
        self._contexts(parsed)

    def _piece(self, text: str) -> None:
        self.pieces.append(text)
        if self.clock is not None:
            self.clock.chunk(text)

    def _contexts(self, data: Any) -> None:
        found = self.spec.contexts.search(data)
        if found is None:
            return
        if not isinstance(found, list):
            raise _Malformed(f"the contexts at {self.spec.contexts_text!r} (ini "
                             f"ragbench_system_contexts) are {type(found).__name__}, not a list")
        self.contexts = [_context(rank, item, self.spec.contexts_text)
                         for rank, item in enumerate(found, start=1)]

    def answer(self, latency: float) -> Answer:
        """The answer read."""
        clock = self.clock
        return Answer("".join(self.pieces), tuple(self.contexts or ()), latency_s=latency,
                      ttft_s=clock.ttft_s if clock else None, itl_s=clock.itl_s if clock else None)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _context(rank: int, item: Any, where: str) -> Context:
    if isinstance(item, str):
        return make_context(rank, id=None, text=item, score=None, metadata={})
    if not isinstance(item, Mapping):
        raise _Malformed(f"context {rank} at {where!r} is {type(item).__name__}: expected an "
                         "object (id, text, score, source, metadata) or a string")
    metadata = dict(item.get("metadata") or {}) if isinstance(item.get("metadata"),
                                                              Mapping) else {}
    if item.get("source") is not None:
        metadata["source"] = item["source"]
    text = next((item[k] for k in TEXT_KEYS if item.get(k) is not None), "")
    score = item.get("score")
    if score is not None and not isinstance(score, int | float):
        try:
            score = float(score)
        except (TypeError, ValueError):
            raise _Malformed(f"context {rank} at {where!r}: score {score!r} is not a "
                             "number") from None
    return make_context(rank, id=item.get("id"), text=text, score=score, metadata=metadata)


async def _read_events(response: httpx.Response, reading: _Reading, sse: bool) -> None:
    """Server-sent events (``data:`` lines up to a blank line) or one event a line."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not sse:
            if line.strip():
                reading.event(line)
            continue
        if not line.strip():
            if data:
                reading.event("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        reading.event("\n".join(data))


# -- the system ---------------------------------------------------------------------------------

class HttpServiceSystem:
    """``answer(question, history=None)`` by one POST to the service (see the module)."""

    def __init__(self, spec: ServiceSpec, *, timeout_s: float = 60.0, max_retries: int = 4,
                 concurrency: int = 8, backoff_base_s: float = 0.5, backoff_max_s: float = 20.0,
                 max_retry_after_s: float = 120.0, loop: LoopThread | None = None) -> None:
        self.spec = spec
        self._headers = {"Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream", **spec.headers()}
        self.timeout_s, self.max_retries, self.concurrency = timeout_s, max_retries, concurrency
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self._loop_thread = loop
        self._own_loop = loop is None
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary())
        self.http_requests = 0

    def __repr__(self) -> str:
        return f"HttpServiceSystem({mask_url(self.spec.url)!r})"

    def describe(self) -> str:
        """One line for the report (no header values)."""
        return f"HTTP service at {mask_url(self.spec.url)}"

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Ask the service and wait (on the background loop)."""
        if self._loop_thread is None:
            self._loop_thread = LoopThread("ragbench-system-url")
        return self._loop_thread.run(self.aanswer(question, history))

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Ask the service: one POST, retried as the module says."""
        body = self.spec.body(question, history)
        state = self._state()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(state, body)
            except _Retry as retry:
                where = f"POST {mask_url(self.spec.url)}"
                if attempt > self.max_retries:
                    raise ModelCallError(self._scrub(
                        f"the system at {where} failed after {attempt} attempt"
                        f"{'s' if attempt > 1 else ''}: {retry.reason}")) from None
                delay = retry.delay
                if delay is not None and delay > self.max_retry_after_s:
                    raise ModelCallError(self._scrub(
                        f"the system at {where}: {retry.reason}; it asks to wait {delay:.0f} s, "
                        f"more than {self.max_retry_after_s:.0f} s")) from None
                await asyncio.sleep(self._backoff(attempt) if delay is None else delay)

    async def _attempt(self, state: _LoopState, body: Any) -> Answer:
        async with state.semaphore:
            self.http_requests += 1
            started = time.perf_counter()
            try:
                return await asyncio.wait_for(self._exchange(state.client, body, started),
                                              self.timeout_s)
            except (TimeoutError, httpx.TimeoutException):
                raise _Retry(f"no reply within {self.timeout_s:g} s "
                             "(--ragbench-timeout)") from None
            except httpx.TransportError as exc:
                raise _Retry(f"connection error ({type(exc).__name__}: {exc})") from None

    async def _exchange(self, client: httpx.AsyncClient, body: Any, started: float) -> Answer:
        async with client.stream("POST", self.spec.url, json=body,
                                 headers=self._headers) as response:
            if response.status_code != 200:
                await response.aread()
                self._refuse(response)
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            reading = _Reading(self.spec)
            try:
                if kind in STREAM_TYPES:
                    reading.clock = StreamClock(started=started)
                    await _read_events(response, reading, sse=kind == "text/event-stream")
                    if not reading.events:
                        raise _Malformed("the streamed reply held no event")
                else:
                    text = (await response.aread()).decode(response.encoding or "utf-8",
                                                           errors="replace")
                    if kind.startswith("text/") and kind != "text/json":
                        reading.pieces.append(text)
                    else:
                        reading.document(_json(text))
            except _Malformed as exc:
                raise _Retry(f"malformed reply: {exc}") from None
        return reading.answer(time.perf_counter() - started)

    def _refuse(self, response: httpx.Response) -> None:
        status = response.status_code
        reason = f"HTTP {status}: {shorten(response.text)!r}"
        if status in RETRY_STATUS or status >= 500:
            raise _Retry(reason, _retry_after(response.headers))
        hint = " (is the path of --ragbench-system-url right?)" if status in (404, 405) else ""
        raise ModelCallError(self._scrub(f"the system at POST {mask_url(self.spec.url)} "
                                         f"refused the question: {reason}{hint}"))

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            limits = httpx.Limits(max_connections=self.concurrency,
                                  max_keepalive_connections=self.concurrency)
            state = _LoopState(httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s),
                                                 limits=limits),
                               asyncio.Semaphore(self.concurrency))
            self._states[loop] = state
        return state

    def _scrub(self, text: str) -> str:
        # the header values were registered as secrets when read (ServiceSpec.headers)
        return scrub(text)

    def _backoff(self, attempt: int) -> float:
        return backoff_s(attempt, self.backoff_base_s, self.backoff_max_s)

    def close(self) -> None:
        """Close the connection pools, and the background loop if the system owns it."""
        for loop, state in list(self._states.items()):
            if loop.is_running() and not loop.is_closed():
                future = asyncio.run_coroutine_threadsafe(state.client.aclose(), loop)
                try:
                    future.result(5)
                except Exception:  # a stuck pool is dropped anyway
                    future.cancel()
        self._states.clear()
        if self._own_loop and self._loop_thread is not None:
            self._loop_thread.close()
            self._loop_thread = None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                         f"{shorten(text)!r}") from None

