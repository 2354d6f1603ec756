"""The controller's collector of item records; builds the report at the end of the session.

Registered only on the controller: under pytest-xdist the records arrive on the
replayed test reports, so the numbers are the same with and without workers. An item
whose worker died is recorded as ``lost``. Nothing heavy is imported until the session
ends with records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.records import REPORT_ATTRIBUTE, ItemRecord
from pytest_ragbench.report import components as components_mod

PHASES = ("setup", "call", "teardown")


class RagbenchSession:
    """Gathers one record per item from the reports; writes and prints the report."""

    def __init__(self, config: pytest.Config, settings: RagbenchConfig) -> None:
        self.config = config
        self.settings = settings
        self.records: dict[str, ItemRecord] = {}
        self.worker_components: dict[str, str] = {}
        self.baseline: Any = None
        self.gates: list[Any] = []
        self.labels: Any = None  # the --ragbench-judge-labels file, read at the start
        self.document: dict[str, Any] | None = None
        self.written: list[Path] = []
        self.problems: list[str] = []

    # -- collecting -----------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check system names, save name and gates, and load the baseline, before any item runs."""
        try:
            if self.settings.systems:
                from pytest_ragbench.system.fixtures import check_systems

                check_systems(self.config, self.settings.systems)
            if self.settings.save:
                from pytest_ragbench.report.runs import check_name

                check_name(self.settings.save)
            if self.settings.gates:
                from pytest_ragbench.report.gates import parse_gates

                self.gates = parse_gates(self.settings.gates)
            if self.settings.judge_labels:
                from pytest_ragbench.cases.labels import read_labels
                from pytest_ragbench.collect import display_path

                path = self.settings.judge_labels
                self.labels = read_labels(path, display_path(path, self.config))
            if self.settings.compare:
                from pytest_ragbench.report import runs

                path = runs.resolve(self.settings.compare, self.settings.report_dir,
                                    self.config.invocation_params.dir)
                self.baseline = runs.load(path)
        except ConfigError as exc:
            raise pytest.UsageError(f"ragbench: {exc}") from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the record carried by a report; a crashed worker's item becomes ``lost``."""
        data = getattr(report, REPORT_ATTRIBUTE, None)
        if isinstance(data, dict):
            self.records[report.nodeid] = ItemRecord.from_dict(data)
        elif report.when not in PHASES and report.failed and report.nodeid not in self.records:
            lost = lost_record(report.nodeid, self.settings.systems, str(report.longrepr))
            if lost is not None:
                self.records[report.nodeid] = lost

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Components named on an xdist worker arrive in its ``workeroutput``."""
        output = getattr(node, "workeroutput", None) or {}
        self.worker_components.update(output.get(components_mod.WORKEROUTPUT_KEY) or {})

    def sorted_records(self) -> list[ItemRecord]:
        """Records in node-id order, independent of worker scheduling."""
        return [self.records[k] for k in sorted(self.records)]

    # -- reporting ------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Build the document, write the files, and fail the session on missed gates."""
        if not self.records:
            return
        from pytest_ragbench.report import document as document_mod
        from pytest_ragbench.report.files import run_info

        found = {**self.worker_components, **components_mod.components(self.config)}
        self.document = document_mod.build(
            self.sorted_records(), self.settings, run=run_info(self.config.rootpath),
            components=components_mod.ordered(found), baseline=self.baseline,
            gate_list=self.gates, labels=self.labels)
        self.document["run"]["exit_status"] = int(session.exitstatus)
        self.written = self._write(self.document)
        if self.document["failures"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write(self, document: dict[str, Any]) -> list[Path]:
        from pytest_ragbench.report import files

        try:
            return files.write_all(document, self.sorted_records(), self.settings)
        except OSError as exc:
            self.problems.append(f"could not write the report to "
                                 f"{self.settings.report_dir}: {exc}")
            return []

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the ``ragbench`` section."""
        if self.document is None:
            return
        from pytest_ragbench.report.terminal import render

        terminalreporter.section("ragbench")
        for line in render(self.document, self.written, self.settings.report_dir):
            red = line.startswith("FAILED") or ": MISSED," in line
            terminalreporter.write_line(line, red=red, bold=red)
        for problem in self.problems:
            terminalreporter.write_line(f"ragbench: {problem}", yellow=True)


def lost_record(nodeid: str, systems: tuple[str, ...], message: str) -> ItemRecord | None:
    """A ``lost`` record for a ragbench item whose worker died (None for other tests)."""
    from pytest_ragbench import kinds

    path, _, name = nodeid.rpartition("::")
    kind, bracket, label = name.partition("[")
    if not bracket or kind not in (*kinds.ITEM_KINDS, "robust", "invalid_case"):
        return None
    label = label[:-1] if label.endswith("]") else label
    system = next((s for s in systems if label.startswith(f"{s}-")), None)
    case_id = label[len(system) + 1:] if system else label
    return ItemRecord(nodeid=nodeid, kind=kind, case_kind="", case_id=case_id, file=path,
                      line=0, status="lost", system=system, error=message[:500])
