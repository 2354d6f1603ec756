"""Gates and regressions reach CI: testcases in --junitxml, words in pytest's last line.

Every behaviour is checked without an xdist flag, with ``-n 2`` and with ``-p no:xdist``:
the checks are sent from the controller at the end of the session, whatever ran the items.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
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


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_missed_gate_is_a_failed_testcase_and_named_in_the_last_line(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATES.format(bound=0.99))
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "12 passed, 1 gate missed in " in _last_line(result)
    suite, cases = _junit(project, "junit.xml")
    assert suite["failures"] == "1" and suite["errors"] == "0"
    assert suite["tests"] == str(12 + 2)  # the items and the two gates
    missed = cases["ragbench.gate[toy.token_f1]"]
    failure = missed.find("failure")
    assert failure is not None
    # the same one-line message as the terminal
    section = result.stdout.lines
    assert f"FAILED {failure.get('message')}" in section
    assert failure.get("message", "").startswith("gate toy.token_f1 >= 0.99: MISSED (mean ")
    held = cases["ragbench.gate[toy.exact_match]"]
    assert held.find("failure") is None and held.find("skipped") is None
    properties = _properties(held)
    assert properties["ragbench.check"] == "gate"
    assert properties["ragbench.message"] in section
    assert float(properties["ragbench.value"]) == pytest.approx(
        project.results()["metrics"]["toy"]["exact_match"]["mean"])
    # the items keep their metric properties
    item = cases["test_cases.toy.jsonl.toy[q000]"]
    assert "ragbench.metric.token_f1" in _properties(item)


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_gates_that_hold_fail_nothing(pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATES.format(bound=0.1))
    result = project.runpytest("--ragbench", "--junitxml=junit.xml", *mode)
    assert result.ret == pytest.ExitCode.OK
    assert "12 passed in " in _last_line(result) and "gate" not in _last_line(result)
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
