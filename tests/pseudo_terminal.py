"""Run a command on a pseudo-terminal, as a user at a terminal would, and read what it drew."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

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
