"""The run's report: the typed results document, its files, testcases, warnings, terminal.

Nothing here may fail the session: a part that breaks becomes one problem line naming
it (and a :class:`RagbenchReportWarning`), and the other parts are still done. Gates and
regressions become test reports before ``--junitxml`` writes its file, so they reach it
as testcases.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.redact import scrub
from pytest_ragbench.render import testcases
from pytest_ragbench.render.testcases import teststatus
from pytest_ragbench.systems import components as components_mod

if TYPE_CHECKING:
    from pytest_ragbench.results.records import ItemRecord
    from pytest_ragbench.run.session import RagbenchSession


class RagbenchReportWarning(UserWarning):
    """A part of the ragbench report could not be made; the rest was."""


class SessionReport:
    """Builds ``run.document`` from the records, writes it, and reports it."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run
        self._warned = 0  # problems already issued as warnings

    def write(self, session: pytest.Session, records: list[ItemRecord],
              plots_ahead: dict[str, Any] | None) -> bool:
        """items.jsonl, the results document and the report files; False: no document."""
        from pytest_ragbench.render import files

        run = self.run
        folder = run.settings.report_dir
        tag = {"id": run.run_id, "status": run.status.status if run.status else None}
        if run.write_files:  # files of the earlier run go first: never two runs side by side
            files.remove_stale(folder, files.previous_run_files(folder), run.problems)
            run.guard(f"writing {folder / 'items.jsonl'}",
                      lambda: run.written.append(files.write_items(folder / "items.jsonl",
                                                                   records, tag)))
        run.document = run.guard("building the results document",
                                 lambda: self._build(session, records))
        if run.document is None:
            return False
        if run.write_files:
            run.written += files.write_all(run.document, records, run.settings, run.problems,
                                           items_written=bool(run.written),
                                           plots_ahead=plots_ahead,
                                           sections=run.results.sections
                                           if run.results is not None else ())
        return True

    def conclude(self, session: pytest.Session) -> None:
        """Fail the session on a failure, report gates and regressions, warn the problems."""
        run = self.run
        document = run.document or {}
        if document.get("failures") and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        run.guard("reporting gates and regressions as test reports",
                  lambda: testcases.emit(session, document,
                                         run.settings.report_dir / "results.json",
                                         gated=run.settings.fails_on("regression"),
                                         problems=run.problems))
        self.warn_problems()
        self._warn_partial_baseline()

    def _build(self, session: pytest.Session, records: list[ItemRecord]) -> dict[str, Any]:
        """The typed document (``run.results``) and its serialised form."""
        from pytest_ragbench.render.files import run_info
        from pytest_ragbench.results import document as document_mod
        from pytest_ragbench.results import sections

        run = self.run
        found = {**run.worker_components, **components_mod.components(run.config)}
        info = run_info(run.config.rootpath, run.run_id)
        if run.status is not None:
            info.update(run.status.as_run_keys())
            if run.status.status == "interrupted" and run.selected is not None:
                info["not_run_items"] = sorted(run.selected - run.records.keys())
        if run.other_runs:
            info["unfinished_runs"] = run.other_runs
        if run.resume is not None:
            kept = len(run.resume.kept)
            info["resumed"] = {"sessions": run.resume.sessions + 1, "kept_items": kept,
                               "run_now": len(records) - kept}
        settings, gate_list = run.settings, run.gates
        if run.settings.shard:
            from pytest_ragbench.run import shards

            shard = shards.parse_shard(run.settings.shard)
            info["shard"] = {"index": shard.index, "total": shard.total,
                             "balanced_by": str(run.settings.shard_durations)
                             if run.settings.shard_durations else None,
                             "settings": shards.comparable_settings(run.public_settings(),
                                                                    run.config.rootpath)}
            # the gates need every item: decided when the shards are merged
            settings = dataclasses.replace(settings, gate="mean", fail_on=None)
            gate_list = []
        if run.merged is not None:
            found = {**found, **run.merged.components()}
            info["merged"] = {"total": run.merged.total,
                              "shards": [{"index": s.shard.get("index"),
                                          "folder": str(s.folder), "run_id": s.run.get("id")}
                                         for s in run.merged.shards],
                              "missing": run.merged.missing_shards()}
        info["exit_status"] = int(session.exitstatus)
        sequential = run.sequential
        if sequential is not None:
            from pytest_ragbench.run import sequential as sequential_mod

            data = sequential.section_data(records)
            info["sequential"] = {k: data[k] for k in ("items_run", "items_not_needed",
                                                       "decided_after")}

        def report_sections(typed: Any) -> list[Any]:
            found = sections.from_hook(run.config, typed, run.problems)
            if sequential is not None:
                found = [sequential_mod.report_section(data), *found]
            return found

        run.results = document_mod.assemble(
            records, settings, run=info,
            components=components_mod.ordered(found), baseline=run.baseline,
            gate_list=gate_list, labels=run.labels, report_sections=report_sections,
            sequential=sequential.gates.decisions()
            if sequential is not None and sequential.gates is not None else None)
        if settings is not run.settings:  # the shard's own settings, as given
            run.results.config["gate"] = run.settings.gate
        run.problems += run.results.problems
        return run.results.to_dict()

    def warn_problems(self) -> None:
        """Each problem also as a pytest warning (shown in the warnings summary)."""
        import warnings

        problems = self.run.problems
        for problem in problems[self._warned:]:
            # with -W error the warning raises: the line in the ragbench section says it
            with contextlib.suppress(Exception):
                warnings.warn(RagbenchReportWarning(scrub(f"ragbench report: {problem}")),
                              stacklevel=1)
        self._warned = len(problems)

    def _warn_partial_baseline(self) -> None:
        import warnings

        baseline = (self.run.document or {}).get("baseline") or {}
        if baseline.get("status") == "interrupted":
            from pytest_ragbench.results.verdict import partial_baseline_text

            with contextlib.suppress(Exception):
                warnings.warn(RagbenchReportWarning(
                    f"ragbench: {partial_baseline_text(baseline)}"), stacklevel=1)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any) -> tuple[str, str, str] | None:
        """Gates and regressions are counted under their own words in the last line."""
        return teststatus(report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the ``ragbench`` section (a part that fails is named, the rest printed)."""
        run = self.run
        if run.document is None and not run.problems:
            return
        terminalreporter.section("ragbench")
        if run.document is not None:
            from pytest_ragbench.render.terminal import render

            before = len(run.problems)
            lines = run.guard("the terminal summary", lambda: render(
                run.document or {}, run.written, run.settings.report_dir,
                problems=run.problems)) or []
            for line in lines:
                red = line.startswith(("FAILED", "verdict: FAILED", "verdict: INTERRUPTED")) \
                    or ": MISSED," in line
                terminalreporter.write_line(scrub(line), red=red, bold=red)
            if len(run.problems) > before:
                self.warn_problems()
        for problem in run.problems:
            terminalreporter.write_line(scrub(f"ragbench: {problem}"), yellow=True)
