"""A Haystack pipeline as the plugin's System (needs haystack-ai).

In conftest.py::

    from pytest_ragbench.adapters import haystack

    @pytest.fixture(scope="session")
    def ragbench_system():
        return haystack.system(rag_pipeline, answer="llm", documents="retriever")

The question goes to every unconnected input named ``query``, ``question`` or ``text``
(``question=`` names others: ``"socket"`` or ``"component.socket"``), the prior turns to
every unconnected input named ``history`` or ``chat_history`` (``history=``) as Haystack
``ChatMessage`` objects. The answer is read from the ``answer`` component's ``answers``
(an AnswerBuilder's) or ``replies`` (a generator's); the contexts are the ``documents``
component's documents, else the documents of the answer an AnswerBuilder made. Left out,
each name is found when one component alone fits. Token usage is read from the ``usage``
that generators put in their replies' ``meta``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

from haystack.dataclasses import ChatMessage

from pytest_ragbench.adapters.common import make_context, read_usage
from pytest_ragbench.systems.protocols import Answer, Context, Usage, as_messages

QUESTION_INPUTS = ("query", "question", "text")
HISTORY_INPUTS = ("history", "chat_history")
ANSWER_OUTPUTS = ("answers", "replies")


def system(pipeline: Any, *, answer: str | None = None, documents: str | None = None,
           question: str | Sequence[str] | None = None,
           history: str | Sequence[str] | None = None,
           top_k: int | None = None) -> HaystackSystem:
    """A Haystack 2 ``Pipeline`` as the system under test; see the module's docstring."""
    return HaystackSystem(pipeline, answer=answer, documents=documents, question=question,
                          history=history, top_k=top_k)


def document_contexts(documents: Sequence[Any]) -> list[Context]:
    """Haystack documents as contexts, best first (their order)."""
    return [make_context(rank, id=doc.id, text=doc.content, score=doc.score, metadata=doc.meta)
            for rank, doc in enumerate(documents, start=1)]


def _sockets(inputs: Mapping[str, Mapping[str, Any]], wanted: str | Sequence[str] | None,
             defaults: Sequence[str]) -> list[tuple[str, str]]:
    """The ``(component, socket)`` pairs of the open inputs named by ``wanted``."""
    names = [wanted] if isinstance(wanted, str) else list(wanted or defaults)
    found = []
    for component, sockets in inputs.items():
        for socket in sockets:
            if socket in names or f"{component}.{socket}" in names:
                found.append((component, socket))
    return found


def _outputs(pipeline: Any) -> dict[str, set[str]]:
    return {name: set(sockets) for name, sockets in
            pipeline.outputs(include_components_with_connected_outputs=True).items()}


