"""LangChain apps as the plugin's System, Retriever, Generator and Judge (needs langchain-core).

In conftest.py::

    from pytest_ragbench.adapters import langchain

    @pytest.fixture(scope="session")
    def ragbench_system():
        return langchain.system(rag_chain)

:func:`system` takes any Runnable (an LCEL chain, a legacy chain). It is called with the
question as a string, or, when its input is a mapping, as ``{input_key: question,
history_key: [messages]}`` (found in the chain's input schema: ``input``, ``question`` or
``query``; ``chat_history``, ``history`` or ``messages``). The answer is the output itself
(a string or a message) or the output's ``answer_key`` (``answer``, ``result``, ``output``,
``text``, ``response``); the contexts are the output's ``context_key`` documents
(``context``, ``source_documents``, ``documents``, ``docs``), else the documents the chain's
retrievers returned, read from LangChain's callbacks, which also give the token usage of
every chat model call and the chain's latency.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.outputs import LLMResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langchain_core.vectorstores import VectorStoreRetriever

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

INPUT_KEYS = ("input", "question", "query")
HISTORY_KEYS = ("chat_history", "history", "messages")
ANSWER_KEYS = ("answer", "result", "output", "text", "response")
CONTEXT_KEYS = ("context", "source_documents", "documents", "docs")


def system(runnable: Runnable[Any, Any], *, input_key: str | None = None,
           history_key: str | None = None, answer_key: str | None = None,
           context_key: str | None = None, top_k: int | None = None) -> LangChainSystem:
    """A Runnable (a chain) as the system under test; the keys are found when not given."""
    return LangChainSystem(runnable, input_key=input_key, history_key=history_key,
                           answer_key=answer_key, context_key=context_key, top_k=top_k)


def retriever(langchain_retriever: BaseRetriever) -> LangChainRetriever:
    """A LangChain retriever as the plugin's Retriever (``ragbench_retriever``)."""
    return LangChainRetriever(langchain_retriever)


def generator(chat_model: Any, *, params: Sequence[str] = ()) -> LangChainGenerator:
    """A LangChain chat model as the plugin's Generator and Judge.

    ``params`` names the plugin's per-call parameters (``temperature``, ``max_tokens``,
    ``seed``) passed on as keyword arguments of the model call, for models that take them
    (ChatOpenAI does); by default the model's own settings apply.
    """
    return LangChainGenerator(chat_model, check_forward(params))


class _Recorder(BaseCallbackHandler):
    """What one run reported through LangChain's callbacks: retrieved documents, usage, time."""

    run_inline = True  # called in the run's own thread, in order

    def __init__(self) -> None:
        self.documents: list[list[Document]] = []
        self.usage = Usage()
        self.started: float | None = None
        self.ended: float | None = None
        self._root: uuid.UUID | None = None
        self._retrievers: set[uuid.UUID] = set()
        self._nested: set[uuid.UUID] = set()

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: uuid.UUID,
                       parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        if parent_run_id is None and self._root is None:
            self._root, self.started = run_id, time.perf_counter()

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        if run_id == self._root:
            self.ended = time.perf_counter()

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: uuid.UUID,
                           parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        if parent_run_id in self._retrievers:  # inside another retriever (an ensemble's part)
            self._nested.add(run_id)
        self._retrievers.add(run_id)

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: uuid.UUID,
                         **kwargs: Any) -> None:
        if run_id not in self._nested:
            self.documents.append(list(documents))

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.usage += llm_usage(response)

    def latency(self, fallback: float) -> float:
        """The root chain's time as the callbacks saw it, else ``fallback``."""
        if self.started is not None and self.ended is not None:
            return self.ended - self.started
        return fallback


def llm_usage(response: LLMResult) -> Usage:
    """Token usage of one model call: each message's ``usage_metadata``, else ``llm_output``."""
    usage = Usage()
    found = False
    for generations in response.generations:
        for generation in generations:
            metadata = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if metadata:
                usage += read_usage(metadata)
                found = True
    if not found and isinstance(response.llm_output, Mapping):
        usage = read_usage(response.llm_output.get("token_usage")
                           or response.llm_output.get("usage"))
    return usage


