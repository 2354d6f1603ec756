"""The system fixtures in real pytest sessions (pytester), defaults and overrides."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy  # noqa: F401  (loaded before inline runs: numpy cannot be imported twice)
import pytest

from pytest_ragbench.testing import LoopbackServer

INI = """
[pytest]
ragbench_corpus = corpus
"""
HEADER = """
import pytest
"""


def llm_args(server: LoopbackServer) -> list[str]:
    return ["--ragbench-llm-url", server.url, "--ragbench-llm-model", "loop-model",
            "--ragbench-concurrency", "4"]


CORPUS = {
    "tower.md": "---\ntitle: Eiffel Tower\n---\nThe Eiffel Tower in Paris was completed in 1889.\n",
    "lakers.md": "# Lakers\n\nThe Lakers won the NBA championship in 2020.\n",
    "coffee.txt": "Espresso is brewed by forcing hot water through ground coffee.\n",
}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def make_corpus(pytester: pytest.Pytester) -> None:
    for name, text in CORPUS.items():
        pytester.path.joinpath("corpus").mkdir(exist_ok=True)
        pytester.path.joinpath("corpus", name).write_text(text, encoding="utf-8")


def test_the_fixtures_module_imports_nothing_heavy() -> None:
    code = ("import sys, pytest_ragbench.systems.fixtures\n"
            "heavy = ['numpy', 'torch', 'httpx', 'faiss', 'bm25s', 'sentence_transformers',"
            " 'llama_cpp', 'sqlalchemy']\n"
            "print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "[]"


def test_default_fixtures_in_a_session(pytester: pytest.Pytester,
                                       server: LoopbackServer) -> None:
    # find_spec, not importorskip: torch imported here would be forgotten when pytester
    # restores sys.modules, and a later import of it in this process fails ("bad call flags")
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("needs the extra 'embed'")
    make_corpus(pytester)
    pytester.makeini(INI)
    pytester.makepyfile(test_defaults="""
        def test_retriever(ragbench_retriever):
            hits = ragbench_retriever.retrieve("When was the tower in Paris finished?", top_k=2)
            assert hits[0].metadata["source"] == "tower.md"
            assert hits[0].metadata["title"] == "Eiffel Tower"

        def test_embedder(ragbench_embedder):
            assert ragbench_embedder.embed(["x"]).shape == (1, 384)

        def test_memory_one(ragbench_memory):
            ragbench_memory.add_interaction("user", "hello", {})
            assert len(ragbench_memory.search_memories("hello")) == 1

        def test_memory_two(ragbench_memory):
            ragbench_memory.add_interaction("user", "again", {})
            assert len(ragbench_memory.search_memories("again")) == 1

        def test_judge(ragbench_judge):
            assert ragbench_judge is None

        def test_system(ragbench_system, request):
            answer = ragbench_system.answer("Who won the NBA championship in 2020?")
            assert answer.text == "echo: Who won the NBA championship in 2020?"
            assert answer.contexts[0].metadata["source"] == "lakers.md"
            assert "loop-model" in ragbench_system.describe()
            from pytest_ragbench.systems.components import components
            found = components(request.config)  # what the report names
            assert "all-MiniLM-L6-v2" in found["embedder"]
            assert "HybridRetriever(rrf k=60" in found["retriever"]
            assert found["generator"].startswith("loop-model at http://127.0.0.1:")
            assert "loop-model" in found["system"]
    """)
    # in a subprocess: an inline run would unload the native libraries it imported
    # (torch, faiss), and loading them twice in one process crashes
    pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                  *llm_args(server)).assert_outcomes(passed=6)
    assert len(server.requests) == 1
    cache = pytester.path / ".ragbench_cache"
    assert (cache / "embeddings.sqlite3").is_file() and any((cache / "indexes").glob("*.faiss"))
    # a repeated session: the reply comes from the cache, no model call
    pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                  *llm_args(server)).assert_outcomes(passed=6)
    assert len(server.requests) == 1


def test_override_only_the_retriever_and_no_local_llm(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if the extra were not installed
    pytester.makeconftest(HEADER + """
from pytest_ragbench.systems.protocols import Context

class MyRetriever:
    queries = []
    def index(self, documents):
        pass
    def retrieve(self, query, top_k=5, filters=None, min_score=None):
        self.queries.append(query)
        return [Context("mine-1", "The answer is forty-two. Nothing else.", 0.9, {"source": "m"})]
    def retrieve_many(self, queries, top_k=5, filters=None, min_score=None):
        return [self.retrieve(q, top_k) for q in queries]

@pytest.fixture(scope="session")
def ragbench_retriever():
    return MyRetriever()
