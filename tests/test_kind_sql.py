"""``sql[<id>]`` items: a system's SQL or text answer checked against the ground truth."""

from __future__ import annotations

import pytest

from tests.helpers import failure_section
from tests.project import RagbenchProject

CASES = """
kind: sql
cases:
  - id: lakers_points
    question: How many points did the Lakers score?
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
  - id: best_pct
    question: Which team shot best?
    expected_sql: SELECT team, ROUND(pct, 1) AS pct FROM scores ORDER BY pct DESC LIMIT 1
    ground_truth_data: [{team: Celtics, pct: 48.3}]
  - id: heat_city
    question: Where do the Heat play?
    expected_sql: SELECT city FROM teams WHERE name = 'Heat'
    ground_truth_data: {city: Miami}
"""

SYSTEM = """
import pytest
from pytest_ragbench.systems.protocols import Answer

ANSWERS = {ANSWERS}
CALLS = []

class ScriptedSystem:
    def answer(self, question, history=None):
        CALLS.append(question)
        text, sql = ANSWERS[question]
        return Answer(text=text, sql=sql, latency_s=0.01)

@pytest.fixture(scope="session")
def ragbench_system():
    return ScriptedSystem()
"""


def _project(pytester: pytest.Pytester, answers: dict[str, tuple[str, str | None]]
             ) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", CASES)
    project.conftest(SYSTEM.replace("{ANSWERS}", repr(answers)))
    return project


def test_the_systems_sql_is_run_and_compared(pytester: pytest.Pytester) -> None:
    project = _project(pytester, {
        "How many points did the Lakers score?":
            ("9500", "SELECT points FROM scores WHERE team = 'Lakers'"),
        "Which team shot best?":  # wrong: lowest instead of highest
            ("Heat", "SELECT team, ROUND(pct, 1) AS pct FROM scores ORDER BY pct LIMIT 1"),
        "Where do the Heat play?": ("", "DELETE FROM teams"),
    })
    result = project.runpytest("--ragbench", "-m", "sql", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    best = failure_section(output, "sql: best_pct")
    assert "the system's SQL returns other data than ground_truth_data" in best
    assert "question: Which team shot best?" in best and "ORDER BY pct LIMIT 1" in best
    assert "Heat" in best  # the rows it got
    write = failure_section(output, "sql: heat_city")
    assert "the system's SQL was refused before execution" in write
    matches = {case: item["metrics"]["execution_match"]
               for case, item in project.items_by_case(kind="sql").items()}
    assert matches == {"lakers_points": 1.0, "best_pct": 0.0, "heat_city": 0.0}


def test_a_text_answer_must_state_every_value(pytester: pytest.Pytester) -> None:
    project = _project(pytester, {
        "How many points did the Lakers score?": ("The Lakers scored 9,500 points.", None),
        "Which team shot best?": ("The Celtics shot best.", None),  # 48.3 missing
        "Where do the Heat play?": ("They play in Miami.", None),
    })
    result = project.runpytest("--ragbench", "-m", "sql", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    section = failure_section(result.stdout.str(), "sql: best_pct")
    assert "does not state every ground-truth value" in section
    assert "missing values: 48.3" in section
    assert "correct = 0, needs >= 1" in section


def test_sql_items_need_ragbench(pytester: pytest.Pytester) -> None:
    project = _project(pytester, {})
    plain = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider").stdout.str()
    assert "::sql[" not in plain and plain.count("::sql_ground_truth[") == 3
    evaluated = project.runpytest("--collect-only", "-q", "--ragbench", "-p", "no:cacheprovider")
    assert evaluated.stdout.str().count("::sql[") == 3


def test_a_system_without_sql_skips_with_its_reason(pytester: pytest.Pytester) -> None:
    project = _project(pytester, {})
    project.makeconftest("""
        import pytest

        class TextOnly:
            answers_sql = False
            def describe(self):
                return "a text-only system"
            def answer(self, question, history=None):
                raise AssertionError("must not be asked")

        @pytest.fixture(scope="session")
        def ragbench_system():
            return TextOnly()
    """)
    result = project.runpytest("--ragbench", "-m", "sql and not sql_ground_truth", "-q", "-rs",
                               "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*answers no SQL questions (a text-only system)*"])
