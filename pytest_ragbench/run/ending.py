"""How the run ended: its records made whole, its status, the exit status, the journals.

Records that never reached the controller (a worker's last ones, a resumed run's kept
ones, the merged shards') are read back; the run is ``complete`` or ``interrupted``,
with what stopped it (a signal, an interrupted worker, ``-x``, a shard not merged). A
complete run removes its journal once the files hold its records, and the journals of
the unfinished runs it replaces; the others are named in the report for a resume.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run import journal as journal_mod
from pytest_ragbench.run.interruption import run_status

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_ragbench.run.session import RagbenchSession


class RunEnding:
    """Settles ``run.records`` and ``run.status``; keeps or removes the journals."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run
        self.stopped_by: str | None = None  # the message of the interruption, if any
        self.replaced_runs: list[Path] = []  # their journals go with the run's own

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """What stopped the session, when no signal did (xdist's ``-x``, a worker's Ctrl-C)."""
        self.stopped_by = str(excinfo.value).strip() or None

    def settle(self, session: pytest.Session) -> bool:
        """Make the records whole and decide the status; False when there is nothing to report.

        An interrupted run with no item finished still reports, every item not run; a run
        in which nothing ran and nothing was stopped removes its journal.
        """
        run = self.run
        run.guard("reading the run's journal", self._merge_journal)
        if run.sequential is not None and run.selected is not None:  # not needed, not lost
            run.selected -= run.sequential.not_needed_ids()
        run.status = run_status(
            run.selected, set(run.records),
            interrupted=session.exitstatus == pytest.ExitCode.INTERRUPTED,
            signal_name=self._signal_name() or self._missing_shards(),
            shouldstop=session.shouldstop or session.shouldfail)
        stopped = bool(run.selected) and run.status.status == "interrupted" \
            and not run.config.option.collectonly
        if not run.records and not stopped:
            if run.journal is not None and run.journal.active:
                run.journal.close()
                journal_mod.remove([run.journal.path], run.problems)
            return False
        self._settle_exit_status(session)
        if run.write_files:
            run.guard("reading the other unfinished runs", self._settle_other_runs)
        return True

    def finish_journal(self) -> None:
        """A complete run removes its journal (and the unfinished runs it replaces)."""
        run = self.run
        if run.journal is None or run.status is None or run.status.status != "complete":
            return
        wrote = {p.name for p in run.written}
        if not {"items.jsonl", "results.json"} <= wrote:
            return  # the journal still holds the records the files do not
        run.journal.close()
        journal_mod.remove([run.journal.path, *self.replaced_runs], run.problems)

    def _merge_journal(self) -> None:
        """Records that never reached this process (a worker's last ones), and the kept ones."""
        run = self.run
        if run.merged is not None:
            for nodeid, data in run.merged.records.items():
                if nodeid not in run.records:
                    run.records[nodeid] = ItemRecord.from_dict(data)
        if run.journal is None or not run.journal.path.is_file():
            return
        if run.resume is None and run.selected is not None \
                and run.selected <= run.records.keys():
            return  # every item's record arrived: the journal holds nothing more
        start = run.resume.size if run.resume is not None else 0
        journal = journal_mod.read(run.journal.path, start=start)
        kept = run.resume.kept if run.resume is not None else {}
        for nodeid, data in [*journal.records.items(), *kept.items()]:
            if nodeid not in run.records:
                run.records[nodeid] = ItemRecord.from_dict(data)

    def _signal_name(self) -> str | None:
        """The signal, the interrupted workers, or the message that stopped the session."""
        run = self.run
        if run.signals.received:
            return run.signals.received
        if run.interrupted_workers:
            names = ", ".join(sorted(run.interrupted_workers))
            signals = sorted({s for s in run.interrupted_workers.values() if s})
            how = f"{'/'.join(signals)} to" if signals else "an interruption of"
            return f"{how} xdist worker {names}"
        return self.stopped_by

    def _missing_shards(self) -> str | None:
        """``shard 3 of 4 not merged (12 items)`` when a merge lacks items of some shards."""
        run = self.run
        if run.merge_collected is None or run.merged is None:
            return None
        missing = [n for n in run.merge_collected if n not in run.merged.records]
        if not missing:
            return None
        # the folders not given; else the shards whose run left items out
        which = run.merged.missing_shards() or sorted({run.merge_collected[n] for n in missing})
        named = ", ".join(str(i) for i in which)
        return (f"shard{'s' if len(which) > 1 else ''} {named} of {run.merged.total} not "
                f"merged ({len(missing)} item{'s' if len(missing) != 1 else ''})")

    def _settle_exit_status(self, session: pytest.Session) -> None:
        """A resumed run's kept failures fail the session; all items kept is not 'no tests'.

        A merge of shards ends as the run on one machine would have; one missing a shard
        ends as an interrupted run.
        """
        run = self.run
        if run.resume is None and run.merged is None:
            return
        failed = any(r.status in ("failed", "error", "lost") for r in run.records.values())
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
        if run.merged is not None and run.status is not None \
                and run.status.status == "interrupted":
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _settle_other_runs(self) -> None:
        """Which other unfinished runs this one replaces, and which it leaves to be resumed.

        A complete run replaces a run of which it has every item (its own records, a
        resumed run's kept ones included), or one that finished nothing; a run it covers
        only in part (after ``--lf`` or ``-k``) keeps its journal, so no finished record
        goes unless its item ran again.
        """
        from pytest_ragbench.run.resume import kept_records

        run = self.run
        complete = run.status is not None and run.status.status == "complete"
        own = run.journal.path if run.journal is not None else None
        for other in journal_mod.unfinished(run.settings.report_dir, besides=own):
            finished = kept_records(other)
            if complete and (not finished or other.items() <= run.records.keys()):
                self.replaced_runs.append(other.path)
            else:
                run.other_runs.append({"id": other.run_id, "finished_items": len(finished)})
