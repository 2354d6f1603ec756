"""Which ragbench items this session runs, with or without pytest-xdist.

Without xdist they are the session's items after deselection (-k, --lf, a resumed run's
kept items); under xdist each worker collects them all and writes the kind, system and
case of each (run/collected.py), read here as the worker reports its node ids. The first
time they are known the run opens: the journal's header, SIGTERM taken over, the
sequential gates begun, and under xdist the plots drawn ahead announced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.run import collected as collected_mod

if TYPE_CHECKING:
    from pytest_ragbench.run.session import RagbenchSession


class RunOpening:
    """The run's selected node ids and the kind and system of each; opens the run."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run
        # (kind, system) of each selected ragbench item: how many of each are to run
        self.names: dict[str, tuple[str, str | None]] = {}

    def count(self, kind: str, system: str | None) -> int:
        """How many items of ``kind`` (and of ``system``, None: of none) were selected."""
        return sum(found == (kind, system) for found in self.names.values())

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Without xdist: the selected ragbench items (after -k, --lf, resume deselection)."""
        if self.run.merge_collected is not None:  # merging shards: every item, none run here
            self.items_known(set(self.run.merge_collected))
            return
        ours = collected_mod.identities(session.items)
        self.names.update((nodeid, (found.kind, found.system)) for nodeid, found in ours.items())
        self.items_known(set(ours), {found.kind for found in ours.values()})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        """Under xdist: the items a worker collected (each worker collects them all)."""
        run = self.run
        first = run.selected is None
        written = run.collected.read(node)
        named = {nodeid: written[nodeid] for nodeid in ids if nodeid in written}
        self.names.update((nodeid, (found.kind, found.system)) for nodeid, found in named.items())
        self.items_known(set(named), {found.kind for found in named.values()})
        if first and run.selected and run.write_files and run.resume is None \
                and not run.config.option.collectonly:
            from pytest_ragbench.run.plots_ahead import PlotsAhead

            run.plots_ahead = PlotsAhead(run.settings)
            run.plots_ahead.expect(run.collected.items[nodeid].kind for nodeid in run.selected)

    def items_known(self, nodeids: set[str], kinds: set[str] | None = None) -> None:
        """The session's ragbench items are known: open the journal, take over SIGTERM."""
        run = self.run
        first = run.selected is None
        run.selected = (run.selected or set()) | nodeids
        if first and run.sequential is not None and kinds is not None:
            sequential, found = run.sequential, kinds
            kept = run.resume.kept.values() if run.resume is not None else ()
            journal = run.journal.path if run.journal is not None else None
            run.guard("starting the sequential gates",
                      lambda: sequential.begin(run.gates, found, kept, journal))
        if not first or not (nodeids or run.resume is not None) or run.config.option.collectonly:
            return
        run.signals.install()
        if run.write_files and run.journal is not None:
            run.journal.header(run.public_settings(), resumed=run.resume is not None,
                               items=run.selected)
            run.journal.lock_shared()
            run.journal.active = True
