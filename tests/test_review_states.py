"""Case fields ``provenance`` and ``review``: which generated cases a session runs.

Accepted and hand-written cases always run; drafts only with ``--ragbench-drafts``;
rejected ones never (README "Generating cases").
"""

from __future__ import annotations

import pytest

from tests.project import RagbenchProject

CASES = """\
kind: sql
cases:
  - id: hand_written
    question: "How many teams are there?"
    expected_sql: SELECT COUNT(*) AS n FROM teams
    ground_truth_data: {n: 3}
  - id: accepted_one
    review: accepted
    provenance: {generator: sql, seed: 1, tables: [teams]}
    question: "Which city do the Heat play in?"
    expected_sql: SELECT city FROM teams WHERE name = 'Heat'
    ground_truth_data: {city: Miami}
  - id: draft_one
    review: draft
    provenance: {generator: sql, seed: 1, tables: [scores]}
    question: "What is the highest points total?"
    expected_sql: SELECT MAX(points) AS top FROM scores
    ground_truth_data: {top: 9900}
  - id: rejected_one
    review: rejected
    provenance: {generator: sql, seed: 1}
    question: "A wrong one"
    expected_sql: SELECT MAX(points) AS top FROM scores
    ground_truth_data: {top: 1}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("generated.yaml", CASES)
    return project


def test_drafts_wait_for_the_flag_and_rejected_cases_never_run(
        project: RagbenchProject) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*hand_written*PASSED*", "*accepted_one*PASSED*",
                                 "*1 draft case run only with --ragbench-drafts*"
                                 "1 rejected case never run*"])
    assert "[draft_one]" not in result.stdout.str()
    assert "[rejected_one]" not in result.stdout.str()


def test_with_the_flag_drafts_run_and_rejected_ones_still_do_not(
        project: RagbenchProject) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "-v", "--ragbench-drafts")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*draft_one*PASSED*"])
    assert "[rejected_one]" not in result.stdout.str()


def test_a_review_state_that_is_not_known_is_an_error_naming_the_field(
        project: RagbenchProject) -> None:
    project.cases("bad.yaml", CASES.replace("review: accepted", "review: acepted"))
    result = project.runpytest("-p", "no:cacheprovider", "-q")
    result.stdout.fnmatch_lines(["*bad.yaml:*review*draft, accepted, rejected*acepted*"])
