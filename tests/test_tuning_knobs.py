"""Seed 004's knobs of the embedded system, on the real MiniLM model, FAISS, bm25s and SmolLM2.

Each knob is off by default; these check that switched on it changes what comes back the
way its definition says, measured independently of the code under test where possible.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

pytest.importorskip("faiss", reason="needs the extra 'embed'")
pytest.importorskip("bm25s", reason="needs the extra 'embed'")

from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.default import EmbeddedSystem
from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder, minilm_path
from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.retrievers import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    default_retriever,
)
from pytest_ragbench.systems.tuning import by_recency, llm_grades
from tests.project import RagbenchProject

TEXTS = {
    "lakers": ("sports", "2020-10-11", "The Los Angeles Lakers won the NBA championship in 2020."),
    "celtics": ("sports", "2024-06-17", "The Boston Celtics won the NBA championship in 2024."),
    "naismith": ("sports", "1891-12-21", "Basketball was invented by James Naismith in 1891."),
    "photosynthesis": ("science", "2001-01-01", "Plants turn sunlight into energy."),
    "mitochondria": ("science", "2002-01-01", "Mitochondria produce ATP."),
    "eiffel": ("travel", "2003-01-01", "The Eiffel Tower in Paris was completed in 1889."),
    "bread": ("food", "2004-01-01", "Banana bread needs ripe bananas, flour and baking soda."),
    "espresso": ("food", "2005-01-01", "Espresso is brewed by forcing hot water through coffee."),
}
DOCS = [Document(key, text, {"topic": topic, "date": date, "source": f"{key}.md"})
        for key, (topic, date, text) in TEXTS.items()]
QUESTION = "Which team won the NBA championship?"


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def dense(embedder: SentenceTransformerEmbedder) -> DenseRetriever:
    retriever = DenseRetriever(embedder)
    retriever.index(DOCS)
    return retriever


def _cosine(embedder: SentenceTransformerEmbedder, a: str, b: str) -> float:
    vectors = embedder.embed([a, b])
    return float(vectors[0] @ vectors[1])


def test_min_score_drops_exactly_the_contexts_under_the_similarity(
        dense: DenseRetriever, embedder: SentenceTransformerEmbedder) -> None:
    everything = EmbeddedSystem(dense, top_k=8, decline_below=None).contexts(QUESTION)
    cosines = {c.id: _cosine(embedder, QUESTION, c.text) for c in everything}
    cut = sorted(cosines.values())[len(cosines) // 2]  # about half above, half below
    kept = EmbeddedSystem(dense, top_k=8, decline_below=None, min_score=cut).contexts(QUESTION)
    assert {c.id for c in kept} == {i for i, s in cosines.items() if s >= cut}
    assert 0 < len(kept) < len(everything)


def test_min_score_needs_a_dense_part() -> None:
    bm25 = BM25Retriever()
    with pytest.raises(ValueError, match="needs a retriever with a dense part"):
        EmbeddedSystem(bm25, min_score=0.3)


def test_a_metadata_filter_keeps_only_matching_documents(dense: DenseRetriever) -> None:
    system = EmbeddedSystem(dense, top_k=5, decline_below=None, filters={"topic": "food"})
    contexts = system.contexts(QUESTION)
    assert {c.metadata["topic"] for c in contexts} == {"food"}
    assert len(contexts) == 2


def test_recency_puts_the_newer_champion_first(dense: DenseRetriever) -> None:
    question = "Lakers NBA championship"
    plain = EmbeddedSystem(dense, top_k=2, decline_below=None).contexts(question)
    assert plain[0].id == "lakers"  # named in the question: the more similar one
    recent = EmbeddedSystem(dense, top_k=2, decline_below=None,
                            recency_weight=0.5).contexts(question)
    assert recent[0].id == "celtics"
    # the rescoring is seed 004's decay: 2020-10-11 is 3.68 years before 2024-06-17
    lakers = next(c for c in dense.retrieve(question, top_k=8) if c.id == "lakers")
    age = (dt.date(2024, 6, 17) - dt.date(2020, 10, 11)).days / 365.25
    rescored = {c.id: c.score for c in by_recency(dense.retrieve(question, top_k=8), 0.1)}
    assert rescored["lakers"] == pytest.approx(lakers.score * (1 - 0.1 * age), rel=1e-6)


def test_fusion_weight_one_and_zero_are_the_dense_and_bm25_orders(
        embedder: SentenceTransformerEmbedder, dense: DenseRetriever) -> None:
    bm25 = BM25Retriever()
    bm25.index(DOCS)
    question = "bread with bananas and coffee"
    dense_ids = [c.id for c in dense.retrieve(question, top_k=3)]
    bm25_ids = [c.id for c in bm25.retrieve(question, top_k=3)]
    assert dense_ids != bm25_ids  # else the test shows nothing
    for weight, expected in ((1.0, dense_ids), (0.0, bm25_ids)):
        hybrid = default_retriever(embedder, weight=weight, fusion="weighted")
        assert isinstance(hybrid, HybridRetriever) and hybrid.weight == weight
        hybrid.index(DOCS)
        got = [c.id for c in hybrid.retrieve(question, top_k=len(expected))]
        assert got[:len(expected)] == expected


def test_the_embedding_model_keys_the_cached_vectors_and_the_index(tmp_path: Path) -> None:
    caches = Caches.open(tmp_path / "cache")
    bundled = SentenceTransformerEmbedder(cache=caches.embeddings)
    folder = str(minilm_path())
    other = SentenceTransformerEmbedder(folder, model_id=folder, cache=caches.embeddings)
    texts = [d.text for d in DOCS]
    bundled.embed(texts)
    other.embed(texts)
    assert other.encoded == len(texts)  # nothing reused from the other model's vectors
    first, second = DenseRetriever(bundled), DenseRetriever(other)
    first.index(DOCS)
    second.index(DOCS)
    assert first.fingerprint != second.fingerprint


def test_an_unavailable_device_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: nothing unavailable to ask for")
    from pytest_ragbench.errors import RagbenchError
    from pytest_ragbench.systems.embedder import resolve_device

    assert resolve_device("auto") in ("cpu", "mps")
    with pytest.raises(RagbenchError, match="ragbench_device = cuda: torch sees no CUDA device"):
        resolve_device("cuda")


@pytest.fixture(scope="module")
def generator(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pytest_ragbench.systems.local_llm import LlamaCppGenerator, find_gguf, local_llm_problem

    problem = local_llm_problem()
    if problem:
        pytest.skip(problem)
    caches = Caches.open(tmp_path_factory.mktemp("llm-cache"))
    model = LlamaCppGenerator(find_gguf(), cache=caches.responses)  # type: ignore[arg-type]
    yield model
    model.close()


def test_llm_reranking_orders_the_broad_candidates_by_the_generators_grades(
        dense: DenseRetriever, generator) -> None:  # type: ignore[no-untyped-def]
    system = EmbeddedSystem(dense, generator, top_k=3, decline_below=None, rerank="llm",
                            rerank_k=6)
    kept = system.contexts(QUESTION)
    broad = dense.retrieve(QUESTION, top_k=6)
    grades = llm_grades(generator, QUESTION, broad)  # the cache answers: the same grades
    pairs = enumerate(zip(broad, grades, strict=True))
    graded = sorted(((g, -rank, c.id) for rank, (c, g) in pairs if g is not None), reverse=True)
    assert [c.id for c in kept] == [i for _, _, i in graded][:3]
    assert [c.score for c in kept] == sorted((float(g) for g, _, _ in graded), reverse=True)[:3]


def test_the_model_calls_of_llm_reranking_are_reported_with_the_answer(
        dense: DenseRetriever, generator) -> None:  # type: ignore[no-untyped-def]
    """Each graded candidate is a model call of the role ``retrieval``, beside the answer's."""
    from pytest_ragbench.kinds.answer_common import usage_of

    system = EmbeddedSystem(dense, generator, top_k=3, decline_below=None, rerank="llm",
                            rerank_k=6, max_tokens=8)
    answer = system.answer(QUESTION)
    usage = usage_of(answer)
    assert usage["system"]["calls"] == 1
    assert usage["retrieval"]["calls"] == 6
    assert usage["retrieval"]["prompt_tokens"] > 0
    plain = EmbeddedSystem(dense, generator, top_k=3, decline_below=None, max_tokens=8)
    assert "retrieval" not in usage_of(plain.answer(QUESTION))


