"""The items this process is going to run: what answers may be fetched ahead of the items.

Serially that is every selected item. On a pytest-xdist worker it is the item running
now and those the controller has sent to this worker and it has not run yet: xdist's
``WorkerInteractor`` keeps their indices into ``session.items`` in its queue ``torun``
(and the next one in ``nextitem_index``). No public API exposes that queue, so it is
read defensively: with an xdist that keeps it elsewhere, a worker knows only the item
it runs, and its answers are fetched as the items ask (as before).

Each worker therefore fetches the answers of its own items only, never another
worker's: no model call is made twice. With ``--dist load`` the controller sends each
worker a first share of the items and then more as it finishes them, so a worker's
queue is a window of the items it will run; :data:`LOOKAHEAD` bounds how far ahead
each look reaches, so that topping up before every item stays cheap.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

LOOKAHEAD = 64  # items of the worker's queue looked at per call

_INTERACTOR = pytest.StashKey[Any]()


def on_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker."""
    return hasattr(config, "workerinput")


def upcoming(request: pytest.FixtureRequest) -> list[pytest.Item]:
    """Every selected item serially; on a worker, its current item and its queue."""
    session = request.session
    if not on_worker(request.config):
        return list(session.items)
    current = request.node if isinstance(request.node, pytest.Item) else None
    return worker_queue(request.config, session, current)


def worker_queue(config: pytest.Config, session: pytest.Session,
                 current: pytest.Item | None = None) -> list[pytest.Item]:
    """``current`` and the items queued for this worker (at most :data:`LOOKAHEAD` of them)."""
    found = [current] if current is not None else []
    interactor = _interactor(config)
    if interactor is None:
        return found
    indices: list[Any] = [getattr(interactor, "nextitem_index", None)]
    queue = getattr(interactor, "torun", None)
    lock = getattr(queue, "lock", None)
    if callable(lock):
        with lock() as pending:
            indices += list(itertools.islice(pending, LOOKAHEAD))
    items = session.items
    for index in indices:
        if isinstance(index, int) and 0 <= index < len(items) and items[index] is not current:
            found.append(items[index])
    return found


def _interactor(config: pytest.Config) -> Any:
    """The WorkerInteractor plugin of this xdist worker, or None."""
    if _INTERACTOR not in config.stash:
        config.stash[_INTERACTOR] = next(
            (plugin for plugin in config.pluginmanager.get_plugins()
             if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun")),
            None)
    return config.stash[_INTERACTOR]
