"""Under pytest-xdist the plots of report.html are drawn while the workers run (issue 20).

A kind's plots are drawn in a background thread of the controller once its last item has
reported, and used at session end only where they were drawn from what the full document
holds: drawing ahead must never change the page. Checked on hand-made records (the thread
draws a kind only when its last item arrives; the session end then draws only the other
kinds; a record that changes afterwards gets its kind drawn again), on random record sets
(hypothesis), and in a real ``-n 2`` session whose report.html equals the page rendered
afresh from its results.json.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.render import html, plots
from pytest_ragbench.results import document
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run.plots_ahead import PlotsAhead
from tests.conftest import REPO_ROOT
from tests.test_report_render_properties import record_sets
from tests.toy_project import make_toy_project


def record(kind: str, index: int, value: float, category: str) -> ItemRecord:
    metrics = {"semantic_similarity": value} if kind == "vector" else {"match": float(index % 2)}
    return ItemRecord(nodeid=f"cases/{kind}.yaml::{kind}[c{index:02d}]", kind=kind,
                      case_kind=kind, case_id=f"c{index:02d}", file=f"cases/{kind}.yaml",
                      line=index + 1, status="passed", fields={"category": category},
                      metrics=metrics)


def some_records() -> list[ItemRecord]:
    rng = random.Random(7)
    vector = [record("vector", i, rng.random(), "ab"[i % 2]) for i in range(12)]
    sql = [record("sql", i, 0.0, "xy"[i % 2]) for i in range(6)]
    return vector + sql


def full_page(records: list[ItemRecord], config: RagbenchConfig,
              ahead: dict[str, Any] | None = None) -> str:
    built = document.build(records, config, run={"id": "r", "time": "t"}, components={})
    return html.render(built, [], ahead)


def count_draws(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many figures are drawn from now on."""
    drawn: list[int] = []
    original = plots.png

    def counted(figure: Any) -> str:
        drawn.append(1)
        return original(figure)

    monkeypatch.setattr(plots, "png", counted)
    return drawn


def test_a_kind_is_drawn_when_its_last_item_arrives_and_the_page_is_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = RagbenchConfig(rootpath=Path("."))
    records = some_records()
    ahead = PlotsAhead(config)
    ahead.expect([r.kind for r in records] + ["memory"])  # a kind whose items never report
    vector = [r for r in records if r.kind == "vector"]
    for item in vector[:-1]:
        ahead.arrived(item)
    assert ahead.finish() == {}  # nothing was complete: nothing drawn

    ahead = PlotsAhead(config)
    ahead.expect([r.kind for r in records] + ["memory"])
    for item in records:
        ahead.arrived(item)
    drawn = ahead.finish()
    assert set(drawn) == {"vector", "sql"}
    assert "<img" in drawn["vector"].html  # a histogram and intervals by category

    figures = count_draws(monkeypatch)
    with_ahead = full_page(records, config, drawn)
    assert figures == []  # every plot came from the thread
    assert with_ahead == full_page(records, config)
    assert len(figures) >= 2  # the same plots, drawn at session end this time


def test_plots_drawn_from_records_that_changed_are_drawn_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = RagbenchConfig(rootpath=Path("."))
    records = some_records()
    ahead = PlotsAhead(config)
    ahead.expect(r.kind for r in records)
    for item in records:
        ahead.arrived(item)
    drawn = ahead.finish()
    rerun = records[0]  # e.g. pytest-rerunfailures reported the item again
    records[0] = ItemRecord(**{**rerun.__dict__, "metrics": {"semantic_similarity": 0.0123}})

    figures = count_draws(monkeypatch)
    page = full_page(records, config, drawn)
    assert figures, "the vector plots no longer match the records: they must be redrawn"
    assert page == full_page(records, config)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_sets(), st.randoms(use_true_random=False))
def test_drawing_ahead_never_changes_the_page(case: tuple[list[ItemRecord], tuple[str, ...]],
                                              rng: random.Random) -> None:
    records, systems = case
    config = RagbenchConfig(rootpath=Path("."), systems=systems)
    ahead = PlotsAhead(config)
    ahead.expect(r.kind for r in records)
    for item in rng.sample(records, len(records)):  # in any order the workers report
        ahead.arrived(item)
    drawn = ahead.finish()
    assert set(drawn) == {r.kind for r in records}
    assert full_page(records, config, drawn) == full_page(records, config)


