"""A corpus in a Qdrant collection: build it if missing, reuse it when it matches, else refuse.

The collection has a named dense vector (``dense``: the embedder's dimension, cosine) and
a named sparse vector (``bm25``: BM25 term weights, IDF applied by the engine), one point
per document (point id = the document's position) with the payload ``doc_id``, ``text``,
``source``, ``title`` and ``metadata``. Its collection metadata holds a manifest under
``ragbench``: schema version, corpus fingerprint, document count, embedder, sparse
settings and a ``status``. A build writes ``incomplete`` first, uploads in batches and
writes ``complete`` last, so a run killed during the upload leaves a collection the next
run recognises and rebuilds. A complete collection is reused only when its schema,
fingerprint and point count all match; any difference is a :class:`QdrantError` naming
it. A collection without a manifest (built by another tool) is reused when its schema
and point count match the corpus.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.systems.protocols import Document, _json_safe
from pytest_ragbench.systems.qdrant.connection import QdrantConnection, QdrantError

DENSE = "dense"
SPARSE = "bm25"
SCHEMA_VERSION = 1
MANIFEST_KEY = "ragbench"
Progress = Callable[[int], None]  # called with the number of documents just uploaded
Upload = Callable[[], tuple[int, int]]  # fills a new collection: (documents, batches)


@dataclass(frozen=True)
class Expected:
    """What the collection of one corpus must look like."""

    name: str
    fingerprint: str
    documents: int
    embedder: str
    sparse: dict[str, Any]
    dimension: int = 0

    def manifest(self, status: str) -> dict[str, Any]:
        """The manifest written into the collection's metadata."""
        return {"schema": SCHEMA_VERSION, "status": status, "fingerprint": self.fingerprint,
                "documents": self.documents, "embedder": self.embedder,
                "dimension": self.dimension, "sparse": self.sparse}


@dataclass(frozen=True)
class Ensured:
    """What :func:`ensure_collection` did: ``built``, ``rebuilt`` or ``reused``."""

    action: str
    uploaded: int = 0
    batches: int = 0
    seconds: float = 0.0
    note: str = ""

    def describe(self) -> str:
        """One phrase for the report, e.g. ``reused (5000 documents, no upload)``."""
        if self.action == "reused":
            return f"reused ({self.note or 'no upload'})"
        text = (f"{self.action}: {self.uploaded} documents uploaded in {self.batches} "
                f"batch{'es' if self.batches != 1 else ''} ({self.seconds:.1f} s)")
        return f"{text}; {self.note}" if self.note else text


def ensure_collection(connection: QdrantConnection, expected: Expected, upload: Upload,
                      dimension: Callable[[], int]) -> Ensured:
    """Reuse, build or rebuild the collection ``expected.name`` (see the module docstring).

    ``upload()`` fills a freshly created collection and returns ``(documents, batches)``;
    ``dimension()`` gives the embedder's dimension, asked only once Qdrant has answered
    (an unreachable server costs no embedding).
    """
    name = expected.name
    exists = connection.call(f"checking collection {name!r}",
                             lambda c: c.collection_exists(name))
    expected = dataclasses.replace(expected, dimension=dimension())
    if not exists:
        return _build(connection, expected, upload, "built", "")
    info = connection.call(f"reading collection {name!r}", lambda c: c.get_collection(name))
    manifest = (getattr(info.config, "metadata", None) or {}).get(MANIFEST_KEY)
    if isinstance(manifest, dict) and manifest.get("status") != "complete":
        held = _count(connection, name)
        note = (f"the previous upload was interrupted ({held} of "
                f"{manifest.get('documents', '?')} documents, marked "
                f"{manifest.get('status')!r}): rebuilt from scratch")
        return _build(connection, expected, upload, "rebuilt", note)
    problems = schema_problems(info, expected)
    held = _count(connection, name)
    if isinstance(manifest, dict):
        problems += manifest_problems(manifest, expected, held)
    elif held != expected.documents:
        problems.append(f"it holds {held} points, the corpus has {expected.documents} "
                        "documents")
    if problems:
        raise QdrantError(
            f"collection {name!r} at {connection.location.describe()} does not match this "
            f"corpus: {'; '.join(problems)}. It is left untouched: delete it, or choose "
            "another name with --ragbench-collection")
    note = f"{held} documents, no upload"
    if not isinstance(manifest, dict):
        note += "; not built by pytest-ragbench (no manifest): its schema and size match"
    return Ensured("reused", note=note)


