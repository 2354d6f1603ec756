"""Progress bars of long phases: drawn on a terminal (a pseudo-terminal here), silent elsewhere."""

from __future__ import annotations

import sys

import pytest

from tests.pseudo_terminal import run_in_terminal
from tests.toy_project import make_toy_project

SLOW_ANSWERS = '''

import time

_quick_answer = ToySystem.answer


def _slow_answer(self, question, history=None):
    time.sleep(2.5)  # longer than PROGRESS_AFTER_S: the item waiting for it shows progress
    return _quick_answer(self, question, history)


ToySystem.answer = _slow_answer
'''


def test_waiting_for_prefetched_answers_shows_progress_on_a_terminal_only(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 2, conftest=SLOW_ANSWERS)
    command = [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-concurrency", "1",
               "-p", "no:cacheprovider"]
    code, output = run_in_terminal(command, project.path)
    assert code == pytest.ExitCode.OK, output
    # The first item waited about 2.5 s for its answer: a bar of the answers ready. The
    # second waited as long, but one bar in 30 s is enough (pytest shows the items).
    bars = [line for line in output.replace("\r", "\n").splitlines()
            if line.startswith("ragbench: waiting for answers")]
    assert bars and bars[-1].endswith("| 1/2 ready"), output
    assert all("2/2" not in line for line in bars)
    assert "= ragbench =" in output  # and the summary still follows
    plain = project.runpytest_subprocess("--ragbench", "--ragbench-concurrency", "1",
                                         "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2)
    assert "waiting for answers" not in plain.stdout.str() + plain.stderr.str()


def test_quiet_flags_and_xdist_draw_no_bar(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 2, conftest=SLOW_ANSWERS)
    base = [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-concurrency", "1",
            "-p", "no:cacheprovider"]
    for extra in (["-qq"], ["-n", "2"]):
        code, output = run_in_terminal([*base, *extra], project.path)
        assert code == pytest.ExitCode.OK, output
        assert "waiting for answers" not in output, extra
