"""Under pytest-xdist, each worker uses its share of the CPUs: ``cores // workers`` threads.

torch, numpy's OpenBLAS and faiss (OpenMP) each start one thread per core in every
process, and llama.cpp is told how many to use. With ``-n 2`` on two cores that makes
four or more busy threads for two cores; OpenMP threads spin at their barriers waiting
for a thread that another process holds, so an item that takes a millisecond serially
takes many times longer on a busy machine. A worker therefore
limits each library to its share:

- the environment variables the libraries read when they load (``OMP_NUM_THREADS`` and
  the BLAS ones) are set as the worker starts, before conftest.py files are imported
  (``pytest_load_initial_conftests``; xdist sets ``PYTEST_XDIST_WORKER_COUNT`` before
  the worker's configuration is made), unless the user set them;
- libraries a conftest.py or plugin loaded before that are limited at run time
  (threadpoolctl, ``torch.set_num_threads``), at ``pytest_configure``;
- torch gets ``torch.set_num_threads`` again when the embedder loads its model, and
  llama.cpp its ``n_threads`` (``systems/local_llm.py``), both from :func:`cpu_share`.

Serial runs are left alone. Cheap to import (no numpy).
"""

from __future__ import annotations

import os
import sys

# Read by the OpenMP runtime (torch, faiss), OpenBLAS, MKL, BLIS, Apple Accelerate and
# numexpr when each library initialises.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_LIMITED_ALREADY = ("numpy", "scipy", "faiss", "torch", "sklearn")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def worker_count() -> int:
    """How many pytest-xdist workers share the machine (1 outside xdist)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return 1
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def cpu_share() -> int:
    """Threads for this process: its CPUs divided among the xdist workers, at least 1."""
    return max(1, usable_cpus() // worker_count())


def on_worker() -> bool:
    """True in a pytest-xdist worker process."""
    return "PYTEST_XDIST_WORKER" in os.environ


def limit_worker_threads() -> int | None:
    """On an xdist worker, hold every threaded library to :func:`cpu_share`; returns it.

    Environment variables the user set are kept. Outside xdist nothing changes (None).
    """
    if not on_worker():
        return None
    share = cpu_share()
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(share))
    if any(name in sys.modules for name in _LIMITED_ALREADY):
        _limit_loaded(share)
    return share


def _limit_loaded(share: int) -> None:
    """Limit thread pools of libraries that were loaded before the variables were set."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=share)  # process-wide, for the rest of the session
    limit_torch(share)


def limit_torch(share: int | None = None) -> None:
    """``torch.set_num_threads`` on an xdist worker, when torch is loaded (no import here)."""
    torch = sys.modules.get("torch")
    if torch is None or not on_worker():
        return
    wanted = share or cpu_share()
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
