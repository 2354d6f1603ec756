"""The default retrievers: dense (FAISS), BM25 (bm25s) and their hybrid fusion.

Imported only when a retriever is first needed (numpy is imported here; faiss and
bm25s inside the functions that use them). An index is built once per corpus and
persisted in the cache's index folder under a fingerprint of the corpus and the
settings, so a later session, or another xdist worker, loads it instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_ragbench.heavy_imports import import_whole
from pytest_ragbench.run.locking import lock_file
from pytest_ragbench.systems.cache import CacheWarning, stable_hash
from pytest_ragbench.systems.protocols import Context, Document, Embedder

RRF_K = 60
HNSW_M = 32


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Return whether metadata satisfies every filter.

    A filter value that is a list, tuple or set matches any of its members; any other
    value must be equal. A metadata value that is a list matches if it contains the
    wanted value (or any of them).
    """
    for key, wanted in (filters or {}).items():
        if key not in metadata:
            return False
        have = metadata[key]
        options = list(wanted) if isinstance(wanted, list | tuple | set | frozenset) else [wanted]
        values = list(have) if isinstance(have, list | tuple | set | frozenset) else [have]
        if not any(v == o for v in values for o in options):
            return False
    return True


def search_text(doc: Document) -> str:
    """Return the text that is indexed for a document: its title, then its text."""
    title = doc.title.strip()
    return f"{title}\n{doc.text}" if title and title not in doc.text[:len(title) + 2] else doc.text


