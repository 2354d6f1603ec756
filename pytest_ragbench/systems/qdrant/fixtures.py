"""How the fixtures use Qdrant (``--ragbench-qdrant-url`` / ``--ragbench-qdrant-path``).

With either flag, ``ragbench_retriever`` and the BEIR retriever are Qdrant's hybrid
retriever (fusion in the engine) and ``ragbench_memory`` keeps its memories in Qdrant.
The built-in systems ``qdrant``, ``qdrant_dense`` and ``qdrant_bm25`` use Qdrant with or
without the flags (without them: local mode in memory). One connection per location and
session. A local-mode folder can be opened by one process at a time, so under
pytest-xdist each worker keeps its collections in a subfolder named after it.

A retriever whose collection cannot be reached or used does not fail the fixture: it is
returned as :class:`Unavailable`, which raises the same :class:`QdrantError` for every
item that retrieves (each item then fails with the message, no traceback of the
fixture) and tries again for another corpus.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig, get_config
from pytest_ragbench.run.progress import progress_bar
from pytest_ragbench.systems.protocols import Context, Document
from pytest_ragbench.systems.qdrant.connection import (
    QDRANT_EXTRA_HINT,
    QdrantConnection,
    QdrantError,
    QdrantLocation,
)

MODES = {"qdrant": "hybrid", "qdrant_dense": "dense", "qdrant_bm25": "bm25"}
_CONNECTIONS = pytest.StashKey[dict[QdrantLocation, QdrantConnection]]()


def configured(settings: RagbenchConfig) -> bool:
    """True when the session was pointed at Qdrant."""
    return bool(settings.qdrant_url or settings.qdrant_path)


def location(config: pytest.Config) -> QdrantLocation:
    """The session's Qdrant location (local mode in memory when none was given)."""
    settings = get_config(config)
    timeout_s, retries = settings.timeout_s, settings.retries
    if settings.qdrant_url:
        return QdrantLocation(url=settings.qdrant_url, timeout_s=timeout_s, retries=retries)
    path = settings.qdrant_path or ":memory:"
    worker = getattr(config, "workerinput", {}).get("workerid")
    if path != ":memory:" and worker:
        path = str(Path(path) / worker)
    return QdrantLocation(path=path, timeout_s=timeout_s, retries=retries)


def connection(config: pytest.Config) -> QdrantConnection:
    """The session's connection to its Qdrant location, closed when the session ends."""
    if importlib.util.find_spec("qdrant_client") is None:
        pytest.skip(f"qdrant-client is not installed: {QDRANT_EXTRA_HINT}")
    where = location(config)
    if where.path and where.path != ":memory:":
        Path(where.path).mkdir(parents=True, exist_ok=True)
    connections = config.stash.setdefault(_CONNECTIONS, {})
    if where not in connections:
        connections[where] = QdrantConnection(where)
        config.add_cleanup(connections[where].close)
    return connections[where]


def qdrant_retriever(request: pytest.FixtureRequest, documents: Sequence[Document],
                     mode: str = "hybrid") -> Any:
    """A Qdrant retriever of ``mode`` indexed on ``documents`` (or :class:`Unavailable`)."""
    # lazy: loads numpy
    from pytest_ragbench.systems.qdrant.retriever import QdrantRetriever

    config = request.config
    conn = connection(config)
    embedder = request.getfixturevalue("ragbench_embedder")
    cache = request.getfixturevalue("ragbench_cache")
    retriever = QdrantRetriever(
        embedder, conn, mode=mode, collection=get_config(config).collection,
        lock_dir=cache.index_dir,
        progress=lambda description, total: progress_bar(config, description, total, "doc"))
    try:
        retriever.index(documents)
    except QdrantError as exc:
        return Unavailable(retriever, exc)
    return retriever


def qdrant_memory(request: pytest.FixtureRequest, embedder: Any) -> Any:
    """A fresh memory store in its own Qdrant collection."""
    # lazy: loads numpy
    from pytest_ragbench.systems.qdrant.memory import QdrantMemoryStore

    return QdrantMemoryStore(embedder, connection(request.config))


class Unavailable:
    """A Qdrant retriever whose collection could not be built or used: every call says why."""

    def __init__(self, retriever: Any, error: QdrantError) -> None:
        self.retriever = retriever
        self.error: QdrantError | None = error
        self.documents: list[Document] = []

    def __repr__(self) -> str:
        return f"Unavailable({self.retriever!r})"

    def describe(self) -> str:
        """The retriever that was asked for, and why it is not there."""
        if self.error is None:
            return str(self.retriever.describe())
        return f"{self.retriever.describe()}: unavailable ({self.error})"

    def index(self, documents: Sequence[Document]) -> None:
        """Try again (a server may be back); on success, calls go to the retriever."""
        self.retriever.index(documents)
        self.error, self.documents = None, list(documents)

    def for_corpus(self, documents: Sequence[Document]) -> Any:
        """Another corpus may be fine: try it."""
        return self.retriever.for_corpus(documents)

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """Raise the indexing error."""
        return self.retrieve_many([query], top_k, filters, min_score)[0]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """Raise the indexing error."""
        if self.error is not None:
            raise QdrantError(str(self.error))
        return list(self.retriever.retrieve_many(queries, top_k, filters, min_score))
