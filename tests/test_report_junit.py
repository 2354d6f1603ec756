"""Gates and regressions reach CI: testcases in --junitxml, words in pytest's last line.

Every behaviour is checked without an xdist flag, with ``-n 2`` and with ``-p no:xdist``:
the checks are sent from the controller at the end of the session, whatever ran the items.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

MODE_IDS = ["plain", "n2", "no-xdist"]
GATES = '[tool.ragbench.gates]\n"toy.token_f1" = {bound}\n"toy.exact_match" = 0.1\n'


def _junit(project: RagbenchProject, name: str) -> tuple[dict[str, str], dict[str, ET.Element]]:
    suite = project.junit(name)
    cases = {f"{c.get('classname')}.{c.get('name')}": c for c in suite.iter("testcase")}
    return dict(suite.attrib), cases


def _properties(case: ET.Element) -> dict[str, Any]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def _last_line(result: pytest.RunResult) -> str:
    return [line for line in result.outlines if line.strip()][-1]


def _counts(last_line: str) -> dict[str, int]:
    """``{"passed": 12, "gates missed": 1, ...}`` from pytest's last line."""
    text = last_line.strip("= ").rsplit(" in ", 1)[0]
    return {words: int(n) for n, _, words in (part.partition(" ") for part in text.split(", "))}


# The two junit-10.xsd schemas JUnit consumers validate against (tests/junit_xsd, its
# README names their sources and license): pytest's own test suite checks xunit2 output
# with the first, Jenkins' xunit plugin reads reports with the second.
SCHEMAS = [Path(__file__).parent / "junit_xsd" / name
           for name in ("pytest-junit-10.xsd", "jenkins-junit-10.xsd")]
FAILING = ("failed", "gate missed", "gates missed", "threshold missed", "thresholds missed",
           "judged metric unscored", "judged metrics unscored", "regression", "regressions")


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=MODE_IDS[:2])
def test_the_xml_validates_and_its_counts_are_the_last_lines(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    """Items that pass and fail, a broken record, a missed, a held and an unchecked gate."""
    import xmlschema  # the dev extra

    schemas = [xmlschema.XMLSchema(str(path)) for path in SCHEMAS]
    gates = GATES.format(bound=0.99) + '"toy.faithfulness" = 0.5\n'
    failing = {"id": "strict", "kind": "toy", "question": "Which team won?",
               "ground_truth": "Celtics", "thresholds": {"exact_match": 1}}
    project = make_toy_project(pytester, 12, extra_cases=[failing], pyproject=gates)
    answers = project.path / "answers.data"
    answers.write_text(answers.read_text().replace('"Celtics"', '"Lakers"'))
    with (project.path / "test_cases" / "toy.jsonl").open("a") as cases_file:
        cases_file.write('{"id": "broken", "kind": "toy", "question": "What?"}\n')  # no answer
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for schema in schemas:
        schema.validate(str(project.path / "junit.xml"))  # raises, naming the element
    suite, cases = _junit(project, "junit.xml")
    counts = _counts(_last_line(result))
    assert counts["passed"] == 12 and counts["failed"] == 2
    assert counts["gate missed"] == counts["gate passed"] == counts["gate not checked"] == 1
    total = sum(n for words, n in counts.items() if words not in ("warnings", "deselected"))
    assert int(suite["tests"]) == total == len(cases)
    assert int(suite["failures"]) + int(suite["errors"]) == sum(
        n for words, n in counts.items() if words in FAILING)
    assert int(suite["skipped"]) == counts["gate not checked"]


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_missed_gate_is_a_failed_testcase_and_named_in_the_last_line(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATES.format(bound=0.99))
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    last = _last_line(result)
    assert "12 passed, " in last and "1 gate missed" in last and "1 gate passed" in last
    suite, cases = _junit(project, "junit.xml")
    assert suite["failures"] == "1" and suite["errors"] == "0"
    assert suite["tests"] == str(12 + 2)  # the items and the two gates, as the last line
    missed = cases["ragbench.gate[toy.token_f1]"]
    failure = missed.find("failure")
    assert failure is not None
    # the same one-line message as the terminal
    section = result.stdout.lines
    assert f"FAILED {failure.get('message')}" in section
    assert failure.get("message", "").startswith("gate toy.token_f1 >= 0.99: MISSED (mean ")
    held = cases["ragbench.gate[toy.exact_match]"]
    assert held.find("failure") is None and held.find("skipped") is None
    # no <properties> inside a <testcase> unless asked: outside pytest's xunit2 schema
    assert all(case.find("properties") is None for case in cases.values())


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=MODE_IDS[:2])
def test_properties_only_when_asked(pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 6, pyproject=GATES.format(bound=0.99),
                               ini="[pytest]\nragbench_junit_properties = true\n")
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    _, cases = _junit(project, "junit.xml")
    properties = _properties(cases["ragbench.gate[toy.exact_match]"])
    assert properties["ragbench.check"] == "gate"
    assert properties["ragbench.message"] in result.stdout.lines
    assert float(properties["ragbench.value"]) == pytest.approx(
        project.results()["metrics"]["toy"]["exact_match"]["mean"])
    item = _properties(cases["test_cases.toy.jsonl.toy[q000]"])
    record = project.items_by_case()["q000"]
    assert float(item["ragbench.metric.token_f1"]) == record["metrics"]["token_f1"]
    assert item["ragbench.status"] == "passed"


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_gates_that_hold_fail_nothing(pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATES.format(bound=0.1))
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.OK
    assert "12 passed, 2 gates passed in " in _last_line(result)
    suite, cases = _junit(project, "junit.xml")
    assert suite["failures"] == "0" and suite["tests"] == str(12 + 2)
    assert cases["ragbench.gate[toy.token_f1]"].find("failure") is None


