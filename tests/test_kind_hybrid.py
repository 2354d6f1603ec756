# ruff: noqa: E501  (case files read best with one field per line)
"""``hybrid[<id>]`` items through real pytest sessions (subprocesses, real embedder and SQLite).

The text path uses the embedded system with the loopback generator's scripted replies;
the SQL path overrides ``ragbench_system`` with an application that also returns SQL,
which is run read-only on the case's database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_ragbench.testing import LoopbackServer
from tests.helpers import failure_section
from tests.project import RagbenchProject

CORPUS = {
    "lakers.md": ("# Los Angeles Lakers\n\nThe Lakers, from Los Angeles, won the first "
                  "In-Season Tournament and finished the season strongly on offense.\n"),
    "heat.md": ("# Miami Heat\n\nThe Heat began a rebuild after an early playoff exit; their "
                "shooting was the weakest of the three teams.\n"),
}
CASES = """
kind: hybrid
cases:
  - id: lakers_points
    category: stat_plus_context
    question: "How many points did the Lakers score in 2023, and where are they from?"
    expected_sql: "SELECT t.name, t.city, s.points FROM teams t JOIN scores s ON s.team = t.name WHERE t.name = 'Lakers'"
    ground_truth_data: {name: Lakers, city: Los Angeles, points: 9500}
    ground_truth_answer: >-
      The Lakers, from Los Angeles, scored 9500 points in 2023 and won the first In-Season
      Tournament.
    expected_sources: [lakers.md]
    thresholds: {value_recall: 1.0, semantic_similarity: 0.6}
  - id: lakers_shooting
    category: stat_plus_context
    question: "What was the Lakers' shooting percentage in 2023?"
    expected_sql: "SELECT s.pct FROM scores s WHERE s.team = 'Lakers'"
    ground_truth_data: {pct: 47.512}
    ground_truth_answer: "The Lakers shot 47.51% in 2023."
    thresholds: {value_recall: 1.0}
  - id: heat_points_missing
    category: stat_plus_context
    question: "How many points did the Heat score in 2023, and why are they rebuilding?"
    expected_sql: "SELECT t.name, s.points FROM teams t JOIN scores s ON s.team = t.name WHERE t.name = 'Heat'"
    ground_truth_data: {name: Heat, points: 8900}
    ground_truth_answer: "The Heat scored 8900 points and began a rebuild after an early playoff exit."
    expected_sources: [heat.md]
    thresholds: {value_recall: 1.0}
  - id: rebuild_analysis
    category: analysis
    question: "Why did the Heat start a rebuild?"
    ground_truth_answer: "The Heat began a rebuild after an early playoff exit."
    expected_sources: [heat.md]
"""
REPLIES = {
    "How many points did the Lakers score in 2023, and where are they from?":
        "The Lakers are from Los Angeles and scored 9,500 points in 2023; they also won the "
        "first In-Season Tournament.",
    "What was the Lakers' shooting percentage in 2023?": "They shot 47.5% from the field.",
    "How many points did the Heat score in 2023, and why are they rebuilding?":
        "The Heat are rebuilding after an early playoff exit.",
    "Why did the Heat start a rebuild?": "Miami began a rebuild after an early playoff exit.",
}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda body: REPLIES[body["messages"][-1]["content"]]) as srv:
        yield srv


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.corpus(CORPUS)
    project.cases("hybrid.yaml", CASES)
    project.scores_db()
    return project


def test_values_with_number_tolerance_and_similarity(project: RagbenchProject,
                                                     server: LoopbackServer) -> None:
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-rN", "-p", "no:cacheprovider", "-k", "hybrid and not ground_truth",
        "--ragbench-llm-url", server.url)
    result.assert_outcomes(passed=3, failed=1)
    items = project.items_by_case(kind="hybrid")

    lakers = items["lakers_points"]
    assert lakers["metrics"]["value_recall"] == 1.0  # "9,500" is 9500, "Los Angeles" a name
    assert lakers["metrics"]["semantic_similarity"] > 0.6
    assert lakers["metrics"]["source_hit@5"] == 1.0
    assert "execution_match" not in lakers["metrics"]  # the embedded system writes no SQL
    # 47.5% states 47.512 to the precision written
    assert items["lakers_shooting"]["metrics"]["value_recall"] == 1.0
    analysis = items["rebuild_analysis"]
    assert analysis["unscored"]["value_recall"].startswith("an analysis question")
    assert analysis["metrics"]["semantic_similarity"] > 0.6

    heat = items["heat_points_missing"]
    assert heat["status"] == "failed" and heat["metrics"]["value_recall"] == 0.5
    section = failure_section(result.stdout.str(), "hybrid: heat_points_missing")
    assert "the answer does not state: 8900" in section
    assert "value_recall = 0.5, needs >= 1" in section
    assert "question: How many points did the Heat score in 2023" in section
    assert "expected values: name=Heat, points=8900" in section
    assert "got: The Heat are rebuilding after an early playoff exit." in section
    assert "[1] heat.md (heat.md#0), score " in section
    assert "hybrid.yaml:" in section


SQL_SYSTEM = """
import pytest
from pytest_ragbench.systems.protocols import Answer, Context

CONTEXTS = (Context("lakers.md#0", "The Lakers, from Los Angeles ...", 0.9, {"source": "lakers.md"}),
            Context("heat.md#0", "The Heat began a rebuild ...", 0.5, {"source": "heat.md"}))
SQL = {
    "How many points did the Lakers score in 2023, and where are they from?":
        "SELECT t.name, t.city, s.points FROM teams t JOIN scores s ON s.team = t.name "
        "WHERE t.name = 'Lakers'",
    "What was the Lakers' shooting percentage in 2023?":
        "SELECT pct FROM scores WHERE team = 'Celtics'",
    "How many points did the Heat score in 2023, and why are they rebuilding?":
        "DELETE FROM scores WHERE team = 'Heat'",
}


class SqlApp:
    def answer(self, question, history=None):
        return Answer("The Heat scored 8900 points; the Lakers from Los Angeles 9500 and "
                      "shot 47.5%; Miami rebuilt after an early playoff exit.",
                      contexts=CONTEXTS, sql=SQL.get(question))


@pytest.fixture(scope="session")
def ragbench_system():
    return SqlApp()
"""


def test_the_systems_sql_is_run_read_only_and_compared(project: RagbenchProject) -> None:
    project.makeconftest(SQL_SYSTEM)
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-rN", "-p", "no:cacheprovider", "-k", "hybrid and not ground_truth")
    result.assert_outcomes(passed=2, failed=2)
    items = project.items_by_case(kind="hybrid")
    assert items["lakers_points"]["metrics"]["execution_match"] == 1.0
    assert items["lakers_points"]["status"] == "passed"
    assert "execution_match" not in items["rebuild_analysis"]["metrics"]  # asked no SQL

    output = result.stdout.str()
    wrong = failure_section(output, "hybrid: lakers_shooting")
    assert "execution_match = 0, needs >= 1" in wrong
    assert "sql: SELECT pct FROM scores WHERE team = 'Celtics'" in wrong
    assert "sql result:" in wrong and "48.25" in wrong

    write = failure_section(output, "hybrid: heat_points_missing")
    assert "the system's SQL was refused before execution" in write
    # the statement was refused, not run: the row is still there
    import sqlite3

    with sqlite3.connect(project.path / "scores.db") as connection:
        assert connection.execute("SELECT count(*) FROM scores WHERE team = 'Heat'").fetchone() \
            == (1,)
    connection.close()
