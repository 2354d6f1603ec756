"""A process that ran ragbench items skips the garbage collection at interpreter exit.

As Python exits it runs the cyclic garbage collector over every object still alive: the
items, their records, and modules such as numpy, scipy and matplotlib. With 10,000 items
that took 2.4 s of CPU, 20 % of a whole ``sql_ground_truth`` session
(``benchmarks/bench_overhead.py``), to free memory the operating system takes back anyway.
``gc.freeze()`` run from ``atexit`` moves every object out of the collector's reach first.

It runs only as the process exits (never at the end of an in-process pytest session,
e.g. pytester's ``runpytest``, whose process goes on), after the report is written and
every fixture is finalized. Python never promised ``__del__`` for objects alive at exit;
objects in reference cycles are then left to the operating system like any other.
"""

from __future__ import annotations

import atexit
import gc

_registered = [False]


def skip_exit_collection() -> None:
    """Freeze the garbage collector's objects when this process exits (once per process)."""
    if not _registered[0]:
        _registered[0] = True
        atexit.register(gc.freeze)
