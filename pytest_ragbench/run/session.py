"""The controller's run: the state its parts share, and the order in which it ends.

Registered only on the controller, with its parts beside it; each part is a pytest
plugin with one job:

- :mod:`.checks` (``StartupChecks``) — system names, save name, gates, judge labels and
  baseline checked and read before any item runs.
- :mod:`.opening` (``RunOpening``) — which ragbench items this session runs; the run
  opens (journal header, SIGTERM) once they are known.
- :mod:`.controller` (``XdistController``) — what each xdist worker is given and what it
  leaves when it goes down.
- :mod:`.recorder` (``Recorder``) — one record per item from the reports; a crashed
  worker's item ``lost``.
- :mod:`.ending` (``RunEnding``) — records only the journal holds, the run's status and
  the exit status, the journals kept or removed.
- :mod:`.reporting` (``SessionReport``) — the results document, its files, the gates as
  testcases, warnings and the terminal section.

The run (:mod:`.journal`, :mod:`.interruption`, :mod:`.resume`): the run id is chosen
at start-up (or taken from the run ``--ragbench-resume`` continues) and given to the
xdist workers; every finished record is appended to the run's journal where its item
ran. Nothing heavy is imported until the session ends with records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run import collected as collected_mod
from pytest_ragbench.run import journal as journal_mod
from pytest_ragbench.run.checks import StartupChecks
from pytest_ragbench.run.controller import XdistController
from pytest_ragbench.run.ending import RunEnding
from pytest_ragbench.run.interruption import RunStatus, SignalWatch
from pytest_ragbench.run.opening import RunOpening
from pytest_ragbench.run.recorder import Recorder
from pytest_ragbench.run.reporting import SessionReport

T = TypeVar("T")


class RagbenchSession:
    """The run's state; registers its parts and, at the end, runs them in order."""

    def __init__(self, config: pytest.Config, settings: RagbenchConfig) -> None:
        self.config = config
        self.settings = settings
        # read at the start (checks.py)
        self.baseline: Any = None
        self.gates: list[Any] = []
        self.labels: Any = None  # the --ragbench-judge-labels file
        # the run: its id, its journal, how far it got (journal.py, interruption.py)
        self.run_id = journal_mod.new_run_id()
        self.resume: Any = None  # the resume.ResumePoint this session continues
        self.journal: journal_mod.JournalWriter | None = None
        self.signals = SignalWatch()
        self.status: RunStatus | None = None  # decided as it ends (ending.py)
        # the items (opening.py, recorder.py): node ids selected, and their records
        self.selected: set[str] | None = None
        self.records: dict[str, ItemRecord] = {}
        # under xdist (controller.py): the kind, system and case of each item the workers
        # collected, the components they named, the workers interrupted (id -> signal)
        self.collected = collected_mod.collected_items(config)
        self.worker_components: dict[str, str] = {}
        self.interrupted_workers: dict[str, str | None] = {}
        self.plots_ahead: Any = None  # plots_ahead.PlotsAhead, drawn by idle workers
        # other unfinished runs of the report dir left for --ragbench-resume (ending.py)
        self.other_runs: list[dict[str, Any]] = []
        # --ragbench-merge: the shards' records (shards.Merged), and the shard of each
        # ragbench item this session collected (none of them runs)
        self.merged: Any = None
        self.merge_collected: dict[str, int] | None = None
        self.sequential: Any = None  # --ragbench-sequential: sequential.SequentialRun
        # the report (reporting.py); ``ragbench verify`` without --report writes no files
        self.document: dict[str, Any] | None = None
        self.results: Any = None  # the typed ResultsDocument (results/document.py)
        self.written: list[Path] = []
        self.problems: list[str] = []
        self.write_files = True
        # the parts
        self.checks = StartupChecks(self)
        self.opening = RunOpening(self)
        self.controller = XdistController(self)
        self.recorder = Recorder(self)
        self.ending = RunEnding(self)
        self.report = SessionReport(self)

    def register(self, pluginmanager: pytest.PytestPluginManager) -> None:
        """Register the session (``ragbench-session``) and each of its parts."""
        parts = {"checks": self.checks, "opening": self.opening, "controller": self.controller,
                 "recorder": self.recorder, "ending": self.ending, "report": self.report}
        pluginmanager.register(self, "ragbench-session")
        for name, part in parts.items():
            pluginmanager.register(part, f"ragbench-session-{name}")

    def prepare_run(self) -> None:
        """Choose the run id (a new one, or the run ``--ragbench-resume`` continues)."""
        if self.settings.resume:
            from pytest_ragbench.run import resume

            self.resume = resume.find(self.settings.report_dir, self.public_settings())
            if self.resume is not None:
                self.run_id = self.resume.run_id
        if self.settings.merge_from:
            from pytest_ragbench.render.files import run_info
            from pytest_ragbench.run import shards

            if getattr(self.config.option, "numprocesses", None):
                raise ConfigError("--ragbench-merge runs no item: drop -n (pytest-xdist)")
            settings = shards.comparable_settings(self.public_settings(), self.config.rootpath)
            self.merged = shards.merge(self.settings.merge_from, settings,
                                       run_info(self.config.rootpath))
        self.journal = journal_mod.JournalWriter(
            journal_mod.journal_path(self.settings.report_dir, self.run_id), self.run_id)

    def public_settings(self) -> dict[str, Any]:
        """The settings as results.json and the journal's header hold them (JSON values)."""
        import json

        return dict(json.loads(json.dumps(self.settings.public_dict(), default=str)))

    def kept_ids(self) -> frozenset[str]:
        """Node ids whose records the resumed run already has: they are not run again."""
        return frozenset(self.resume.kept) if self.resume is not None else frozenset()

    def selected_count(self, kind: str, system: str | None) -> int:
        """How many items of ``kind`` (and of ``system``, None: of none) were selected."""
        return self.opening.count(kind, system)

    def guard(self, part: str, action: Callable[[], T]) -> T | None:
        """Run a part that must not take the session down; a failure becomes a problem line."""
        try:
            return action()
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.problems.append(f"{part} failed ({detail})")
            return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """End the run: settle it, write the report, remove the journal, report the checks.

        Runs before ``--junitxml`` writes its file (tryfirst), so that the gates and
        regressions reach it as testcases. Nothing here may fail the session: a part
        that breaks becomes one warning naming it, and the other parts are still done.
        A SIGTERM from now on waits for the files (run/interruption.py).
        """
        self.signals.reporting = True
        ahead = self.guard("drawing plots ahead", self._plots_drawn_ahead)
        if not self.ending.settle(session):
            return
        from pytest_ragbench.run import garbage

        garbage.freeze(self.config)  # the records live on: the report's scans skip them
        if not self.report.write(session, self.recorder.sorted_records(), ahead):
            return
        if self.write_files:
            self.guard("removing the run's journal", self.ending.finish_journal)
        self.report.conclude(session)

    def _plots_drawn_ahead(self) -> dict[str, Any] | None:
        """The kinds' plots drawn while the workers ran; the drawing thread is stopped."""
        if self.plots_ahead is None:
            return None
        ahead, self.plots_ahead = self.plots_ahead, None
        return dict(ahead.finish())

    def pytest_unconfigure(self) -> None:
        """A session that ended before its report stops the plot thread too."""
        if self.plots_ahead is not None:
            self.plots_ahead.close()
        self.collected.close()
