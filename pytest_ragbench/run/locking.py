"""An exclusive lock on a file, held across processes (``fcntl.flock``; ``msvcrt`` on Windows)."""

from __future__ import annotations

import os
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


def _lock(handle: IO[str]) -> None:
    if os.name == "nt":  # pragma: no cover - exercised on Windows only
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
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
