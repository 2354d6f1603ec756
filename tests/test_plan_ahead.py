"""A kind's own ahead-of-time plan (``ItemKind.plan_ahead``), added from a conftest.py.

The package's one mechanism (``run/prefetch.py``) gives the plan the kind's items to come:
serially every selected item at once, under xdist each worker's own items, each item once,
before it runs, and never to another worker. The kind knows nothing about xdist.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.project import RagbenchProject

CONFTEST = '''
import json
import os
from pathlib import Path

import pytest

from pytest_ragbench.cases.build import text
from pytest_ragbench.kinds import AS_GIVEN, CaseKind, Field, ItemKind, Outcome
from pytest_ragbench.metrics import exact_match

LOG = Path(__file__).with_name("plans.jsonl")
BATCH = pytest.StashKey[dict]()


def log(**entry):
    entry["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\\n")


def plan(items, item):
    """One batched call for the items to come: every question answered at once."""
    log(event="plan", items=[queued.nodeid for queued in items], by=item.nodeid)
    answers = item.session_state(BATCH, dict)
    answers.update({queued.nodeid: queued.case.question.upper() for queued in items})


def run(case, item):
    answers = item.session_state(BATCH, dict)
    log(event="run", item=item.nodeid, planned=item.nodeid in answers)
    answer = answers.get(item.nodeid, "")
    return Outcome(metrics={"exact_match": exact_match(answer, case.ground_truth)})


BATCHED_CASES = CaseKind("batched", {"question": Field(True, text),
                                     "ground_truth": Field(True, text)})
BATCHED = ItemKind(name="batched", case_kind="batched", runner=run, plan_ahead=plan,
                   description="answered in one batch ahead", answers=AS_GIVEN,
                   metrics=("exact_match",), thresholds={"exact_match": 1.0})


def pytest_ragbench_item_kinds(config):
    return [BATCHED_CASES, BATCHED]
'''

CASES = [{"id": f"b{i:02d}", "kind": "batched", "question": f"question {i}",
          "ground_truth": f"QUESTION {i}"} for i in range(24)]


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(CONFTEST).ini()
    project.cases("batched.jsonl", CASES)
    return project


def _log(project: RagbenchProject) -> list[dict[str, Any]]:
    lines = (project.path / "plans.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_serially_the_plan_is_called_once_with_every_selected_item_in_run_order(
        pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-k", "not b03",
                         subprocess=True)
    result.assert_outcomes(passed=23, deselected=1)
    log = _log(project)
    plans = [e for e in log if e["event"] == "plan"]
    runs = [e for e in log if e["event"] == "run"]
    assert len(plans) == 1
    assert plans[0]["items"] == [e["item"] for e in runs]  # run order, the deselected left out
    assert plans[0]["by"] == runs[0]["item"] == plans[0]["items"][0]
    assert not any("b03" in nodeid for nodeid in plans[0]["items"])
    assert all(e["planned"] for e in runs)
    assert log[0]["event"] == "plan"  # before the first item ran


def test_under_xdist_each_worker_plans_its_own_items_once_before_they_run(
        pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-n", "2", subprocess=True)
    result.assert_outcomes(passed=24)
    log = _log(project)
    ran_by = {e["item"]: e["worker"] for e in log if e["event"] == "run"}
    assert len(ran_by) == 24 and set(ran_by.values()) == {"gw0", "gw1"}
    planned = Counter(nodeid for e in log if e["event"] == "plan" for nodeid in e["items"])
    assert planned == Counter(list(ran_by))  # every item planned exactly once
    plans = [e for e in log if e["event"] == "plan"]
    for entry in plans:
        # only the worker that runs an item plans it: no work for another worker's items
        assert {ran_by[nodeid] for nodeid in entry["items"]} == {entry["worker"]}
    for worker in ("gw0", "gw1"):  # a worker's first plan holds the item about to run
        first = next(e for e in plans if e["worker"] == worker)
        assert first["by"] == first["items"][0]
    # later plans top up with the items sent since, each before any of them runs
    assert all(e["planned"] for e in log if e["event"] == "run")


SECTION = '''

from pytest_ragbench import GateVerdict, MetricStats, ReportSection


def pytest_ragbench_report_sections(config, document):
    """The kind's own section, from the typed entries of the document."""
    cell = document.metrics["batched"]["exact_match"]
    gate, = (g for g in document.gates if g.kind == "batched")
    assert isinstance(cell, MetricStats) and isinstance(gate, GateVerdict)
    plans = sum(json.loads(line)["event"] == "plan" for line in LOG.read_text().splitlines())
    return ReportSection(key="batching", title="batched answers",
                         data={"plans": plans, "n": cell.n, "mean": cell.mean,
                               "gate_passed": gate.passed},
                         table=[["metric", "n", "mean", "plans"],
                                ["exact_match", cell.n, cell.mean, plans]])
'''


def test_a_conftest_kind_brings_its_plan_and_its_report_section(
        pytester: pytest.Pytester) -> None:
    """One conftest.py adds a kind, its own plan and its own section; the package is untouched."""
    project = RagbenchProject(pytester).conftest(CONFTEST + SECTION).ini()
    project.cases("batched.jsonl", CASES[:6])
    project.gates('[gates]\n"batched.exact_match" = 0.9\n')
    result = project.run("--ragbench", "-p", "no:cacheprovider", subprocess=True)
    result.assert_outcomes(passed=6)
    results = project.results()  # validated against the schema and the typed entries
    assert results["batching"] == {"plans": 1, "n": 6, "mean": 1.0, "gate_passed": True}
    output = result.stdout.str().splitlines()
    start = output.index("batched answers")
    assert output[start + 2].split() == ["exact_match", "6", "1.000", "1"]
    assert "<h2>batched answers</h2>" in project.html()
