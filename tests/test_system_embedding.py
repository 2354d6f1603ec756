"""The default embedder and memory store, on the real all-MiniLM-L6-v2 model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers", reason="needs the extra 'embed'")

from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder, minilm_path
from pytest_ragbench.systems.memory import EmbeddingMemoryStore
from pytest_ragbench.systems.protocols import Embedder, MemoryStore


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_rows_are_normalised_float32_and_match_bare_encode(
        embedder: SentenceTransformerEmbedder) -> None:
    texts = ["The cat sat on the mat.", "Quantum computers use qubits.", "The cat sat on the mat."]
    vectors = embedder.embed(texts)
    assert isinstance(embedder, Embedder)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(str(minilm_path()), device="cpu").encode(
        texts[:2], normalize_embeddings=True)
    np.testing.assert_allclose(vectors[:2], bare, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_paraphrases_are_closer_than_unrelated_texts(embedder: SentenceTransformerEmbedder) -> None:
    a, b, c = embedder.embed(["How old is the Eiffel Tower?",
                              "When was the Eiffel Tower built?",
                              "Best recipe for banana bread"])
    assert float(a @ b) > float(a @ c) + 0.3


def test_a_warm_cache_never_loads_the_model(tmp_path: Path) -> None:
    texts = [f"document number {i} about topic {i % 7}" for i in range(50)]
    cold = SentenceTransformerEmbedder(cache=Caches.open(tmp_path).embeddings)
    first = cold.embed(texts)
    assert cold.encoded == 50 and cold.stats()["misses"] == 50
    warm = SentenceTransformerEmbedder(cache=Caches.open(tmp_path).embeddings)
    second = warm.embed(list(reversed(texts)))
    assert not warm.model_loaded and warm.encoded == 0
    assert warm.stats()["hits"] == 50
    np.testing.assert_array_equal(first, second[::-1])
    assert cold.embed([*texts[:3], "one new text"]).shape == (4, 384)
    assert cold.encoded == 51  # only the new text went through the model


# --- memory store ------------------------------------------------------------------------

DEBATE = [
    ("moderator", "Welcome to the debate on nuclear energy safety.", {"turn": 0}),
    ("proponent", "Nuclear energy is the safest energy source with lowest death rate per TWh.",
     {"turn": 1}),
    ("opponent", "Nuclear waste remains dangerous for thousands of years.", {"turn": 2}),
    ("proponent", "Modern reactors have passive safety systems.", {"turn": 3}),
    ("opponent", "Solar costs have dropped 90% in the last decade.", {"turn": 4}),
]


def fill(store: EmbeddingMemoryStore) -> list[str]:
    return [store.add_interaction(role, content, meta) for role, content, meta in DEBATE]


def test_memory_scores_are_cosine_similarities(embedder: SentenceTransformerEmbedder) -> None:
    store = EmbeddingMemoryStore(embedder)
    assert isinstance(store, MemoryStore)
    ids = fill(store)
    assert len(set(ids)) == len(ids)
    query = "What did the proponent say about safety?"
    hits = store.search_memories(query, top_k=5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    vectors = embedder.embed([query] + [c for _, c, _ in DEBATE])
    expected = {ids[i]: float(vectors[0] @ vectors[i + 1]) for i in range(len(DEBATE))}
    for hit in hits:
        assert hit.similarity == pytest.approx(expected[hit.id], abs=1e-5)
        assert hit.score == pytest.approx(hit.similarity)
        assert hit.metadata["role"] == hit.role
    assert {h.id for h in hits} == set(ids)
    assert hits[0].to_dict()["role"] == hits[0].role


def test_memory_exact_text_is_found_first(embedder: SentenceTransformerEmbedder) -> None:
    store = EmbeddingMemoryStore(embedder)
    ids = fill(store)
    for i, (_, content, _) in enumerate(DEBATE):
        assert store.search_memories(content, top_k=1)[0].id == ids[i]


def test_memory_filters_top_k_min_score_and_clear(embedder: SentenceTransformerEmbedder) -> None:
    store = EmbeddingMemoryStore(embedder)
    ids = fill(store)
    hits = store.search_memories("energy", top_k=5, filter_metadata={"role": "opponent"})
    assert {h.id for h in hits} == {ids[2], ids[4]}
    hits = store.search_memories("energy", filter_metadata={"turn": [1, 3]})
    assert {h.id for h in hits} == {ids[1], ids[3]}
    assert len(store.search_memories("energy", top_k=2)) == 2
    floor = store.search_memories("What was said about cryptocurrency mining?", min_score=0.5)
    assert all(h.similarity >= 0.5 for h in floor)
    everything = store.search_memories("What was said about cryptocurrency mining?")
    assert len(floor) < len(everything)
    store.clear()
    assert store.search_memories("energy") == []
    new_id = store.add_interaction("user", "hello", None)
    assert new_id not in ids  # ids stay unique across clear()


def test_memory_recency_weight(embedder: SentenceTransformerEmbedder) -> None:
    store = EmbeddingMemoryStore(embedder)
    ids = fill(store)
    newest_first = store.search_memories("anything", top_k=5, recency_weight=1.0)
    assert [h.id for h in newest_first] == list(reversed(ids))
    half = store.search_memories("nuclear", top_k=5, recency_weight=0.5)
    for hit in half:
        recency = ids.index(hit.id) / (len(ids) - 1)
        assert hit.score == pytest.approx(0.5 * hit.similarity + 0.5 * recency)
    with pytest.raises(ValueError, match="recency_weight"):
        store.search_memories("x", recency_weight=2.0)


def test_memories_are_embedded_in_one_batch(tmp_path: Path) -> None:
    counting = SentenceTransformerEmbedder(cache=Caches.open(tmp_path).embeddings)
    store = EmbeddingMemoryStore(counting)
    fill(store)
    assert counting.encoded == 0  # nothing embedded until the first search
    calls = []
    original = counting.embed

    def spy(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return original(texts)

    counting.embed = spy  # type: ignore[method-assign]
    store.search_memories("safety")
    store.search_memories("waste")
    assert calls == [len(DEBATE), 1, 1]
