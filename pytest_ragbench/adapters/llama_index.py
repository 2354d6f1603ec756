"""LlamaIndex apps as the plugin's System, Retriever, Generator and Judge (needs llama-index-core).

In conftest.py::

    from pytest_ragbench.adapters import llama_index

    @pytest.fixture(scope="session")
    def ragbench_system():
        return llama_index.system(index.as_query_engine())

:func:`system` takes a query engine (``query(question)``) or a chat engine
(``chat(question, chat_history=[...])``); the answer is the response's text and the
contexts are its ``source_nodes``. A chat engine keeps a memory: each call hands it the
case's prior turns (an empty history for a first question), and calls to one chat engine
run one at a time. Token usage comes from LlamaIndex's instrumentation events (the
``LLM*EndEvent`` of every model call made while answering), where the model reports it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.schema import NodeWithScore

from pytest_ragbench.adapters.common import (
    HistoryDropped,
    check_forward,
    finish_generation,
    make_context,
    model_params,
    read_usage,
    schema_messages,
)
from pytest_ragbench.systems.protocols import Answer, Context, Generation, Usage, as_messages


def system(engine: Any, *, top_k: int | None = None) -> LlamaIndexSystem:
    """A query engine or a chat engine as the system under test."""
    return LlamaIndexSystem(engine, top_k=top_k)


def retriever(llama_retriever: Any) -> LlamaIndexRetriever:
    """A LlamaIndex retriever (``retrieve(query) -> [NodeWithScore]``) as the plugin's Retriever."""
    return LlamaIndexRetriever(llama_retriever)


def generator(llm: Any, *, params: Sequence[str] = ()) -> LlamaIndexGenerator:
    """A LlamaIndex LLM (``chat(messages)``) as the plugin's Generator and Judge.

    ``params`` names the plugin's per-call parameters (``temperature``, ``max_tokens``,
    ``seed``) passed on as keyword arguments of ``chat``; by default the LLM's own settings
    apply.
    """
    return LlamaIndexGenerator(llm, check_forward(params))


# -- token usage from the instrumentation events ------------------------------------------

_CALL: contextvars.ContextVar[_Usages | None] = contextvars.ContextVar(
    "ragbench_llama_index_call", default=None)


class _Usages:
    """The usage reported by the model calls of one answer (or one generation)."""

    def __init__(self) -> None:
        self.total = Usage()
        self._seen: list[Any] = []  # the responses counted (kept, so their ids stay unique)
        self._last: tuple[type, Usage] | None = None
        self._lock = threading.Lock()

    def add(self, kind: type, response: Any, usage: Usage) -> None:
        """Count one end event's usage, unless it reports a call counted already."""
        with self._lock:
            # An async call made through its sync twin ends twice with the same response;
            # a chat call made through a completion call (or the reverse) ends with two
            # responses of the same usage, one right after the other.
            if any(response is seen for seen in self._seen):
                return
            self._seen.append(response)
            last, self._last = self._last, (kind, usage)
            if last is not None and last[0] is not kind and last[1] == usage:
                return
            self.total += usage


class _UsageHandler(BaseEventHandler):
    """Adds each model call's reported usage to the answer being made in its context."""

    @classmethod
    def class_name(cls) -> str:
        """The handler's name for LlamaIndex."""
        return "RagbenchUsageHandler"

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Record an LLM end event's usage."""
        usages = _CALL.get()
        if usages is None or not isinstance(event, LLMChatEndEvent | LLMCompletionEndEvent):
            return
        usage = response_usage(event.response)
        if usage.total_tokens:
            usages.add(type(event), event.response, usage)


_HANDLER_LOCK = threading.Lock()
_HANDLER: list[_UsageHandler] = []  # added to the root dispatcher once a process


def _listen() -> None:
    with _HANDLER_LOCK:
        if not _HANDLER:
            _HANDLER.append(_UsageHandler())
            get_dispatcher().add_event_handler(_HANDLER[0])


@contextmanager
def _recording() -> Iterator[_Usages]:
    _listen()
    usages = _Usages()
    token = _CALL.set(usages)
    try:
        yield usages
    finally:
        _CALL.reset(token)


def response_usage(response: Any) -> Usage:
    """A ChatResponse's or CompletionResponse's usage.

    Read from its (or its message's) ``additional_kwargs``, else its ``raw`` reply's ``usage``.
    """
    if response is None:
        return Usage()
    message = getattr(response, "message", None)  # a chat reply made from a completion
    for kwargs in (getattr(response, "additional_kwargs", None),
                   getattr(message, "additional_kwargs", None)):
        usage = read_usage(kwargs or {})
        if usage.total_tokens:
            return usage
    raw = getattr(response, "raw", None)
    found = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    return read_usage(found) if found is not None else Usage()


# -- the adapters ----------------------------------------------------------------------------

def node_contexts(nodes: Sequence[NodeWithScore]) -> list[Context]:
    """Source nodes as contexts, best first (their order)."""
    return [make_context(rank, id=hit.node.node_id, text=hit.node.get_content(),
                         score=hit.score, metadata=hit.node.metadata)
            for rank, hit in enumerate(nodes, start=1)]


def chat_history(history: Sequence[Any] | None) -> list[ChatMessage]:
    """Prior turns as LlamaIndex chat messages."""
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"])
            for m in as_messages(history)]