""")
    pytester.makepyfile(test_override="""
        from conftest import MyRetriever

        def test_llm(ragbench_llm):
            pass

        def test_system(ragbench_system):
            answer = ragbench_system.answer("What is the answer?")
            assert [c.id for c in answer.contexts] == ["mine-1"]
            assert answer.text == "The answer is forty-two."
            assert MyRetriever.queries == ["What is the answer?"]
            assert "extractive" in ragbench_system.describe()
            assert "local-llm" in ragbench_system.describe()
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*no generator*install the extra 'local-llm'*"])


def test_override_retriever_and_llm_keeps_the_embedded_system(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HEADER + """
from pytest_ragbench.systems.protocols import Context, Generation, Usage

class OneDoc:
    def index(self, documents):
        pass
    def retrieve(self, query, top_k=5, filters=None, min_score=None):
        return [Context("doc", "Text.", 1.0, {"title": "T"})]
    def retrieve_many(self, queries, top_k=5, filters=None, min_score=None):
        return [self.retrieve(q) for q in queries]

class Shouter:
    model_id = "shouter"
    def generate(self, messages, **params):
        return Generation(messages[-1]["content"].upper(), "shouter", Usage(3, 1, 4))

@pytest.fixture(scope="session")
def ragbench_retriever():
    return OneDoc()

@pytest.fixture(scope="session")
def ragbench_llm():
    return Shouter()
""")
    pytester.makepyfile(test_gen="""
        def test_system(ragbench_system):
            answer = ragbench_system.answer("quiet please")
            assert answer.text == "QUIET PLEASE" and answer.usage.total_tokens == 4
            assert "generator shouter" in ragbench_system.describe()
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


OVERRIDE_SYSTEM = """
import json
from pytest_ragbench.systems.fixtures import ANSWER_REQUEST
from pytest_ragbench.systems.protocols import Answer, AnswerRequest

class MyApp:
    calls = []
    def answer(self, question, history=None):
        self.calls.append(question)
        return Answer(text=f"my answer to {question}")

@pytest.fixture(scope="session")
def ragbench_system():
    return MyApp()

def pytest_collection_modifyitems(items):
    # what the plugin's item classes do: attach each item's question at collection
    for item in items:
        item.stash[ANSWER_REQUEST] = AnswerRequest(f"q{item.callspec.params['n']}")

def pytest_sessionfinish(session):
    name = getattr(session.config, "workerinput", {}).get("workerid", "main")
    session.config.rootpath.joinpath(f"calls-{name}.json").write_text(json.dumps(MyApp.calls))
"""

OVERRIDE_TESTS = """
import pytest
from pytest_ragbench.systems.fixtures import ANSWER_REQUEST

@pytest.mark.parametrize("n", range(6))
def test_item(n, request, ragbench_system, ragbench_prefetch):
    answer = ragbench_prefetch.answer(request.node.nodeid, ragbench_system,
                                      request.node.stash[ANSWER_REQUEST])
    assert answer.text == f"my answer to q{n}"
"""


def _calls(pytester: pytest.Pytester) -> list[str]:
    return sorted(c for f in pytester.path.glob("calls-*.json")
                  for c in json.loads(f.read_text()))


def test_override_the_whole_system_and_prefetch_only_selected_items(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HEADER + OVERRIDE_SYSTEM)
    pytester.makepyfile(test_app=OVERRIDE_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "1 or 3 or 5")
    result.assert_outcomes(passed=3, deselected=3)
    assert _calls(pytester) == ["q1", "q3", "q5"]  # selected items only, each asked once
    result = pytester.runpytest("-p", "no:cacheprovider", "-x", "-k", "not 0")
    result.assert_outcomes(passed=5, deselected=1)


def test_override_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(HEADER + OVERRIDE_SYSTEM)
    pytester.makepyfile(test_app=OVERRIDE_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=6)
    assert _calls(pytester) == [f"q{n}" for n in range(6)]  # no duplicate calls on workers


def test_without_llm_url_the_generator_is_the_local_model(pytester: pytest.Pytester) -> None:
    from pytest_ragbench.systems.local_llm import local_llm_problem

    problem = local_llm_problem()  # also imports llama_cpp in the outer process
    if problem:
        pytest.skip(problem)
    pytester.makeconftest(HEADER + """
@pytest.fixture(scope="session")
def ragbench_retriever():
    from pytest_ragbench.systems.retrievers import BM25Retriever
    return BM25Retriever()
""")
    pytester.makepyfile(test_local="""
        def test_local(ragbench_llm, ragbench_system):
            assert type(ragbench_llm).__name__ == "LlamaCppGenerator"
            assert "SmolLM2-135M-Instruct" in ragbench_system.describe()
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
