"""A retriever on a Qdrant collection: dense, BM25 or hybrid, with the fusion done by Qdrant.

Same protocol as the FAISS/bm25s retrievers (``index``, ``retrieve``, ``retrieve_many``,
``for_corpus``). ``index(documents)`` makes sure the corpus's collection exists and
matches (:mod:`pytest_ragbench.systems.qdrant.collection`: build if missing, reuse when
present, refuse a mismatch); retrieval is one Query API request per query, sent in
batches:

- ``mode="dense"``: nearest neighbours on the named dense vector (cosine). ``exact=True``
  (the default up to :data:`~pytest_ragbench.systems.fixtures.HNSW_ABOVE` documents, as
  FAISS is flat up to there) searches exhaustively, like FAISS's flat index.
- ``mode="bm25"``: the named sparse vector; Qdrant applies the IDF, so the scores are
  bm25s's Lucene BM25 (:mod:`pytest_ragbench.systems.sparse`).
- ``mode="hybrid"``: two prefetches (dense and sparse, ``candidates`` deep each) fused by
  reciprocal rank in Qdrant. With ``rrf_k=60`` the engine is asked for its ``k=61``: Qdrant
  scores ``1/(k + rank − 1)`` with ranks from 1 where the in-process hybrid scores
  ``1/(k + rank)``, so both fuse the same way. ``rrf_k=None`` uses the engine's default
  (``Fusion.RRF``, k=2).

``filters`` become a Qdrant payload filter on the documents' metadata (a list value
matches any of its members, a list in the metadata matches if it contains the value).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.run.locking import lock_file
from pytest_ragbench.systems.cache import stable_hash
from pytest_ragbench.systems.protocols import Context, Document, Embedder
from pytest_ragbench.systems.qdrant.collection import (
    DENSE,
    SPARSE,
    Ensured,
    Expected,
    ensure_collection,
    upsert_batches,
)
from pytest_ragbench.systems.qdrant.connection import QdrantConnection, QdrantError
from pytest_ragbench.systems.retrievers import RRF_K, search_text
from pytest_ragbench.systems.sparse import SparseEncoder

MODES = ("dense", "bm25", "hybrid")
EXACT_UP_TO = 200_000  # documents; the same cut-off as FAISS flat -> HNSW
QUERY_BATCH = 64  # queries per Query API batch request
UPLOAD_BATCH = 256  # documents per upsert
ProgressFactory = Callable[[str, int], contextlib.AbstractContextManager[Any]]


class QdrantRetriever:
    """Retrieves from a Qdrant collection built (or reused) for the indexed corpus."""

    name = "qdrant"

    def __init__(self, embedder: Embedder, connection: QdrantConnection, *,
                 mode: str = "hybrid", collection: str | None = None, exact: bool | None = None,
                 rrf_k: int | None = RRF_K, candidates: int = 50,
                 batch_size: int = UPLOAD_BATCH, encoder: SparseEncoder | None = None,
                 lock_dir: Path | None = None, progress: ProgressFactory | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if rrf_k is not None and rrf_k < 0:
            raise ValueError("rrf_k must be at least 0")
        self.embedder, self.connection, self.mode = embedder, connection, mode
        self.requested_collection = collection
        self.exact, self.rrf_k, self.candidates = exact, rrf_k, candidates
        self.batch_size = batch_size
        self.encoder = encoder or SparseEncoder()
        self.lock_dir = Path(lock_dir) if lock_dir is not None else None
        self.progress = progress
        self.documents: list[Document] = []
        self.fingerprint = ""
        self.collection = ""
        self.ensured: Ensured | None = None
        self._positions: dict[str, int] = {}
        self._siblings: dict[str, QdrantRetriever] = {}

    def __len__(self) -> int:
        return len(self.documents)

    def __repr__(self) -> str:
        return (f"QdrantRetriever({self.mode}, {self.connection.location.describe()}, "
                f"collection={self.collection or self.requested_collection!r}, "
                f"{len(self.documents)} docs)")

    def describe(self) -> str:
        """One line: mode, location, collection and whether it was built or reused."""
        if self.mode == "dense":
            how = f"dense {self.embedder.model_id}, {'exact' if self._exact() else 'HNSW'}"
        elif self.mode == "bm25":
            how = "BM25 sparse vectors, IDF in the engine"
        else:
            fusion = "engine default k" if self.rrf_k is None else f"k={self.rrf_k}"
            how = (f"hybrid: dense {self.embedder.model_id} + BM25 sparse, RRF {fusion} "
                   "fused in the engine")
        text = f"Qdrant {how} at {self.connection.location.describe()}"
        if self.collection:
            text += f", collection {self.collection!r}"
        if self.ensured is not None:
            text += f" {self.ensured.describe()}"
        if self.encoder.collisions:
            text += f"; {self.encoder.collisions} BM25 term hash collision(s)"
        return text

    def _exact(self) -> bool:
        return self.exact if self.exact is not None else len(self.documents) <= EXACT_UP_TO

    # -- indexing ----------------------------------------------------------------------

    def _params(self) -> dict[str, Any]:
        return {"model": self.embedder.model_id, "sparse": self.encoder.params(),
                "payload": 1}

    def corpus_fingerprint(self, documents: Sequence[Document]) -> str:
        """A hash of the documents (ids, indexed text, metadata) and the vector settings."""
        return stable_hash("qdrant", self._params(),
                           [(d.id, search_text(d), dict(d.metadata)) for d in documents])[:32]

    def index(self, documents: Sequence[Document]) -> None:
        """Make sure the corpus's collection exists and matches; upload it if missing."""
        fingerprint = self.corpus_fingerprint(documents)
        if fingerprint == self.fingerprint and self.ensured is not None:
            return
        self.documents = list(documents)
        self._positions = {d.id: i for i, d in enumerate(self.documents)}
        self.fingerprint, self.ensured = fingerprint, None
        self.collection = self.requested_collection or f"ragbench_{fingerprint[:16]}"
        if not self.documents:
            return
        texts = [search_text(d) for d in self.documents]
        sparse = self.encoder.documents(texts)  # also counts hash collisions
        expected = Expected(self.collection, fingerprint, len(self.documents),
                            self.embedder.model_id, self.encoder.params())
        with self._lock():
            self.ensured = ensure_collection(
                self.connection, expected, lambda: self._upload(texts, sparse),
                dimension=lambda: int(self.embedder.embed(texts[:1]).shape[1]))
            location = self.connection.location
            if self.ensured.action != "reused" and location.path not in (None, ":memory:"):
                # Local mode reloads a folder's points in reverse order, and that order
                # breaks ties between equal scores: search the reloaded collection from
                # the start, so that this run and every later one rank ties alike.
                self.connection.reopen()

    def _upload(self, texts: list[str], sparse: list[Any]) -> tuple[int, int]:
        description = f"ragbench: uploading {len(texts)} documents to Qdrant {self.collection}"
        bar_factory = self.progress or (lambda _d, _t: contextlib.nullcontext())
        with bar_factory(description, len(texts)) as bar:
            return upsert_batches(self.connection, self.collection, self.documents,
                                  self.embedder.embed, sparse, texts,
                                  batch_size=self.batch_size,
                                  progress=getattr(bar, "update", None))

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """One process of this machine checks or builds a given collection at a time."""
        if self.lock_dir is None or self.connection.location.path == ":memory:":
            yield
            return
        key = stable_hash(self.connection.location.describe(), self.collection)[:16]
        with lock_file(self.lock_dir / f"qdrant-{key}.lock"):
            yield

    def for_corpus(self, documents: Sequence[Document]) -> QdrantRetriever:
        """A retriever like this one on ``documents`` (same location and settings), once."""
        fingerprint = self.corpus_fingerprint(documents)
        if fingerprint == self.fingerprint:
            return self
        if fingerprint not in self._siblings:
            sibling = QdrantRetriever(
                self.embedder, self.connection, mode=self.mode,
                collection=self.requested_collection, exact=self.exact, rrf_k=self.rrf_k,
                candidates=self.candidates, batch_size=self.batch_size,
                encoder=SparseEncoder(k1=self.encoder.k1, b=self.encoder.b,
                                      stopwords=self.encoder.stopwords),
                lock_dir=self.lock_dir, progress=self.progress)
            sibling.index(documents)
            self._siblings[fingerprint] = sibling
        return self._siblings[fingerprint]

    # -- retrieval ---------------------------------------------------------------------

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """Return the ``top_k`` best contexts for one query."""
        return self.retrieve_many([query], top_k, filters, min_score)[0]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """Return the ``top_k`` best contexts for each query, sent as batch requests."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        queries = list(queries)
        if not queries or not self.documents:
            return [[] for _ in queries]
        if self.ensured is None:
            raise QdrantError(f"{self!r} is not indexed: call index(documents) first")
        requests = self._requests(queries, top_k, payload_filter(filters), min_score)
        asked = [i for i, r in enumerate(requests) if r is not None]
        found: list[list[Context]] = [[] for _ in queries]
        for start in range(0, len(asked), QUERY_BATCH):
            chunk = asked[start:start + QUERY_BATCH]
            responses = self._search([requests[i] for i in chunk])
            for i, response in zip(chunk, responses, strict=True):
                found[i] = [self._context(point) for point in response.points]
        return found

    def _search(self, batch: list[Any]) -> list[Any]:
        name = self.collection
        found: list[Any] = self.connection.call(
            f"searching collection {name!r}",
            lambda c: c.query_batch_points(name, requests=batch))
        return found

    def _requests(self, queries: list[str], top_k: int, flt: Any,
                  min_score: float | None) -> list[Any]:
        """One Query API request per query (None: nothing to ask, e.g. only stopwords)."""
        from qdrant_client import models

        limit = min(top_k, len(self.documents))
        dense = self.embedder.embed(queries) if self.mode != "bm25" else None
        sparse = self.encoder.queries(queries) if self.mode != "dense" else None
        # Local mode always searches exhaustively (and warns about search params).
        search = models.SearchParams(exact=self._exact()) if self.connection.location.remote \
            else None
        common: dict[str, Any] = {"limit": limit, "filter": flt, "score_threshold": min_score,
                                  "with_payload": ["doc_id"]}
        requests: list[Any] = []
        for i in range(len(queries)):
            dense_query = None if dense is None else dense[i].tolist()
            sparse_query = None
            if sparse is not None and sparse[i].indices:
                sparse_query = models.SparseVector(indices=sparse[i].indices,
                                                   values=sparse[i].values)
            if self.mode == "dense":
                requests.append(models.QueryRequest(query=dense_query, using=DENSE,
                                                    params=search, **common))
            elif self.mode == "bm25":
                requests.append(None if sparse_query is None else models.QueryRequest(
                    query=sparse_query, using=SPARSE, **common))
            else:
                depth = max(self.candidates, top_k)
                prefetch = [models.Prefetch(query=dense_query, using=DENSE, limit=depth,
                                            filter=flt, params=search)]
                if sparse_query is not None:
                    prefetch.append(models.Prefetch(query=sparse_query, using=SPARSE,
                                                    limit=depth, filter=flt))
                requests.append(models.QueryRequest(prefetch=prefetch, query=self._fusion(),
                                                    **common))
        return requests

    def _fusion(self) -> Any:
        from qdrant_client import models

        if self.rrf_k is None:
            return models.FusionQuery(fusion=models.Fusion.RRF)
        return models.RrfQuery(rrf=models.Rrf(k=self.rrf_k + 1))

    def _context(self, point: Any) -> Context:
        doc_id = str((point.payload or {}).get("doc_id"))
        position = self._positions.get(doc_id)
        if position is None:
            raise QdrantError(f"collection {self.collection!r} returned document {doc_id!r}, "
                              "which is not in the corpus being evaluated: it holds another "
                              "corpus; delete it or choose another --ragbench-collection")
        doc = self.documents[position]
        return Context(id=doc.id, text=doc.text, score=float(point.score),
                       metadata=dict(doc.metadata))


def payload_filter(filters: Mapping[str, Any] | None, prefix: str = "metadata.") -> Any:
    """A Qdrant ``Filter`` requiring every ``metadata`` key to match (None: no filter).

    A list, tuple or set matches any of its members; strings, integers and booleans match
    exactly; a float matches an equal number.
    """
    if not filters:
        return None
    from qdrant_client import models

    return models.Filter(must=[_condition(f"{prefix}{key}", wanted)
                               for key, wanted in filters.items()])


def _condition(key: str, wanted: Any) -> Any:
    from qdrant_client import models

    options = list(wanted) if isinstance(wanted, list | tuple | set | frozenset) else [wanted]
    if not options:
        return models.Filter(must=[models.HasIdCondition(has_id=[])])  # matches nothing
    conditions: list[Any] = []
    for value in options:
        if isinstance(value, bool | int | str):
            conditions.append(models.FieldCondition(key=key, match=models.MatchValue(value=value)))
        elif isinstance(value, float):
            conditions.append(models.FieldCondition(key=key, range=models.Range(gte=value,
                                                                                lte=value)))
        else:
            raise ValueError(f"filter {key!r}: cannot match a {type(value).__name__} value in "
                             "Qdrant (use strings, numbers, booleans or lists of them)")
    return conditions[0] if len(conditions) == 1 else models.Filter(should=conditions)