def schema_problems(info: Any, expected: Expected) -> list[str]:
    """Differences between a collection's vector schema and the one this corpus needs."""
    from qdrant_client import models

    problems = []
    vectors = info.config.params.vectors
    dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
    if dense is None:
        problems.append(f"it has no named dense vector {DENSE!r}")
    else:
        if dense.size != expected.dimension:
            problems.append(f"its dense vector {DENSE!r} has {dense.size} dimensions, the "
                            f"embedder {expected.embedder} gives {expected.dimension}")
        if dense.distance != models.Distance.COSINE:
            problems.append(f"its dense vector {DENSE!r} uses {dense.distance} distance, "
                            "not cosine")
    sparse = (info.config.params.sparse_vectors or {}).get(SPARSE)
    if sparse is None:
        problems.append(f"it has no named sparse vector {SPARSE!r}")
    elif sparse.modifier != models.Modifier.IDF:
        problems.append(f"its sparse vector {SPARSE!r} has modifier {sparse.modifier}, "
                        "not idf")
    return problems


def manifest_problems(manifest: dict[str, Any], expected: Expected, held: int) -> list[str]:
    """Differences between a complete manifest (and the points held) and this corpus."""
    problems = []
    if manifest.get("schema") != SCHEMA_VERSION:
        problems.append(f"it was built with manifest schema {manifest.get('schema')}, this "
                        f"version writes {SCHEMA_VERSION}")
    for key, label in (("documents", "documents"), ("embedder", "embedder"),
                       ("sparse", "sparse settings")):
        if manifest.get(key) != getattr(expected, key):
            problems.append(f"{label}: the collection has {manifest.get(key)!r}, this corpus "
                            f"{getattr(expected, key)!r}")
    if manifest.get("fingerprint") != expected.fingerprint and not problems:
        problems.append(f"its documents differ (corpus fingerprint {manifest.get('fingerprint')}"
                        f" in the collection, {expected.fingerprint} here)")
    if held != manifest.get("documents"):
        problems.append(f"it holds {held} points but its manifest says "
                        f"{manifest.get('documents')} documents (damaged or changed since)")
    return problems


def _count(connection: QdrantConnection, name: str) -> int:
    result = connection.call(f"counting the points of {name!r}",
                             lambda c: c.count(name, exact=True))
    return int(result.count)


def _build(connection: QdrantConnection, expected: Expected, upload: Upload, action: str,
           note: str) -> Ensured:
    from qdrant_client import models

    name = expected.name
    started = time.perf_counter()
    if action == "rebuilt":
        connection.call(f"deleting the incomplete collection {name!r}",
                        lambda c: c.delete_collection(name))
    connection.call(f"creating collection {name!r}", lambda c: c.create_collection(
        name,
        vectors_config={DENSE: models.VectorParams(size=expected.dimension,
                                                   distance=models.Distance.COSINE)},
        sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={MANIFEST_KEY: expected.manifest("incomplete")}))
    uploaded, batches = upload()
    held = _count(connection, name)
    if held != expected.documents:
        raise QdrantError(f"collection {name!r}: {held} points after uploading "
                          f"{expected.documents} documents; left marked incomplete")
    connection.call(f"marking collection {name!r} complete", lambda c: c.update_collection(
        name, metadata={MANIFEST_KEY: expected.manifest("complete")}))
    return Ensured(action, uploaded, batches, time.perf_counter() - started, note)


def point_payload(doc: Document) -> dict[str, Any]:
    """The payload of a document's point."""
    metadata = _json_safe(doc.metadata)
    return {"doc_id": doc.id, "text": doc.text, "source": str(doc.metadata.get("source") or ""),
            "title": doc.title, "metadata": metadata}


def upsert_batches(connection: QdrantConnection, name: str, documents: Sequence[Document],
                   dense: Callable[[list[str]], Any], sparse: Sequence[Any], texts: Sequence[str],
                   *, batch_size: int, progress: Progress | None = None) -> tuple[int, int]:
    """Embed and upload ``documents`` in batches; returns ``(documents, batches)``.

    Each batch is embedded just before it is sent (the embedding cache makes a rebuild
    cheap) and written with ``wait=True``; re-sending a batch is harmless (same ids).
    """
    from qdrant_client import models

    batches = 0
    for start in range(0, len(documents), batch_size):
        chunk = documents[start:start + batch_size]
        vectors = dense(list(texts[start:start + batch_size]))
        points = [
            models.PointStruct(
                id=start + offset,
                vector={DENSE: vectors[offset].tolist(),
                        SPARSE: models.SparseVector(indices=sparse[start + offset].indices,
                                                    values=sparse[start + offset].values)},
                payload=point_payload(doc))
            for offset, doc in enumerate(chunk)]
        _upsert(connection, name, points, f"uploading documents {start + 1}-"
                f"{start + len(chunk)} to {name!r}")
        batches += 1
        if progress is not None:
            progress(len(chunk))
    return len(documents), batches


def _upsert(connection: QdrantConnection, name: str, points: list[Any], what: str) -> None:
    connection.call(what, lambda c: c.upsert(name, points=points, wait=True))
