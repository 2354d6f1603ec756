"""Spider department_store: all 56 real cases pass; ten corrupted variants each fail clearly."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import oracle_file
from tests.helpers import failure_section

pytestmark = pytest.mark.usefixtures("spider_db")


@pytest.fixture
def spider_db() -> Path:
    return oracle_file("spider-department_store", "department_store.sqlite")


def _spider_cases() -> dict[str, dict]:
    path = oracle_file("spider-department_store", "cases.jsonl")
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {case["id"]: case for case in cases}


def _run(pytester: pytest.Pytester, db: Path, *args: str) -> pytest.RunResult:
    # The rootdir is the test's folder: given only the oracle's case file, pytest would root
    # the session in ../shared/oracles and write the report (.ragbench/) there.
    return pytester.runpytest("-p", "no:cacheprovider", f"--rootdir={pytester.path}",
                              f"--ragbench-db-url=sqlite:///{db}", *args)


def test_all_spider_cases_pass_as_a_plain_case_file(pytester: pytest.Pytester,
                                                    spider_db: Path) -> None:
    source = oracle_file("spider-department_store", "cases.jsonl")
    result = _run(pytester, spider_db, str(source), "-q")
    result.assert_outcomes(passed=56)
    result.stdout.fnmatch_lines(["*sql_ground_truth*56*56*"])


def _corrupt(case: dict, name: str, **changes: object) -> dict:
    variant = copy.deepcopy(case)
    variant["id"] = name
    variant.update(changes)
    return variant


def _variants() -> list[tuple[dict, list[str]]]:
    """(corrupted case, fragments its failure message must contain)."""
    cases = _spider_cases()
    staff = cases["spider-train-department_store-2"]          # 3 rows, order-free
    names = cases["spider-train-department_store-12"]         # 3 rows, ORDER BY
    prices = cases["spider-train-department_store-10"]        # floats, 2 places
    rows = staff["expected_rows"]
    return [
        (_corrupt(staff, "changed_value", expected_rows=[[5, "1"], *rows[1:]]),
         ["only in expected (1 row(s))", "staff_gender: '1'", "only in actual", "'0'"]),
        (_corrupt(staff, "missing_row", expected_rows=rows[:2]),
         ["row count: expected 2, got 3", "only in actual (1 row(s))"]),
        (_corrupt(staff, "extra_row", expected_rows=[*rows, [99, "0"]]),
         ["row count: expected 4, got 3", "only in expected (1 row(s))", "staff_id: 99"]),
        (_corrupt(staff, "renamed_column", expected_columns=["staff_id", "gender"]),
         ["columns differ", "missing column(s): gender", "unexpected column(s): staff_gender"]),
        (_corrupt(names, "swapped_rows", expected_rows=[names["expected_rows"][1],
                                                        names["expected_rows"][0],
                                                        *names["expected_rows"][2:]]),
         ["same rows in a different order", "first difference at row 1"]),
        (_corrupt(prices, "float_off_by_cent",
                  expected_rows=[[*r[:2], round(r[2] + 0.01, 2)] if i == 0 else r
                                 for i, r in enumerate(prices["expected_rows"])]),
         ["only in expected (1 row(s))", "only in actual (1 row(s))"]),
        (_corrupt(staff, "type_change", expected_rows=[["5", "0"], *rows[1:]]),
         ["only in expected", "staff_id: '5'", "staff_id: 5"]),
        (_corrupt(staff, "null_vs_empty", gold_sql="SELECT NULL AS staff_gender",
                  expected_columns=["staff_gender"], expected_rows=[[""]]),
         ["only in expected", "staff_gender: ''", "only in actual", "staff_gender: NULL"]),
        (_corrupt(staff, "duplicated_row", expected_rows=[*rows, rows[0]]),
         ["row count: expected 4, got 3", "only in expected (1 row(s))"]),
        (_corrupt(staff, "empty_result", expected_rows=[]),
         ["row count: expected 0, got 3"]),
    ]


def test_ten_corrupted_variants_each_fail_naming_the_difference(
        pytester: pytest.Pytester, spider_db: Path) -> None:
    variants = _variants()
    pytester.makefile(".jsonl", corrupted="\n".join(json.dumps(v) for v, _ in variants))
    result = _run(pytester, spider_db, "corrupted.jsonl", "-q")
    result.assert_outcomes(failed=10)
    output = result.stdout.str()
    assert "Traceback" not in output
    for variant, fragments in variants:
        section = failure_section(output, f"sql_ground_truth: {variant['id']}")
        for fragment in fragments:
            assert fragment in section, (variant["id"], fragment, section)


def test_a_cent_off_passes_at_one_decimal_place(pytester: pytest.Pytester,
                                                spider_db: Path) -> None:
    """695.16 -> 695.17 differs at 2 places but not at 1: float_places decides."""
    case = _spider_cases()["spider-train-department_store-10"]
    rows = [[*r[:2], round(r[2] + 0.01, 2)] if r[2] == 695.16 else r
            for r in case["expected_rows"]]
    assert rows != case["expected_rows"]
    pytester.makefile(".jsonl", two=json.dumps(_corrupt(case, "two", expected_rows=rows)),
                      one=json.dumps(_corrupt(case, "one", expected_rows=rows, float_places=1)))
    _run(pytester, spider_db, "two.jsonl", "-q").assert_outcomes(failed=1)
    _run(pytester, spider_db, "one.jsonl", "-q").assert_outcomes(passed=1)


def test_case_file_reached_through_a_symlink(pytester: pytest.Pytester,
                                             spider_db: Path) -> None:
    link = pytester.path / "linked"
    link.symlink_to(spider_db.parent, target_is_directory=True)
    result = _run(pytester, spider_db, str(link / "cases.jsonl"), "-q")
    result.assert_outcomes(passed=56)
