"""Heavy libraries (ragas, nltk, torch, faiss, rouge-score) imported whole, or not at all.

An exception raised in the middle of an import leaves the library half-initialised:
pytest-timeout's ``signal`` method raises its timeout wherever the main thread is, Ctrl-C
and SIGTERM (run/interruption.py) raise ``KeyboardInterrupt`` there, and when that is
inside a library's ``__init__`` (or importlib's own bookkeeping), the half-run package can
stay in ``sys.modules``; every later ``import nltk`` then gets it ("partially initialized
module 'nltk' has no attribute 'data'"). :func:`import_whole` prevents that:

- in the main thread, SIGALRM, SIGINT and SIGTERM are held while the import runs, so
  their exception is raised just after it (the import is never cut short);
- a half-initialised module already in ``sys.modules`` (an import some other code had
  interrupted) is dropped with its submodules first, so it is imported again;
- an import that fails has the packages it imported for the first time dropped, so the
  next try starts clean.

Compiled extension modules are never dropped: they cannot be loaded twice in a process.
Only the standard library is used here.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType, ModuleType
from typing import Any

# The signals whose handlers raise in the main thread: pytest-timeout, Ctrl-C, SIGTERM.
_HELD = tuple(getattr(signal, name) for name in ("SIGALRM", "SIGINT", "SIGTERM")
              if hasattr(signal, name))


def import_whole(name: str) -> ModuleType:
    """Import ``name`` (a module of a heavy library) so that it is never left half-run."""
    module = sys.modules.get(name)
    if module is not None and not _initializing(module):
        return module  # imported already: the common case, kept cheap
    with _signals_held():
        drop_half_initialised()
        before = set(sys.modules)
        try:
            return importlib.import_module(name)
        except BaseException:
            _drop_new(set(sys.modules) - before, before)
            raise


def drop_half_initialised() -> list[str]:
    """Drop modules left half-run by an interrupted import (no thread is importing them).

    Their submodules go too: a package imported again would otherwise lack them as
    attributes. Returns the names dropped.
    """
    stale = [name for name, module in list(sys.modules.items())
             if _initializing(module) and not _being_imported(name)]
    doomed = {name for name in list(sys.modules)
              if any(name == s or name.startswith(f"{s}.") for s in stale)}
    _drop(doomed)
    return sorted(doomed)


def _initializing(module: object) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _being_imported(name: str) -> bool:
    """True when a thread holds the import lock of ``name`` (it is being imported now)."""
    try:
        from importlib import _bootstrap

        locks: Any = getattr(_bootstrap, "_module_locks")  # noqa: B009 - private, checked
        reference = locks.get(name)
    except (ImportError, AttributeError):
        return True  # cannot tell: leave it alone
    lock = reference() if reference is not None else None
    return lock is not None and getattr(lock, "owner", None) is not None


def _drop(names: set[str]) -> None:
    """Remove pure-Python modules from ``sys.modules`` (compiled ones stay: see above)."""
    for name in names:
        if not _compiled(name):
            sys.modules.pop(name, None)


def _drop_new(new: set[str], before: set[str]) -> None:
    """After a failed import: drop the packages it imported for the first time.

    A package imported before keeps the submodules the failed import added (numpy's C
    code holds on to the first ``numpy.dtypes``: a second one would lack its classes),
    and so does a new package with a compiled module among them (torch: its C part
    stays loaded, and its Python part cannot be run against it twice).
    """
    packages: dict[str, list[str]] = {}
    for name in new:
        packages.setdefault(name.partition(".")[0], []).append(name)
    for top, names in packages.items():
        if top not in before and not any(_compiled(name) for name in names):
            _drop(set(names))


def _compiled(name: str) -> bool:
    """True for a built-in or compiled extension module."""
    loader = getattr(getattr(sys.modules.get(name), "__spec__", None), "loader", None)
    return name in sys.builtin_module_names \
        or isinstance(loader, importlib.machinery.ExtensionFileLoader)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """In the main thread, SIGALRM, SIGINT and SIGTERM wait until the block is done.

    Their Python handlers are what raise (pytest-timeout's ``Failed``, ``KeyboardInterrupt``):
    for the block they are swapped for one that notes the signal, and afterwards the real
    handler is called for each signal noted. (Blocking the signals with ``pthread_sigmask``
    would not do: the kernel gives a process's signal to any thread that does not block it,
    and Python then runs the handler in the main thread all the same.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # Python runs signal handlers in the main thread only
        return
    noted: list[tuple[int, FrameType | None]] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append((signum, frame))

    previous = {}
    for signum in _HELD:
        with contextlib.suppress(ValueError, OSError, TypeError):
            previous[signum] = signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                if signal.getsignal(signum) is note:  # unless the import set its own
                    signal.signal(signum, handler)
        for signum, frame in noted:  # each signal now gets what it would have got
            _deliver(signum, frame, previous.get(signum))


def _deliver(signum: int, frame: FrameType | None, handler: Any) -> None:
    """Do what ``handler`` (as ``signal.signal`` returned it) does for ``signum``."""
    if callable(handler):
        handler(signum, frame)  # raises, as it would have during the import
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the default action (SIGTERM: the process ends)