def message_text(message: Any) -> str:
    """The text of a message or a content value (a string, or a list of content blocks)."""
    content = message.content if isinstance(message, BaseMessage) else message
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else str(part.get("text", ""))
                       for part in content
                       if isinstance(part, str) or (isinstance(part, Mapping)
                                                    and part.get("type", "text") == "text"))
    return str(content)


def document_contexts(documents: Sequence[Document]) -> list[Context]:
    """LangChain documents as contexts, best first (their order)."""
    return [make_context(rank, id=doc.id, text=doc.page_content, score=None,
                         metadata=doc.metadata)
            for rank, doc in enumerate(documents, start=1)]


def _is_documents(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(d, Document) for d in value)


def _input_keys(runnable: Runnable[Any, Any]) -> tuple[str | None, str | None]:
    """The question's and the history's keys read from the input schema (None: a string)."""
    try:
        schema = runnable.get_input_jsonschema()
    except Exception:  # a runnable whose schema cannot be built: take a string
        return None, None
    properties = schema.get("properties") or {}
    if schema.get("type") != "object" or not properties:
        return None, None
    question = next((k for k in INPUT_KEYS if k in properties), None)
    if question is None:
        required = [k for k in schema.get("required", ()) if k in properties]
        question = required[0] if len(required) == 1 else None
    history = next((k for k in HISTORY_KEYS if k in properties), None)
    return question, history


class LangChainSystem:
    """A Runnable answering ``answer(question, history=None)``; see the module's docstring."""

    def __init__(self, runnable: Runnable[Any, Any], *, input_key: str | None = None,
                 history_key: str | None = None, answer_key: str | None = None,
                 context_key: str | None = None, top_k: int | None = None) -> None:
        self.runnable = runnable
        found_input, found_history = _input_keys(runnable)
        self.input_key = input_key or found_input
        self.history_key = history_key or found_history or "chat_history"
        self.answer_key, self.context_key = answer_key, context_key
        if top_k is not None:
            self.top_k = top_k
        self._history_unused: HistoryDropped | None = None
        if self.input_key is None:
            self._history_unused = HistoryDropped(
                f"the LangChain app {self._name()} takes a string: the prior turns of "
                "conversational cases are not passed to it (give input_key= and history_key= "
                "if it takes a mapping)")
        elif history_key is None and found_history is None:
            self._history_unused = HistoryDropped(
                f"the LangChain app {self._name()} names no history in its input schema: the "
                f"prior turns of conversational cases are passed as {self.history_key!r}, "
                "which it may ignore (give history_key=)")

    def _name(self) -> str:
        try:
            return str(self.runnable.get_name())
        except Exception:  # a runnable without a name
            return type(self.runnable).__name__

    def describe(self) -> str:
        """One line for the report."""
        return f"LangChain {self._name()} (pytest_ragbench.adapters.langchain)"

    def chain_input(self, question: str, history: Sequence[Any] | None) -> Any:
        """What the runnable is called with."""
        if self._history_unused is not None:
            self._history_unused(history)
        if self.input_key is None:
            return question
        return {self.input_key: question,
                self.history_key: convert_to_messages(as_messages(history))}

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Invoke the runnable once."""
        recorder = _Recorder()
        started = time.perf_counter()
        output = self.runnable.invoke(self.chain_input(question, history),
                                      config={"callbacks": [recorder]})
        return self._answer(output, recorder, time.perf_counter() - started)

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Invoke the runnable once, asynchronously (``ainvoke``)."""
        recorder = _Recorder()
        started = time.perf_counter()
        output = await self.runnable.ainvoke(self.chain_input(question, history),
                                             config={"callbacks": [recorder]})
        return self._answer(output, recorder, time.perf_counter() - started)

    def _answer(self, output: Any, recorder: _Recorder, wall: float) -> Answer:
        text, documents = self._read(output)
        if documents is None:
            seen: set[tuple[str | None, str]] = set()
            documents = []
            for run in recorder.documents:
                for doc in run:
                    if (doc.id, doc.page_content) not in seen:
                        seen.add((doc.id, doc.page_content))
                        documents.append(doc)
        return Answer(text, tuple(document_contexts(documents)),
                      latency_s=recorder.latency(wall), usage=recorder.usage)

    def _read(self, output: Any) -> tuple[str, list[Document] | None]:
        """The answer text and, when the output holds them, its documents."""
        if isinstance(output, str | BaseMessage):
            return message_text(output), None
        if not isinstance(output, Mapping):
            raise TypeError(f"the LangChain app {self._name()} returned "
                            f"{type(output).__name__}: expected a string, a message or a "
                            "mapping holding the answer (give answer_key=)")
        wanted = (self.answer_key,) if self.answer_key else ANSWER_KEYS
        answer_key = next((k for k in wanted if k in output), None)
        if answer_key is None:
            raise KeyError(f"the LangChain app {self._name()} returned a mapping with keys "
                           f"{', '.join(map(repr, output))}: no answer among "
                           f"{', '.join(wanted)} (give answer_key=)")
        context_key = self.context_key or next(
            (k for k in CONTEXT_KEYS if _is_documents(output.get(k))), None)
        documents = output.get(context_key) if context_key else None
        if documents is not None and not _is_documents(documents):
            raise TypeError(f"the LangChain app's output {context_key!r} holds "
                            f"{type(documents).__name__}, not a list of Documents")
        return message_text(output[answer_key]), (list(documents)
                                                  if documents is not None else None)


