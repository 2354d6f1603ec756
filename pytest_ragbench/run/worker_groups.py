"""Under ``-n N``, items whose kinds load the same slow library run on one xdist worker.

With xdist's default ``--dist load`` every worker gets items of every kind, so every
worker imports rouge-score with nltk, with a judge ragas, and the rest. On two cores that
duplicated start-up is most of a warm bundled run, so ``-n 2`` was slower than serial
(the README's "Running in parallel" gives the import costs). This scheduler is xdist's
``LoadScopeScheduling`` with one scope per group of kinds that share a library
(:attr:`ItemKind.loads <pytest_ragbench.kinds.ItemKind.loads>`, joined transitively): such
a group goes to one worker as one unit.

The other items are cut into chunks that shrink as the items run out (each a quarter of
a worker's share of what is left, as ``--dist load`` sizes its batches), so that both
workers finish together; kinds with more metrics go first, because a kind's plots in
report.html are drawn as soon as its last item reports (``run/plots_ahead.py``) and
those kinds have the most to draw. A worker is sent more units whenever it has no more
than ``ragbench_concurrency`` items waiting (xdist waits until two are left): a worker
fetches the answers of the items it has been sent (``run/schedule.py``), so its queue
must hold enough items for their model calls to run concurrently.
Only ``--dist load`` is replaced; any other ``--dist`` the user names is left alone.

A crashed worker: xdist's ``LoadScopeScheduling.remove_node`` puts the crashed worker's
unfinished units back in the queue *with the item that crashed it*, which then runs again
and takes the next worker down, until xdist runs out of restarts (with ``--dist load``
the crashed item is reported once and never rerun). Here the crashed item counts as
done before its unit goes back, so, as under ``--dist load``, only that item is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from pytest_ragbench.config.settings import get_config
from pytest_ragbench.kinds import ItemKind
from pytest_ragbench.run.collected import collected_items

GROUP_PREFIX = "ragbench-loads:"


def library_groups(kinds: Iterable[ItemKind]) -> dict[str, str]:
    """Map each kind that loads a slow library to its group (kinds sharing one, joined)."""
    owner: dict[str, str] = {}  # library -> the group it belongs to
    groups: dict[str, set[str]] = {}  # group name -> its kinds
    for kind in kinds:
        if not kind.loads:
            continue
        joined = {owner[lib] for lib in kind.loads if lib in owner}
        name = min(joined | set(kind.loads))
        members = {kind.name}
        for old in joined:
            members |= groups.pop(old)
        groups[name] = members
        for lib, group in list(owner.items()):
            if group in joined:
                owner[lib] = name
        for lib in kind.loads:
            owner[lib] = name
    return {kind: name for name, members in groups.items() for kind in members}


KindOf = Callable[[str], "str | None"]  # node id -> the item's kind (None: not a ragbench item)


def group_of(nodeid: str, groups: dict[str, str], kind_of: KindOf) -> str | None:
    """The library group of an item's kind, or None."""
    kind = kind_of(nodeid)
    return None if kind is None else groups.get(kind)


def work_units(nodeids: Sequence[str], groups: dict[str, str], workers: int,
               metric_counts: dict[str, int] | None = None,
               kind_of: KindOf = lambda nodeid: None) -> dict[str, str]:
    """The work unit of every node id: its library group, or a chunk of the others.

    ``kind_of``: the kind of each item, as the workers said it (run/collected.py).

    With ``metric_counts`` (kind -> metrics it declares) the other items are chunked kinds
    with more metrics first: report.html's plots of a kind are drawn as soon as its last
    item reports (run/plots_ahead.py), and a kind with more metrics has more to draw,
    so it should not be the one that finishes last.
    """
    units: dict[str, str] = {}
    others = []
    for nodeid in nodeids:
        group = group_of(nodeid, groups, kind_of)
        if group is None:
            others.append(nodeid)
        else:
            units[nodeid] = GROUP_PREFIX + group
    if metric_counts:
        others.sort(key=lambda nodeid: -metric_counts.get(kind_of(nodeid) or "", 0))
    start = chunk = 0
    while start < len(others):
        size = max(1, (len(others) - start) // (4 * max(1, workers)))
        for nodeid in others[start:start + size]:
            units[nodeid] = f"ragbench-chunk:{chunk}"
        start, chunk = start + size, chunk + 1
    return units


def scheduler(config: pytest.Config, log: Any, groups: dict[str, str],
              metric_counts: dict[str, int] | None = None) -> Any:
    """A ``LoadScopeScheduling`` whose scopes are :func:`work_units`.

    The kind of each item is the one its worker wrote at collection (run/collected.py),
    known by the time xdist first asks for scopes (every worker has collected).
    """
    from xdist.scheduler import LoadScopeScheduling

    ahead = max(2, get_config(config).concurrency)  # items kept waiting on each worker
    kind_of = collected_items(config).kind_of

    class SharedLibraryScheduling(LoadScopeScheduling):
        units: dict[str, str] | None = None

        def remove_node(self, node: Any) -> str | None:
            """LoadScopeScheduling's, except that the crashed item is not run again."""
            workload = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values()
                       for nodeid, completed in unit.items() if not completed]
            if not pending:
                return None
            crashed = pending[0]  # items run in the order they were sent
            for unit in workload.values():
                if crashed in unit:
                    unit[crashed] = True
            self.workqueue.update((scope, unit) for scope, unit in workload.items()
                                  if not all(unit.values()))
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _reschedule(self, node: Any) -> None:
            """Send units until the worker has more than ``ahead`` items waiting.

            xdist sends one when two are left; a worker fetches the answers of the items
            it has been sent (``run/schedule.py``), so a short queue leaves it asking
            one at a time what it could have asked ``concurrency`` at a time.
            """
            if node.shutting_down or node not in self.registered_collections:
                return  # a worker that replaces a crashed one gets work once it has collected
            if not self.workqueue:
                node.shutdown()
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) <= ahead:
                self._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None and self.collection:  # set before scopes are first asked
                self.units = work_units(self.collection, groups, len(self.nodes),
                                        metric_counts, kind_of)
            if self.units is not None and nodeid in self.units:
                return self.units[nodeid]
            group = group_of(nodeid, groups, kind_of)
            return nodeid if group is None else GROUP_PREFIX + group

    return SharedLibraryScheduling(config, log)


class WorkerGroups:
    """The controller's plugin providing the scheduler (registered when xdist is present)."""

    def __init__(self, kinds: Iterable[ItemKind]) -> None:
        kinds = list(kinds)
        self.groups = library_groups(kinds)
        self.metric_counts = {kind.name: len(kind.metrics) for kind in kinds}

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist", None) != "load" or not self.groups:
            return None
        return scheduler(config, log, self.groups, self.metric_counts)