def response_text(response: Any) -> str:
    """The text of a Response, a StreamingResponse or an AgentChatResponse."""
    text = getattr(response, "response", None)
    if isinstance(text, str):
        return text
    if getattr(response, "response_gen", None) is not None:  # a streamed reply: read it whole
        return "".join(str(token) for token in response.response_gen)
    return "" if text is None else str(text)


class LlamaIndexSystem:
    """A query or chat engine answering ``answer(question, history=None)``."""

    def __init__(self, engine: Any, *, top_k: int | None = None) -> None:
        self.engine = engine
        self.is_chat = callable(getattr(engine, "chat", None))
        if not self.is_chat and not callable(getattr(engine, "query", None)):
            raise TypeError(f"{type(engine).__name__} is neither a LlamaIndex query engine "
                            "(query) nor a chat engine (chat)")
        if top_k is not None:
            self.top_k = top_k
        self._lock = threading.Lock()  # a chat engine's memory serves one conversation
        self._history_dropped = HistoryDropped(
            f"the LlamaIndex query engine {type(engine).__name__} takes no conversation "
            "history: the prior turns of conversational cases are not passed to it (use a "
            "chat engine for them)")

    def describe(self) -> str:
        """One line for the report."""
        return f"LlamaIndex {type(self.engine).__name__} (pytest_ragbench.adapters.llama_index)"

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Ask the engine once."""
        with _recording() as usages:
            started = time.perf_counter()
            if self.is_chat:
                with self._lock:
                    response = self.engine.chat(question, chat_history=chat_history(history))
            else:
                self._history_dropped(history)
                response = self.engine.query(question)
            text = response_text(response)
            latency = time.perf_counter() - started
        return self._answer(response, text, latency, usages)

    def _answer(self, response: Any, text: str, latency: float, usages: _Usages) -> Answer:
        nodes = list(getattr(response, "source_nodes", None) or ())
        return Answer(text, tuple(node_contexts(nodes)), latency_s=latency, usage=usages.total)

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Ask a query engine asynchronously (``aquery``); a chat engine in a worker thread."""
        if self.is_chat:
            return await asyncio.to_thread(self.answer, question, history)
        self._history_dropped(history)
        with _recording() as usages:
            started = time.perf_counter()
            response = await self.engine.aquery(question)
            text = response_text(response)
            latency = time.perf_counter() - started
        return self._answer(response, text, latency, usages)


class LlamaIndexRetriever:
    """``retrieve(query, top_k)`` through a LlamaIndex retriever."""

    def __init__(self, llama_retriever: Any) -> None:
        self.retriever = llama_retriever

    def describe(self) -> str:
        """One line for the report."""
        return (f"LlamaIndex {type(self.retriever).__name__} "
                "(pytest_ragbench.adapters.llama_index)")

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """The retriever's nodes for ``query``, at most ``top_k``."""
        contexts = node_contexts(self.retriever.retrieve(query)[:top_k])
        return contexts if min_score is None else [c for c in contexts if c.score >= min_score]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """:meth:`retrieve` for each query."""
        return [self.retrieve(query, top_k, filters, min_score) for query in queries]


class LlamaIndexGenerator:
    """``generate(messages, *, schema=None, **params)`` through a LlamaIndex LLM's ``chat``."""

    def __init__(self, llm: Any, forward: tuple[str, ...] = ()) -> None:
        self.llm = llm
        self.forward = forward
        metadata = getattr(llm, "metadata", None)
        self.model_id = str(getattr(metadata, "model_name", None) or getattr(llm, "model", None)
                            or type(llm).__name__)

    def describe(self) -> str:
        """One line for the report."""
        return f"LlamaIndex {type(self.llm).__name__} {self.model_id}"

    def _chat(self, messages: Sequence[Mapping[str, Any]],
              schema: Mapping[str, Any] | None) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole(m["role"]), content=m["content"])
                for m in schema_messages(messages, schema)]

    def generate(self, messages: Sequence[Mapping[str, Any]], *,
                 schema: Mapping[str, Any] | None = None, parse_reply: Any = None,
                 **params: Any) -> Generation:
        """One ``chat`` call; ``schema`` asks for a JSON object, parsed into ``data``."""
        with _recording() as usages:
            started = time.perf_counter()
            reply = self.llm.chat(self._chat(messages, schema),
                                  **model_params(params, self.forward))
            latency = time.perf_counter() - started
        return self._generation(reply, latency, usages, schema, parse_reply)

    async def agenerate(self, messages: Sequence[Mapping[str, Any]], *,
                        schema: Mapping[str, Any] | None = None, parse_reply: Any = None,
                        **params: Any) -> Generation:
        """:meth:`generate`, asynchronously (``achat``)."""
        with _recording() as usages:
            started = time.perf_counter()
            reply = await self.llm.achat(self._chat(messages, schema),
                                         **model_params(params, self.forward))
            latency = time.perf_counter() - started
        return self._generation(reply, latency, usages, schema, parse_reply)

    def _generation(self, reply: Any, latency: float, usages: _Usages,
                    schema: Mapping[str, Any] | None, parse_reply: Any) -> Generation:
        usage = usages.total if usages.total.total_tokens else response_usage(reply)
        generation = Generation(text=str(reply.message.content or ""), model=self.model_id,
                                usage=usage, latency_s=latency)
        return finish_generation(generation, who=f"LlamaIndex model {self.model_id}",
                                 schema=schema, parse_reply=parse_reply)
