"""Dense (FAISS), BM25 (bm25s) and hybrid retrieval on the real MiniLM model."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss", reason="needs the extra 'embed'")
pytest.importorskip("bm25s", reason="needs the extra 'embed'")

from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.corpus import load_corpus
from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
from pytest_ragbench.systems.protocols import Document, Retriever
from pytest_ragbench.systems.retrievers import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    default_retriever,
    matches,
    rrf_fuse,
    weighted_fuse,
)
from tests.conftest import oracle_file

TEXTS = {
    "lakers": ("sports", "The Los Angeles Lakers won the NBA championship in 2020."),
    "naismith": ("sports", "Basketball was invented by James Naismith in 1891 in Springfield."),
    "photosynthesis": ("science", "Photosynthesis lets plants turn sunlight into chemical energy."),
    "mitochondria": ("science", "Mitochondria produce most of the cell's supply of ATP."),
    "eiffel": ("travel", "The Eiffel Tower in Paris was completed in 1889."),
    "kyoto": ("travel", "Kyoto has over a thousand Buddhist temples."),
    "python": ("tech", "Python is a programming language created by Guido van Rossum."),
    "sqlite": ("tech", "SQLite is an embedded SQL database engine."),
    "bread": ("food", "Banana bread needs ripe bananas, flour and baking soda."),
    "espresso": ("food", "Espresso is brewed by forcing hot water through ground coffee."),
}
DOCS = [Document(key, text, {"topic": topic, "source": f"{key}.md"})
        for key, (topic, text) in TEXTS.items()]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def dense(embedder: SentenceTransformerEmbedder) -> DenseRetriever:
    retriever = DenseRetriever(embedder)
    retriever.index(DOCS)
    return retriever


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    retriever = BM25Retriever()
    retriever.index(DOCS)
    return retriever


def test_dense_finds_paraphrases(dense: DenseRetriever) -> None:
    assert isinstance(dense, Retriever)
    cases = {"Who created basketball?": "naismith", "How do plants make energy?": "photosynthesis",
             "famous iron landmark in France": "eiffel", "coffee drink": "espresso"}
    for query, expected in cases.items():
        hits = dense.retrieve(query, top_k=3)
        assert hits[0].id == expected, (query, hits)
        assert 0 < hits[0].score <= 1.0001
        assert hits[0].metadata["source"] == f"{expected}.md"


def test_bm25_scores_term_matches_only(bm25: BM25Retriever) -> None:
    hits = bm25.retrieve("Guido Rossum language", top_k=5)
    assert hits[0].id == "python"
    assert all(h.score > 0 for h in hits)
    assert len(bm25.retrieve("zeppelin", top_k=5)) == 0  # no shared term: nothing
    assert bm25.retrieve("the of and", top_k=5) == []  # stopwords only


def test_retrieve_many_equals_retrieve(dense: DenseRetriever, bm25: BM25Retriever) -> None:
    queries = ["basketball history", "database engine", "temples in Japan"]
    for retriever in (dense, bm25):
        batched = retriever.retrieve_many(queries, top_k=4)
        single = [retriever.retrieve(q, top_k=4) for q in queries]
        assert [[c.id for c in row] for row in batched] == [[c.id for c in row] for row in single]
        for b_row, s_row in zip(batched, single, strict=True):
            assert [c.score for c in b_row] == pytest.approx([c.score for c in s_row], abs=1e-5)


def test_hybrid_rrf_is_the_reciprocal_rank_sum(dense: DenseRetriever, bm25: BM25Retriever) -> None:
    hybrid = HybridRetriever(dense, bm25, fusion="rrf", candidates=10)
    hybrid.index(DOCS)  # already indexed: nothing is rebuilt
    query = "Which city has the Eiffel Tower?"
    dense_ids = [c.id for c in dense.retrieve(query, top_k=10)]
    bm25_ids = [c.id for c in bm25.retrieve(query, top_k=10)]
    expected: dict[str, float] = {}
    for ranked in (dense_ids, bm25_ids):
        for rank, doc_id in enumerate(ranked, start=1):
            expected[doc_id] = expected.get(doc_id, 0.0) + 1 / (60 + rank)
    got = hybrid.retrieve(query, top_k=10)
    assert {c.id: c.score for c in got} == pytest.approx(expected)
    assert got[0].id == "eiffel"
    assert rrf_fuse([[("a", 9.0), ("b", 1.0)], [("b", 5.0)]], k=60) == [
        ("b", pytest.approx(1 / 62 + 1 / 61)), ("a", pytest.approx(1 / 61))]


def test_weighted_fusion_extremes_follow_one_retriever(dense: DenseRetriever,
                                                       bm25: BM25Retriever) -> None:
    query = "bananas and flour"
    only_dense = HybridRetriever(dense, bm25, fusion="weighted", weight=1.0)
    only_dense.index(DOCS)
    assert [c.id for c in only_dense.retrieve(query, 3)] == [c.id for c in dense.retrieve(query, 3)]
    assert weighted_fuse([[("a", 2.0), ("b", 1.0)], [("b", 7.0), ("c", 3.0)]], [0.5, 0.5]) == [
        ("a", 0.5), ("b", 0.5), ("c", 0.0)]  # ties keep first-seen order
    with pytest.raises(ValueError, match="weight"):
        HybridRetriever(dense, bm25, fusion="weighted", weight=1.5)


def test_filters_and_min_score(dense: DenseRetriever, bm25: BM25Retriever) -> None:
    hybrid = HybridRetriever(dense, bm25)
    hybrid.index(DOCS)
    for retriever in (dense, bm25, hybrid):
        hits = retriever.retrieve("energy for plants and cells", top_k=10,
                                  filters={"topic": "science"})
        assert hits and {c.metadata["topic"] for c in hits} == {"science"}
        hits = retriever.retrieve("energy", top_k=10, filters={"topic": ["food", "tech"]})
        assert {c.metadata["topic"] for c in hits} <= {"food", "tech"}
        assert retriever.retrieve("energy", filters={"topic": "nothing"}) == []
        assert retriever.retrieve("energy", filters={"missing_key": 1}) == []
    strict = dense.retrieve("Who created basketball?", top_k=10, min_score=0.5)
    assert [c.id for c in strict] == ["naismith"]
    assert all(c.score >= 0.5 for c in strict)
    assert matches({"tags": ["a", "b"]}, {"tags": "b"})
    assert not matches({"tags": ["a", "b"]}, {"tags": ["c"]})


def test_hnsw_agrees_with_flat_and_filters_stay_exact(embedder: SentenceTransformerEmbedder,
                                                      dense: DenseRetriever) -> None:
    hnsw = DenseRetriever(embedder, index_type="hnsw")
    hnsw.index(DOCS)
    for query in ("basketball", "coffee", "old towers", "programming"):
        assert [c.id for c in hnsw.retrieve(query, 3)] == [c.id for c in dense.retrieve(query, 3)]
    filtered = hnsw.retrieve("coffee", top_k=10, filters={"topic": "travel"})
    expected = dense.retrieve("coffee", top_k=10, filters={"topic": "travel"})
    assert [c.id for c in filtered] == [c.id for c in expected]
    assert [c.score for c in filtered] == pytest.approx([c.score for c in expected], abs=1e-5)


def test_index_is_persisted_and_reused(tmp_path: Path) -> None:
    caches = Caches.open(tmp_path)
    first_embedder = SentenceTransformerEmbedder(cache=caches.embeddings)
    first = default_retriever(first_embedder, index_dir=caches.index_dir)
    first.index(DOCS)
    first.retrieve_many(["basketball", "coffee"])
    assert not first.loaded_from_cache
    assert len(list(tmp_path.joinpath("indexes").glob("*.faiss"))) == 1
    assert len(list(tmp_path.joinpath("indexes").glob("*.bm25"))) == 1

    again = Caches.open(tmp_path)
    second_embedder = SentenceTransformerEmbedder(cache=again.embeddings)
    second = default_retriever(second_embedder, index_dir=again.index_dir)
    second.index(DOCS)
    assert second.loaded_from_cache
    results = second.retrieve_many(["basketball", "coffee"])
    assert not second_embedder.model_loaded  # corpus index and query vectors came from disk
    assert [r[0].id for r in results] == ["naismith", "espresso"]

    changed = [*DOCS[:-1], Document("espresso", "Espresso is a strong coffee.", DOCS[-1].metadata)]
    third = default_retriever(second_embedder, index_dir=again.index_dir)
    third.index(changed)
    assert not third.loaded_from_cache  # another corpus, another index


NEVER_SEARCHES = """
import sys
from pathlib import Path
from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.retrievers import default_retriever

