"""An item's kind and system are stored on it and on its record, never read from its node id.

Under xdist the controller learns of the items from their node ids only; what it needs
before their records arrive (the scheduler's groups, the record of an item whose worker
died) comes from the workers (run/collected.py). A case id may hold ``::``, and one may
begin with a system's name and ``-``: a node id cannot be parsed back reliably.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.project import RagbenchProject

pytest_plugins = ["pytester"]

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_ragbench"
SPLITTERS = {"split", "rsplit", "partition", "rpartition", "removeprefix", "removesuffix"}

CONFTEST = '''
import os

from pytest_ragbench.kinds import EVALUATION, VERIFICATION, ItemKind, Outcome


def heavy(case, item):
    if case.id in ("odd::id", "a-y") and os.environ.get("CRASH"):
        os._exit(3)
    return where(case, item)


def light(case, item):
    if case.id == "c1" and item.system_name == "b" and os.environ.get("CRASH"):
        os._exit(3)
    return where(case, item)


def where(case, item):
    return Outcome(metrics={"match": 1.0},
                   evidence={"worker": os.environ.get("PYTEST_XDIST_WORKER", "serial")})


class Answers:
    def answer(self, question, history=None):
        return "an answer"


def pytest_ragbench_systems(config):
    return {"a": lambda request: Answers(), "b": lambda request: Answers()}


def pytest_ragbench_item_kinds(config):
    # named as the built-in kinds of sql cases, so that these replace them
    return [ItemKind(name="sql_ground_truth", case_kind="sql", runner=heavy, description="heavy",
                     family=VERIFICATION, metrics=("match",), loads=("heavylib",)),
            ItemKind(name="sql", case_kind="sql", runner=light, description="light",
                     family=EVALUATION, metrics=("match",),
                     fixtures=("ragbench_config", "ragbench_system"))]
'''

# "a-y": a system's item is named kind[<system>-<case id>], so sql_ground_truth[a-y]
# (no system) reads as system a's case y; "odd::id" hides the kind behind a "::"
IDS = [f"c{i}" for i in range(6)] + ["odd::id", "a-y"]


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester)
    project.conftest(CONFTEST)
    project.cases("s.yaml", "".join(
        f"- id: '{case_id}'\n  question: q\n  expected_sql: SELECT 1 AS n\n"
        f"  ground_truth_data: {{n: 1}}\n" for case_id in IDS))
    return project


def test_items_with_unusual_ids_keep_their_library_group_under_xdist(
        pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest_subprocess("--ragbench", "--ragbench-systems=a,b", "-n", "2",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=24)  # 8 sql_ground_truth + 8 x 2 sql
    records = project.items()
    workers = {r["evidence"]["worker"] for r in records if r["kind"] == "sql_ground_truth"}
    assert len(workers) == 1  # one library group, one worker: the odd ids' items included
    ran = {(r["system"], r["case_id"]) for r in records if r["kind"] == "sql"}
    assert ran == {(system, case_id) for system in ("a", "b") for case_id in IDS}


def test_the_lost_records_of_items_with_unusual_ids_keep_their_kind_and_system(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRASH", "1")
    project = _project(pytester)
    result = project.runpytest_subprocess("--ragbench", "--ragbench-systems=a,b", "-n", "2",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=21, failed=3)  # three workers crashed, one item each
    records = project.items()
    assert len(records) == 24
    lost = sorted((r["kind"], r["system"], r["case_id"]) for r in records
                  if r["status"] == "lost")
    assert lost == [("sql", "b", "c1"), ("sql_ground_truth", None, "a-y"),
                    ("sql_ground_truth", None, "odd::id")]


def test_no_module_splits_a_node_id() -> None:
    """A ``.split``/``.partition`` (and the like) of anything named ``nodeid`` is a parse."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in SPLITTERS \
                    and "nodeid" in ast.unparse(node.func.value).lower():
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "kind, system and case come from the item or record:\n" + \
        "\n".join(found)
