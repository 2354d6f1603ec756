"""Gates, judged metrics and regressions reach the reporters people combine pytest with.

Each reporter is the real plugin (the dev extra): pytest-sugar, pytest-html, allure-pytest
and teamcity-messages, with ``--junitxml`` beside it. A missed gate must be a failed test
in each, with the XML's ``failures`` agreeing with the exit code; a reporter that raises
on a check is named once and costs the others nothing.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import SQL_CASES_ONE_WRONG
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

GATES = '[tool.ragbench.gates]\n"toy.token_f1" = 0.99\n"toy.exact_match" = 0.1\n'
MISSED = "ragbench::gate[toy.token_f1]"
HELD = "ragbench::gate[toy.exact_match]"


def _missed_gate_project(pytester: pytest.Pytester, conftest: str = "") -> RagbenchProject:
    """Six toy items that pass; gate token_f1 >= 0.99 is missed, exact_match >= 0.1 held."""
    return make_toy_project(pytester, 6, pyproject=GATES, conftest=conftest)


def _suite(project: RagbenchProject) -> dict[str, str]:
    return dict(project.junit("junit.xml").attrib)


def _assert_junit_agrees(project: RagbenchProject, result: pytest.RunResult) -> None:
    """The XML names the missed gate as its one failure, and the session exits 1."""
    suite = _suite(project)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (suite["failures"], suite["errors"], suite["tests"]) == ("1", "0", str(6 + 2))
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("mode", [(), ("-n", "2")], ids=["plain", "n2"])
def test_pytest_sugar_shows_the_missed_gate(pytester: pytest.Pytester,
                                            mode: tuple[str, ...]) -> None:
    """sugar draws its progress bar from the collected count; told nothing of the checks,
    its bar indexed past its end once they outnumbered a bar's step (a 10-block bar and 291
    items: the first check) and raised IndexError. A one-block bar reaches that with 30."""
    pytest.importorskip("pytest_sugar")
    project = make_toy_project(pytester, 30, pyproject=GATES)
    (project.path / "pytest-sugar.conf").write_text("[sugar]\nprogressbar_length = 1\n")
    result = project.runpytest_subprocess("--ragbench", "--junitxml=junit.xml",
                                          "-p", "sugar", "--force-sugar", *mode)
    suite = _suite(project)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (suite["failures"], suite["errors"], suite["tests"]) == ("1", "0", str(30 + 2))
    output = result.stdout.str()
    assert "pytest-sugar" in output  # sugar drew this run, not pytest's own reporter
    # sugar's failure block: the gate's name as its header, its line as the failure
    assert re.search(r"―+ gate\[toy\.token_f1\] ―+", output)
    assert "gate toy.token_f1 >= 0.99: MISSED (mean " in output
    # the checks were announced to sugar: its bar ends at 100%, and no reporter raised
    assert re.search(r"\b100%", output)
    assert not [line for line in result.outlines if line.startswith("ragbench: the plugin")]
    assert "INTERNALERROR" not in output + result.stderr.str()


def test_pytest_html_counts_the_checks_as_the_xml_does(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_html")
    project = _missed_gate_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "--junitxml=junit.xml",
                                          "--html=report.html")
    _assert_junit_agrees(project, result)
    html = (project.path / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'data-jsonblob="([^"]*)"', html)
    assert blob is not None
    import html as html_module

    tests = json.loads(html_module.unescape(blob.group(1)))["tests"]
    outcomes = {nodeid: [r["result"] for r in runs] for nodeid, runs in tests.items()}
    assert outcomes[MISSED] == ["Failed"] and outcomes[HELD] == ["Passed"]
    assert len(outcomes) == int(_suite(project)["tests"])  # 6 items and 2 gates
    assert f"{len(outcomes)} tests took" in html


def test_allure_files_the_missed_gate_as_failed(pytester: pytest.Pytester) -> None:
    pytest.importorskip("allure_pytest")
    project = _missed_gate_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "--junitxml=junit.xml",
                                          "--alluredir=allure")
    _assert_junit_agrees(project, result)
    results = _allure_results(project.path / "allure")
    assert results["gate[toy.token_f1]"]["status"] == "failed"
    message = results["gate[toy.token_f1]"]["statusDetails"]["message"]
    assert "gate toy.token_f1 >= 0.99: MISSED (mean " in message
    assert results["gate[toy.exact_match]"]["status"] == "passed"
    assert sum(r["status"] == "passed" for r in results.values()) == 6 + 1


def test_teamcity_starts_and_fails_the_missed_gate(pytester: pytest.Pytester) -> None:
    pytest.importorskip("teamcity")
    project = _missed_gate_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "--junitxml=junit.xml", "--teamcity")
    _assert_junit_agrees(project, result)
    messages = [_teamcity(line) for line in result.outlines if "##teamcity[" in line]
    started = [m["name"] for m in messages if m["type"] == "testStarted"]
    failed = [m for m in messages if m["type"] == "testFailed"]
    assert [m["name"] for m in failed] == ["ragbench.gate(toy_token_f1)"]
    assert "gate toy.token_f1 >= 0.99: MISSED" in failed[0]["details"]
    assert "ragbench.gate(toy_exact_match)" in started
    # collection announces the items, and the checks are announced before they start:
    # PyCharm adds each testCount to its total, which then equals the tests started
    count = [int(m["count"]) for m in messages if m["type"] == "testCount"]
    assert count == [6, 2] and sum(count) == len(started) == 6 + 2
    first_check = next(i for i, m in enumerate(messages)
                       if m["type"] == "testStarted" and m["name"].startswith("ragbench."))
    assert [m["type"] for m in messages[:first_check]].count("testCount") == 2


BROKEN_REPORTER = '''

class BrokenReporter:
    """Raises on every ragbench check, as pytest-sugar 1.0 did past the collected count."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if report.nodeid.startswith("ragbench::"):
            raise IndexError("list index out of range")


