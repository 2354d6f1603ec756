"""Indexing and query throughput of FAISS/bm25s, Qdrant local mode and the embedded Qdrant Edge.

    python benchmarks/bench_qdrant.py                 # the 5,000 DBpedia documents, 50 queries
    python benchmarks/bench_qdrant.py --docs 500      # a smaller slice, for a smoke run
    python benchmarks/bench_qdrant.py --qdrant-url http://localhost:6333   # and a server

The corpus is the DBpedia subset of ../shared/oracles/beir-subsets. Embeddings
(all-MiniLM-L6-v2) are computed once, through the embedding cache (``--cache``), and
handed to every engine precomputed, as are the BM25 sparse vectors: the table measures
the engines, not the model. Per engine and mode:

- index s: building the index (FAISS, bm25s) or creating the collection and uploading
  every point in batches of 256 (Qdrant), payload ``doc_id``/``text`` included;
- q/s batch: the 50 queries as one batch (``retrieve_many``; Qdrant's batch query API),
  best of ``--repeat``; ms/q single: one query at a time, median;
- nDCG@10 on the subset's qrels, so the rows show the engines agree.

Engines: ``faiss`` is FAISS flat + bm25s + in-process RRF (this project's default
retrievers); ``qdrant-local`` is qdrant-client's local mode through :class:`QdrantRetriever`
(exact search in Python/numpy); ``qdrant-edge`` is the embedded Qdrant engine
(``qdrant-edge-py``, Qdrant's Rust segment code in process), driven directly; ``qdrant-server``
is any Qdrant server or cluster given with ``--qdrant-url`` (API key from
``RAGBENCH_QDRANT_API_KEY``), through :class:`QdrantRetriever`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import read_qrels, read_queries
from pytest_ragbench.kinds.beir.runner import read_documents
from pytest_ragbench.metrics import evaluate_run
from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.retrievers import search_text
from pytest_ragbench.systems.sparse import SparseEncoder

ORACLES = Path(__file__).resolve().parent.parent.parent / "shared" / "oracles" / "beir-subsets"
MODES = ("dense", "bm25", "hybrid")
TOP_K = 10
Row = tuple[str, str, str, str, str, str]


class Precomputed:
    """An embedder that hands out vectors computed beforehand (the engines' input)."""

    def __init__(self, model_id: str, vectors: dict[str, np.ndarray]) -> None:
        self.model_id = model_id
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


def load(docs: int) -> tuple[list[Document], dict[str, str], dict[str, dict[str, int]]]:
    folder = ORACLES / "dbpedia"
    errors: list[CaseError] = []
    documents = read_documents(folder / "corpus.jsonl", errors)[:docs]
    kept = {d.id for d in documents}
    qrels, _ = read_qrels(folder / "qrels" / "test.tsv", errors)
    qrels = {q: {d: g for d, g in r.items() if d in kept} for q, r in qrels.items()}
    qrels = {q: r for q, r in qrels.items() if any(g > 0 for g in r.values())}
    queries = read_queries(folder / "queries.jsonl", errors)
    return documents, {q: queries[q] for q in qrels}, qrels


def embed_once(documents: list[Document], queries: list[str], cache: Path) -> Precomputed:
    from pytest_ragbench.systems.cache import Caches
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(cache=Caches.open(cache).embeddings)
    texts = [search_text(d) for d in documents] + list(queries)
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    print(f"embeddings: {len(texts)} texts in {time.perf_counter() - started:.1f} s "
          f"({embedder.encoded} through the model, the rest from {cache})", flush=True)
    return Precomputed(embedder.model_id, dict(zip(texts, vectors, strict=True)))


def measure(search_many: Callable[[list[str]], list[list[tuple[str, float]]]],
            search_one: Callable[[str], list[tuple[str, float]]], queries: dict[str, str],
            qrels: dict[str, dict[str, int]], repeat: int) -> tuple[float, float, float]:
    """(queries/s in batch, ms/query one at a time, nDCG@10)."""
    ids, texts = list(queries), list(queries.values())
    best = float("inf")
    results: list[list[tuple[str, float]]] = []
    for _ in range(repeat):
        started = time.perf_counter()
        results = search_many(texts)
        best = min(best, time.perf_counter() - started)
    single = []
    for text in texts:
        started = time.perf_counter()
        search_one(text)
        single.append(time.perf_counter() - started)
    run = {q: dict(found) for q, found in zip(ids, results, strict=True)}
    ndcg = float(evaluate_run(qrels, run, ["nDCG@10"])["nDCG@10"])
    return len(texts) / best, 1000 * statistics.median(single), ndcg


def as_pairs(contexts: list[Any]) -> list[tuple[str, float]]:
    return [(c.id, c.score) for c in contexts]


def bench_retriever(engine: str, build: Callable[[str], Any], documents: list[Document],
                    queries: dict[str, str], qrels: dict[str, dict[str, int]],
                    repeat: int) -> list[Row]:
    rows = []
    for mode in MODES:
        build(mode).index(documents[:3])  # untimed warm-up: imports, first allocations
        retriever = build(mode)
        started = time.perf_counter()
        retriever.index(documents)
        seconds = time.perf_counter() - started
        qps, ms, ndcg = measure(
            lambda texts, r=retriever: [as_pairs(c) for c in r.retrieve_many(texts, TOP_K)],
            lambda text, r=retriever: as_pairs(r.retrieve(text, TOP_K)), queries, qrels, repeat)
        rows.append((engine, mode, f"{seconds:.2f}", f"{qps:.0f}", f"{ms:.2f}", f"{ndcg:.4f}"))
        print(f"  {engine} {mode}: done", flush=True)
    return rows


def faiss_rows(embedder: Precomputed, *args: Any) -> list[Row]:
    from pytest_ragbench.systems.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    def build(mode: str) -> Any:
        if mode == "dense":
            return DenseRetriever(embedder)  # type: ignore[arg-type]
        if mode == "bm25":
            return BM25Retriever()
        return HybridRetriever(DenseRetriever(embedder), BM25Retriever())  # type: ignore[arg-type]

    return bench_retriever("faiss+bm25s", build, *args)


def qdrant_rows(engine: str, embedder: Precomputed, location: Any, *args: Any) -> list[Row]:
    from pytest_ragbench.systems.qdrant.connection import QdrantConnection
    from pytest_ragbench.systems.qdrant.retriever import QdrantRetriever

    connection = QdrantConnection(location)
    names: list[str] = []

    def build(mode: str) -> Any:  # each mode gets a fresh collection: indexing is measured
        name = f"ragbench_bench_{mode}_{os.getpid()}"
        names.append(name)
        with contextlib.suppress(Exception):
            connection.call("cleanup", lambda c: c.delete_collection(name))
        return QdrantRetriever(embedder, connection, mode=mode,  # type: ignore[arg-type]
                               collection=name, exact=True)

    try:
        return bench_retriever(engine, build, *args)
    finally:
        for name in names:
            with contextlib.suppress(Exception):
                connection.call("cleanup", lambda c, n=name: c.delete_collection(n))
        connection.close()


def edge_rows(embedder: Precomputed, documents: list[Document], queries: dict[str, str],
              qrels: dict[str, dict[str, int]], repeat: int) -> list[Row]:
    import qdrant_edge as qe

    texts = [search_text(d) for d in documents]
    dense = embedder.embed(texts)
    encoder = SparseEncoder()
    sparse = encoder.documents(texts)
    rows = []
    for mode in MODES:
        folder = tempfile.mkdtemp(prefix="ragbench-edge-")
        try:
            started = time.perf_counter()
            shard = qe.EdgeShard.create(folder, qe.EdgeConfig(
                vectors={"dense": qe.EdgeVectorParams(size=dense.shape[1],
                                                      distance=qe.Distance.Cosine)},
                sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}))
            for start in range(0, len(documents), 256):
                shard.update(qe.UpdateOperation.upsert_points([
                    qe.Point(id=i, vector={"dense": dense[i].tolist(),
                                           "bm25": qe.SparseVector(sparse[i].indices,
                                                                   sparse[i].values)},
                             payload={"doc_id": documents[i].id, "text": documents[i].text})
                    for i in range(start, min(start + 256, len(documents)))]))
            shard.flush()
            seconds = time.perf_counter() - started

            def request(text: str, mode: str = mode) -> Any:
                vector = embedder.embed([text])[0].tolist()
                (terms,) = encoder.queries([text])
                words = qe.SparseVector(terms.indices, terms.values)
                exact = qe.SearchParams(exact=True)
                if mode == "dense":
                    return qe.QueryRequest(limit=TOP_K, query=qe.Query.Nearest(vector, "dense"),
                                           params=exact, with_payload=["doc_id"])
                if mode == "bm25":
                    return qe.QueryRequest(limit=TOP_K, query=qe.Query.Nearest(words, "bm25"),
                                           with_payload=["doc_id"])
                return qe.QueryRequest(
                    limit=TOP_K, query=qe.Fusion.Rrf(k=61), with_payload=["doc_id"],
                    prefetches=[qe.Prefetch(limit=50, query=qe.Query.Nearest(vector, "dense"),
                                            params=exact),
                                qe.Prefetch(limit=50, query=qe.Query.Nearest(words, "bm25"))])

            def pairs(points: list[Any]) -> list[tuple[str, float]]:
                return [(str(p.payload["doc_id"]), float(p.score)) for p in points]

            qps, ms, ndcg = measure(
                lambda many, s=shard: [pairs(r) for r in s.query_batch(
                    qe.QueryBatchRequest([request(t) for t in many]))],
                lambda one, s=shard: pairs(s.query(request(one))), queries, qrels, repeat)
            rows.append(("qdrant-edge", mode, f"{seconds:.2f}", f"{qps:.0f}", f"{ms:.2f}",
                         f"{ndcg:.4f}"))
            shard.close()
            print(f"  qdrant-edge {mode}: done", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return rows


def table(rows: list[Row]) -> str:
    header: Row = ("engine", "mode", "index s", "q/s batch", "ms/q single", "nDCG@10")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000, help="first N documents (max 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="batch runs (best is kept)")
    parser.add_argument("--cache", type=Path, default=Path(".ragbench_cache"),
                        help="embedding cache folder (default .ragbench_cache)")
    parser.add_argument("--qdrant-url", help="also benchmark this Qdrant server or cluster")
    args = parser.parse_args(argv)
    from pytest_ragbench.systems.qdrant.connection import QdrantLocation

    documents, queries, qrels = load(args.docs)
    print(f"DBpedia subset: {len(documents)} documents, {len(queries)} judged queries "
          f"(top {TOP_K})", flush=True)
    embedder = embed_once(documents, list(queries.values()), args.cache)
    common = (documents, queries, qrels, args.repeat)
    rows = faiss_rows(embedder, *common)
    rows += qdrant_rows("qdrant-local", embedder, QdrantLocation(path=":memory:"), *common)
    notes = []
    try:
        import qdrant_edge  # noqa: F401
    except ImportError as exc:
        notes.append(f"qdrant-edge: not installed ({exc}); `pip install qdrant-edge-py` "
                     "installs the embedded engine where the registry has a wheel for "
                     "this platform")
    else:
        rows += edge_rows(embedder, *common)
    if args.qdrant_url:
        rows += qdrant_rows("qdrant-server", embedder, QdrantLocation(url=args.qdrant_url),
                            *common)
    print()
    print(table(rows))
    for note in notes:
        print(note)
    print("versions: " + ", ".join(f"{name} {_version(name)}" for name in
                                   ("faiss-cpu", "bm25s", "qdrant-client", "qdrant-edge-py")))


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    main()
