"""A process that ran ragbench items skips the garbage collection at exit (run/garbage.py).

The per-item overhead target lives in benchmarks/bench_overhead.py; these tests check that
the freeze happens as the process exits, only when ragbench items ran, and never inside a
process that goes on (pytester's in-process runs).
"""

from __future__ import annotations

import gc
import json

import pytest

from tests.helpers import make_scores_db

CASE = {"id": "lakers", "kind": "sql", "question": "How many points did the Lakers score?",
        "expected_sql": "SELECT points FROM scores WHERE team = 'Lakers'",
        "ground_truth_data": {"points": 9500}}

# Registered before the plugin's atexit handler, so it runs after it (atexit is LIFO).
CONFTEST = '''
import atexit, gc, os
from pathlib import Path

OUT = Path(__file__).with_name(f"frozen-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.txt")
atexit.register(lambda: OUT.write_text(str(gc.get_freeze_count())))
'''


def _project(pytester: pytest.Pytester, with_cases: bool) -> None:
    make_scores_db(pytester.path / "scores.db")
    pytester.makeini("[pytest]\nragbench_db_url = sqlite:///scores.db\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    if with_cases:
        pytester.mkdir("test_cases")
        (pytester.path / "test_cases" / "scores.jsonl").write_text(json.dumps(CASE) + "\n")


@pytest.mark.parametrize("mode", [(), ("-n", "2"), ("-p", "no:xdist")],
                         ids=["default", "n2", "no-xdist"])
def test_a_process_that_ran_ragbench_items_exits_without_collecting(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    _project(pytester, with_cases=True)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *mode)
    result.assert_outcomes(passed=2)
    frozen = {path.stem.split("-")[1]: int(path.read_text())
              for path in pytester.path.glob("frozen-*.txt")}
    if mode == ("-n", "2"):  # the workers ran the items; the controller only reported
        assert frozen["main"] == 0
        ran = {name: count for name, count in frozen.items() if name != "main"}
        assert ran and all(count > 1000 for count in ran.values()), frozen
    else:
        assert frozen == {"main": frozen["main"]} and frozen["main"] > 1000


def test_a_session_without_ragbench_items_exits_as_usual(pytester: pytest.Pytester) -> None:
    _project(pytester, with_cases=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert int((pytester.path / "frozen-main.txt").read_text()) == 0


def test_an_in_process_session_leaves_the_running_process_alone(
        pytester: pytest.Pytester) -> None:
    _project(pytester, with_cases=True)
    before = gc.get_freeze_count()
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    assert gc.get_freeze_count() == before  # nothing frozen while this process goes on


def test_the_session_objects_are_frozen_while_the_items_run_and_thawed_after(
        pytester: pytest.Pytester) -> None:
    """Collections during the run skip the items; an in-process run gives them back."""
    _project(pytester, with_cases=True)
    (pytester.path / "conftest.py").write_text(
        (pytester.path / "conftest.py").read_text()
        + "\n\ndef pytest_runtest_call(item):\n"
          "    with Path(__file__).with_name('during.txt').open('a') as out:\n"
          "        out.write(f'{gc.get_freeze_count()}\\n')\n")
    before = gc.get_freeze_count()
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    during = [int(n) for n in (pytester.path / "during.txt").read_text().split()]
    assert len(during) == 2
    assert all(count > before + 1000 for count in during), (before, during)
    assert gc.get_freeze_count() == before
