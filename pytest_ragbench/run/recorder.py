"""One record per item, taken from the test reports as they arrive on the controller.

Under pytest-xdist the records arrive on the replayed reports, so the numbers are the
same with and without workers. An item whose worker crashed becomes ``lost``; one whose
worker was interrupted did not run and gets no record. An item's first record also
reaches the sequential gates; every record reaches the plots drawn ahead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_ragbench.results.records import REPORT_ATTRIBUTE, ItemRecord
from pytest_ragbench.run.controller import worker_id

if TYPE_CHECKING:
    from pytest_ragbench.run.session import RagbenchSession

PHASES = ("setup", "call", "teardown")


class Recorder:
    """Keeps the run's records (``run.records``), by node id."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the record carried by a report; a crashed worker's item becomes ``lost``."""
        run = self.run
        data = getattr(report, REPORT_ATTRIBUTE, None)
        if isinstance(data, dict):
            first = report.nodeid not in run.records
            record = run.records[report.nodeid] = ItemRecord.from_dict(data)
            if first and run.sequential is not None:
                sequential = run.sequential
                run.guard("deciding the gates sequentially", lambda: sequential.arrived(record))
            if run.plots_ahead is not None:
                plots = run.plots_ahead
                run.guard("drawing plots ahead", lambda: plots.arrived(record))
        elif report.when not in PHASES and report.failed and report.nodeid not in run.records:
            if worker_id(getattr(report, "node", None)) in run.interrupted_workers:
                return  # its worker was interrupted: the item did not run, it did not crash
            known = run.collected.items.get(report.nodeid)
            if known is not None:  # a ragbench item: its worker never sent the record
                run.records[report.nodeid] = known.lost(report.nodeid, str(report.longrepr))

    def sorted_records(self) -> list[ItemRecord]:
        """Records in node-id order, independent of worker scheduling."""
        return [self.run.records[k] for k in sorted(self.run.records)]
