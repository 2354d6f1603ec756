"""Progress bars of long phases: drawn on a terminal (a pseudo-terminal here), silent elsewhere."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.test_report_support import make_toy_project

COLUMNS, ROWS = 120, 40


def run_in_terminal(command: Sequence[str], cwd: Path, timeout: float = 900.0
                    ) -> tuple[int, str]:
    """Run ``command`` with stdin, stdout and stderr on a pseudo-terminal; its exit code and
    everything it wrote there."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    process = subprocess.Popen(list(command), cwd=cwd, env=env, stdin=follower,
                               stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        else:
            process.kill()
            pytest.fail(f"{' '.join(command)} still ran after {timeout} s")
    finally:
        os.close(leader)
    return process.wait(60), b"".join(chunks).decode("utf-8", "replace")


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
    make_toy_project(pytester, 2, conftest=SLOW_ANSWERS)
    command = [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-concurrency", "1",
               "-p", "no:cacheprovider"]
    code, output = run_in_terminal(command, pytester.path)
    assert code == pytest.ExitCode.OK, output
    # The first item waited about 2.5 s for its answer: a bar of the answers ready. The
    # second waited as long, but one bar in 30 s is enough (pytest shows the items).
    bars = [line for line in output.replace("\r", "\n").splitlines()
            if line.startswith("ragbench: waiting for answers")]
    assert bars and bars[-1].endswith("| 1/2 ready"), output
    assert all("2/2" not in line for line in bars)
    assert "= ragbench =" in output  # and the summary still follows
    plain = pytester.runpytest_subprocess("--ragbench", "--ragbench-concurrency", "1",
                                          "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2)
    assert "waiting for answers" not in plain.stdout.str() + plain.stderr.str()


def test_quiet_flags_and_xdist_draw_no_bar(pytester: pytest.Pytester) -> None:
    make_toy_project(pytester, 2, conftest=SLOW_ANSWERS)
    base = [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-concurrency", "1",
            "-p", "no:cacheprovider"]
    for extra in (["-qq"], ["-n", "2"]):
        code, output = run_in_terminal([*base, *extra], pytester.path)
        assert code == pytest.ExitCode.OK, output
        assert "waiting for answers" not in output, extra
