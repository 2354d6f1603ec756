"""``hybrid_ground_truth`` items: PASS, FAIL on data, WARNING on missing entity mentions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import failure_section, ragbench_section
from tests.project import RagbenchProject

CASES = """
kind: hybrid
cases:
  - id: top_scorer
    question: Who scored the most and why?
    expected_sql: SELECT team, points FROM scores ORDER BY points DESC LIMIT 1
    ground_truth_data: {team: Celtics, points: 9900}
    ground_truth_answer: The Celtics scored 9,900 points thanks to their spacing.
  - id: forgets_the_number
    question: Who scored the most?
    expected_sql: SELECT team, points FROM scores ORDER BY points DESC LIMIT 1
    ground_truth_data: {team: Celtics, points: 9900}
    ground_truth_answer: The Celtics led the league because of their spacing.
  - id: wrong_data
    question: Who scored the least?
    expected_sql: SELECT team FROM scores ORDER BY points ASC LIMIT 1
    ground_truth_data: {team: Lakers}
    ground_truth_answer: The Lakers scored the least.
  - id: analysis_only
    question: Why does shooting percentage matter?
    ground_truth_answer: It measures efficiency per shot.
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("hybrid.yaml", CASES)
    return project


def test_pass_fail_and_warning(project: RagbenchProject) -> None:
    result = project.runpytest("-q", "-k", "hybrid_ground_truth")
    result.assert_outcomes(passed=3, failed=1)
    output = result.stdout.str()
    section = failure_section(output, "hybrid_ground_truth: wrong_data")
    assert section.startswith("the SQL result differs from ground_truth_data")
    assert "{team: 'Lakers'}" in section and "{team: 'Heat'}" in section
    line = CASES.splitlines().index("  - id: forgets_the_number") + 1
    assert (f"hybrid.yaml:{line}: RagbenchWarning: hybrid_ground_truth[forgets_the_number]: "
            "ground_truth_answer does not mention: 9900") in output
    lines = ragbench_section(output)
    assert lines[1].split() == ["hybrid_ground_truth", "(all)", "4", "2", "1", "1", "0", "0",
                                "0"]


def test_verify_hybrid_prints_the_summary(project: RagbenchProject) -> None:
    result = subprocess.run([sys.executable, "-m", "pytest_ragbench", "verify", "hybrid"],
                            cwd=project.path, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "3/4 passed, 75.0% success rate" in result.stdout
    assert "WARNING  test_cases/hybrid.yaml::hybrid_ground_truth[forgets_the_number]" in \
        result.stdout
    assert "1 passed with a warning" in result.stdout


def test_bundled_hybrid_cases_verify() -> None:
    from tests.conftest import REPO_ROOT

    result = subprocess.run([sys.executable, "verification/verify_all_hybrid_ground_truth.py"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    summary = [line for line in result.stdout.splitlines() if "success rate" in line][-1]
    passed, total = map(int, summary.split(" ")[0].split("/"))
    assert passed == total >= 15
