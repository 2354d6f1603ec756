"""Case loaders: formats, aliases, ids, line numbers and errors (no pytest session needed)."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragbench.cases import SqlCase, Table, load_file
from pytest_ragbench.errors import CaseError

SQL_CASE = {"id": "a", "kind": "sql", "question": "How many?",
            "expected_sql": "SELECT 1 AS n", "ground_truth_data": {"n": 1}}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_yaml_mapping_with_kind_default_and_field_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", """
        kind: sql
        cases:
          - id: one
            question: How many players?
            expected_sql: SELECT COUNT(*) AS n FROM players
            ground_truth_data: {n: 60}
          - id: two
            question: Top two?
            expected_sql: SELECT name FROM players ORDER BY pts DESC LIMIT 2
            ground_truth_data:
              - {name: A}
              - {name: B}
            order_matters: true
            category: top_n
        """)
    result = load_file(path)
    assert [c.id for c in result.cases] == ["one", "two"]
    first, second = result.cases
    assert isinstance(first, SqlCase)
    assert (first.line, second.line) == (3, 7)
    assert first.expected == Table(("n",), ((60,),))
    assert second.expected.rows == (("A",), ("B",)) and second.order_matters
    assert second.category == "top_n"


def test_yaml_list_json_and_jsonl_read_the_same_cases(tmp_path: Path) -> None:
    other = dict(SQL_CASE, id="b", question="Other?")
    yaml_path = write(tmp_path, "c.yml", f"- {json.dumps(SQL_CASE)}\n- {json.dumps(other)}\n")
    json_path = write(tmp_path, "c.json", json.dumps([SQL_CASE, other], indent=2))
    jsonl_path = write(tmp_path, "c.jsonl", f"{json.dumps(SQL_CASE)}\n\n{json.dumps(other)}\n")
    loaded = [load_file(p).cases for p in (yaml_path, json_path, jsonl_path)]
    strip = [[(c.id, c.question, c.expected) for c in cases] for cases in loaded]
    assert strip[0] == strip[1] == strip[2]
    assert [c.line for c in loaded[2]] == [1, 3]
    json_lines = json_path.read_text().splitlines()
    starts = [n for n, text in enumerate(json_lines, start=1) if text == "  {"]
    assert [c.line for c in loaded[1]] == starts


def test_aliases_gold_sql_and_expected_rows(tmp_path: Path) -> None:
    record = {"id": "s", "question": "q", "gold_sql": "SELECT a, b FROM t",
              "expected_columns": ["a", "b"], "expected_rows": [[1, "x"], [2, None]],
              "db_id": "department_store"}
    case = load_file(write(tmp_path, "s.jsonl", json.dumps(record))).cases[0]
    assert isinstance(case, SqlCase)
    assert case.expected_sql == "SELECT a, b FROM t"
    assert case.ground_truth_data == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]
    assert case.expected == Table(("a", "b"), ((1, "x"), (2, None)))
    assert case.extra == {"db_id": "department_store"}


def test_duplicate_column_names_survive_through_the_table(tmp_path: Path) -> None:
    record = {"id": "d", "question": "q", "gold_sql": "SELECT p.name, t.name FROM p, t",
              "expected_columns": ["name", "name"], "expected_rows": [["a", "b"]]}
    case = load_file(write(tmp_path, "d.jsonl", json.dumps(record))).cases[0]
    assert case.expected == Table(("name", "name"), (("a", "b"),))


def test_python_module_is_parsed_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    path = write(tmp_path, "nba_test_cases.py", f'''
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("ran")  # must never run

        SQL_TEST_CASES = [
            SQLEvaluationTestCase(
                question="What is the average field goal percentage for the Lakers?",
                query_type=QueryType.SQL_ONLY,
                expected_sql=(
                    "SELECT ROUND(AVG(fg_pct), 1) AS avg_fg_pct "
                    "FROM player_stats"
                ),
                ground_truth_data={{"avg_fg_pct": 44.6}},
                category="aggregation_sql_team",
            ),
        ]
        HYBRID_TEST_CASES = [
            SQLEvaluationTestCase(
                question="Who scored the most?",
                query_type=QueryType.HYBRID,
                expected_sql="SELECT name FROM players LIMIT 1",
                ground_truth_answer="Shai scored the most.",
                ground_truth_data={{"name": "Shai"}},
            ),
        ]
        VECTOR_TEST_CASES = [
            {{"question": "Who impressed?", "ground_truth": "Reddit 1",
              "category": TestCategory.SIMPLE}},
            {{"question": f"not a literal {{1}}", "ground_truth": "x"}},
        ]
        ''')
    result = load_file(path)
    assert not marker.exists()
    kinds = {c.kind: c for c in result.cases}
    assert set(kinds) == {"sql", "hybrid", "vector"}
    assert kinds["sql"].expected_sql.startswith("SELECT ROUND(AVG(fg_pct), 1) AS avg_fg_pct FROM")
    assert kinds["sql"].extra == {"query_type": "SQL_ONLY"}
    assert kinds["vector"].category == "SIMPLE"
    assert kinds["sql"].id.startswith("what_is_the_average_field_goal_percentag_")
    (error,) = result.errors
    assert error.line == path.read_text().splitlines().index(
        '    {"question": f"not a literal {1}", "ground_truth": "x"},') + 1
    assert error.field == "question" and "only literals" in error.message


def test_generated_ids_are_stable_and_depend_on_content(tmp_path: Path) -> None:
    record = dict(SQL_CASE)
    del record["id"]
    first = load_file(write(tmp_path, "a.jsonl", json.dumps(record))).cases[0].id
    again = load_file(write(tmp_path, "b.jsonl", "\n" + json.dumps(record))).cases[0].id
    changed = load_file(write(tmp_path, "c.jsonl", json.dumps(
        dict(record, expected_sql="SELECT 2 AS n")))).cases[0].id
    assert first == again != changed
    assert first.startswith("how_many_")


def test_duplicate_id_is_a_file_error_naming_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.jsonl", "\n".join(json.dumps(SQL_CASE) for _ in range(2)))
    with pytest.raises(CaseError) as info:
        load_file(path)
    assert "duplicate id 'a'" in str(info.value)
    assert "line 1" in str(info.value) and "line 2" in str(info.value)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"kind": "sqlx"}, "kind", "unknown kind 'sqlx'"),
        ({"question": None}, "question", "required field is missing"),
        ({"float_places": "two"}, "float_places", "expected an integer"),
        ({"order_matters": "yes"}, "order_matters", "expected true or false"),
        ({"expected_sq": "SELECT 1"}, "expected_sq", "did you mean 'expected_sql'"),
        ({"ground_truth_data": [{"a": 1}, {"b": 2}]}, "ground_truth_data", "row 2 has keys"),
        ({"id": "has space"}, "id", "may contain only"),
        ({"thresholds": {"match": "high"}}, "thresholds.match", "must be a number"),
        ({"thresholds": {"match": float("nan")}}, "thresholds.match",
         "must be a finite number, got nan"),
        ({"thresholds": {"match": float("-inf")}}, "thresholds.match",
         "must be a finite number, got -inf"),
    ],
)
def test_bad_fields_name_file_line_and_field(tmp_path: Path, change: dict, field: str,
                                             message: str) -> None:
    good = dict(SQL_CASE, id="good")
    bad = {**SQL_CASE, **change}
    path = write(tmp_path, "bad.jsonl", f"{json.dumps(good)}\n{json.dumps(bad)}\n")
    result = load_file(path)
    assert [c.id for c in result.cases] == ["good"]  # the rest of the file still loads
    (error,) = result.errors
    assert (error.line, error.field) == (2, field)
    assert message in error.message
    assert str(error).startswith(f"{path}:2: field '{field}': ")


def test_memory_index_out_of_range_names_the_field_line(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", """
        - kind: memory
          setup:
            - {role: user, content: hello}
          query: hi
          expected: [0, 3]
        """)
    (error,) = load_file(path).errors
    assert (error.line, error.field) == (5, "expected")
    assert "index 3 is out of range" in error.message


def test_yaml_syntax_error_is_a_file_error_with_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", "- id: a\n  question: [unclosed\n- id: b\n")
    with pytest.raises(CaseError) as info:
        load_file(path)
    assert info.value.line is not None and info.value.line >= 2
    assert "invalid YAML" in str(info.value)


def test_malformed_jsonl_line_is_one_error_and_the_rest_loads(tmp_path: Path) -> None:
    path = write(tmp_path, "x.jsonl", f'{json.dumps(SQL_CASE)}\n{{"id": "b",\n[1, 2]\n')
    result = load_file(path)
    assert [c.id for c in result.cases] == ["a"]
    assert [(e.line, "invalid JSON" in e.message or "object" in e.message)
            for e in result.errors] == [(2, True), (3, True)]


def test_kind_is_inferred_from_fields(tmp_path: Path) -> None:
    records = [
        {"question": "q1", "expected_sql": "SELECT 1", "ground_truth_data": {"a": 1}},
        {"question": "q2", "ground_truth_answer": "x"},
        {"question": "q3", "ground_truth": "doc a"},
        {"question": "q4", "ground_truth": "x", "doc_type": "table"},
        {"setup": [{"role": "u", "content": "c"}], "query": "q5", "expected": [0]},
    ]
    path = write(tmp_path, "mixed.jsonl", "\n".join(json.dumps(r) for r in records))
    assert [c.kind for c in load_file(path).cases] == ["sql", "hybrid", "vector", "ragas",
                                                         "memory"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["id", "kind", "question", "expected_sql", "gold_sql",
                                       "ground_truth_data", "expected_rows", "expected_columns",
                                       "setup", "query", "expected", "cases", "ground_truth",
                                       "thresholds", "top_k", "history", "x"]), children,
                      max_size=6),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=json_values, suffix=st.sampled_from([".json", ".jsonl", ".yaml"]))
def test_random_documents_raise_only_case_errors(tmp_path: Path, document: object,
                                                 suffix: str) -> None:
    import yaml

    path = tmp_path / f"random{suffix}"
    if suffix == ".yaml":
        path.write_text(yaml.safe_dump(document))
    elif suffix == ".jsonl":
        items = document if isinstance(document, list) else [document]
        path.write_text("\n".join(json.dumps(item) for item in items))
    else:
        path.write_text(json.dumps(document))
    try:
        result = load_file(path)
    except CaseError:
        return
    for error in result.errors:
        assert isinstance(error, CaseError) and error.file


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_random_text_raises_only_case_errors(tmp_path: Path, text: str) -> None:
    for name in ("t.yaml", "t.json", "t.jsonl", "t_test_cases.py"):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with contextlib.suppress(CaseError):
            load_file(path)
