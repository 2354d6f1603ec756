"""``sql_ground_truth`` items through real pytest sessions (pytester)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.helpers import XDIST_MODES, failure_section, make_scores_db, ragbench_section
from tests.project import RagbenchProject

CASES_YAML = """
kind: sql
cases:
  - id: lakers_points
    question: How many points did the Lakers score?
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
    category: aggregation
  - id: best_pct
    question: Which team shot best?
    expected_sql: SELECT team, ROUND(pct, 1) AS pct FROM scores ORDER BY pct DESC LIMIT 2
    ground_truth_data:
      - {team: Celtics, pct: 48.3}
      - {team: Lakers, pct: 47.5}
    order_matters: true
    category: ranking
  - id: null_notes
    question: Which teams have no note?
    expected_sql: SELECT team FROM scores WHERE note IS NULL
    ground_truth_data: [{team: Lakers}]
    category: null_handling
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    """A repository with test_cases/ and a database configured in its ini file."""
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", CASES_YAML)
    return project


def test_cases_become_items_with_readable_node_ids(project: RagbenchProject) -> None:
    result = project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "test_cases/scores.yaml::sql_ground_truth[lakers_points]",
        "test_cases/scores.yaml::sql_ground_truth[best_pct]",
        "test_cases/scores.yaml::sql_ground_truth[null_notes]",
    ])
    project.runpytest("-q").assert_outcomes(passed=3)


def test_select_by_kind_id_and_category_marker(project: RagbenchProject) -> None:
    project.runpytest("-k", "sql_ground_truth", "-q").assert_outcomes(passed=3)
    project.runpytest("-k", "lakers", "-q").assert_outcomes(passed=1)
    project.runpytest("-m", "ranking", "-q", "--strict-markers").assert_outcomes(passed=1)
    project.runpytest("-m", "sql_ground_truth", "-q").assert_outcomes(passed=3)
    result = project.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.ragbench:*", "@pytest.mark.vector:*"])


def test_evaluation_items_need_the_flag(project: RagbenchProject) -> None:
    result = project.runpytest("--collect-only", "-q", "--ragbench")
    result.stdout.fnmatch_lines(["test_cases/scores.yaml::sql[lakers_points]"])
    plain = project.runpytest("--collect-only", "-q")
    assert "::sql[" not in plain.stdout.str()


def test_reportinfo_points_at_the_case_line(project: RagbenchProject) -> None:
    items, _ = project.inline_genitems()
    locations = {item.name: item.location for item in items}
    lines = CASES_YAML.splitlines()
    first = lines.index("  - id: lakers_points")  # 0-based, as pytest locations are
    assert locations["sql_ground_truth[lakers_points]"][:2] == ("test_cases/scores.yaml", first)
    assert locations["sql_ground_truth[best_pct]"][1] == lines.index("  - id: best_pct")
    assert locations["sql_ground_truth[best_pct]"][2] == "sql_ground_truth: best_pct"


def test_failure_shows_sql_and_diff_not_a_traceback(project: RagbenchProject) -> None:
    project.cases("wrong.yaml", (
        "- id: wrong\n  question: Lakers points?\n"
        "  expected_sql: SELECT points FROM scores WHERE team = 'Lakers'\n"
        "  ground_truth_data: {points: 9400}\n"))
    result = project.runpytest("-q", "test_cases/wrong.yaml")
    result.assert_outcomes(failed=1)
    section = failure_section(result.stdout.str(), "sql_ground_truth: wrong")
    assert section.splitlines()[0] == "the result differs from ground_truth_data"
    assert "sql: SELECT points FROM scores WHERE team = 'Lakers'" in section
    assert "{points: 9400}" in section and "{points: 9500}" in section
    assert "Traceback" not in section and "pytest_ragbench" not in section
    assert "case: test_cases/wrong.yaml:1" in section