DRAWN_AHEAD_PLUGIN = '''
import os

def pytest_configure(config):
    from pytest_ragbench.run import plots_ahead
    original = plots_ahead.draw
    lane = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"

    def recorded(kind, records, settings):
        drawn = original(kind, records, settings)
        with open("drawn_ahead.txt", "a") as handle:
            handle.write(f"{kind} {len(records)} {len(drawn.html)} {lane} {os.getpid()}\\n")
        return drawn

    plots_ahead.draw = recorded
'''


def test_an_xdist_session_draws_ahead_and_writes_the_same_page(
        pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project = make_toy_project(pytester, 24)
    pytester.makepyfile(drawn_ahead=DRAWN_AHEAD_PLUGIN)
    result = pytester.runpytest_subprocess("--ragbench", "-n", "2", "-p", "drawn_ahead",
                                           "--ragbench-systems=exact,terse",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=48)
    drawn = (pytester.path / "drawn_ahead.txt").read_text().split()
    # the toy kind's plots, drawn once, by the controller's thread or an idle worker
    assert len(drawn) == 5 and drawn[:2] == ["toy", "48"] and int(drawn[2]) > 1000
    assert drawn[3] in ("controller", "gw0", "gw1")
    folder = project.report_dir()
    results = json.loads((folder / "results.json").read_text())
    assert (folder / "report.html").read_text() == html.render(results, [])


# -- worker lanes: an xdist worker's process draws, through execnet ---------------------------

BUSY_MAIN_THREAD = """
import time
channel.send("busy")
time.sleep(1.5)
"""


def test_a_worker_lane_draws_what_the_controller_draws() -> None:
    """Through a real execnet gateway, as xdist makes them (``main_thread_only``).

    Its main thread is first kept busy for longer than execnet waits before refusing
    another ``remote_exec`` (as when the worker's session is still ending): the lane
    asks again until the worker is free.
    """
    execnet = pytest.importorskip("execnet")
    config = RagbenchConfig(rootpath=Path("."))
    records = some_records()
    gateway = execnet.makegateway(  # this interpreter, in the repository (not a test's cwd)
        f"execmodel=main_thread_only//popen//python={sys.executable}//chdir={REPO_ROOT}")
    try:
        busy = gateway.remote_exec(BUSY_MAIN_THREAD)
        assert busy.receive(timeout=30) == "busy"
        ahead = PlotsAhead(config, local_lane=False)
        ahead.expect(r.kind for r in records)
        ahead.add_worker("gw7", gateway)
        for item in records:
            ahead.arrived(item)
        drawn = ahead.finish()
    finally:
        gateway.exit()
    assert ahead.drawn_by() == {"vector": "gw7", "sql": "gw7"}, ahead.lane_failures

    here = PlotsAhead(config)
    here.expect(r.kind for r in records)
    for item in records:
        here.arrived(item)
    assert here.finish() == drawn  # the same inputs, html and problems
    assert full_page(records, config, drawn) == full_page(records, config)


class BrokenChannel:
    """A worker's channel that says hello and then loses its connection."""

    def __init__(self) -> None:
        self.received = 0

    def receive(self, timeout: float | None = None) -> bytes:
        self.received += 1
        if self.received == 1:
            return b"ready"
        raise EOFError("worker gone")

    def send(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


class BrokenGateway:
    def __init__(self) -> None:
        self.channel = BrokenChannel()

    def remote_exec(self, source: Any) -> BrokenChannel:
        return self.channel


def test_a_worker_lane_that_fails_gives_its_kind_back() -> None:
    config = RagbenchConfig(rootpath=Path("."))
    records = some_records()
    gateway = BrokenGateway()
    ahead = PlotsAhead(config)
    ahead.expect(r.kind for r in records)
    ahead.add_worker("gw3", gateway)
    for item in records:
        ahead.arrived(item)
    drawn = ahead.finish()
    assert set(drawn) == {"vector", "sql"}
    assert set(ahead.drawn_by().values()) == {"controller"}
    assert full_page(records, config, drawn) == full_page(records, config)


def test_without_a_lane_left_the_kinds_go_to_the_session_end() -> None:
    config = RagbenchConfig(rootpath=Path("."))
    records = some_records()
    ahead = PlotsAhead(config, local_lane=False)
    ahead.expect(r.kind for r in records)
    ahead.add_worker("gw3", BrokenGateway())
    for item in records:
        ahead.arrived(item)
    assert ahead.finish() == {}  # returns: nothing can draw them here
