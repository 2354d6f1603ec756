"""The controller's collector of item records; builds the report at the end of the session.

Registered only on the controller: under pytest-xdist the records arrive on the
replayed test reports, so the numbers are the same with and without workers. An item
whose worker died is recorded as ``lost``. Nothing heavy is imported until the session
ends with records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.records import REPORT_ATTRIBUTE, ItemRecord
from pytest_ragbench.report import components as components_mod

PHASES = ("setup", "call", "teardown")
T = TypeVar("T")


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
        self._warned = 0  # problems already issued as warnings
        # ``ragbench verify`` without --report writes no files (cli.py).
        self.write_files = True

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

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the report files, fail the session on missed gates, report the checks.

        Runs before ``--junitxml`` writes its file (tryfirst), so that the gates and
        regressions reach it as testcases. Nothing here may fail the session: a part
        that breaks becomes one warning naming it, and the other parts are still done.
        """
        if not self.records:
            return
        from pytest_ragbench.report import files

        records = self.sorted_records()
        folder = self.settings.report_dir
        if self.write_files:
            self._guard(f"writing {folder / 'items.jsonl'}",
                        lambda: self.written.append(files.write_items(folder / "items.jsonl",
                                                                      records)))
        self.document = self._guard("building the results document",
                                    lambda: self._build(session, records))
        if self.document is None:
            if self.write_files:  # an older results.json or report.html would look current
                files.remove_stale(folder, ("results.json", "report.html"), self.problems)
            return
        if self.write_files:
            self.written += files.write_all(self.document, records, self.settings,
                                            self.problems, items_written=bool(self.written))
        if self.document["failures"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._guard("reporting gates and regressions as test reports",
                    lambda: self._report_checks(self.document or {}))
        self._warn_problems()

    def _build(self, session: pytest.Session, records: list[ItemRecord]) -> dict[str, Any]:
        from pytest_ragbench.report import document as document_mod
        from pytest_ragbench.report.files import run_info

        found = {**self.worker_components, **components_mod.components(self.config)}
        document = document_mod.build(
            records, self.settings, run=run_info(self.config.rootpath),
            components=components_mod.ordered(found), baseline=self.baseline,
            gate_list=self.gates, labels=self.labels)
        document["run"]["exit_status"] = int(session.exitstatus)
        return document

    def _report_checks(self, document: dict[str, Any]) -> None:
        from pytest_ragbench.report import testcases

        location = _relative(self.settings.report_dir / "results.json", self.config.rootpath)
        testcases.emit(self.config, document, location,
                       gated=self.settings.fail_on == "regression")

    def _guard(self, part: str, action: Callable[[], T]) -> T | None:
        """Run one part of the report; a failure becomes a problem line naming the part."""
        try:
            return action()
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.problems.append(f"{part} failed ({detail})")
            return None

    def _warn_problems(self) -> None:
        """Each problem also as a pytest warning (shown in the warnings summary)."""
        import warnings

        for problem in self.problems[self._warned:]:
            # with -W error the warning raises: the line in the ragbench section says it
            with contextlib.suppress(Exception):
                warnings.warn(RagbenchReportWarning(f"ragbench report: {problem}"),
                              stacklevel=1)
        self._warned = len(self.problems)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any) -> tuple[str, str, str] | None:
        """Gates and regressions are counted under their own words in the last line."""
        from pytest_ragbench.report.testcases import teststatus

        return teststatus(report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the ``ragbench`` section (a part that fails is named, the rest printed)."""
        if self.document is None and not self.problems:
            return
        terminalreporter.section("ragbench")
        if self.document is not None:
            from pytest_ragbench.report.terminal import render

            before = len(self.problems)
            lines = self._guard("the terminal summary", lambda: render(
                self.document or {}, self.written, self.settings.report_dir,
                problems=self.problems)) or []
            for line in lines:
                red = line.startswith(("FAILED", "verdict: FAILED", "verdict: INTERRUPTED")) \
                    or ": MISSED," in line
                terminalreporter.write_line(line, red=red, bold=red)
            if len(self.problems) > before:
                self._warn_problems()
        for problem in self.problems:
            terminalreporter.write_line(f"ragbench: {problem}", yellow=True)


class RagbenchReportWarning(UserWarning):
    """A part of the ragbench report could not be made; the rest was."""


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return str(path)


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
