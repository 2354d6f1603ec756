"""The interfaces of a system under test, for type hints and ``isinstance`` checks.

Override a fixture with any object that has these methods (nothing has to inherit):

| fixture | protocol | methods the plugin calls |
|---|---|---|
| ``ragbench_system`` | :class:`System` (:class:`PassageSystem`) | ``answer(question, history=None)``; optional ``answer_from(question, contexts, history=None)`` |
| ``ragbench_retriever`` | :class:`Retriever` | ``retrieve(query, top_k)``, ``retrieve_many(queries, top_k)``; optional ``index(documents)`` |
| ``ragbench_embedder`` | :class:`Embedder` | ``embed(texts)`` |
| ``ragbench_llm`` | :class:`Generator` | ``generate(messages, **params)`` |
| ``ragbench_judge`` | :class:`Judge` | ``generate(messages, *, schema=None, **params)`` |
| ``ragbench_memory`` | :class:`MemoryStore` | ``add_interaction``, ``search_memories``, ``clear`` |

A fixture whose object lacks a method or does not take its arguments fails the session
at setup with one message (:mod:`pytest_ragbench.systems.checks`).
"""  # noqa: E501

from pytest_ragbench.systems.protocols import (
    Answer,
    Context,
    Document,
    Embedder,
    Generation,
    Generator,
    Judge,
    MemoryHit,
    MemoryStore,
    Message,
    PassageSystem,
    Retriever,
    System,
    Usage,
)

__all__ = ["Answer", "Context", "Document", "Embedder", "Generation", "Generator", "Judge",
           "MemoryHit", "MemoryStore", "Message", "PassageSystem", "Retriever", "System",
           "Usage"]
