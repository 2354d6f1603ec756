"""``--ragbench-sequential``: a seeded stratified order, stopped once every gate is decided."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import pytest

from pytest_ragbench.results.gates import Gate
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run.sequential import ALPHA, SequentialGates, stratified_order
from tests.toy_project import make_toy_project

CLEAR_GATES = '[tool.ragbench.gates]\n"toy.token_f1" = 0.3\n"toy.exact_match" = 0.1\n'

# The toy kind's items stop the session after N of them when asked (as Ctrl-C would).
STOP_AFTER = '''
import os

RAN = []


def pytest_runtest_call(item):
    RAN.append(item.nodeid)
    limit = os.environ.get("TOY_STOP_AFTER")
    if limit and len(RAN) > int(limit):
        raise KeyboardInterrupt
'''


class FakeItem:
    def __init__(self, nodeid: str, kind: str, category: str | None) -> None:
        self.nodeid = nodeid
        self.item_kind = SimpleNamespace(name=kind)
        self.case = SimpleNamespace(category=category)

    def record_for_report(self) -> None:  # marks it as an evaluation item
        raise AssertionError


def _record(kind: str, index: int, metrics: dict[str, float], **fields: object
            ) -> ItemRecord:
    return ItemRecord(nodeid=f"{kind}::{index}", kind=kind, case_kind=kind, case_id=str(index),
                      file="f", line=0, status="passed", metrics=metrics, fields=dict(fields))


# ---------------------------------------------------------------------------- the order


def test_the_order_is_seeded_and_spreads_every_stratum_over_the_run() -> None:
    items = [FakeItem(f"a::{i}", "vector", "lookup") for i in range(60)] \
        + [FakeItem(f"b::{i}", "vector", "reasoning") for i in range(20)] \
        + [FakeItem(f"c::{i}", "sql", None) for i in range(10)]
    plain = SimpleNamespace(nodeid="test_plain.py::test_it")  # an ordinary test
    ordered = stratified_order([*items, plain], seed=3)  # type: ignore[list-item]
    assert ordered[0] is plain
    assert ordered == stratified_order([plain, *reversed(items)], seed=3)  # type: ignore[list-item]
    assert ordered != stratified_order([*items, plain], seed=4)  # type: ignore[list-item]
    ours = ordered[1:]
    assert sorted(i.nodeid for i in ours) == sorted(i.nodeid for i in items)
    sizes = Counter(i.nodeid[0] for i in items)
    for length in range(1, len(ours) + 1):
        seen = Counter(i.nodeid[0] for i in ours[:length])
        for stratum, size in sizes.items():
            # each stratum in its share of every stretch, give or take one item
            assert abs(seen[stratum] - length * size / len(items)) <= 2, (length, stratum)
    first = [i.nodeid for i in ours[:10]]
    assert first != sorted(first)  # shuffled, not in file order


# ---------------------------------------------------------------------------- the gates


def test_each_gate_gets_its_share_of_alpha_per_system() -> None:
    gates = [Gate("toy.token_f1", "toy", "token_f1", (), 0.3),
             Gate("toy.exact_match", "toy", "exact_match", (), 0.1),
             Gate("sql.correct", "sql", "correct", (), 0.5)]
    tracker = SequentialGates(gates, ("a", "b"), min_n=5)
    tracker.start({"toy"})  # no sql item selected: its gate waits for nothing
    assert sorted(tracker.tracks) == [("toy.exact_match", "exact_match", "a"),
                                      ("toy.exact_match", "exact_match", "b"),
                                      ("toy.token_f1", "token_f1", "a"),
                                      ("toy.token_f1", "token_f1", "b")]
    assert {t.alpha for t in tracker.tracks.values()} == {ALPHA / 4}


def test_a_gate_at_k_follows_the_k_recorded() -> None:
    gate = Gate("vector.source_hit@k", "vector", "source_hit@k", (), 0.2)
    tracker = SequentialGates([gate], (), min_n=5)
    tracker.start({"vector"})
    assert not tracker.tracks and tracker.done_keys() == []
    for i in range(40):
        tracker.add(_record("vector", i, {"source_hit@4": 1.0, "answered": 1.0}))
    assert list(tracker.tracks) == [("vector.source_hit@k", "source_hit@4", None)]
    assert tracker.all_decided and tracker.tracks[
        ("vector.source_hit@k", "source_hit@4", None)].status == "passed"
    assert tracker.done_keys() == [("vector", None)]


def test_values_in_clusters_or_without_a_range_are_left_to_the_end() -> None:
    gates = [Gate("toy.token_f1", "toy", "token_f1", (), 0.1),
             Gate("toy.latency_ms", "toy", "latency_ms", (), 5000.0)]
    tracker = SequentialGates(gates, (), min_n=5)
    tracker.start({"toy"})
    for i in range(60):
        tracker.add(_record("toy", i, {"token_f1": 0.9, "latency_ms": 10.0},
                            cluster=f"c{i // 3}"))
    statuses = {key[1]: t.to_json() for key, t in tracker.tracks.items()}
    assert statuses["token_f1"]["status"] == "undecided"
    assert statuses["token_f1"]["why_undecided"] == "values in clusters are not independent"
    assert not tracker.all_decided


def test_a_lower_is_better_gate_passes_below_its_bound() -> None:
    gate = Gate("toy.hallucination_rate", "toy", "token_f1", (), 0.5)  # as lower-better
    tracker = SequentialGates([gate], (), min_n=5)
    tracker.start({"toy"})
    track = next(iter(tracker.tracks.values()))
    track.lower_better = True
    for i in range(200):
        tracker.add(_record("toy", i, {"token_f1": 0.1 if i % 2 else 0.2}))
        if tracker.all_decided:
            break
    assert track.status == "passed" and track.bounds()[1] <= 0.5


# ---------------------------------------------------------------------------- sessions


def test_clear_gates_stop_the_run_early_and_say_what_it_saved(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, count=300, pyproject=CLEAR_GATES)
    result = project.run("--ragbench", "--ragbench-sequential")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK
    ran = outcomes["passed"]
    assert ran < 100 and outcomes["deselected"] == 300 - ran
    results = project.results()
    data = results["sequential"]
    assert data["decided_after"] == ran == data["items_run"]
    assert data["items_not_needed"] == 300 - ran
    assert data["saved"]["items"] == 300 - ran and data["saved"]["model_calls"] > 0
    assert {g["status"] for g in data["gates"]} == {"passed"}
    assert all(g["sequential"]["decided_after"] <= ran for g in results["gates"])
    assert results["run"]["status"] == "complete"  # items not needed are not "not run"
    assert len(project.items()) == ran
    text = result.stdout.str()
    assert f"every gate decided after {ran} items: {300 - ran} items not needed" in text
    assert "gate toy.token_f1 >= 0.3: passed (confidence sequence [" in text


def test_a_gate_clearly_missed_fails_the_session_early(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, count=300, pyproject=(
        '[tool.ragbench.gates]\n"toy.exact_match" = 0.95\n'))
    result = project.run("--ragbench", "--ragbench-sequential")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    gate = project.results()["gates"][0]
    assert gate["passed"] is False and gate["sequential"]["cs_high"] < 0.95
    assert result.parseoutcomes()["deselected"] > 200
    assert "gate toy.exact_match >= 0.95: MISSED (confidence sequence" in result.stdout.str()


def test_a_gate_at_its_mean_runs_every_item_and_is_checked_as_usual(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, count=40)
    project.run("--ragbench").assert_outcomes(passed=40)
    mean = project.results()["metrics"]["toy"]["token_f1"]["mean"]
    bound = math.floor(mean * 1e4) / 1e4  # just under the mean: the mean passes
    (project.path / "pyproject.toml").write_text(
        f'[tool.ragbench.gates]\n"toy.token_f1" = {bound}\n')
    result = project.run("--ragbench", "--ragbench-sequential")
    result.assert_outcomes(passed=40)
    results = project.results()
    assert "sequential" not in results["gates"][0]
    assert results["gates"][0]["passed"] is True  # the mean, as without the flag
    assert results["sequential"]["items_not_needed"] == 0
    assert "not every gate was decided before the items ran out" in result.stdout.str()


def test_under_xdist_the_controller_decides_and_workers_take_no_new_items(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, count=300, pyproject=CLEAR_GATES)
    result = project.run("--ragbench", "--ragbench-sequential", "-n", "2")
    assert result.ret == pytest.ExitCode.OK
    outcomes = result.parseoutcomes()
    ran = outcomes["passed"]
    assert ran < 100 and ran + outcomes["deselected"] == 300
    results = project.results()
    data = results["sequential"]
    assert data["items_run"] == ran and data["items_not_needed"] == 300 - ran
    assert data["decided_after"] <= ran  # items already sent may finish after the decision
    assert results["run"]["status"] == "complete"
    assert not list((project.path / ".ragbench").rglob("*.sequential.json"))


def test_a_resumed_run_counts_its_kept_items_first(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, count=300, pyproject=CLEAR_GATES, conftest=STOP_AFTER)
    monkeypatch.setenv("TOY_STOP_AFTER", "4")
    first = project.run("--ragbench", "--ragbench-sequential", subprocess=True, timeout=300)
    assert first.ret == pytest.ExitCode.INTERRUPTED
    monkeypatch.delenv("TOY_STOP_AFTER")
    second = project.run("--ragbench", "--ragbench-sequential", "--ragbench-resume")
    assert second.ret == pytest.ExitCode.OK
    results = project.results()
    kept = results["run"]["resumed"]["kept_items"]
    assert kept == 4
    data = results["sequential"]
    ran_now = second.parseoutcomes()["passed"]
    assert data["items_run"] == kept + ran_now == data["decided_after"]
    assert data["items_not_needed"] == 300 - kept - ran_now
    assert results["run"]["status"] == "complete"


def test_a_shard_cannot_decide_gates_sequentially(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, count=5, pyproject=CLEAR_GATES)
    result = project.run("--ragbench", "--ragbench-sequential", "--ragbench-shard=1/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ragbench-sequential decides the gates as the items run" in result.stderr.str()
