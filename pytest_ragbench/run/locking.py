"""Locks between processes, all of them here: no other module takes a file lock itself.

Only the standard library: the traffic log (monitor.py) takes its lock in an app.

- :func:`locked`: a file opened and held exclusively while it is read and written
  (leaderboard.csv, the saved runs' index): ``fcntl.flock``, ``msvcrt`` on Windows.
- :func:`lock_file`: one process at a time does a piece of work (builds an index, rotates
  a traffic log), the others wait; a lock file beside the work, locked like :func:`locked`.
- :func:`hold_shared` / :func:`is_held`: a running session holds its journal, so another
  session can tell a live journal from an abandoned one (POSIX; elsewhere never held).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def locked(path: Path, mode: str = "a+") -> Iterator[IO[str]]:
    """Open ``path`` and hold an exclusive lock on it until the block ends.

    Every writer that goes through here waits for the others, so appends never
    interleave and a read-then-write (choosing the next run number) is atomic.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8", newline="") as handle:
        _lock(handle)
        try:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            _unlock(handle)


@contextmanager
def lock_file(path: Path, required: bool = True) -> Iterator[bool]:
    """Hold the lock file ``path`` (created if missing) until the block ends.

    With ``required=False`` a lock file that cannot be made (no room, a read-only folder)
    runs the block unlocked: the block yields False then (at worst work done twice).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        if required:
            raise
        yield False
        return
    try:
        _lock(handle)
        try:
            yield True
        finally:
            _unlock(handle)
    finally:
        handle.close()


def hold_shared(fd: int) -> None:
    """Take a shared lock on the open file ``fd``, released when it is closed (POSIX)."""
    if os.name == "nt":  # pragma: no cover - a journal is never held on Windows
        return
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_SH)


def is_held(path: Path) -> bool:
    """True when another process holds a lock on ``path`` (:func:`hold_shared`; POSIX)."""
    if os.name == "nt":  # pragma: no cover
        return False
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def _lock(handle: IO[str]) -> None:
    if os.name == "nt":  # pragma: no cover - exercised on Windows only
        import msvcrt

        handle.seek(0)
        while True:  # LK_LOCK gives up after ten seconds: wait as flock does
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
                break
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EDEADLK):
                    raise
                time.sleep(0.05)
        handle.seek(0, os.SEEK_END)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _unlock(handle: IO[str]) -> None:
    if os.name == "nt":  # pragma: no cover
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
