"""The controller's run is split into parts with one job each (``run/session.py``).

``RagbenchSession`` holds the state the parts share and orders the end of the run;
each part is a pytest plugin of its own, and no pytest hook is handled in two places.
"""

from __future__ import annotations

import json

import pytest

from pytest_ragbench.run.checks import StartupChecks
from pytest_ragbench.run.controller import XdistController
from pytest_ragbench.run.ending import RunEnding
from pytest_ragbench.run.opening import RunOpening
from pytest_ragbench.run.recorder import Recorder
from pytest_ragbench.run.reporting import SessionReport
from pytest_ragbench.run.session import RagbenchSession
from tests.toy_project import make_toy_project

PARTS = {"checks": StartupChecks, "opening": RunOpening, "controller": XdistController,
         "recorder": Recorder, "ending": RunEnding, "report": SessionReport}


def hooks(cls: type) -> set[str]:
    return {name for name in vars(cls) if name.startswith("pytest_")}


def test_no_hook_is_handled_by_two_parts_and_the_session_only_orders_the_end() -> None:
    owners: dict[str, list[str]] = {}
    for name, part in {**PARTS, "session": RagbenchSession}.items():
        for hook in hooks(part):
            owners.setdefault(hook, []).append(name)
    assert {hook: names for hook, names in owners.items() if len(names) > 1} == {}
    assert hooks(RagbenchSession) == {"pytest_sessionfinish", "pytest_unconfigure"}
    assert all(hooks(part) for part in PARTS.values())  # each part is a plugin of its own


PROBE = '''
import json
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """Which of the run's parts are registered, and who holds the records at the end."""
    manager = session.config.pluginmanager
    run = manager.get_plugin("ragbench-session")
    names = sorted(name for name, _ in manager.list_name_plugin()
                   if name and name.startswith("ragbench-session"))
    parts = {name: type(manager.get_plugin(name)).__name__ for name in names}
    Path("parts.json").write_text(json.dumps({
        "parts": parts, "records": len(run.records), "status": run.status.status,
        "same_run": all(getattr(manager.get_plugin(name), "run", run) is run
                        for name in names)}))
'''


def test_a_ragbench_run_registers_the_session_and_its_six_parts(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 6)
    pytester.makepyfile(partsprobe=PROBE)
    pytester.syspathinsert()
    result = project.runpytest("--ragbench", "-p", "partsprobe")
    assert result.ret == pytest.ExitCode.OK
    seen = json.loads((pytester.path / "parts.json").read_text())
    assert seen["parts"] == {
        "ragbench-session": "RagbenchSession",
        **{f"ragbench-session-{name}": part.__name__ for name, part in PARTS.items()}}
    assert seen["same_run"] is True
    assert (seen["records"], seen["status"]) == (6, "complete")
