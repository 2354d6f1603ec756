"""The system under test: protocols, the embedded offline defaults and the model clients.

Importing this package is cheap; each default lives in its own module and pulls in its
heavy libraries (numpy, sentence-transformers, faiss, bm25s, httpx, llama-cpp) only
when it is imported, which the fixtures in :mod:`pytest_ragbench.systems.fixtures` do
on first use. :mod:`.components` (fixtures name the embedder, generator and judge for
the report) and :mod:`pytest_ragbench.run.progress` (progress bars) run in every
process of a session, xdist workers included.
"""

from pytest_ragbench.systems.protocols import (
    Answer,
    AnswerRequest,
    Context,
    Document,
    Embedder,
    Generation,
    Generator,
    Judge,
    MemoryHit,
    MemoryStore,
    PassageSystem,
    Retriever,
    System,
    Usage,
)

__all__ = ["Answer", "AnswerRequest", "Context", "Document", "Embedder", "Generation",
           "Generator", "Judge", "MemoryHit", "MemoryStore", "PassageSystem", "Retriever",
           "System", "Usage"]
