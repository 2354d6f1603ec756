"""Under ``-n N``, items of kinds that load the same slow library share one worker (issue 20).

Each worker that runs a ragas item imports ragas (about 2.5 s of CPU): xdist's default
``--dist load`` gave both workers such items. ``run/worker_groups.py`` keeps every
kind that shares a library (``ItemKind.loads``) on one worker and spreads the rest in
chunks; ``benchmarks/bench_xdist.py`` measures what that buys.
"""

from __future__ import annotations

import pytest

from pytest_ragbench import kinds
from pytest_ragbench.kinds import ItemKind
from pytest_ragbench.results.records import ItemIdentity
from pytest_ragbench.run import worker_groups
from pytest_ragbench.run.collected import collected_items
from tests.project import RagbenchProject

pytest_plugins = ["pytester"]


def _kind(name: str, *loads: str) -> ItemKind:
    return ItemKind(name=name, case_kind="sql", runner="x:run", loads=loads)


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
    nodeids += ["tests/test_mine.py::test_ragas[1]"]  # a user's test: no kind
    kinds = {n: "ragas" for n in nodeids[:5]} | {n: "vector" for n in nodeids[5:21]}
    units = worker_groups.work_units(nodeids, groups, workers=2, kind_of=kinds.get)
    assert {units[n] for n in nodeids[:5]} == {"ragbench-loads:ragas"}
    others = [units[n] for n in nodeids[5:]]
    sizes = [others.count(unit) for unit in dict.fromkeys(others)]  # in collection order
    assert sizes == [2] + [1] * 15  # 17 // (4 * 2) items, then a quarter share of the rest
    many = worker_groups.work_units([f"v.yaml::vector[v{i}]" for i in range(251)], groups, 2,
                                    kind_of=lambda nodeid: "vector")
    sizes = [list(many.values()).count(unit) for unit in dict.fromkeys(many.values())]
    assert sizes[:3] == [31, 27, 24] and sizes[-1] == 1 and sum(sizes) == 251
    assert sizes == sorted(sizes, reverse=True)


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester)
    project.conftest('''
import os

from pytest_ragbench.kinds import EVALUATION, VERIFICATION, ItemKind
from pytest_ragbench.kinds import Outcome


def heavy(case, item):
    if case.id == "c5" and os.environ.get("CRASH_C5"):
        os._exit(3)  # the worker dies in the middle of its group
    return where(case, item)


def where(case, item):
    return Outcome(metrics={"match": 1.0},
                   evidence={"worker": os.environ.get("PYTEST_XDIST_WORKER", "serial")})


def pytest_ragbench_item_kinds(config):
    return [ItemKind(name="sql_ground_truth", case_kind="sql", runner=heavy, description="heavy",
                     family=VERIFICATION, metrics=("match",), loads=("heavylib",)),
            ItemKind(name="sql", case_kind="sql", runner=where, description="light",
                     family=EVALUATION, metrics=("match",))]
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
    config = pytester.parseconfigure()
    config.option.tx, config.option.dist = ["2*popen"], dist  # what -n 2 sets
    assert plugin.pytest_xdist_make_scheduler(config, None) is None
    config.option.dist = "load"  # what -n N alone means: the ragbench scheduler
    made = plugin.pytest_xdist_make_scheduler(config, None)
    collected_items(config).items["s.jsonl::odd[a]"] = ItemIdentity(
        "ragas", None, "ragas", "a", "s.jsonl", 1)  # as a worker wrote it
    assert made is not None and made._split_scope("s.jsonl::odd[a]") == "ragbench-loads:ragas"
    assert made._split_scope("s.jsonl::ragas[b]") == "s.jsonl::ragas[b]"  # not collected


class _FakeWorker:
    """What the scheduler uses of xdist's WorkerController."""

    def __init__(self) -> None:
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def test_a_worker_is_kept_more_than_concurrency_items_ahead(pytester: pytest.Pytester) -> None:
    """So that it can fetch that many answers at once (xdist tops up at two items left)."""
    config = pytester.parseconfigure("--tx=popen", "--ragbench-concurrency=10")
    scheduler = worker_groups.scheduler(config, None, {"ragas": "ragas"})
    worker = _FakeWorker()
    nodeids = [f"test_cases/v.yaml::vector[v{i}]" for i in range(30)]
    scheduler.add_node(worker)
    scheduler.add_node_collection(worker, nodeids)
    scheduler.schedule()
    assert len(worker.sent) == 12  # chunks of 7 and 5: xdist alone would have sent 7
    scheduler.mark_test_complete(worker, worker.sent[0])
    assert len(worker.sent) == 12  # 11 still waiting: more than 10
    scheduler.mark_test_complete(worker, worker.sent[1])
    assert len(worker.sent) == 16  # 10 waiting: the next chunk (4) goes out
    for index in list(worker.sent[3:]):
        scheduler.mark_test_complete(worker, index)
    while not worker.shutting_down:  # the rest arrives chunk by chunk, then the shutdown
        scheduler.mark_test_complete(worker, worker.sent[-1])
    assert sorted(worker.sent) == list(range(30))


def test_kinds_with_more_metrics_are_sent_first() -> None:
    """Their plots take longest to draw, and are drawn once the kind's last item reports."""
    nodeids = [f"s.yaml::sql[s{i}]" for i in range(8)]
    nodeids += [f"v.yaml::vector[v{i}]" for i in range(8)]
    kinds = {n: "sql" for n in nodeids[:8]} | {n: "vector" for n in nodeids[8:]}
    units = worker_groups.work_units(nodeids, {}, workers=1,
                                     metric_counts={"sql": 1, "vector": 15}, kind_of=kinds.get)
    chunk = {n: int(units[n].rsplit(":", 1)[1]) for n in nodeids}
    assert max(chunk[n] for n in nodeids[8:]) <= min(chunk[n] for n in nodeids[:8])
    assert chunk[nodeids[8]] == 0 and chunk[nodeids[0]] < chunk[nodeids[7]]
    assert [chunk[n] for n in nodeids[8:]] == sorted(chunk[n] for n in nodeids[8:])
