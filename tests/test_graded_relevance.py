# ruff: noqa: E501  (the scenarios read best with one memory per line)
"""Seed 004's memory criteria: ``top1_accuracy``, graded ``relevance`` scored as nDCG, and the
keyword-overlap baseline, through real pytest sessions (pytester, subprocesses: torch cannot
be loaded twice in one process) with the real MiniLM embedder.
"""

from __future__ import annotations

import math
import re

import pytest

from pytest_ragbench.metrics.answer import keyword_overlap
from pytest_ragbench.metrics.ir import graded_ndcg
from pytest_ragbench.metrics.registry import Unscored
from tests.project import RagbenchProject

SCENARIOS = """
kind: memory
cases:
  - id: exact_turn
    query: "What did the proponent say about safety in turn 1?"
    setup:
      - {role: moderator, content: "Welcome to the debate on nuclear energy safety."}
      - {role: proponent, content: "Nuclear energy is the safest energy source with lowest death rate per TWh."}
      - {role: opponent, content: "Nuclear waste remains dangerous for thousands of years."}
      - {role: proponent, content: "Modern reactors have passive safety systems."}
    expected: [1]
    relevance: {1: 2, 3: 1, 0: 0}
    top_k: 3
  - id: economics
    query: "Arguments about economic costs and affordability"
    setup:
      - {role: proponent, content: "Nuclear provides 24/7 baseload power unlike solar."}
      - {role: opponent, content: "Solar costs have dropped 90% in the last decade."}
      - {role: proponent, content: "France gets 70% of electricity from nuclear with low costs."}
    expected: [1, 2]
    top_k: 2
"""


def _dcg(gains: list[int]) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))


def test_graded_ndcg_is_the_textbook_formula() -> None:
    """Linear gain, log2 discount, ideal order cut at k too (trec_eval's ndcg_cut)."""
    grades = {"a": 1, "b": 2, "c": 0, "d": 2}
    got = graded_ndcg(grades, ["a", "b", "c", "a"], 3)
    assert got == pytest.approx(_dcg([1, 2, 0]) / _dcg([2, 2, 1]))
    assert graded_ndcg(grades, ["b", "d", "a"], 3) == pytest.approx(1.0)
    assert graded_ndcg(grades, ["x", "c"], 3) == 0.0
    assert isinstance(graded_ndcg({"a": 0}, ["a"], 3), Unscored)


def _ranked_indices(got: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\[(\d+)\]", got, flags=re.MULTILINE)]


def test_memory_scenarios_report_top1_graded_ndcg_and_keyword_overlap(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    project.cases("memory.yaml", SCENARIOS)
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    items = project.items_by_case()
    exact, economics = items["exact_turn"], items["economics"]
    order = _ranked_indices(exact["evidence"]["got"])
    assert len(order) == 3
    assert exact["metrics"]["top1_accuracy"] == float(order[0] == 1)
    grades = {1: 2, 3: 1, 0: 0}
    expected_ndcg = _dcg([grades.get(i, 0) for i in order]) / _dcg([2, 1])
    assert exact["metrics"]["graded_ndcg"] == pytest.approx(expected_ndcg)
    setup = ["Welcome to the debate on nuclear energy safety.",
             "Nuclear energy is the safest energy source with lowest death rate per TWh.",
             "Nuclear waste remains dangerous for thousands of years.",
             "Modern reactors have passive safety systems."]
    query = "What did the proponent say about safety in turn 1?"
    overlaps = [float(keyword_overlap(query, setup[i])) for i in order]  # type: ignore[arg-type]
    assert exact["metrics"]["keyword_overlap"] == pytest.approx(sum(overlaps) / 3)
    # two expected memories: not an exact-recall scenario; no grades: no graded nDCG
    assert "top1_accuracy" not in economics["metrics"]
    assert "expects 2 memories" in economics["unscored"]["top1_accuracy"]
    assert economics["unscored"]["graded_ndcg"] == "the case gives no relevance grades"
    assert 0.0 < economics["metrics"]["keyword_overlap"] <= 1.0


@pytest.mark.parametrize(("relevance", "message"), [
    ("{1: 3}", "setup index 1: grade 3 is not 0, 1 or 2"),
    ("{7: 2}", "setup index 7 is out of range: setup has 4 memories"),
    ("{first: 2}", "'first' is not an index into setup"),
    ("[1, 2]", "expected a mapping of setup index to a grade"),
])
def test_a_bad_relevance_is_a_clear_error_naming_file_line_and_field(
        pytester: pytest.Pytester, relevance: str, message: str) -> None:
    project = RagbenchProject(pytester)
    project.cases("memory.yaml", SCENARIOS.replace("{1: 2, 3: 1, 0: 0}", relevance))
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)  # the other scenario still runs
    output = result.stdout.str()
    line = SCENARIOS.splitlines().index("    relevance: {1: 2, 3: 1, 0: 0}") + 1
    assert re.search(rf"memory\.yaml:{line}: field 'relevance[.\w]*': ", output), output
    assert message in output
    assert "INTERNALERROR" not in output


VECTOR_CASES = """
kind: vector
cases:
  - id: graded
    question: "Who won the 2024 Defensive Player of the Year award?"
    ground_truth: "Rudy Gobert"
    expected_sources: [gobert.md]
    relevance: {gobert.md: 2, awards.md: 1, weather.md: 0, missing.md: 1}
  - id: bad_grade
    question: "Who won?"
    ground_truth: "Rudy Gobert"
    relevance: {gobert.md: high}
"""

FIXED_SYSTEM = '''
import pytest
from pytest_ragbench.protocols import Answer, Context


class Fixed:
    """Always the same three contexts, in this order."""
    top_k = 3

    def answer(self, question, history=None):
        contexts = [Context(id=f"c{i}", text=f"text {name}", score=1.0 - i / 10, metadata={"source": name})
                    for i, name in enumerate(["awards.md", "weather.md", "gobert.md"])]
        return Answer("Rudy Gobert won it.", tuple(contexts))


@pytest.fixture(scope="session")
def ragbench_system():
    return Fixed()
'''


def test_vector_cases_score_graded_relevance_of_their_sources(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).conftest(FIXED_SYSTEM)
    project.cases("vector.yaml", VECTOR_CASES)
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    output = result.stdout.str()
    items = project.items_by_case()
    assert items["graded"]["metrics"]["graded_ndcg"] == pytest.approx(
        _dcg([1, 0, 2]) / _dcg([2, 1, 1]))
    assert re.search(r"vector\.yaml:\d+: field 'relevance\.gobert\.md': source 'gobert\.md': "
                     r"grade 'high' is not 0, 1 or 2", output), output
