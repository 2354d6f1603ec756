"""Under xdist: the kind and system of each ragbench item a worker collected, for the controller.

The controller collects nothing: xdist tells it only the node ids each worker collected,
and an item's record (kind, system, case) arrives later, with its report. The scheduler
(run/worker_groups.py), the count of selected items per kind and system, and the record
of an item whose worker died need them before that. An item carries them from where it
is made (``identity()`` in collect/items.py); each worker writes them to a file in a
folder the controller made (named in ``workerinput``) before xdist announces the worker's
collection, and the controller reads that file when the announcement arrives. A node id
is never parsed for them: a case id may hold ``[``, ``::`` or a system's name.

Workers on other machines (``--tx ssh=...``) cannot write into the controller's folder:
their items are then known by their records only.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.results.records import ItemIdentity

WORKER_INPUT_KEY = "ragbench_collected"  # config.workerinput: the folder to write into
COLLECTED_KEY = pytest.StashKey["CollectedItems"]()  # the controller's CollectedItems


def identity(item: pytest.Item) -> ItemIdentity | None:
    """What a ragbench item says of itself; None for other tests."""
    made = getattr(item, "identity", None)
    found = made() if callable(made) else None
    return found if isinstance(found, ItemIdentity) else None


def identities(items: Iterable[pytest.Item]) -> dict[str, ItemIdentity]:
    """``{nodeid: identity}`` of the ragbench items among ``items``."""
    return {item.nodeid: found for item in items if (found := identity(item)) is not None}


class CollectedItems:
    """The controller's side: the folder the workers write into, and what they wrote."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.items: dict[str, ItemIdentity] = {}

    def worker_input(self) -> str:
        """The folder a worker writes its file into (made when the first worker starts)."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="ragbench-collected-"))
        return str(self.folder)

    def read(self, node: Any) -> dict[str, ItemIdentity]:
        """The ragbench items the worker ``node`` collected (none when it wrote no file)."""
        worker = getattr(node, "workerinput", {}).get("workerid")
        if self.folder is None or not worker:
            return {}
        try:
            data = json.loads(_file(self.folder, str(worker)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        found = {nodeid: ItemIdentity(*fields) for nodeid, fields in data.items()}
        self.items.update(found)
        return found

    def kind_of(self, nodeid: str) -> str | None:
        """The kind of the item ``nodeid``; None for other tests and items not yet known."""
        found = self.items.get(nodeid)
        return None if found is None else found.kind

    def close(self) -> None:
        """Remove the folder."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def collected_items(config: pytest.Config) -> CollectedItems:
    """The controller's :class:`CollectedItems` (made on first use)."""
    if COLLECTED_KEY not in config.stash:
        config.stash[COLLECTED_KEY] = CollectedItems()
    return config.stash[COLLECTED_KEY]


class WorkerItems:
    """A worker's side: writes its items' identities before xdist announces its collection."""

    def __init__(self, folder: Path, worker: str) -> None:
        self.path = _file(folder, worker)

    @pytest.hookimpl(tryfirst=True)  # before xdist's own hook sends "collectionfinish"
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        data = {nodeid: list(found) for nodeid, found in identities(session.items).items()}
        partial = self.path.with_suffix(".part")
        partial.write_text(json.dumps(data), encoding="utf-8")
        os.replace(partial, self.path)


def join_collection(config: pytest.Config) -> None:
    """On an xdist worker: write the collected items where the controller reads them."""
    given = getattr(config, "workerinput", {})
    folder, worker = given.get(WORKER_INPUT_KEY), given.get("workerid")
    if folder and worker:
        config.pluginmanager.register(WorkerItems(Path(folder), str(worker)),
                                      "ragbench-worker-items")


def _file(folder: Path, worker: str) -> Path:
    return folder / f"{worker}.json"