class HaystackSystem:
    """A pipeline answering ``answer(question, history=None)``."""

    def __init__(self, pipeline: Any, *, answer: str | None = None,
                 documents: str | None = None, question: str | Sequence[str] | None = None,
                 history: str | Sequence[str] | None = None, top_k: int | None = None) -> None:
        self.pipeline = pipeline
        inputs = pipeline.inputs()
        self.question_inputs = _sockets(inputs, question, QUESTION_INPUTS)
        if not self.question_inputs:
            open_inputs = ", ".join(f"{c}.{s}" for c, sockets in inputs.items() for s in sockets)
            raise ValueError(f"the Haystack pipeline has no open input named "
                             f"{question or ' or '.join(QUESTION_INPUTS)} for the question "
                             f"(open inputs: {open_inputs or 'none'}); give question=")
        self.history_inputs = _sockets(inputs, history, HISTORY_INPUTS)
        if history is not None and not self.history_inputs:
            raise ValueError(f"the Haystack pipeline has no open input {history!r} for the "
                             "history")
        self._history_types = {pair: inputs[pair[0]][pair[1]].get("type")
                               for pair in self.history_inputs}
        outputs = _outputs(pipeline)
        self.answer_component = self._component(outputs, answer, ANSWER_OUTPUTS, "answer")
        self.documents_component = self._documents_component(outputs, documents)
        self.generators = {name for name, sockets in outputs.items()
                           if "replies" in sockets or "meta" in sockets}
        if top_k is not None:
            self.top_k = top_k

    @staticmethod
    def _component(outputs: Mapping[str, set[str]], name: str | None, sockets: Sequence[str],
                   role: str) -> str:
        if name is not None:
            if name not in outputs:
                raise ValueError(f"the Haystack pipeline has no component {name!r} "
                                 f"(components: {', '.join(outputs)})")
            return name
        for socket in sockets:  # AnswerBuilder's answers before a generator's replies
            candidates = [c for c, found in outputs.items() if socket in found]
            if len(candidates) == 1:
                return candidates[0]
            if candidates:
                raise ValueError(f"several components of the Haystack pipeline give "
                                 f"{socket!r} ({', '.join(candidates)}): give {role}=")
        raise ValueError(f"no component of the Haystack pipeline gives "
                         f"{' or '.join(map(repr, sockets))}: give {role}=")

    def _documents_component(self, outputs: Mapping[str, set[str]],
                             name: str | None) -> str | None:
        if name is not None:
            return self._component(outputs, name, ("documents",), "documents")
        if "answers" in outputs[self.answer_component]:
            return None  # the answer's own documents
        return self._component(outputs, None, ("documents",), "documents")

    def describe(self) -> str:
        """One line for the report."""
        return (f"Haystack pipeline (answer: {self.answer_component}, documents: "
                f"{self.documents_component or self.answer_component})")

    def run_data(self, question: str, history: Sequence[Any] | None) -> dict[str, Any]:
        """The pipeline's input: the question and the prior turns on their sockets."""
        data: dict[str, dict[str, Any]] = {}
        for component, socket in self.question_inputs:
            data.setdefault(component, {})[socket] = question
        for pair in self.history_inputs:
            data.setdefault(pair[0], {})[pair[1]] = self._history(history, pair)
        return data

    def _history(self, history: Sequence[Any] | None, pair: tuple[str, str]) -> Any:
        messages = as_messages(history)
        if self._history_types.get(pair) is str:
            return "\n".join(f"{m['role']}: {m['content']}" for m in messages)
        return [ChatMessage.from_assistant(m["content"]) if m["role"] == "assistant"
                else ChatMessage.from_system(m["content"]) if m["role"] == "system"
                else ChatMessage.from_user(m["content"]) for m in messages]

    def _included(self) -> set[str]:
        names = {self.answer_component, *self.generators}
        if self.documents_component is not None:
            names.add(self.documents_component)
        return names

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Run the pipeline once."""
        started = time.perf_counter()
        outputs = self.pipeline.run(self.run_data(question, history),
                                    include_outputs_from=self._included())
        return self._answer(outputs, time.perf_counter() - started)

    async def aanswer(self, question: str, history: Sequence[Any] | None = None) -> Answer:
        """Run the pipeline once with ``run_async`` (when it has it: Haystack's async pipeline)."""
        run_async = getattr(self.pipeline, "run_async", None)
        if not inspect.iscoroutinefunction(run_async):
            return await asyncio.to_thread(self.answer, question, history)
        started = time.perf_counter()
        outputs = await run_async(self.run_data(question, history),
                                  include_outputs_from=self._included())
        return self._answer(outputs, time.perf_counter() - started)

    def _answer(self, outputs: Mapping[str, Any], latency: float) -> Answer:
        produced = outputs.get(self.answer_component) or {}
        text, documents = _answer_text(produced)
        if self.documents_component is not None:
            documents = list((outputs.get(self.documents_component) or {}).get("documents")
                             or ())
        usage = sum((_usage(outputs.get(name) or {}) for name in sorted(self.generators)),
                    Usage())
        return Answer(text, tuple(document_contexts(documents)), latency_s=latency,
                      usage=usage)


def _answer_text(produced: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The first answer's text, and its documents (an AnswerBuilder's answers have them)."""
    answers = produced.get("answers")
    if answers:
        return str(answers[0].data or ""), list(getattr(answers[0], "documents", None) or ())
    replies = produced.get("replies")
    if replies:
        first = replies[0]
        return str(first.text if isinstance(first, ChatMessage) else first or ""), []
    return "", []


def _usage(produced: Mapping[str, Any]) -> Usage:
    """The usage a generator reported: in its replies' ``meta`` or its own ``meta`` list."""
    usage = Usage()
    for reply in produced.get("replies") or ():
        if isinstance(reply, ChatMessage):
            usage += read_usage(reply.meta.get("usage"))
    if not usage.total_tokens:
        for meta in produced.get("meta") or ():
            if isinstance(meta, Mapping):
                usage += read_usage(meta.get("usage"))
    return usage