@pytest.fixture(scope="module")
def cross_encoder_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sentence-transformers CrossEncoder folder built from the bundled MiniLM.

    No trained cross-encoder can be fetched offline, so its scoring head is freshly (and
    seededly) initialised: the scores carry no meaning, but the folder is loaded, run and
    reordered by exactly as a trained one would be.
    """
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(7)
    folder = tmp_path_factory.mktemp("cross-encoder")
    CrossEncoder(str(minilm_path()), num_labels=1, device="cpu").save(str(folder))
    return folder


def test_a_cross_encoder_folder_orders_the_broad_candidates_by_its_scores(
        dense: DenseRetriever, cross_encoder_folder: Path) -> None:
    from sentence_transformers import CrossEncoder

    system = EmbeddedSystem(dense, top_k=3, decline_below=None,
                            rerank=str(cross_encoder_folder), rerank_k=6)
    kept = system.contexts(QUESTION)
    broad = dense.retrieve(QUESTION, top_k=6)
    scores = CrossEncoder(str(cross_encoder_folder), device="cpu").predict(
        [(QUESTION, str(c.text)) for c in broad], show_progress_bar=False)
    expected = sorted(zip((float(s) for s in scores), (c.id for c in broad), strict=True),
                      reverse=True)[:3]
    assert [c.id for c in kept] == [i for _, i in expected]
    assert [c.score for c in kept] == pytest.approx([s for s, _ in expected], abs=1e-5)


def test_query_expansion_retrieves_with_the_generators_terms(
        dense: DenseRetriever, generator) -> None:  # type: ignore[no-untyped-def]
    from pytest_ragbench.systems.tuning import expand_query

    system = EmbeddedSystem(dense, generator, top_k=3, decline_below=None,
                            query_expansion=True)
    expanded = expand_query(generator, QUESTION)
    assert expanded.startswith(QUESTION) and len(expanded) > len(QUESTION)
    assert [c.id for c in system.contexts(QUESTION)] == \
        [c.id for c in dense.retrieve(expanded, top_k=3)]


CASES = """
kind: vector
cases:
  - id: champion
    question: "Which team won the NBA championship in 2024?"
    ground_truth: "The Boston Celtics."
    expected_sources: [celtics.md]
"""


def test_the_ini_keys_reach_the_embedded_system(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).ini(
        ragbench_min_score="0.1", ragbench_recency_weight="0.2", ragbench_rerank_k="7",
        ragbench_filter="topic = sports")
    project.corpus({f"{key}.md": f"---\ntopic: {topic}\ndate: {date}\n---\n{text}\n"
                    for key, (topic, date, text) in TEXTS.items()})
    project.cases("vector.yaml", CASES)
    project.conftest("""
import pytest

@pytest.fixture(scope="session")
def ragbench_llm():
    pytest.skip("extractive answers are enough here")
""")
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    system = project.results()["components"]["system"]
    assert "min_score=0.1" in system and "recency_weight=0.2" in system
    assert "filters={'topic': 'sports'}" in system
    item = project.items_by_case()["champion"]
    assert item["metrics"]["source_hit@5"] == 1.0


def test_a_bad_ini_value_is_a_usage_error_naming_the_key(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).ini(ragbench_device="gpu")
    project.corpus({"a.md": "Some text about basketball."})
    project.cases("vector.yaml", CASES)
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert "ragbench_device = 'gpu': expected auto, cpu, cuda, cuda:N or mps" in output