def test_a_gate_with_nothing_scored_is_a_skipped_testcase(pytester: pytest.Pytester) -> None:
    gate = '[tool.ragbench.gates]\n"toy.faithfulness" = 0.5\n'
    project = make_toy_project(pytester, 4, pyproject=gate)
    result = project.runpytest("--ragbench", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    suite, cases = _junit(project, "junit.xml")
    skipped = cases["ragbench.gate[toy.faithfulness]"].find("skipped")
    assert skipped is not None and "not checked, no scored values" in skipped.get("message", "")
    assert suite["skipped"] == "1" and suite["failures"] == "0"
    assert "4 passed, 1 gate not checked in " in _last_line(result)


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_regressions_are_testcases_failed_only_when_they_fail_the_session(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 24)
    project.runpytest("--ragbench", "--ragbench-save=base")
    (project.path / "degrade.txt").write_text("x")

    noted = project.runpytest("--ragbench", "--ragbench-compare=base", "--junitxml=a.xml",
                              *mode)
    found = project.results()["regressions"]
    assert len(found) == 2  # token_f1 and exact_match of the degraded system
    assert noted.ret == pytest.ExitCode.OK
    assert "24 passed, 2 regressions found in " in _last_line(noted)
    suite, cases = _junit(project, "a.xml")
    assert suite["failures"] == "0"
    names = {f"ragbench.regression[current_vs_baseline:toy.{c['metric']}]" for c in found}
    assert names <= set(cases)
    assert all(cases[n].find("failure") is None for n in names)

    gated = project.runpytest("--ragbench", "--ragbench-compare=base",
                              "--ragbench-fail-on=regression", "--junitxml=b.xml", *mode)
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    assert "24 passed, 2 regressions in " in _last_line(gated)
    suite, cases = _junit(project, "b.xml")
    assert suite["failures"] == "2"
    section = gated.stdout.lines
    for name in names:
        failure = cases[name].find("failure")
        assert failure is not None and f"FAILED {failure.get('message')}" in section
    assert "verdict: FAILED: 2 regressions against the baseline" in section


def test_checks_do_not_count_as_tests_for_last_failed(pytester: pytest.Pytester) -> None:
    """``--lf`` after a missed gate alone reruns everything (the gate covers every item)."""
    project = make_toy_project(pytester, 6, pyproject=GATES.format(bound=0.99))
    project.runpytest("--ragbench", "-p", "cacheprovider")
    again = project.runpytest("--ragbench", "-p", "cacheprovider", "--lf")
    again.assert_outcomes(passed=6)
    assert "1 gate missed" in _last_line(again)