caches = Caches.open(Path(sys.argv[1]))
docs = [Document(line.split("\\t")[0], line.split("\\t")[1]) for line in sys.argv[2:]]
retriever = default_retriever(SentenceTransformerEmbedder(cache=caches.embeddings),
                              index_dir=caches.index_dir)
retriever.index(docs)
before = sorted(m for m in ("faiss", "bm25s", "numba") if m in sys.modules)
top = retriever.retrieve("Guido Rossum", 1)[0].id
after = sorted(m for m in ("faiss", "bm25s") if m in sys.modules)
print(retriever.loaded_from_cache, before, top, after)
"""


def test_a_persisted_index_is_read_at_the_first_search_only(tmp_path: Path) -> None:
    """A process that indexes but never searches (an xdist worker given only items that
    answer from given passages) imports neither faiss nor bm25s (numba): 0.5 s of CPU."""
    import subprocess
    import sys

    caches = Caches.open(tmp_path)
    default_retriever(SentenceTransformerEmbedder(cache=caches.embeddings),
                      index_dir=caches.index_dir).index(DOCS)
    del caches
    lines = [f"{d.id}\t{d.text}" for d in DOCS]
    fresh = subprocess.run([sys.executable, "-c", NEVER_SEARCHES, str(tmp_path), *lines],
                           capture_output=True, text=True, timeout=300, check=True)
    assert fresh.stdout.split("\n")[0] == "True [] python ['bm25s', 'faiss']"


def test_an_unreadable_persisted_index_is_built_again_at_the_first_search(
        tmp_path: Path) -> None:
    caches = Caches.open(tmp_path)
    embedder = SentenceTransformerEmbedder(cache=caches.embeddings)
    default_retriever(embedder, index_dir=caches.index_dir).index(DOCS)
    for path in tmp_path.joinpath("indexes").glob("*.faiss"):
        path.write_bytes(b"not a faiss index")
    retriever = default_retriever(embedder, index_dir=caches.index_dir)
    retriever.index(DOCS)
    assert retriever.loaded_from_cache  # the files are there: read when first searched
    assert retriever.retrieve("Guido Rossum", 1)[0].id == "python"
    assert not retriever.dense.loaded_from_cache and retriever.sparse.loaded_from_cache
    assert retriever.dense.retrieve("Guido Rossum", 1)[0].id == "python"


def test_for_corpus_builds_each_corpus_once(dense: DenseRetriever) -> None:
    other = [Document("x", "Mount Everest is the highest mountain."),
             Document("y", "The Nile is a long river.")]
    sibling = dense.for_corpus(other)
    assert sibling is not dense and sibling is dense.for_corpus(list(other))
    assert dense.for_corpus(DOCS) is dense
    assert sibling.retrieve("tallest peak", 1)[0].id == "x"
    assert dense.retrieve("tallest peak", 1)[0].id in TEXTS


def test_real_beir_passages_come_back_under_their_own_ids(
        embedder: SentenceTransformerEmbedder) -> None:
    corpus = load_corpus([oracle_file("beir-subsets", "msmarco")], errors=[])[:120]
    retriever = default_retriever(embedder)
    retriever.index(corpus)
    probes = corpus[::10]
    results = retriever.retrieve_many([d.text for d in probes], top_k=1)
    assert [r[0].id for r in results] == [d.id for d in probes]
    sparse = retriever.sparse.retrieve_many([d.text for d in probes], top_k=1)
    assert [r[0].id for r in sparse] == [d.id for d in probes]


def _build_bm25(index_dir: str, barrier: Any, out: Any) -> None:
    from pytest_ragbench.systems.retrievers import BM25Retriever

    retriever = BM25Retriever(index_dir=Path(index_dir))
    barrier.wait(60)
    retriever.index(DOCS)
    out.put((retriever.loaded_from_cache, retriever.retrieve("Guido Rossum", 1)[0].id))


def test_two_processes_building_one_index_build_it_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_build_bm25, args=(str(tmp_path), barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert results == [(False, "python"), (True, "python")]  # one built it, the other loaded it
    assert len(list(tmp_path.glob("*.bm25"))) == 1
    assert not list(tmp_path.glob(".*"))  # no temporary folder left behind