WRITES = [
    "DELETE FROM scores",
    "UPDATE scores SET points = 0",
    "INSERT INTO teams VALUES ('X', 'Y')",
    "DROP TABLE scores",
    "CREATE TABLE hack (a)",
    "ATTACH DATABASE 'other.db' AS other",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = WAL",
    "SELECT 1; DELETE FROM scores",
    "WITH x AS (SELECT 1) DELETE FROM scores",
    "REPLACE INTO teams VALUES ('Lakers', 'LA')",
    "VACUUM",
    "select * from scores; drop table teams",
]


def test_writing_statements_are_refused_and_the_file_is_untouched(
        project: RagbenchProject) -> None:
    db = project.path / "scores.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    cases = [{"id": f"w{i}", "kind": "sql", "question": "write?", "expected_sql": sql,
              "ground_truth_data": []} for i, sql in enumerate(WRITES)]
    project.cases("writes.jsonl", "\n".join(json.dumps(c) for c in cases))
    # -rN: no short summary, so each refusal is printed once, in its failure section
    result = project.runpytest("-q", "-rN", "test_cases/writes.jsonl")
    result.assert_outcomes(failed=len(WRITES))
    assert result.stdout.str().count("refused before execution") == len(WRITES)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in project.path.iterdir() if p.suffix == ".db") == ["scores.db"]


def test_the_connection_itself_cannot_write(tmp_path: Path) -> None:
    """Past the statement guard, SQLite is still opened read-only with an authorizer."""
    from pytest_ragbench.sql.engine import open_read_only

    db = make_scores_db(tmp_path / "s.db")
    engine = open_read_only(f"sqlite:///{db}")
    import sqlalchemy as sa

    with engine.connect() as connection, pytest.raises(sa.exc.DatabaseError):
        connection.exec_driver_sql("DELETE FROM scores")
    engine.dispose()


BAD_INPUT = {
    "malformed.yaml": "- id: a\n  question: [unclosed\n",
    "malformed.json": '[{"id": "a",}]',
    "lines.jsonl": '{"id": "ok", "kind": "sql", "question": "q", '
                   '"expected_sql": "SELECT 1 AS n", "ground_truth_data": {"n": 1}}\n'
                   '{"id": "broken"\n'
                   '{"id": "nokind", "question": "q", "kind": "graph"}\n'
                   '{"id": "missing", "kind": "sql", "question": "q", '
                   '"ground_truth_data": {"n": 1}}\n'
                   '{"id": "typed", "kind": "sql", "question": "q", "expected_sql": '
                   '"SELECT 1 AS n", "ground_truth_data": {"n": 1}, "float_places": "2"}\n'
                   '{"id": "syntax", "kind": "sql", "question": "q", '
                   '"expected_sql": "SELECT n FROM", "ground_truth_data": {"n": 1}}\n'
                   '{"id": "otherdb", "kind": "sql", "question": "q", "db": "missing_db", '
                   '"expected_sql": "SELECT 1 AS n", "ground_truth_data": {"n": 1}}\n',
}


def test_bad_input_gives_clear_errors_and_the_rest_runs(project: RagbenchProject) -> None:
    for name, text in BAD_INPUT.items():
        project.cases(name, text)
    project.ini("ragbench_dbs =\n    missing_db = sqlite:///nowhere/missing.db\n",
                ragbench_db_url="sqlite:///scores.db")
    result = project.runpytest("-q", "-rfE")
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    result.assert_outcomes(passed=4, failed=8)  # 3 good + 1 good jsonl line
    result.stdout.fnmatch_lines([
        "invalid case: test_cases/lines.jsonl:2: invalid JSON*",
        "invalid case: test_cases/lines.jsonl:3: field 'kind': unknown kind 'graph'*",
        "invalid case: test_cases/lines.jsonl:4: field 'expected_sql': required field*",
        "invalid case: test_cases/lines.jsonl:5: field 'float_places': expected an integer*",
        "invalid case: test_cases/malformed.json:1: invalid JSON*",
        "invalid case: test_cases/malformed.yaml:3: invalid YAML*",
    ])
    assert "database error: incomplete input" in output
    assert "database error: database file not found" in output and "missing.db" in output


