"""The built-in ``graph`` system: an entity graph with personalized PageRank (networkx).

Checked against networkx's own pagerank on a graph built by hand, and through a real
session that compares dense, hybrid and graph retrieval (seed 000's three modes).
"""

from __future__ import annotations

import pytest

pytest.importorskip("networkx")
pytest.importorskip("bm25s", reason="needs the extra 'embed'")

from pytest_ragbench.systems.graph import GraphRetriever, entities
from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.retrievers import BM25Retriever
from tests.project import RagbenchProject

CORPUS = {
    "gobert": "Rudy Gobert plays centre for the Minnesota Timberwolves.",
    "finch": "Chris Finch coaches the Minnesota Timberwolves from the bench.",
    "bread": "Banana bread needs ripe bananas, flour and baking soda.",
    "espresso": "An Italian Espresso is brewed by forcing hot water through ground coffee.",
    "tatum": "Jayson Tatum leads the Boston Celtics.",
}
DOCS = [Document(key, text, {"source": f"{key}.md"}) for key, text in CORPUS.items()]
QUESTION = "Tell me about Rudy Gobert."


def test_entities_are_capitalised_spans_without_stop_words() -> None:
    assert entities("The Boston Celtics beat the Minnesota Timberwolves. What a game!") == \
        {"boston celtics", "minnesota timberwolves"}
    assert entities("PIE and TS% in the NBA") == {"pie", "ts", "nba"}
    assert entities("Rudy Gobert won Defensive Player of the Year.") == \
        {"rudy gobert", "defensive player of the year"}


def test_graph_retrieval_reaches_a_passage_linked_only_through_a_shared_entity() -> None:
    graph = GraphRetriever()
    graph.index(DOCS)
    found = graph.retrieve(QUESTION, top_k=5)
    assert [c.id for c in found] == ["gobert", "finch"]  # nothing else is linked to Gobert
    # the finch passage shares no word with the question: BM25 cannot find it
    bm25 = BM25Retriever()
    bm25.index(DOCS)
    assert "finch" not in [c.id for c in bm25.retrieve(QUESTION, top_k=5)]


def test_the_scores_are_networkx_personalized_pagerank() -> None:
    import networkx as nx

    graph = GraphRetriever()
    graph.index(DOCS)
    by_hand = nx.Graph()
    by_hand.add_edges_from([("gobert", "rudy gobert"), ("gobert", "minnesota timberwolves"),
                            ("finch", "chris finch"), ("finch", "minnesota timberwolves")])
    ranks = nx.pagerank(by_hand, alpha=0.85, personalization={"rudy gobert": 1.0})
    scores = {c.id: c.score for c in graph.retrieve(QUESTION, top_k=5)}
    assert scores["gobert"] == pytest.approx(ranks["gobert"], rel=1e-4)
    assert scores["finch"] == pytest.approx(ranks["finch"], rel=1e-4)


def test_a_query_without_a_known_entity_retrieves_nothing() -> None:
    graph = GraphRetriever()
    graph.index(DOCS)
    assert graph.retrieve("how do you bake a cake", top_k=5) == []


CASES = """
kind: vector
cases:
  - id: gobert_coach
    question: "Who coaches Rudy Gobert's team?"
    ground_truth: "Chris Finch, coach of the Minnesota Timberwolves."
    expected_sources: [finch.md]
  - id: tatum_team
    question: "Which team does Jayson Tatum lead?"
    ground_truth: "The Boston Celtics."
    expected_sources: [tatum.md]
  - id: bread
    question: "What does Banana bread need?"
    ground_truth: "Ripe bananas, flour and baking soda."
    expected_sources: [bread.md]
"""


def test_dense_hybrid_and_graph_run_with_the_comparison(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    project.corpus({f"{key}.md": text for key, text in CORPUS.items()})
    project.cases("vector.yaml", CASES)
    project.conftest("""
import pytest

@pytest.fixture(scope="session")
def ragbench_llm():
    pytest.skip("extractive answers are enough here")
""")
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                          "--ragbench-systems=dense,hybrid,graph")
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    items = project.items()
    systems = {item.get("system") for item in items}
    assert systems == {"dense", "hybrid", "graph"}, systems
    graph_items = {item["case_id"]: item for item in items if item.get("system") == "graph"}
    assert graph_items["gobert_coach"]["metrics"]["source_hit@5"] == 1.0
    results = project.results()
    assert results["systems"] == ["dense", "hybrid", "graph"]
    per_system = results["metrics"]["vector"]["source_hit@5"]["systems"]
    assert per_system["graph"]["n"] == 3
    pairs = {name for name in results["comparisons"] if "graph" in name}
    assert len(pairs) == 2, results["comparisons"].keys()  # graph against dense and hybrid
