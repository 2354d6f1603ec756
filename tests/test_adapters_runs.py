"""Whole runs through the adapters, with the real MiniLM embedder (subprocess pytester runs).

- One line in conftest.py plugs a LangChain chain, a LlamaIndex chat engine or a Haystack
  pipeline in; the run is green, the contexts are the app's, prior turns reach its model.
- The bundled vector cases (test_cases/nba_vector.yaml over test_cases/corpus/) evaluated
  through each adapter, and through the same app behind a FastAPI service by URL, give the
  retrieval metrics of the same dense retriever (MiniLM + FAISS) used directly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.adapter_apps import COMPARED as NAMES
from tests.adapter_apps import SERVICE_INI, SYSTEMS_CONFTEST
from tests.helpers import four_documents
from tests.project import RagbenchProject
from tests.rag_service import serve

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")
pytest.importorskip("sentence_transformers")

REPO = Path(__file__).resolve().parent.parent
APPS = Path(__file__).with_name("adapter_apps.py")
RETRIEVAL = ("source_hit@5", "source_recall@5", "source_mrr", "source_ndcg@5",
             "id_context_precision", "id_context_recall", "top_similarity",
             "similarity_in_range")

CASES = """
kind: vector
cases:
  - id: tower
    question: "When was the Eiffel Tower completed?"
    ground_truth: "The Eiffel Tower was completed in 1889 for a world fair."
    expected_sources: [tower.md]
  - id: followup
    category: conversational
    question: "Who created Python?"
    history:
      - {role: user, content: "Tell me about programming languages."}
      - {role: assistant, content: "Python first appeared in 1991."}
    ground_truth: "Guido van Rossum created Python."
    expected_sources: [python.md]
  - id: espresso
    question: "How is espresso made?"
    ground_truth: "By forcing hot water through finely ground coffee."
    expected_sources: [coffee.md]
"""

ONE_LINE = {
    "langchain": ("from apps import langchain_chain as build", "langchain",
                  "langchain.system(APP)"),
    "llama_index": ("from apps import llama_index_engine as build", "llama_index",
                    "llama_index.system(APP)"),
    "haystack": ("from apps import haystack_pipeline as build", "haystack",
                 "haystack.system(APP)"),
}

CONFTEST = '''
import pytest
{build_import}
from apps import KeywordRetriever
from pytest_ragbench.adapters import {module}
from pytest_ragbench.systems.corpus import load_corpus

kwargs = {{"chat": True}} if "{module}" == "llama_index" else {{}}
APP = build(KeywordRetriever(load_corpus(["test_cases/corpus"])), log="prompts.jsonl", **kwargs)


@pytest.fixture(scope="session")
def ragbench_system():
    return {line}
'''


def small_project(pytester: pytest.Pytester, conftest: str) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(conftest)
    project.makepyfile(apps=APPS.read_text(encoding="utf-8"))
    project.corpus({d.metadata["source"]: d.text + "\n" for d in four_documents()})
    project.cases("vector.yaml", CASES)
    return project


@pytest.mark.parametrize("adapter", list(ONE_LINE))
def test_one_line_in_conftest_gives_a_green_run(pytester: pytest.Pytester, adapter: str) -> None:
    build_import, module, line = ONE_LINE[adapter]
    project = small_project(pytester, CONFTEST.format(build_import=build_import, module=module,
                                                      line=line))
    result = project.run("--ragbench", "-p", "no:cacheprovider", subprocess=True, timeout=600)
    result.assert_outcomes(passed=3)
    items = project.items_by_case()
    for case, source in (("tower", "tower.md"), ("followup", "python.md"),
                         ("espresso", "coffee.md")):
        assert items[case]["metrics"]["source_mrr"] == 1.0
        assert f"[1] {source}" in items[case]["evidence"]["retrieved"]
    logged = [json.loads(line)["prompt"]
              for line in (project.path / "prompts.jsonl").read_text().splitlines()]
    followup = [p for p in logged if "Who created Python?" in p]
    assert followup and all("Tell me about programming languages." in p
                            and "Python first appeared in 1991." in p for p in followup)
    assert not any("programming languages" in p for p in logged if "espresso" in p)
    results = project.results()
    assert f"pytest_ragbench.adapters.{module}" in results["components"]["system"] or \
        "Haystack pipeline" in results["components"]["system"]


# -- the bundled vector cases: direct, through each adapter, by URL -----------------------------



def compare(items: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{case: {system: metrics}}``."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for item in items:
        table.setdefault(item["case_id"], {})[item["system"]] = item["metrics"]
    return table


def test_bundled_vector_cases_give_the_same_retrieval_metrics_every_way(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    project = RagbenchProject(pytester).conftest(SYSTEMS_CONFTEST)
    project.makepyfile(apps=APPS.read_text(encoding="utf-8"))
    shutil.copytree(REPO / "test_cases" / "corpus", project.path / "test_cases" / "corpus")
    shutil.copy(REPO / "test_cases" / "nba_vector.yaml", project.path / "test_cases")
    log = tmp_path / "requests.jsonl"
    with serve(project.path / "test_cases" / "corpus", "dense", log) as url:
        project.ini(f"ragbench_system_url = {url}/rag\n" + SERVICE_INI)
        result = project.run("--ragbench", "-p", "no:cacheprovider",
                             f"--ragbench-systems={','.join(NAMES)}", subprocess=True,
                             timeout=1200)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    table = compare(project.items())
    assert len(table) == 45 and all(set(row) == set(NAMES) for row in table.values())
    for case, row in table.items():
        direct = row["direct"]
        assert "top_similarity" in direct  # every case retrieved something
        for name in NAMES[1:]:
            same = {m: row[name].get(m) for m in RETRIEVAL}
            assert same == {m: direct.get(m) for m in RETRIEVAL}, (case, name)
        # by URL the service answers as the direct system does: every metric is the same
        assert row["default"] == direct, case
    aggregate = project.results()["metrics"]["vector"]
    for metric in RETRIEVAL:
        means = {n: aggregate[metric]["systems"][n]["mean"] for n in NAMES}
        assert len(set(means.values())) == 1, (metric, means)
    # the conversational cases' turns reached the service as messages
    bodies = [json.loads(line) for line in log.read_text().splitlines()]
    with_history = [b for b in bodies if b["chat_history"]]
    conversational = yaml.safe_load((REPO / "test_cases" / "nba_vector.yaml").read_text())
    assert len(with_history) == sum(bool(c.get("history")) for c in conversational["cases"])
    assert all(set(m) == {"role", "content"} for b in with_history for m in b["chat_history"])
