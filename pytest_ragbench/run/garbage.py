"""The cyclic garbage collector in a process that runs ragbench items.

A session keeps every item, case and record alive until it ends, and each of Python's
full collections scans every tracked object again; one runs whenever the objects that
survived grew by a quarter. With thousands of items those scans cost more CPU than the
plugin's own work per item. So:

- once the items are collected, and again before the report is built, the objects alive
  then are frozen (``gc.freeze()``): later collections leave them out. They are the
  session's own and live until it ends; garbage among them waits until they are thawed.
- at ``pytest_unconfigure`` they are thawed (``gc.unfreeze()``), so a process that goes on
  (pytester's in-process runs) collects each session's objects as before.
- as the process exits, the collection Python runs over every object still alive (the
  items, their records, numpy, scipy, matplotlib) is skipped: ``gc.freeze()`` from
  ``atexit``, after the report is written and every fixture finalized. Python never
  promised ``__del__`` for objects alive at exit; the operating system takes the memory.
"""

from __future__ import annotations

import atexit
import gc

import pytest

_FROZEN = pytest.StashKey[bool]()
_registered = [False]


def freeze(config: pytest.Config) -> None:
    """Leave the objects alive now out of the collector's scans until :func:`thaw`."""
    gc.freeze()
    config.stash[_FROZEN] = True


def thaw(config: pytest.Config) -> None:
    """Give the objects frozen for this session back to the collector."""
    if config.stash.get(_FROZEN, False):
        config.stash[_FROZEN] = False
        gc.unfreeze()


def skip_exit_collection() -> None:
    """Freeze the garbage collector's objects when this process exits (once per process)."""
    if not _registered[0]:
        _registered[0] = True
        atexit.register(gc.freeze)