def pytest_configure(config):
    config.pluginmanager.register(BrokenReporter(), "broken-reporter")
'''


@pytest.mark.parametrize("mode", [(), ("-n", "2")], ids=["plain", "n2"])
def test_a_reporter_that_raises_costs_only_itself(pytester: pytest.Pytester,
                                                   mode: tuple[str, ...]) -> None:
    project = _missed_gate_project(pytester, conftest=BROKEN_REPORTER)
    result = project.runpytest_subprocess("--ragbench", "--junitxml=junit.xml",
                                          "--html=report.html", *mode)
    _assert_junit_agrees(project, result)
    output = result.stdout.str()
    assert "6 passed, 1 warning, 1 gate passed, 1 gate missed in " in output.splitlines()[-1]
    # one line naming the plugin, however many checks it failed on
    named = "the plugin 'broken-reporter' (conftest) raised"
    lines = [line for line in result.outlines if named in line]
    assert lines and all("IndexError: list index out of range in "
                         "pytest_runtest_logreport for ragbench::gate[" in line for line in lines)
    assert len({line.strip() for line in lines if line.startswith("ragbench:")}) == 1
    assert "FAILED gate toy.token_f1 >= 0.99: MISSED" in output  # the section is whole
    assert MISSED in (project.path / "report.html").read_text(encoding="utf-8")


def test_a_ground_truth_mismatch_is_an_assertion_failure(pytester: pytest.Pytester) -> None:
    """allure tells a failed test (an assertion) from a broken one (any other exception)."""
    pytest.importorskip("allure_pytest")
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", SQL_CASES_ONE_WRONG)
    result = project.runpytest_subprocess("--alluredir=allure", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    results = _allure_results(project.path / "allure")
    mismatch = results["sql_ground_truth[heat]"]
    assert mismatch["status"] == "failed"
    message = mismatch["statusDetails"]["message"]
    assert message.startswith("pytest_ragbench.collect.items.CaseFailed")
    assert "the result differs from ground_truth_data" in mismatch["statusDetails"]["message"]
    assert results["sql_ground_truth[lakers]"]["status"] == "passed"
    failure = project.junit("junit.xml").find("testcase[@name='sql_ground_truth[heat]']/failure")
    assert failure is not None


def _allure_results(folder: Path) -> dict[str, dict[str, Any]]:
    """allure's ``*-result.json`` files by test name."""
    found = [json.loads(p.read_text()) for p in folder.glob("*-result.json")]
    return {r["name"]: r for r in found}


def _teamcity(line: str) -> dict[str, str]:
    """``##teamcity[testStarted name='x' ...]`` as ``{"type": "testStarted", "name": "x"}``."""
    message = line[line.index("##teamcity[") + len("##teamcity["):].rstrip().removesuffix("]")
    kind, _, rest = message.partition(" ")
    fields = {k: v.replace("|'", "'").replace("|[", "[").replace("|]", "]").replace("|n", "\n")
              .replace("||", "|") for k, v in re.findall(r"(\w+)='((?:[^'|]|\|.)*)'", rest)}
    return {"type": kind, **fields}


def test_the_checks_are_testcases_of_a_session_level_node(pytester: pytest.Pytester) -> None:
    """``ragbench`` as classname, the check as name, in both the XML and the report's ids."""
    project = _missed_gate_project(pytester)
    project.runpytest("--ragbench", "--junitxml=junit.xml")
    root = ET.parse(project.path / "junit.xml").getroot()
    checks = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")
              if c.get("classname") == "ragbench"]
    assert checks == [("ragbench", "gate[toy.exact_match]"), ("ragbench", "gate[toy.token_f1]")]