class LangChainRetriever:
    """``retrieve(query, top_k)`` through a LangChain retriever (``invoke``; ``batch``)."""

    def __init__(self, langchain_retriever: BaseRetriever) -> None:
        self.retriever = langchain_retriever

    def describe(self) -> str:
        """One line for the report."""
        return f"LangChain {type(self.retriever).__name__} (pytest_ragbench.adapters.langchain)"

    def _kwargs(self, top_k: int) -> dict[str, Any]:
        # A vector store's retriever merges call keywords into its search_kwargs.
        return {"k": top_k} if isinstance(self.retriever, VectorStoreRetriever) else {}

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """The retriever's documents for ``query``, at most ``top_k``."""
        documents = self.retriever.invoke(query, **self._kwargs(top_k))
        return _kept(document_contexts(documents[:top_k]), min_score)

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """:meth:`retrieve` for each query, run as one ``batch``."""
        results = self.retriever.batch(list(queries), **self._kwargs(top_k))
        return [_kept(document_contexts(documents[:top_k]), min_score) for documents in results]


def _kept(contexts: list[Context], min_score: float | None) -> list[Context]:
    return contexts if min_score is None else [c for c in contexts if c.score >= min_score]


class LangChainGenerator:
    """``generate(messages, *, schema=None, **params)`` through a LangChain chat model."""

    def __init__(self, chat_model: Any, forward: tuple[str, ...] = ()) -> None:
        self.chat_model = chat_model
        self.forward = forward
        self.model_id = str(getattr(chat_model, "model_name", None)
                            or getattr(chat_model, "model", None) or type(chat_model).__name__)

    def describe(self) -> str:
        """One line for the report."""
        return f"LangChain {type(self.chat_model).__name__} {self.model_id}"

    def generate(self, messages: Sequence[Mapping[str, Any]], *,
                 schema: Mapping[str, Any] | None = None, parse_reply: Any = None,
                 **params: Any) -> Generation:
        """One model call; ``schema`` asks for a JSON object, parsed into ``data``."""
        recorder = _Recorder()
        started = time.perf_counter()
        reply = self.chat_model.invoke(convert_to_messages(schema_messages(messages, schema)),
                                       config={"callbacks": [recorder]},
                                       **model_params(params, self.forward))
        return self._generation(reply, recorder, time.perf_counter() - started, schema,
                                parse_reply)

    async def agenerate(self, messages: Sequence[Mapping[str, Any]], *,
                        schema: Mapping[str, Any] | None = None, parse_reply: Any = None,
                        **params: Any) -> Generation:
        """:meth:`generate`, asynchronously (``ainvoke``)."""
        recorder = _Recorder()
        started = time.perf_counter()
        reply = await self.chat_model.ainvoke(
            convert_to_messages(schema_messages(messages, schema)),
            config={"callbacks": [recorder]}, **model_params(params, self.forward))
        return self._generation(reply, recorder, time.perf_counter() - started, schema,
                                parse_reply)

    def _generation(self, reply: Any, recorder: _Recorder, latency: float,
                    schema: Mapping[str, Any] | None, parse_reply: Any) -> Generation:
        generation = Generation(text=message_text(reply), model=self.model_id,
                                usage=recorder.usage, latency_s=latency)
        return finish_generation(generation, who=f"LangChain model {self.model_id}",
                                 schema=schema, parse_reply=parse_reply)
