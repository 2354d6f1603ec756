"""The controller's collector of item records; builds the report at the end of the session.

Registered only on the controller: under pytest-xdist the records arrive on the
replayed test reports, so the numbers are the same with and without workers. An item
whose worker died is recorded as ``lost``; one whose worker was interrupted is not run.
Nothing heavy is imported until the session ends with records.

The run (:mod:`.journal`, :mod:`.interruption`, :mod:`.resume`): the run id is chosen
at start-up (or taken from the run ``--ragbench-resume`` continues) and given to the
xdist workers; every finished record is appended to the run's journal where its item
ran; at the end, records that never reached the controller are read back from the
journal, and the run is ``complete`` or ``interrupted`` (with the items not run).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_ragbench.collect.files import display_path
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.kinds import registry
from pytest_ragbench.redact import scrub
from pytest_ragbench.render import testcases
from pytest_ragbench.render.testcases import teststatus
from pytest_ragbench.results.records import REPORT_ATTRIBUTE, ItemRecord
from pytest_ragbench.run import collected as collected_mod
from pytest_ragbench.run import journal as journal_mod
from pytest_ragbench.run.interruption import RunStatus, SignalWatch, run_status
from pytest_ragbench.systems import components as components_mod
from pytest_ragbench.systems.fixtures import check_systems

PHASES = ("setup", "call", "teardown")
WORKER_INPUT_KEY = "ragbench_run"  # config.workerinput: the run id, journal, resume point
SIGNAL_OUTPUT_KEY = "ragbench_signal"  # config.workeroutput: the signal a worker received
T = TypeVar("T")
OK_EXITS = (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED))  # a worker's, finished


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
        self.results: Any = None  # the typed ResultsDocument (results/document.py)
        self.written: list[Path] = []
        self.problems: list[str] = []
        self._warned = 0  # problems already issued as warnings
        # ``ragbench verify`` without --report writes no files (cli.py).
        self.write_files = True
        # The run: its id, its journal, how far it got (run/journal.py, interruption.py).
        self.run_id = journal_mod.new_run_id()
        self.resume: Any = None  # the resume.ResumePoint this session continues
        self.journal: journal_mod.JournalWriter | None = None
        self.signals = SignalWatch()
        self.selected: set[str] | None = None  # node ids of this session's ragbench items
        # (kind, system) of each selected ragbench item: how many of each are to run
        self.selected_names: dict[str, tuple[str, str | None]] = {}
        # under xdist: the kind, system and case of each item the workers collected
        self.collected = collected_mod.collected_items(config)
        self.interrupted_workers: dict[str, str | None] = {}  # xdist id -> signal, if known
        self.status: RunStatus | None = None
        self.stopped_by: str | None = None  # the message of the interruption, if any
        self.plots_ahead: Any = None  # under xdist: plots_ahead.PlotsAhead
        # Other unfinished runs of the report dir: those this run replaces (their journals
        # go with its own) and those it leaves for --ragbench-resume (named in the report).
        self.replaced_runs: list[Path] = []
        self.other_runs: list[dict[str, Any]] = []
        # --ragbench-merge: the shards' records (run/shards.Merged), and the shard of each
        # ragbench item this session collected (none of them runs)
        self.merged: Any = None
        self.merge_collected: dict[str, int] | None = None
        self.sequential: Any = None  # --ragbench-sequential: run/sequential.SequentialRun

    # -- the run --------------------------------------------------------------------------

    def prepare_run(self) -> None:
        """Choose the run id (a new one, or the run ``--ragbench-resume`` continues)."""
        if self.settings.resume:
            from pytest_ragbench.run import resume

            self.resume = resume.find(self.settings.report_dir, self._public_settings())
            if self.resume is not None:
                self.run_id = self.resume.run_id
        if self.settings.merge_from:
            from pytest_ragbench.render.files import run_info
            from pytest_ragbench.run import shards

            if getattr(self.config.option, "numprocesses", None):
                raise ConfigError("--ragbench-merge runs no item: drop -n (pytest-xdist)")
            settings = shards.comparable_settings(self._public_settings(), self.config.rootpath)
            self.merged = shards.merge(self.settings.merge_from, settings,
                                       run_info(self.config.rootpath))
        self.journal = journal_mod.JournalWriter(
            journal_mod.journal_path(self.settings.report_dir, self.run_id), self.run_id)

    def _public_settings(self) -> dict[str, Any]:
        import json

        return dict(json.loads(json.dumps(self.settings.public_dict(), default=str)))

    def kept_ids(self) -> frozenset[str]:
        """Node ids whose records the resumed run already has: they are not run again."""
        return frozenset(self.resume.kept) if self.resume is not None else frozenset()

    def _items_known(self, nodeids: set[str], kinds: set[str] | None = None) -> None:
        """The session's ragbench items are known: open the journal, take over SIGTERM."""
        first = self.selected is None
        self.selected = (self.selected or set()) | nodeids
        if first and self.sequential is not None and kinds is not None:
            sequential, found = self.sequential, kinds
            kept = self.resume.kept.values() if self.resume is not None else ()
            journal = self.journal.path if self.journal is not None else None
            self._guard("starting the sequential gates",
                        lambda: sequential.begin(self.gates, found, kept, journal))
        if not first or not (nodeids or self.resume is not None) \
                or self.config.option.collectonly:
            return
        self.signals.install()
        if self.write_files and self.journal is not None:
            self.journal.header(self._public_settings(), resumed=self.resume is not None,
                                items=self.selected)
            self.journal.lock_shared()
            self.journal.active = True

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Without xdist: the selected ragbench items (after -k, --lf, resume deselection)."""
        if self.merge_collected is not None:  # merging shards: every item, none run here
            self._items_known(set(self.merge_collected))
            return
        ours = collected_mod.identities(session.items)
        self.selected_names.update((nodeid, (found.kind, found.system))
                                   for nodeid, found in ours.items())
        self._items_known(set(ours), {found.kind for found in ours.values()})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        """Under xdist: the items a worker collected (each worker collects them all)."""
        first = self.selected is None
        written = self.collected.read(node)
        named = {nodeid: written[nodeid] for nodeid in ids if nodeid in written}
        self.selected_names.update((nodeid, (found.kind, found.system))
                                   for nodeid, found in named.items())
        self._items_known(set(named), {found.kind for found in named.values()})
        if first and self.selected and self.write_files and self.resume is None \
                and not self.config.option.collectonly:
            from pytest_ragbench.run.plots_ahead import PlotsAhead

            self.plots_ahead = PlotsAhead(self.settings)
            self.plots_ahead.expect(self.collected.items[nodeid].kind
                                    for nodeid in self.selected)

    def selected_count(self, kind: str, system: str | None) -> int:
        """How many items of ``kind`` (and of ``system``, None: of none) were selected."""
        return sum(found == (kind, system) for found in self.selected_names.values())

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Give each xdist worker the run id, the journal, and what resuming deselects.

        And the folder where it writes the kind and system of its items (run/collected.py).
        """
        node.workerinput[collected_mod.WORKER_INPUT_KEY] = self.collected.worker_input()
        if not self.write_files or self.journal is None:
            return
        node.workerinput[WORKER_INPUT_KEY] = {
            "id": self.run_id, "journal": str(self.journal.path),
            "resume": self.resume.worker_input() if self.resume is not None else None}

    # -- collecting -----------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check system names, save name and gates, and load the baseline, before any item runs."""
        try:
            if self.settings.systems:
                check_systems(self.config, self.settings.systems)
            if self.settings.save:
                from pytest_ragbench.results.runs import check_name

                check_name(self.settings.save)
            if self.settings.gates:
                from pytest_ragbench.results.gates import parse_gates

                self.gates = parse_gates(self.settings.gates)
            if self.settings.judge_labels:
                from pytest_ragbench.cases.labels import read_labels
                from pytest_ragbench.config.vocabulary import check_labels

                path = self.settings.judge_labels
                self.labels = read_labels(path, display_path(path, self.config))
                check_labels(self.labels, registry(self.config))
            if self.settings.compare:
                from pytest_ragbench.results import runs

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
            first = report.nodeid not in self.records
            self.records[report.nodeid] = ItemRecord.from_dict(data)
            if first and self.sequential is not None:
                self._guard("deciding the gates sequentially",
                            lambda: self.sequential.arrived(self.records[report.nodeid]))
            if self.plots_ahead is not None:
                self._guard("drawing plots ahead", lambda: self.plots_ahead.arrived(
                    self.records[report.nodeid]))
        elif report.when not in PHASES and report.failed and report.nodeid not in self.records:
            worker = _worker_id(getattr(report, "node", None))
            if worker in self.interrupted_workers:
                return  # its worker was interrupted: the item did not run, it did not crash
            known = self.collected.items.get(report.nodeid)
            if known is not None:  # a ragbench item: its worker never sent the record
                self.records[report.nodeid] = known.lost(report.nodeid, str(report.longrepr))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Components named on an xdist worker arrive in its ``workeroutput``.

        A worker that ran all its items draws plots until the session ends
        (run/plots_ahead.py).
        """
        output = getattr(node, "workeroutput", None) or {}
        self.worker_components.update(output.get(components_mod.WORKEROUTPUT_KEY) or {})
        gateway = getattr(node, "gateway", None)
        if error is None and output.get("exitstatus") in OK_EXITS and gateway is not None \
                and self.plots_ahead is not None:
            self._guard("drawing plots ahead", lambda: self.plots_ahead.add_worker(
                _worker_id(node) or "worker", gateway))
        if error == "keyboard-interrupt" or output.get("exitstatus") == int(
                pytest.ExitCode.INTERRUPTED):
            worker = _worker_id(node)
            if worker is not None:
                self.interrupted_workers[worker] = output.get(SIGNAL_OUTPUT_KEY) \
                    or self.interrupted_workers.get(worker)

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
        A SIGTERM from now on waits for the files (run/interruption.py).
        """
        self.signals.reporting = True
        ahead = self._guard("drawing plots ahead", self._plots_drawn_ahead)
        self._guard("reading the run's journal", self._merge_journal)
        if self.sequential is not None and self.selected is not None:  # not needed, not lost
            self.selected -= self.sequential.not_needed_ids()
        self.status = run_status(
            self.selected, set(self.records),
            interrupted=session.exitstatus == pytest.ExitCode.INTERRUPTED,
            signal_name=self._signal_name() or self._missing_shards(),
            shouldstop=session.shouldstop or session.shouldfail)
        stopped = bool(self.selected) and self.status.status == "interrupted" \
            and not self.config.option.collectonly
        if not self.records and not stopped:
            # nothing ran, nothing was stopped: nothing to report or keep for a resume
            if self.journal is not None and self.journal.active:
                self.journal.close()
                journal_mod.remove([self.journal.path], self.problems)
            return
        # (An interrupted run with no item finished still says so, every item not run.)
        from pytest_ragbench.render import files
        from pytest_ragbench.run import garbage

        garbage.freeze(self.config)  # the records live on: the report's scans skip them

        records = self.sorted_records()
        self._settle_exit_status(session)
        if self.write_files:
            self._guard("reading the other unfinished runs", self._settle_other_runs)
        folder = self.settings.report_dir
        tag = {"id": self.run_id, "status": self.status.status}
        if self.write_files:  # files of the earlier run go first: never two runs side by side
            files.remove_stale(folder, files.previous_run_files(folder), self.problems)
            self._guard(f"writing {folder / 'items.jsonl'}",
                        lambda: self.written.append(files.write_items(folder / "items.jsonl",
                                                                      records, tag)))
        self.document = self._guard("building the results document",
                                    lambda: self._build(session, records))
        if self.document is None:
            return
        if self.write_files:
            self.written += files.write_all(self.document, records, self.settings,
                                            self.problems, items_written=bool(self.written),
                                            plots_ahead=ahead,
                                            sections=self.results.sections
                                            if self.results is not None else ())
            self._guard("removing the run's journal", self._finish_journal)
        if self.document["failures"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._guard("reporting gates and regressions as test reports",
                    lambda: self._report_checks(session, self.document or {}))
        self._warn_problems()
        self._warn_partial_baseline()

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

    def _missing_shards(self) -> str | None:
        """``shard 3 of 4 not merged (12 items)`` when a merge lacks items of some shards."""
        if self.merge_collected is None or self.merged is None:
            return None
        missing = [n for n in self.merge_collected if n not in self.merged.records]
        if not missing:
            return None
        # the folders not given; else the shards whose run left items out
        which = self.merged.missing_shards() or sorted({self.merge_collected[n]
                                                        for n in missing})
        named = ", ".join(str(i) for i in which)
        return (f"shard{'s' if len(which) > 1 else ''} {named} of {self.merged.total} not "
                f"merged ({len(missing)} item{'s' if len(missing) != 1 else ''})")

    def _merge_journal(self) -> None:
        """Records that never reached this process (a worker's last ones), and the kept ones."""
        if self.merged is not None:
            for nodeid, data in self.merged.records.items():
                if nodeid not in self.records:
                    self.records[nodeid] = ItemRecord.from_dict(data)
        if self.journal is None or not self.journal.path.is_file():
            return
        if self.resume is None and self.selected is not None \
                and self.selected <= self.records.keys():
            return  # every item's record arrived: the journal holds nothing more
        start = self.resume.size if self.resume is not None else 0
        journal = journal_mod.read(self.journal.path, start=start)
        kept = self.resume.kept if self.resume is not None else {}
        for nodeid, data in [*journal.records.items(), *kept.items()]:
            if nodeid not in self.records:
                self.records[nodeid] = ItemRecord.from_dict(data)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """What stopped the session, when no signal did (xdist's ``-x``, a worker's Ctrl-C)."""
        self.stopped_by = str(excinfo.value).strip() or None

    def _signal_name(self) -> str | None:
        if self.signals.received:
            return self.signals.received
        if self.interrupted_workers:
            names = ", ".join(sorted(self.interrupted_workers))
            signals = sorted({s for s in self.interrupted_workers.values() if s})
            how = f"{'/'.join(signals)} to" if signals else "an interruption of"
            return f"{how} xdist worker {names}"
        return self.stopped_by

    def _settle_exit_status(self, session: pytest.Session) -> None:
        """A resumed run's kept failures fail the session; all items kept is not 'no tests'.

        A merge of shards ends as the run on one machine would have; one missing a shard
        ends as an interrupted run.
        """
        if self.resume is None and self.merged is None:
            return
        failed = any(r.status in ("failed", "error", "lost") for r in self.records.values())
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
        if self.merged is not None and self.status is not None \
                and self.status.status == "interrupted":
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _settle_other_runs(self) -> None:
        """Which other unfinished runs this one replaces, and which it leaves to be resumed.

        A complete run replaces a run of which it has every item (its own records, a
        resumed run's kept ones included), or one that finished nothing; a run it covers
        only in part (after ``--lf`` or ``-k``) keeps its journal, so no finished record
        goes unless its item ran again.
        """
        from pytest_ragbench.run.resume import kept_records

        complete = self.status is not None and self.status.status == "complete"
        own = self.journal.path if self.journal is not None else None
        for other in journal_mod.unfinished(self.settings.report_dir, besides=own):
            finished = kept_records(other)
            if complete and (not finished or other.items() <= self.records.keys()):
                self.replaced_runs.append(other.path)
            else:
                self.other_runs.append({"id": other.run_id, "finished_items": len(finished)})

    def _finish_journal(self) -> None:
        """A complete run removes its journal (and the unfinished runs it replaces)."""
        if self.journal is None or self.status is None or self.status.status != "complete":
            return
        wrote = {p.name for p in self.written}
        if not {"items.jsonl", "results.json"} <= wrote:
            return  # the journal still holds the records the files do not
        self.journal.close()
        journal_mod.remove([self.journal.path, *self.replaced_runs], self.problems)

    def _warn_partial_baseline(self) -> None:
        import warnings

        baseline = (self.document or {}).get("baseline") or {}
        if baseline.get("status") == "interrupted":
            from pytest_ragbench.results.verdict import partial_baseline_text

            with contextlib.suppress(Exception):
                warnings.warn(RagbenchReportWarning(
                    f"ragbench: {partial_baseline_text(baseline)}"), stacklevel=1)

    def _build(self, session: pytest.Session, records: list[ItemRecord]) -> dict[str, Any]:
        from pytest_ragbench.render.files import run_info
        from pytest_ragbench.results import document as document_mod
        from pytest_ragbench.results import sections

        found = {**self.worker_components, **components_mod.components(self.config)}
        run = run_info(self.config.rootpath, self.run_id)
        if self.status is not None:
            run.update(self.status.as_run_keys())
            if self.status.status == "interrupted" and self.selected is not None:
                run["not_run_items"] = sorted(self.selected - self.records.keys())
        if self.other_runs:
            run["unfinished_runs"] = self.other_runs
        if self.resume is not None:
            kept = len(self.resume.kept)
            run["resumed"] = {"sessions": self.resume.sessions + 1, "kept_items": kept,
                              "run_now": len(records) - kept}
        settings, gate_list = self.settings, self.gates
        if self.settings.shard:
            from pytest_ragbench.run import shards

            shard = shards.parse_shard(self.settings.shard)
            run["shard"] = {"index": shard.index, "total": shard.total,
                            "balanced_by": str(self.settings.shard_durations)
                            if self.settings.shard_durations else None,
                            "settings": shards.comparable_settings(self._public_settings(),
                                                                   self.config.rootpath)}
            # the gates need every item: decided when the shards are merged
            settings = dataclasses.replace(settings, gate="mean", fail_on=None)
            gate_list = []
        if self.merged is not None:
            found = {**found, **self.merged.components()}
            run["merged"] = {"total": self.merged.total,
                             "shards": [{"index": s.shard.get("index"), "folder": str(s.folder),
                                         "run_id": s.run.get("id")}
                                        for s in self.merged.shards],
                             "missing": self.merged.missing_shards()}
        run["exit_status"] = int(session.exitstatus)
        sequential = self.sequential
        if sequential is not None:
            from pytest_ragbench.run import sequential as sequential_mod

            data = sequential.section_data(records)
            run["sequential"] = {k: data[k] for k in ("items_run", "items_not_needed",
                                                      "decided_after")}

        def report_sections(typed: Any) -> list[Any]:
            found = sections.from_hook(self.config, typed, self.problems)
            if sequential is not None:
                found = [sequential_mod.report_section(data), *found]
            return found

        self.results = document_mod.assemble(
            records, settings, run=run,
            components=components_mod.ordered(found), baseline=self.baseline,
            gate_list=gate_list, labels=self.labels, report_sections=report_sections,
            sequential=sequential.gates.decisions()
            if sequential is not None and sequential.gates is not None else None)
        if settings is not self.settings:  # the shard's own settings, as given
            self.results.config["gate"] = self.settings.gate
        self.problems += self.results.problems
        return self.results.to_dict()

    def _report_checks(self, session: pytest.Session, document: dict[str, Any]) -> None:
        testcases.emit(session, document, self.settings.report_dir / "results.json",
                       gated=self.settings.fails_on("regression"), problems=self.problems)

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
                warnings.warn(RagbenchReportWarning(scrub(f"ragbench report: {problem}")),
                              stacklevel=1)
        self._warned = len(self.problems)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any) -> tuple[str, str, str] | None:
        """Gates and regressions are counted under their own words in the last line."""
        return teststatus(report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the ``ragbench`` section (a part that fails is named, the rest printed)."""
        if self.document is None and not self.problems:
            return
        terminalreporter.section("ragbench")
        if self.document is not None:
            from pytest_ragbench.render.terminal import render

            before = len(self.problems)
            lines = self._guard("the terminal summary", lambda: render(
                self.document or {}, self.written, self.settings.report_dir,
                problems=self.problems)) or []
            for line in lines:
                red = line.startswith(("FAILED", "verdict: FAILED", "verdict: INTERRUPTED")) \
                    or ": MISSED," in line
                terminalreporter.write_line(scrub(line), red=red, bold=red)
            if len(self.problems) > before:
                self._warn_problems()
        for problem in self.problems:
            terminalreporter.write_line(scrub(f"ragbench: {problem}"), yellow=True)



class RagbenchReportWarning(UserWarning):
    """A part of the ragbench report could not be made; the rest was."""


def _worker_id(node: Any) -> str | None:
    return getattr(getattr(node, "gateway", None), "id", None)
