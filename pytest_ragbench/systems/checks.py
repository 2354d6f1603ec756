"""Setup-time checks that a fixture's object fits the protocol the plugin calls it through.

An overridden ``ragbench_retriever`` whose ``retrieve`` takes ``k`` where the plugin passes
``top_k`` would otherwise fail every item with a traceback from deep inside the plugin.
Instead the first item that sets the object up fails with one message naming the fixture,
the method, the expected signature and the protocol, and the session stops there
(``session.shouldfail``, as ``-x`` does; under xdist each worker stops after one item).

Each method is checked by binding the arguments the plugin passes to its signature
(:func:`inspect.Signature.bind`), so ``retrieve(self, query, top_k=5, **kw)`` fits and
``retrieve(self, query, k)`` does not. Objects whose signature cannot be read (C
extensions) are not checked. Cheap to import.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_ragbench.errors import RagbenchError


@dataclass(frozen=True)
class Method:
    """One method of a protocol: how it is shown, and the arguments the plugin passes."""

    name: str
    shown: str  # the expected signature, as in the README
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    required: bool = True


@dataclass(frozen=True)
class Spec:
    """A protocol of :mod:`pytest_ragbench.protocols` and the methods the plugin calls."""

    protocol: str
    methods: tuple[Method, ...]


_MESSAGES = [{"role": "user", "content": "?"}]
SPECS: dict[str, Spec] = {
    "ragbench_system": Spec("System", (
        Method("answer", "answer(question, history=None)", ("q", None)),
        Method("answer_from", "answer_from(question, contexts, history=None)", ("q", []),
               required=False),
        Method("aanswer", "async aanswer(question, history=None)", ("q", None), required=False),
        Method("prepare", "prepare(questions)", (["q"],), required=False),
    )),
    "ragbench_retriever": Spec("Retriever", (
        Method("retrieve", "retrieve(query, top_k)", ("q",), (("top_k", 5),)),
        Method("retrieve_many", "retrieve_many(queries, top_k)", (["q"],), (("top_k", 5),)),
        Method("index", "index(documents)", ([],), required=False),
    )),
    "ragbench_embedder": Spec("Embedder", (Method("embed", "embed(texts)", (["t"],)),)),
    "ragbench_llm": Spec("Generator", (
        Method("generate", "generate(messages, **params)", (_MESSAGES,),
               (("temperature", 0.0), ("max_tokens", 16))),
        Method("agenerate", "async agenerate(messages, **params)", (_MESSAGES,),
               (("temperature", 0.0), ("max_tokens", 16)), required=False),
    )),
    "ragbench_judge": Spec("Judge", (
        Method("generate", "generate(messages, *, schema=None, **params)", (_MESSAGES,),
               (("schema", None), ("temperature", 0.0), ("max_tokens", 16))),
        Method("agenerate", "async agenerate(messages, *, schema=None, **params)", (_MESSAGES,),
               (("schema", None), ("temperature", 0.0), ("max_tokens", 16)), required=False),
    )),
    "ragbench_memory": Spec("MemoryStore", (
        Method("add_interaction", "add_interaction(role, content, metadata=None)",
               ("user", "text", {})),
        Method("search_memories", "search_memories(query, top_k=5, filter_metadata=None, "
               "min_score=None, recency_weight=0.0)", ("q",),
               (("top_k", 5), ("filter_metadata", None), ("min_score", None),
                ("recency_weight", 0.0))),
        Method("clear", "clear()"),
    )),
}
# Fixtures whose value may be None (``ragbench_judge`` without a judge configured).
MAY_BE_NONE = frozenset({"ragbench_judge"})


class ProtocolMismatch(RagbenchError):
    """A fixture's object lacks a method of its protocol or does not take its arguments."""


def problems(fixture: str, value: Any) -> list[str]:
    """What keeps ``value`` (the object of ``fixture``) from fitting its protocol."""
    spec = SPECS.get(fixture)
    if spec is None or (value is None and fixture in MAY_BE_NONE):
        return []
    owner = type(value).__name__
    found = []
    for method in spec.methods:
        function = getattr(value, method.name, None)
        if function is None:
            if method.required:
                found.append(f"{owner} has no method {method.name}: expected "
                             f"{method.shown}")
            continue
        if not callable(function):
            found.append(f"{owner}.{method.name} is not callable: expected {method.shown}")
            continue
        why = _binding_problem(function, method)
        if why is not None:
            found.append(f"{owner}.{method.name}{why[0]} does not accept the arguments the "
                         f"plugin passes ({why[1]}): expected {method.shown}")
    return found


def _binding_problem(function: Any, method: Method) -> tuple[str, str] | None:
    """``(its signature, the error)`` when the plugin's arguments do not bind, else None."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or C extension: nothing to read
        return None
    try:  # unexpected arguments first (``top_k``), then missing ones
        signature.bind_partial(*method.args, **dict(method.kwargs))
        signature.bind(*method.args, **dict(method.kwargs))
    except TypeError as exc:
        return str(signature), str(exc)
    return None


def message(fixture: str, found: list[str]) -> str:
    """One message naming the fixture, each problem and the protocol."""
    spec = SPECS[fixture]
    lines = [f"{fixture} does not fit the protocol pytest_ragbench.protocols.{spec.protocol} "
             "(README: \"Interfaces\"):"]
    lines += [f"  {problem}" for problem in found]
    return "\n".join(lines)


_CHECKED = pytest.StashKey[dict[tuple[str, type], str | None]]()


def require(request: pytest.FixtureRequest | None, fixture: str, value: Any) -> None:
    """Fail (once, stopping the session) when ``value`` does not fit ``fixture``'s protocol.

    Each class is checked once per fixture and session (``ragbench_memory`` is made
    afresh for every item); without a request (outside pytest) a mismatch raises
    :class:`ProtocolMismatch`.
    """
    checked: dict[tuple[str, type], str | None] = {} if request is None else \
        request.config.stash.setdefault(_CHECKED, {})
    key = (fixture, type(value))
    if key not in checked:
        found = problems(fixture, value)
        checked[key] = message(fixture, found) if found else None
    text = checked[key]
    if text is None:
        return
    if request is None:
        raise ProtocolMismatch(text)
    request.session.shouldfail = f"ragbench: {fixture} does not fit its protocol"
    pytest.fail(text, pytrace=False)