def test_unreachable_default_database_is_one_clear_failure_per_item(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    project.ini(ragbench_db_url="postgresql+psycopg2://u:secret@127.0.0.1:1/x")
    project.cases("c.yaml", CASES_YAML)
    result = project.runpytest("-q")
    result.assert_outcomes(failed=3)
    output = result.stdout.str()
    assert "database error" in output and "INTERNALERROR" not in output
    assert "secret" not in output


def test_duplicate_ids_fail_naming_both_lines_and_the_rest_runs(
        project: RagbenchProject) -> None:
    project.cases("dup.yaml", (
        "- {id: same, question: q, expected_sql: SELECT 1 AS n, ground_truth_data: {n: 1}}\n"
        "- {id: other, question: q, expected_sql: SELECT 2 AS n, ground_truth_data: {n: 2}}\n"
        "- {id: same, question: q2, expected_sql: SELECT 3 AS n, ground_truth_data: {n: 3}}\n"))
    result = project.runpytest("-q", "-k", "sql_ground_truth")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*test_cases/dup.yaml:3: field 'id': duplicate id 'same': "
                                 "first defined on line 1, again on line 3*"])


def test_summary_counts_kinds_and_categories(project: RagbenchProject) -> None:
    lines = ragbench_section(project.runpytest("-q").stdout.str())
    assert lines[0].split() == ["kind", "category", "items", "passed", "failed", "warning",
                                "error", "skipped", "lost"]
    assert lines[1].split() == ["sql_ground_truth", "(all)", "3", "3", "0", "0", "0", "0", "0"]
    assert [line.split()[0] for line in lines[2:]] == ["aggregation", "null_handling", "ranking"]


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["plain", "n2", "no-xdist"])
def test_summary_is_the_same_with_and_without_xdist(project: RagbenchProject,
                                                    mode: tuple[str, ...]) -> None:
    project.cases("wrong.yaml", (
        "- id: wrong\n  question: q\n  expected_sql: SELECT 1 AS n\n"
        "  ground_truth_data: {n: 2}\n  category: aggregation\n"))
    result = project.runpytest_subprocess("-q", *mode)
    result.assert_outcomes(passed=3, failed=1)
    assert ragbench_section(result.stdout.str()) == [
        "kind              category       items  passed  failed  warning  error  skipped  lost",
        "sql_ground_truth  (all)          4      3       1       0        0      0        0",
        "                  aggregation    2      1       1       0        0      0        0",
        "                  null_handling  1      1       0       0        0      0        0",
        "                  ranking        1      1       0       0        0      0        0",
    ]


def test_records_travel_on_reports_and_into_junit(project: RagbenchProject) -> None:
    result = project.runpytest_subprocess("-q", "-n", "2", "--junitxml=out.xml",
                                          "-o", "ragbench_junit_properties=true")
    result.assert_outcomes(passed=3)
    xml = (project.path / "out.xml").read_text()
    assert xml.count('name="ragbench.metric.match" value="1.0"') == 3
    assert 'name="ragbench.status" value="passed"' in xml


def test_cases_outside_testpaths_are_still_collected(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).ini(testpaths="tests",
                                            ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.mkdir("tests")
    (project.path / "tests" / "test_x.py").write_text("def test_ok():\n    pass\n")
    project.cases("c.yaml", CASES_YAML)
    project.runpytest("-q").assert_outcomes(passed=4)
    project.runpytest("-q", "tests").assert_outcomes(passed=1)  # explicit paths win


def test_data_files_elsewhere_are_not_taken_for_cases(pytester: pytest.Pytester) -> None:
    pytester.mkdir("tests")
    (pytester.path / "tests" / "fixture.json").write_text('{"not": "a case"}')
    (pytester.path / "tests" / "settings.yaml").write_text("a: 1\n")
    (pytester.path / "tests" / "test_x.py").write_text("def test_ok():\n    pass\n")
    pytester.runpytest("-q").assert_outcomes(passed=1)
