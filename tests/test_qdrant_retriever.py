"""The Qdrant retriever in qdrant-client's local mode, against FAISS and bm25s on real data.

Embeddings go through one cache for the whole session (tests/qdrant_support.py), so the
5,000 DBpedia documents are embedded once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("qdrant_client", reason="needs the extra 'qdrant'")
pytest.importorskip("faiss", reason="needs the extra 'embed'")

from qdrant_client import QdrantClient, models

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import read_qrels, read_queries
from pytest_ragbench.kinds.beir.runner import read_documents
from pytest_ragbench.metrics import evaluate_run
from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
from pytest_ragbench.systems.memory import EmbeddingMemoryStore
from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.qdrant.collection import MANIFEST_KEY
from pytest_ragbench.systems.qdrant.connection import QdrantConnection, QdrantError, QdrantLocation
from pytest_ragbench.systems.qdrant.memory import QdrantMemoryStore
from pytest_ragbench.systems.qdrant.retriever import QdrantRetriever
from pytest_ragbench.systems.retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from pytest_ragbench.systems.sparse import SparseEncoder
from tests.conftest import oracle_file
from tests.qdrant_support import shared_embedding_cache  # noqa: F401 (a fixture)

TEXTS = {
    "lakers": ("sports", ["nba"], "The Los Angeles Lakers won the NBA championship in 2020."),
    "naismith": ("sports", [], "Basketball was invented by James Naismith in 1891."),
    "photosynthesis": ("science", ["biology"], "Photosynthesis turns sunlight into energy."),
    "mitochondria": ("science", ["biology", "cells"], "Mitochondria produce the cell's ATP."),
    "eiffel": ("travel", ["paris"], "The Eiffel Tower in Paris was completed in 1889."),
    "kyoto": ("travel", [], "Kyoto has over a thousand Buddhist temples."),
    "python": ("tech", ["code"], "Python is a programming language created by Guido van Rossum."),
    "sqlite": ("tech", ["code", "databases"], "SQLite is an embedded SQL database engine."),
    "bread": ("food", [], "Banana bread needs ripe bananas, flour and baking soda."),
    "espresso": ("food", ["coffee"], "Espresso is brewed by forcing hot water through coffee."),
}
DOCS = [Document(key, text, {"topic": topic, "tags": tags, "source": f"{key}.md",
                             "year": 2000 + i, "draft": i % 2 == 0})
        for i, (key, (topic, tags, text)) in enumerate(TEXTS.items())]


@pytest.fixture(scope="module")
def embedder(shared_embedding_cache: Path) -> SentenceTransformerEmbedder:  # noqa: F811
    return SentenceTransformerEmbedder(cache=Caches.open(shared_embedding_cache).embeddings)


@pytest.fixture
def memory_connection() -> Iterator[QdrantConnection]:
    connection = QdrantConnection(QdrantLocation(path=":memory:"))
    yield connection
    connection.close()


@contextlib.contextmanager
def local(path: Path) -> Iterator[QdrantConnection]:
    connection = QdrantConnection(QdrantLocation(path=str(path)))
    try:
        yield connection
    finally:
        connection.close()


def _run(retriever: Any, queries: dict[str, str], top_k: int = 100
         ) -> dict[str, dict[str, float]]:
    ids = list(queries)
    found = retriever.retrieve_many([queries[q] for q in ids], top_k=top_k)
    return {q: {c.id: c.score for c in contexts if c.id != q}
            for q, contexts in zip(ids, found, strict=True)}


def _top(run: dict[str, dict[str, float]], qid: str, k: int = 10) -> list[str]:
    return [d for d, _ in sorted(run[qid].items(), key=lambda x: (-x[1], x[0]))[:k]]


def _beir(name: str, max_docs: int | None) -> tuple[list[Document], dict[str, str],
                                                    dict[str, dict[str, int]]]:
    folder = oracle_file("beir-subsets", name)
    errors: list[CaseError] = []
    documents = read_documents(folder / "corpus.jsonl", errors)
    qrels, _ = read_qrels(folder / "qrels" / "test.tsv", errors)
    queries = read_queries(folder / "queries.jsonl", errors)
    assert not errors
    if max_docs:
        documents = documents[:max_docs]
        kept = {d.id for d in documents}
        qrels = {q: {d: g for d, g in r.items() if d in kept} for q, r in qrels.items()}
        qrels = {q: r for q, r in qrels.items() if any(g > 0 for g in r.values())}
    return documents, {q: queries[q] for q in qrels}, qrels


# -- same numbers as FAISS flat and the in-process hybrid ----------------------------------


@pytest.mark.parametrize(("name", "max_docs"), [("dbpedia", None), ("msmarco", 1500)])
def test_same_numbers_as_faiss_and_the_in_process_hybrid(
        embedder: SentenceTransformerEmbedder, memory_connection: QdrantConnection,
        name: str, max_docs: int | None) -> None:
    """Dense through Qdrant (exact) = FAISS flat; Qdrant's RRF = the in-process hybrid ± 0.01.

    dbpedia is the whole 5,000-document subset (qrels with a header line); msmarco's
    qrels have no header line, and our reader keeps its first judgment.
    """
    documents, queries, qrels = _beir(name, max_docs)
    assert len(queries) >= 30
    dense, bm25 = DenseRetriever(embedder, index_type="flat"), BM25Retriever()
    hybrid = HybridRetriever(dense, bm25)
    hybrid.index(documents)
    qdrant_dense = QdrantRetriever(embedder, memory_connection, mode="dense", exact=True)
    qdrant_dense.index(documents)
    qdrant_hybrid = QdrantRetriever(embedder, memory_connection, mode="hybrid")
    qdrant_hybrid.index(documents)
    assert qdrant_hybrid.ensured is not None and qdrant_hybrid.ensured.action == "reused"

    faiss_run, qdrant_run = _run(dense, queries), _run(qdrant_dense, queries)
    for qid in queries:
        assert _top(qdrant_run, qid) == _top(faiss_run, qid), qid
        for doc in _top(faiss_run, qid):
            assert qdrant_run[qid][doc] == pytest.approx(faiss_run[qid][doc], abs=1e-5)
    ours = evaluate_run(qrels, qdrant_run, ["nDCG@10"])["nDCG@10"]
    theirs = evaluate_run(qrels, faiss_run, ["nDCG@10"])["nDCG@10"]
    assert abs(ours - theirs) <= 1e-6, (ours, theirs)

    fused_run = _run(qdrant_hybrid, queries)
    fused = evaluate_run(qrels, fused_run, ["nDCG@10"])["nDCG@10"]
    in_process = evaluate_run(qrels, _run(hybrid, queries), ["nDCG@10"])["nDCG@10"]
    assert abs(fused - in_process) <= 0.01, (fused, in_process)
    moved = sum(_top(fused_run, q) != _top(qdrant_run, q) for q in queries)
    assert moved > len(queries) / 2  # the sparse half changed most rankings: fusion happened


def test_bm25_sparse_vectors_score_like_bm25s(memory_connection: QdrantConnection) -> None:
    """Term weights + Qdrant's IDF modifier = bm25s's Lucene BM25, on the 5,000 msmarco passages."""
    documents, queries, _ = _beir("msmarco", None)
    reference = BM25Retriever()
    reference.index(documents)
    encoder = SparseEncoder()
    from pytest_ragbench.systems.retrievers import search_text

    vectors = encoder.documents([search_text(d) for d in documents])
    client = memory_connection.client()
    client.create_collection("bm25", vectors_config={}, sparse_vectors_config={
        "bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})
    client.upsert("bm25", points=[
        models.PointStruct(id=i, vector={"bm25": models.SparseVector(indices=v.indices,
                                                                     values=v.values)})
        for i, v in enumerate(vectors)])
    texts = [*queries.values(), "what is what is the the capital"]  # repeats count twice
    expected = reference.retrieve_many(texts, top_k=10)
    for text, query, want in zip(texts, encoder.queries(texts), expected, strict=True):
        got = client.query_points("bm25", query=models.SparseVector(
            indices=query.indices, values=query.values), using="bm25", limit=10).points
        assert [round(p.score, 4) for p in got] == [round(c.score, 4) for c in want], text
        assert {documents[int(p.id)].id for p in got} >= {c.id for c in want[:5]
                                                          if c.score > want[5].score + 1e-4}


# -- build if missing, reuse when present, refuse a mismatch --------------------------------


def test_a_second_index_reuses_the_collection(embedder: SentenceTransformerEmbedder,
                                              tmp_path: Path) -> None:
    with local(tmp_path / "qdrant") as connection:
        first = QdrantRetriever(embedder, connection, mode="hybrid", batch_size=4)
        first.index(DOCS)
        assert first.ensured is not None
        assert (first.ensured.action, first.ensured.uploaded, first.ensured.batches) == \
            ("built", 10, 3)
        expected = first.retrieve("Who created Python?", 3)
    with local(tmp_path / "qdrant") as connection:  # another session, same folder
        second = QdrantRetriever(embedder, connection, mode="hybrid")
        attempts = connection.attempts
        second.index(DOCS)
        assert second.ensured is not None and second.ensured.action == "reused"
        assert connection.attempts - attempts == 3  # exists, info, count: no upload
        assert "reused (10 documents, no upload)" in second.describe()
        assert second.retrieve("Who created Python?", 3) == expected
        assert second.collection == first.collection


def test_another_corpus_under_the_same_name_is_refused(embedder: SentenceTransformerEmbedder,
                                                       memory_connection: QdrantConnection
                                                       ) -> None:
    QdrantRetriever(embedder, memory_connection, collection="shared").index(DOCS)
    other = QdrantRetriever(embedder, memory_connection, collection="shared")
    with pytest.raises(QdrantError) as failure:
        other.index(DOCS[:9])
    message = str(failure.value)
    assert message.startswith("collection 'shared' at local mode :memory: does not match "
                              "this corpus: documents: the collection has 10, this corpus 9")
    assert "delete it, or choose another name with --ragbench-collection" in message
    changed = [Document(d.id, d.text + " (edited)", d.metadata) for d in DOCS]
    with pytest.raises(QdrantError, match=r"its documents differ \(corpus fingerprint "):
        other.index(changed)
    assert memory_connection.client().count("shared").count == 10  # left untouched


def test_a_damaged_collection_is_refused(embedder: SentenceTransformerEmbedder,
                                         memory_connection: QdrantConnection) -> None:
    retriever = QdrantRetriever(embedder, memory_connection)
    retriever.index(DOCS)
    client = memory_connection.client()
    client.delete(retriever.collection, points_selector=models.PointIdsList(points=[3]))
    again = QdrantRetriever(embedder, memory_connection)
    with pytest.raises(QdrantError, match="it holds 9 points but its manifest says 10 "
                                          r"documents \(damaged or changed since\)"):
        again.index(DOCS)


def test_a_collection_with_another_schema_is_refused(embedder: SentenceTransformerEmbedder,
                                                     memory_connection: QdrantConnection
                                                     ) -> None:
    client = memory_connection.client()
    client.create_collection("theirs", vectors_config={
        "dense": models.VectorParams(size=8, distance=models.Distance.DOT)})
    retriever = QdrantRetriever(embedder, memory_connection, collection="theirs")
    with pytest.raises(QdrantError) as failure:
        retriever.index(DOCS)
    message = str(failure.value)
    for part in ("its dense vector 'dense' has 8 dimensions, the embedder "
                 "sentence-transformers/all-MiniLM-L6-v2 gives 384",
                 "its dense vector 'dense' uses Dot distance, not cosine",
                 "it has no named sparse vector 'bm25'",
                 "it holds 0 points, the corpus has 10 documents"):
        assert part in message


def test_a_matching_collection_built_elsewhere_is_reused(embedder: SentenceTransformerEmbedder,
                                                         memory_connection: QdrantConnection
                                                         ) -> None:
    built = QdrantRetriever(embedder, memory_connection, collection="ours")
    built.index(DOCS)
    client = memory_connection.client()
    client.update_collection("ours", metadata={MANIFEST_KEY: None})  # as if built by hand
    assert not (client.get_collection("ours").config.metadata or {}).get(MANIFEST_KEY)
    reused = QdrantRetriever(embedder, memory_connection, collection="ours")
    reused.index(DOCS)
    assert "not built by pytest-ragbench (no manifest)" in reused.describe()
    assert reused.retrieve("Eiffel Tower", 1)[0].id == "eiffel"


def _upload_then_die(path: str, cache: str) -> None:
    """Start indexing with batches of 3 and kill this process after the first batch."""
    embedder = SentenceTransformerEmbedder(cache=Caches.open(Path(cache)).embeddings)
    connection = QdrantConnection(QdrantLocation(path=path))

    @contextlib.contextmanager
    def dying_bar(description: str, total: int) -> Iterator[Any]:
        class Bar:
            def update(self, count: int) -> None:
                os.kill(os.getpid(), signal.SIGKILL)
        yield Bar()

    QdrantRetriever(embedder, connection, batch_size=3, progress=dying_bar).index(DOCS)


def test_an_upload_killed_midway_is_rebuilt_by_the_next_run(
        embedder: SentenceTransformerEmbedder, tmp_path: Path,
        shared_embedding_cache: Path) -> None:  # noqa: F811
    path = tmp_path / "qdrant"
    process = multiprocessing.get_context("spawn").Process(
        target=_upload_then_die, args=(str(path), str(shared_embedding_cache)))
    process.start()
    process.join(300)
    assert process.exitcode == -signal.SIGKILL
    client = QdrantClient(path=str(path))
    try:
        (name,) = [c.name for c in client.get_collections().collections]
        assert client.get_collection(name).config.metadata[MANIFEST_KEY]["status"] == \
            "incomplete"
        assert client.count(name).count == 3
    finally:
        client.close()
    with local(path) as connection:
        retriever = QdrantRetriever(embedder, connection)
        retriever.index(DOCS)
        assert retriever.ensured is not None and retriever.ensured.action == "rebuilt"
        assert ("rebuilt: 10 documents uploaded in 1 batch" in retriever.describe()
                and "the previous upload was interrupted (3 of 10 documents, marked "
                    "'incomplete'): rebuilt from scratch" in retriever.describe())
        assert connection.client().count(name).count == 10
        assert retriever.retrieve("Guido van Rossum", 1)[0].id == "python"
    with local(path) as connection:
        again = QdrantRetriever(embedder, connection)
        again.index(DOCS)
        assert again.ensured is not None and again.ensured.action == "reused"


# -- filters and the memory store ----------------------------------------------------------


@pytest.mark.parametrize("filters", [
    {"topic": "tech"}, {"topic": ["tech", "food"]}, {"tags": "biology"},
    {"tags": ["code", "paris"]}, {"draft": True}, {"year": 2003}, {"year": [2001, 2008]},
    {"topic": "science", "tags": "cells"}, {"topic": "nope"}, {"missing": "x"},
])
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_payload_filters_select_what_the_in_process_filter_selects(
        embedder: SentenceTransformerEmbedder, memory_connection: QdrantConnection,
        filters: dict[str, Any], mode: str) -> None:
    dense = DenseRetriever(embedder)
    reference = dense if mode == "dense" else HybridRetriever(dense, BM25Retriever())
    reference.index(DOCS)
    qdrant = QdrantRetriever(embedder, memory_connection, mode=mode)
    qdrant.index(DOCS)
    query = "programming languages and biology of cells"
    want = reference.retrieve(query, top_k=10, filters=filters)
    got = qdrant.retrieve(query, top_k=10, filters=filters)
    assert [c.id for c in got] == [c.id for c in want]
    assert [c.score for c in got] == pytest.approx([c.score for c in want], abs=1e-5)


def test_min_score_and_the_engine_default_fusion(embedder: SentenceTransformerEmbedder,
                                                 memory_connection: QdrantConnection) -> None:
    dense = QdrantRetriever(embedder, memory_connection, mode="dense")
    dense.index(DOCS)
    top3 = dense.retrieve("Paris landmark", 3)
    floor = (top3[1].score + top3[2].score) / 2
    assert [c.id for c in dense.retrieve("Paris landmark", 10, min_score=floor)] == \
        [c.id for c in top3[:2]]
    engine = QdrantRetriever(embedder, memory_connection, rrf_k=None)
    engine.index(DOCS)
    top = engine.retrieve("Guido van Rossum created Python", 3)
    assert top[0].id == "python"
    assert top[0].score == pytest.approx(1 / 2 + 1 / 2)  # rank 1 twice, Qdrant's k=2
    assert "RRF engine default k" in engine.describe()
    assert BM25Retriever().retrieve_many([], 3) == []


MEMORIES = [
    ("user", "I prefer window seats on long flights.", {"topic": "travel"}),
    ("assistant", "Noted: window seat on long-haul flights.", {"topic": "travel"}),
    ("user", "My daughter is allergic to peanuts.", {"topic": "health"}),
    ("user", "Book a table for four at an Italian place.", {"topic": "food"}),
    ("assistant", "I booked Trattoria Roma for four at 8pm.", {"topic": "food"}),
    ("user", "Remind me that the car needs an oil change.", {"topic": "errands"}),
]


@pytest.mark.parametrize(("filters", "min_score", "recency"), [
    (None, None, 0.0), ({"role": "user"}, None, 0.0), ({"role": "assistant"}, 0.2, 0.0),
    ({"topic": ["food", "travel"]}, None, 0.5), (None, 0.9, 0.0),
])
def test_the_memory_store_in_qdrant_answers_like_the_embedded_one(
        embedder: SentenceTransformerEmbedder, memory_connection: QdrantConnection,
        filters: dict[str, Any] | None, min_score: float | None, recency: float) -> None:
    ours, reference = QdrantMemoryStore(embedder, memory_connection), EmbeddingMemoryStore(embedder)
    for store in (ours, reference):
        ids = [store.add_interaction(role, text, meta) for role, text, meta in MEMORIES]
        assert ids == [f"mem-{i}" for i in range(len(MEMORIES))]
    for query in ("where do I like to sit on a plane", "restaurant reservation"):
        want = reference.search_memories(query, 3, filters, min_score, recency)
        got = ours.search_memories(query, 3, filters, min_score, recency)
        assert [(h.id, h.role) for h in got] == [(h.id, h.role) for h in want]
        assert [h.similarity for h in got] == pytest.approx([h.similarity for h in want],
                                                            abs=1e-5)
        assert all(h.metadata["role"] == h.role for h in got)
    ours.clear()
    assert ours.search_memories("anything", 3) == []
    assert not memory_connection.client().collection_exists(ours.collection)
