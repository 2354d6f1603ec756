"""Under ``-n N``, items of kinds that load the same slow library share one worker (issue 20).

Each worker that runs a ragas item imports ragas (about 2.5 s of CPU): xdist's default
``--dist load`` gave both workers such items. ``system/worker_groups.py`` keeps every
kind that shares a library (``ItemKind.loads``) on one worker and spreads the rest in
chunks; ``benchmarks/bench_xdist.py`` measures what that buys.
"""

from __future__ import annotations

import pytest

from pytest_ragbench import kinds
from pytest_ragbench.kinds import ItemKind
from pytest_ragbench.system import worker_groups
from tests.project import RagbenchProject

pytest_plugins = ["pytester"]


def _kind(name: str, *loads: str) -> ItemKind:
    return ItemKind(name, "sql", "x:run", loads=loads)


def test_kinds_sharing_a_library_are_joined_transitively() -> None:
    groups = worker_groups.library_groups([
        _kind("a", "x"), _kind("b", "y"), _kind("c", "x", "y"), _kind("d"), _kind("e", "z")])
    assert groups["a"] == groups["b"] == groups["c"] != groups["e"]
    assert "d" not in groups


def test_only_ragas_items_are_grouped_among_the_builtin_kinds() -> None:
    groups = worker_groups.library_groups(kinds.builtin_registry().item_kinds.values())
    assert set(groups) == {"ragas"}


def test_grouped_items_are_one_unit_and_the_others_chunks() -> None:
    groups = {"ragas": "ragas"}
    nodeids = [f"test_cases/s.jsonl::ragas[s{i}]" for i in range(5)]
    nodeids += [f"test_cases/v.yaml::vector[v{i}]" for i in range(16)]
    nodeids += ["tests/test_mine.py::test_ragas[1]"]  # a user's test is never a ragas item
    units = worker_groups.work_units(nodeids, groups, workers=2)
    assert {units[n] for n in nodeids[:5]} == {"ragbench-loads:ragas"}
    others = [units[n] for n in nodeids[5:]]
    sizes = [others.count(unit) for unit in dict.fromkeys(others)]  # in collection order
    assert sizes == [2] + [1] * 15  # 17 // (4 * 2) items, then a quarter share of the rest
    many = worker_groups.work_units([f"v.yaml::vector[v{i}]" for i in range(251)], groups, 2)
    sizes = [list(many.values()).count(unit) for unit in dict.fromkeys(many.values())]
    assert sizes[:3] == [31, 27, 24] and sizes[-1] == 1 and sum(sizes) == 251
    assert sizes == sorted(sizes, reverse=True)


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester)
    project.conftest('''
import os

from pytest_ragbench.kinds import EVALUATION, VERIFICATION, ItemKind
from pytest_ragbench.records import Outcome


def heavy(case, context):
    if case.id == "c5" and os.environ.get("CRASH_C5"):
        os._exit(3)  # the worker dies in the middle of its group
    return where(case, context)


def where(case, context):
    return Outcome(metrics={"match": 1.0},
                   evidence={"worker": os.environ.get("PYTEST_XDIST_WORKER", "serial")})


def pytest_ragbench_item_kinds(config):
    return [ItemKind("sql_ground_truth", "sql", heavy, "heavy", VERIFICATION,
                     metrics=("match",), loads=("heavylib",)),
            ItemKind("sql", "sql", where, "light", EVALUATION, metrics=("match",))]
''')
    project.cases("s.yaml", "".join(
        f"- id: c{i}\n  question: q\n  expected_sql: SELECT 1 AS n\n"
        f"  ground_truth_data: {{n: 1}}\n" for i in range(12)))
    return project


def test_a_kind_that_loads_a_library_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest_subprocess("--ragbench", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=24)
    workers: dict[str, set[str]] = {}
    for record in project.items():
        workers.setdefault(record["kind"], set()).add(record["evidence"]["worker"])
    assert len(workers["sql_ground_truth"]) == 1
    assert workers["sql"] <= {"gw0", "gw1"}


def test_a_crash_inside_a_group_loses_only_its_item(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """xdist's LoadScope would rerun the crashed item with the rest of its unit; not here."""
    monkeypatch.setenv("CRASH_C5", "1")
    project = _project(pytester)
    result = project.runpytest_subprocess("--ragbench", "-n", "2", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*sql_ground_truth[[]c5[]]*"])
    result.assert_outcomes(passed=23, failed=1)
    records = project.items()
    lost = [r for r in records if r["status"] == "lost"]
    assert [(r["kind"], r["case_id"]) for r in lost] == [("sql_ground_truth", "c5")]
    assert len(records) == 24


@pytest.mark.parametrize("dist", ["loadfile", "loadscope", "worksteal", "each"])
def test_a_dist_mode_the_user_names_is_left_alone(pytester: pytest.Pytester, dist: str) -> None:
    plugin = worker_groups.WorkerGroups(kinds.builtin_registry().item_kinds.values())
    config = pytester.parseconfig()
    config.option.tx, config.option.dist = ["2*popen"], dist  # what -n 2 sets
    assert plugin.pytest_xdist_make_scheduler(config, None) is None
    config.option.dist = "load"  # what -n N alone means: the ragbench scheduler
    made = plugin.pytest_xdist_make_scheduler(config, None)
    assert made is not None and made._split_scope("s.jsonl::ragas[a]") == "ragbench-loads:ragas"
