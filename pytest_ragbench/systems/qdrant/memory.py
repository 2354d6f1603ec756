"""Conversational memory in a Qdrant collection, ``filter_metadata`` as a payload filter.

Behaves like :class:`~pytest_ragbench.systems.memory.EmbeddingMemoryStore`: every memory's
metadata includes ``role``; memories are embedded and uploaded in one batch at the first
search after they are added; ``min_score`` is a floor on the cosine similarity (Qdrant's
``score_threshold``); ``recency_weight`` w blends similarity s with recency r (1 for the
newest memory, 0 for the oldest) as (1 − w)·s + w·r. Each store has its own collection,
created at the first search and deleted by :meth:`clear` and :meth:`close`.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from pytest_ragbench.systems.protocols import Embedder, MemoryHit, _json_safe
from pytest_ragbench.systems.qdrant.collection import DENSE
from pytest_ragbench.systems.qdrant.connection import QdrantConnection
from pytest_ragbench.systems.qdrant.retriever import payload_filter


class QdrantMemoryStore:
    """Memories as points of a private Qdrant collection."""

    def __init__(self, embedder: Embedder, connection: QdrantConnection, *,
                 prefix: str = "ragbench_memory") -> None:
        self.embedder, self.connection = embedder, connection
        self.collection = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self._entries: list[tuple[str, str, str, dict[str, Any]]] = []  # id, role, text, meta
        self._uploaded = 0
        self._created = False
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"QdrantMemoryStore({self.embedder.model_id}, "
                f"{self.connection.location.describe()}, {len(self)} memories)")

    def describe(self) -> str:
        """One line naming the store."""
        return f"Qdrant memory store at {self.connection.location.describe()}"

    def add_interaction(self, role: str, content: str,
                        metadata: Mapping[str, Any] | None = None) -> str:
        """Store one interaction and return its id (unique for the life of the store)."""
        memory_id = f"mem-{next(self._ids)}"
        meta = {**dict(_json_safe(dict(metadata or {}))), "role": str(role)}
        self._entries.append((memory_id, str(role), str(content), meta))
        return memory_id

    def clear(self) -> None:
        """Forget every memory (the collection is dropped)."""
        self._drop()
        self._entries.clear()
        self._uploaded = 0

    def close(self) -> None:
        """Drop the collection."""
        self._drop()

    def _drop(self) -> None:
        if self._created:
            name = self.collection
            self.connection.call(f"deleting collection {name!r}",
                                 lambda c: c.delete_collection(name))
            self._created = False

    def _upload_pending(self) -> None:
        from qdrant_client import models

        pending = self._entries[self._uploaded:]
        if not pending:
            return
        name = self.collection
        if not self._created:  # ask Qdrant before embedding: a dead server costs nothing
            self.connection.call(f"checking collection {name!r}",
                                 lambda c: c.collection_exists(name))
        vectors = self.embedder.embed([text for _, _, text, _ in pending])
        if not self._created:
            size = int(vectors.shape[1])
            self.connection.call(f"creating collection {name!r}", lambda c: c.create_collection(
                name, vectors_config={DENSE: models.VectorParams(
                    size=size, distance=models.Distance.COSINE)}))
            self._created = True
        points = [models.PointStruct(id=self._uploaded + offset, vector={DENSE: vector.tolist()},
                                     payload={"memory_id": memory_id, "role": role,
                                              "text": text, "metadata": meta,
                                              "position": self._uploaded + offset})
                  for offset, ((memory_id, role, text, meta), vector)
                  in enumerate(zip(pending, vectors, strict=True))]
        self.connection.call(f"uploading {len(points)} memories to {name!r}",
                             lambda c: c.upsert(name, points=points, wait=True))
        self._uploaded = len(self._entries)

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
        self._upload_pending()
        vector = self.embedder.embed([query])[0].tolist()
        # Recency can lift any memory above a more similar one: rank them all then.
        limit = len(self._entries) if recency_weight else top_k
        name, flt = self.collection, payload_filter(filter_metadata)
        response = self.connection.call(
            f"searching collection {name!r}",
            lambda c: c.query_points(name, query=vector, using=DENSE, limit=limit,
                                     query_filter=flt, score_threshold=min_score,
                                     with_payload=True))
        last = max(len(self._entries) - 1, 1)
        hits = []
        for point in response.points:
            payload = point.payload or {}
            similarity = float(point.score)
            recency = int(payload["position"]) / last if len(self._entries) > 1 else 1.0
            score = (1.0 - recency_weight) * similarity + recency_weight * recency
            hits.append(MemoryHit(id=str(payload["memory_id"]), text=str(payload["text"]),
                                  score=score, metadata=dict(payload.get("metadata") or {}),
                                  role=str(payload.get("role", "")), similarity=similarity))
        hits.sort(key=lambda h: -h.score)
        return hits[:top_k]
