"""The default conversational memory store, on the session's embedder.

Imported only when a memory store is first needed (imports numpy).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_ragbench.systems.protocols import Embedder, MemoryHit
from pytest_ragbench.systems.retrievers import matches


@dataclass
class _Entry:
    id: str
    role: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    vector: np.ndarray | None = None


class EmbeddingMemoryStore:
    """Interactions embedded with an :class:`Embedder`, searched by cosine similarity.

    ``metadata`` of every memory includes ``role``, so ``filter_metadata={"role": ...}``
    works. Memories are embedded in one batch at the first search after they are added.
    ``recency_weight`` w blends the similarity s with recency r (1 for the newest
    memory, 0 for the oldest): score = (1 − w)·s + w·r. ``min_score`` is a floor on the
    similarity s, so recency never lets an unrelated memory through.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._entries: list[_Entry] = []
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"EmbeddingMemoryStore({self.embedder.model_id}, {len(self)} memories)"

    def add_interaction(self, role: str, content: str,
                        metadata: Mapping[str, Any] | None = None) -> str:
        """Store one interaction and return its id (unique for the life of the store)."""
        memory_id = f"mem-{next(self._ids)}"
        self._entries.append(_Entry(memory_id, str(role), str(content),
                                    {**dict(metadata or {}), "role": str(role)}))
        return memory_id

    def clear(self) -> None:
        """Forget every memory."""
        self._entries.clear()

    def _embed_pending(self) -> None:
        pending = [e for e in self._entries if e.vector is None]
        if pending:
            vectors = self.embedder.embed([e.content for e in pending])
            for entry, vector in zip(pending, vectors, strict=True):
                entry.vector = vector

    def search_memories(self, query: str, top_k: int = 5,
                        filter_metadata: Mapping[str, Any] | None = None,
                        min_score: float | None = None,
                        recency_weight: float = 0.0) -> list[MemoryHit]:
        """Return up to ``top_k`` memories, best first."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if not 0.0 <= recency_weight <= 1.0:
            raise ValueError("recency_weight must be between 0 and 1")
        if not self._entries:
            return []
        self._embed_pending()
        query_vector = self.embedder.embed([query])[0]
        last = max(len(self._entries) - 1, 1)
        hits = []
        for position, entry in enumerate(self._entries):
            if not matches(entry.metadata, filter_metadata):
                continue
            assert entry.vector is not None
            similarity = float(np.dot(query_vector, entry.vector))
            if min_score is not None and similarity < min_score:
                continue
            recency = position / last if len(self._entries) > 1 else 1.0
            score = (1.0 - recency_weight) * similarity + recency_weight * recency
            hits.append(MemoryHit(id=entry.id, text=entry.content, score=score,
                                  metadata=dict(entry.metadata), role=entry.role,
                                  similarity=similarity))
        hits.sort(key=lambda h: -h.score)
        return hits[:top_k]
