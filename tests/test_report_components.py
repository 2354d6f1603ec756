"""The user's own system is named in the report and timed by the plugin.

The system comes from a conftest.py override of ``ragbench_system``, as the README says.
Its name is its ``describe()`` or, failing that, its class and module. Each call is
timed around the call itself: time an answer spent waiting for a prefetch slot is not in
it, and the system's own ``latency_s`` is shown beside it.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import XDIST_MODES
from tests.toy_project import make_toy_project

MODE_IDS = ["plain", "n2", "no-xdist"]
SLOW_SYSTEM = '''

class SlowApp:
    """A user's RAG app: each answer takes 0.2 s; it says 9 s."""

    def __init__(self, answers):
        self.answers = answers

    def answer(self, question, history=None):
        import time
        time.sleep(0.2)
        return Answer(self.answers[question], latency_s=9.0)


@pytest.fixture(scope="session")
def ragbench_system(request):
    root = Path(str(request.config.rootpath))
    return SlowApp(json.loads((root / "answers.data").read_text()))
'''
DESCRIBED = SLOW_SYSTEM + '''

SlowApp.describe = lambda self: "my app: hybrid search + a 3B model"
'''


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_system_without_describe_is_named_by_class_and_module(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 4, conftest=SLOW_SYSTEM)
    project.runpytest("--ragbench", *mode).assert_outcomes(passed=4)
    assert project.results()["components"]["system"] == "SlowApp (conftest)"
    page = project.html()
    assert "<td>system</td><td>SlowApp (conftest)</td>" in page


def test_describe_names_the_system(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 2, conftest=DESCRIBED)
    result = project.runpytest("--ragbench")
    result.stdout.fnmatch_lines(["components:", "*  system: my app: hybrid search + a 3B model"])


def test_service_time_leaves_out_the_wait_for_a_prefetch_slot(
        pytester: pytest.Pytester) -> None:
    """Five answers of 0.2 s one at a time: the last waits 0.8 s for its turn, not counted."""
    project = make_toy_project(pytester, 5, conftest=SLOW_SYSTEM)
    result = project.runpytest("--ragbench", "--ragbench-concurrency=1", "-p", "no:xdist")
    result.assert_outcomes(passed=5)
    times = [i["usage"]["system"]["service_s"][0] for i in project.items()]
    assert len(times) == 5
    # each call takes 0.2 s; the answers were prefetched one after another, so from the
    # moment they were asked for, the last one came 1 s later
    assert all(0.19 <= t < 0.5 for t in times), times
    usage = project.results()["usage"]["system"]
    assert usage["service_n"] == 5 and 0.19 <= usage["service_p50_s"] < 0.5
    assert usage["latency_p50_s"] == pytest.approx(9.0)  # what the system reported
    traces = [i["answers"][0] for i in project.items()]
    assert all(t["latency_s"] == 9.0 and 0.19 <= t["service_s"] < 0.5 for t in traces)
    page = project.html()
    row = re.search(r"<td>system</td><td>SlowApp \(conftest\)</td><td>([^<]*)</td><td>([^<]*)"
                    r"</td>", page)
    assert row and row.group(2) == "9.00 s / 9.00 s" and row.group(1).endswith("ms")
    result.stdout.fnmatch_lines(["model usage * latency p50 * service p50 *",
                                 "system * 9.00 s * 9.00 s * ms *"])


def test_a_users_repr_is_never_shown() -> None:
    """A repr may carry settings such as keys: a user's object is named by class and module."""
    from pytest_ragbench.systems.components import describe

    class Client:
        def __repr__(self) -> str:
            return "Client(api_key='sk-secret')"

    class Broken:
        def describe(self) -> str:
            raise RuntimeError("no")

    assert describe(Client()) == f"Client ({__name__})".replace(
        "Client", "test_a_users_repr_is_never_shown.<locals>.Client")
    assert describe(Broken()).endswith("(describe() failed: RuntimeError)")