class _Indexed:
    """A corpus held by a retriever, with helpers shared by every kind of index."""

    name = "base"

    def __init__(self, index_dir: Path | None = None) -> None:
        self.index_dir = Path(index_dir) if index_dir is not None else None
        self.documents: list[Document] = []
        self.fingerprint = ""
        self.loaded_from_cache = False  # the index is (or is to be) read from index_dir
        self._load_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.documents)

    def _params(self) -> dict[str, Any]:
        return {}

    def _set_documents(self, documents: Sequence[Document]) -> bool:
        """Adopt ``documents``; returns False when the same corpus is already indexed."""
        fingerprint = stable_hash(self.name, self._params(),
                                  [(d.id, search_text(d)) for d in documents])[:32]
        if fingerprint == self.fingerprint and self._ready():
            return False
        self.documents = list(documents)
        self.fingerprint = fingerprint
        return True

    def _ready(self) -> bool:
        return False

    def index(self, documents: Sequence[Document]) -> None:
        """Index the documents; a persisted index of the same corpus is read when first searched."""
        if not self._set_documents(documents):
            return
        self._forget()
        self.loaded_from_cache = False
        if not self.documents:
            return
        with self._build_lock():
            if self._persisted() is None:
                self._build()
        if not self._loaded():
            self.loaded_from_cache = True  # read at the first search (_ensure_loaded)

    def _forget(self) -> None:
        """Drop the index of an earlier corpus."""

    def _persisted(self) -> Path | None:
        """The index of this corpus in ``index_dir``, if one was written."""
        return None

    def _build(self) -> None:
        raise NotImplementedError

    def _loaded(self) -> bool:
        return True

    def _load(self) -> None:
        pass

    def _ensure_loaded(self) -> None:
        """Read a persisted index at the first search, not when indexing.

        A process that never searches (an xdist worker given only items that answer from
        given passages) then never imports faiss or bm25s (numba) nor reads the index.
        """
        if self._loaded():
            return
        with self._load_lock:
            if not self._loaded():
                self._load()

    def for_corpus(self, documents: Sequence[Document]) -> Any:
        """Return a retriever like this one indexed on ``documents``, built once per corpus.

        The retriever itself keeps its own corpus; use this to search another one
        (a BEIR dataset, say) without re-indexing for every query.
        """
        fingerprint = stable_hash(self.name, self._params(),
                                  [(d.id, search_text(d)) for d in documents])[:32]
        if fingerprint == self.fingerprint:
            return self
        siblings: dict[str, Any] = self.__dict__.setdefault("_siblings", {})
        if fingerprint not in siblings:
            sibling = self._spawn()
            sibling.index(documents)
            siblings[fingerprint] = sibling
        return siblings[fingerprint]

    def _spawn(self) -> Any:
        raise NotImplementedError

    def _allowed(self, filters: Mapping[str, Any] | None) -> np.ndarray | None:
        """Positions of the documents passing ``filters`` (None when there is no filter)."""
        if not filters:
            return None
        return np.array([i for i, d in enumerate(self.documents) if matches(d.metadata, filters)],
                        dtype=np.int64)

    def _context(self, position: int, score: float) -> Context:
        doc = self.documents[position]
        return Context(id=doc.id, text=doc.text, score=float(score), metadata=dict(doc.metadata))

    @contextlib.contextmanager
    def _build_lock(self) -> Iterator[None]:
        """Let one process build a given index while the others wait for it."""
        if self.index_dir is None:
            yield
            return
        # without room for the lock file the index is built unlocked (a duplicate at worst)
        with lock_file(self.index_dir / f"{self.fingerprint}.lock", required=False):
            yield

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """Return the ``top_k`` best contexts for one query."""
        return self.retrieve_many([query], top_k, filters, min_score)[0]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """Return the ``top_k`` best contexts for each query, searched as one batch."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if not queries:
            return []
        allowed = self._allowed(filters)
        if not self.documents or (allowed is not None and allowed.size == 0):
            return [[] for _ in queries]
        hits = self._search(list(queries), top_k, allowed)
        return [[self._context(p, s) for p, s in row if min_score is None or s >= min_score]
                for row in hits]

    def _search(self, queries: list[str], top_k: int,
                allowed: np.ndarray | None) -> list[list[tuple[int, float]]]:
        raise NotImplementedError


class DenseRetriever(_Indexed):
    """Cosine similarity by FAISS inner product on normalised vectors.

    ``index_type`` is ``"flat"`` (exact) or ``"hnsw"`` (approximate, for large corpora;
    filtered searches are still exact over the documents that pass the filter).
    """

    name = "dense"

    def __init__(self, embedder: Embedder, *, index_type: str = "flat",
                 hnsw_m: int = HNSW_M, ef_search: int = 128,
                 index_dir: Path | None = None) -> None:
        if index_type not in ("flat", "hnsw"):
            raise ValueError(f"index_type must be 'flat' or 'hnsw', got {index_type!r}")
        super().__init__(index_dir)
        self.embedder = embedder
        self.index_type = index_type
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self._index: Any = None

    def __repr__(self) -> str:
        return (f"DenseRetriever({self.embedder.model_id}, {self.index_type}, "
                f"{len(self.documents)} docs)")

    def _params(self) -> dict[str, Any]:
        return {"model": self.embedder.model_id, "type": self.index_type, "m": self.hnsw_m}

    def _forget(self) -> None:
        self._index = None

    def _persisted(self) -> Path | None:
        path = self.index_dir / f"{self.fingerprint}.faiss" if self.index_dir else None
        return path if path is not None and path.is_file() else None

    def _load(self) -> None:
        import_whole("faiss")  # its first import: never left half-run
        import faiss

        path = self._persisted()
        if path is not None:
            with contextlib.suppress(RuntimeError):
                index = faiss.read_index(str(path))
                if index.ntotal == len(self.documents):
                    self._index = index
        if self._index is None:  # unreadable or of another size: built again
            with self._build_lock():
                self._build()
            self.loaded_from_cache = False
        self._tune()

    def _build(self) -> None:
        import_whole("faiss")  # its first import: never left half-run
        import faiss

        vectors = self.embedder.embed([search_text(d) for d in self.documents])
        self._index = self._new_index(vectors.shape[1])
        self._index.add(vectors)
        if self.index_dir is not None:
            path = self.index_dir / f"{self.fingerprint}.faiss"
            _persist(path, lambda: _atomic_write(path, lambda tmp: faiss.write_index(self._index,
                                                                                    tmp)))
        self._tune()

    def _tune(self) -> None:
        if self.index_type == "hnsw":
            self._index.hnsw.efSearch = self.ef_search

    def _ready(self) -> bool:
        return self._index is not None or self.loaded_from_cache or not self.documents

    def _loaded(self) -> bool:
        return self._index is not None

    def _spawn(self) -> DenseRetriever:
        return DenseRetriever(self.embedder, index_type=self.index_type, hnsw_m=self.hnsw_m,
                              ef_search=self.ef_search, index_dir=self.index_dir)

    def _new_index(self, dim: int) -> Any:
        import faiss

        if self.index_type == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 200
            return index
        return faiss.IndexFlatIP(dim)

    def _search(self, queries: list[str], top_k: int,
                allowed: np.ndarray | None) -> list[list[tuple[int, float]]]:
        import faiss

        self._ensure_loaded()
        vectors = self.embedder.embed(queries)
        if allowed is not None and self.index_type == "hnsw":
            return self._exact_subset(vectors, top_k, allowed)
        k = min(top_k, len(self.documents) if allowed is None else int(allowed.size))
        params = None
        if allowed is not None:
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed))  # type: ignore[call-arg]
        elif self.index_type == "hnsw":
            params = faiss.SearchParametersHNSW(  # type: ignore[attr-defined]
                efSearch=max(self.ef_search, k))
        scores, ids = self._index.search(vectors, k, params=params)
        return [[(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if i >= 0]
                for row_ids, row_scores in zip(ids, scores, strict=True)]

    def _exact_subset(self, vectors: np.ndarray, top_k: int,
                      allowed: np.ndarray) -> list[list[tuple[int, float]]]:
        subset = self._index.reconstruct_batch(allowed)
        scores = vectors @ subset.T
        k = min(top_k, int(allowed.size))
        rows = []
        for row in scores:
            best = np.argsort(-row, kind="stable")[:k]
            rows.append([(int(allowed[j]), float(row[j])) for j in best])
        return rows


class BM25Retriever(_Indexed):
    """Okapi BM25 (bm25s, Lucene variant) over lower-cased words without English stopwords.

    Scores are raw BM25 scores; documents sharing no term with the query are not returned.
    """

    name = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, stopwords: str | None = "en",
                 index_dir: Path | None = None) -> None:
        super().__init__(index_dir)
        self.k1, self.b, self.stopwords = k1, b, stopwords
        self._bm25: Any = None

    def __repr__(self) -> str:
        return f"BM25Retriever(k1={self.k1}, b={self.b}, {len(self.documents)} docs)"

    def _params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "stopwords": self.stopwords}

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        tokens: list[list[str]] = bm25s.tokenize(texts, stopwords=self.stopwords,
                                                 return_ids=False, show_progress=False)
        return tokens

    def _forget(self) -> None:
        self._bm25 = None

    def _persisted(self) -> Path | None:
        folder = self.index_dir / f"{self.fingerprint}.bm25" if self.index_dir else None
        return folder if folder is not None and (folder / "params.index.json").is_file() \
            else None

    def _load(self) -> None:
        import_whole("bm25s")  # its first import: never left half-run
        import bm25s

        folder = self._persisted()
        if folder is not None:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self._bm25 = bm25s.BM25.load(str(folder), show_progress=False)
        if self._bm25 is None:  # unreadable: built again
            with self._build_lock():
                self._build()
            self.loaded_from_cache = False

    def _build(self) -> None:
        import_whole("bm25s")  # its first import: never left half-run
        import bm25s

        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b)
        self._bm25.index(self._tokenize([search_text(d) for d in self.documents]),
                         show_progress=False)
        if self.index_dir is not None:
            folder = self.index_dir / f"{self.fingerprint}.bm25"
            _persist(folder, lambda: _atomic_write_dir(
                folder, lambda tmp: self._bm25.save(tmp, show_progress=False)))

    def _ready(self) -> bool:
        return self._bm25 is not None or self.loaded_from_cache or not self.documents

    def _loaded(self) -> bool:
        return self._bm25 is not None

    def _spawn(self) -> BM25Retriever:
        return BM25Retriever(k1=self.k1, b=self.b, stopwords=self.stopwords,
                             index_dir=self.index_dir)

    def _search(self, queries: list[str], top_k: int,
                allowed: np.ndarray | None) -> list[list[tuple[int, float]]]:
        self._ensure_loaded()
        n = len(self.documents)
        k = min(top_k, n if allowed is None else int(allowed.size))
        mask = None
        if allowed is not None:
            mask = np.zeros(n, dtype=np.float32)
            mask[allowed] = 1.0
        tokens = self._tokenize(queries)
        rows: list[list[tuple[int, float]]] = [[] for _ in queries]
        asked = [i for i, t in enumerate(tokens) if t]  # a query of stopwords only finds nothing
        if asked:
            ids, scores = self._bm25.retrieve([tokens[i] for i in asked], k=k,
                                              show_progress=False, weight_mask=mask)
            for row, i in enumerate(asked):
                rows[i] = [(int(d), float(s)) for d, s in zip(ids[row], scores[row], strict=True)
                           if s > 0]
        return rows


class HybridRetriever(_Indexed):
    """Fuses a dense and a BM25 retriever.

    ``fusion="rrf"``: reciprocal-rank fusion, score = Σ 1/(k + rank), k = 60.
    ``fusion="weighted"``: ``weight`` × dense + (1 − ``weight``) × BM25, each min–max
    normalised over the candidates of the query. ``min_score`` applies to the fused score.
    """

    name = "hybrid"

    def __init__(self, dense: DenseRetriever, sparse: BM25Retriever, *, fusion: str = "rrf",
                 rrf_k: int = RRF_K, weight: float = 0.5, candidates: int = 50) -> None:
        if fusion not in ("rrf", "weighted"):
            raise ValueError(f"fusion must be 'rrf' or 'weighted', got {fusion!r}")
        if not 0.0 <= weight <= 1.0:
            raise ValueError("weight must be between 0 and 1")
        super().__init__(None)
        self.dense, self.sparse = dense, sparse
        self.fusion, self.rrf_k, self.weight, self.candidates = fusion, rrf_k, weight, candidates

    def __repr__(self) -> str:
        how = f"rrf k={self.rrf_k}" if self.fusion == "rrf" else f"weighted {self.weight}"
        return f"HybridRetriever({how}, {self.dense!r}, {self.sparse!r})"

    def index(self, documents: Sequence[Document]) -> None:
        """Index the documents in both retrievers."""
        if not self._set_documents(documents):
            return
        self.dense.index(self.documents)
        self.sparse.index(self.documents)
        self.loaded_from_cache = self.dense.loaded_from_cache and self.sparse.loaded_from_cache

    def _params(self) -> dict[str, Any]:
        return {"fusion": self.fusion, "k": self.rrf_k, "weight": self.weight,
                "dense": self.dense._params(), "sparse": self.sparse._params()}

    def _ready(self) -> bool:
        return self.dense._ready() and self.sparse._ready()

    def _spawn(self) -> HybridRetriever:
        return HybridRetriever(self.dense._spawn(), self.sparse._spawn(), fusion=self.fusion,
                               rrf_k=self.rrf_k, weight=self.weight, candidates=self.candidates)

    def _search(self, queries: list[str], top_k: int,
                allowed: np.ndarray | None) -> list[list[tuple[int, float]]]:
        depth = max(self.candidates, top_k)
        dense = self.dense._search(queries, depth, allowed)
        sparse = self.sparse._search(queries, depth, allowed)
        if self.fusion == "rrf":
            return [rrf_fuse([d, s], self.rrf_k)[:top_k]
                    for d, s in zip(dense, sparse, strict=True)]
        weights = [self.weight, 1.0 - self.weight]
        return [weighted_fuse([d, s], weights)[:top_k] for d, s in zip(dense, sparse, strict=True)]


def rrf_fuse(lists: Sequence[Sequence[tuple[Any, float]]],
             k: int = RRF_K) -> list[tuple[Any, float]]:
    """Reciprocal-rank fusion of ranked ``(id, score)`` lists (rank 1 = first)."""
    fused: dict[Any, float] = {}
    for ranked in lists:
        for rank, (key, _score) in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])


def weighted_fuse(lists: Sequence[Sequence[tuple[Any, float]]],
                  weights: Sequence[float]) -> list[tuple[Any, float]]:
    """Weighted sum of min–max normalised scores; an id absent from a list gets 0 there."""
    fused: dict[Any, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        if not ranked:
            continue
        scores = [s for _, s in ranked]
        low, high = min(scores), max(scores)
        for key, score in ranked:
            norm = 1.0 if high == low else (score - low) / (high - low)
            fused[key] = fused.get(key, 0.0) + weight * norm
    return sorted(fused.items(), key=lambda item: -item[1])


def _persist(path: Path, write: Any) -> None:
    """Store an index for later sessions; one that cannot be written stays in memory only."""
    try:
        write()
    except (OSError, RuntimeError) as exc:  # a full disk (faiss raises RuntimeError)
        warnings.warn(f"could not store the index {path} in the cache ({exc}): it is kept "
                      "in memory for this session", CacheWarning, stacklevel=2)


def _atomic_write(path: Path, write: Any) -> None:
    """Write a file through a temporary name in the same folder, then rename it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _atomic_write_dir(folder: Path, write: Any) -> None:
    """Fill a temporary folder, then rename it into place (the first writer wins)."""
    tmp = tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.")
    try:
        write(tmp)
        with contextlib.suppress(OSError):  # another process got there first: same index
            os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def default_retriever(embedder: Embedder, *, kind: str = "hybrid", fusion: str = "rrf",
                      index_type: str = "flat", index_dir: Path | None = None,
                      weight: float = 0.5) -> Any:
    """Build one of the default retrievers: ``"hybrid"`` (default), ``"dense"`` or ``"bm25"``."""
    if kind == "dense":
        return DenseRetriever(embedder, index_type=index_type, index_dir=index_dir)
    if kind == "bm25":
        return BM25Retriever(index_dir=index_dir)
    if kind == "hybrid":
        return HybridRetriever(DenseRetriever(embedder, index_type=index_type, index_dir=index_dir),
                               BM25Retriever(index_dir=index_dir), fusion=fusion,
                               weight=weight)
    raise ValueError(f"unknown retriever kind {kind!r} (hybrid, dense or bm25)")
