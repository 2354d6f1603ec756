"""Session checks as test reports, so JUnit XML and pytest's summary line count them.

At the end of the session the controller sends one ``call`` and one ``teardown``
:class:`CheckReport` per gate, per judged metric (its unscored share against
``--ragbench-max-unscored``) and per regression found against a baseline through
``pytest_runtest_logreport``, before ``--junitxml`` writes its file: each becomes a
``<testcase>`` (``ragbench.gate[vector.semantic_similarity]``), failed when it fails the
session, with the terminal's one-line message, so the XML's ``failures`` agrees with the
exit code. ``pytest_report_teststatus`` files them under their own words, so the last
line reads ``291 passed, 2 gates missed`` instead of counting them as tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

CHECK_ATTRIBUTE = "ragbench_check"  # "gate", "threshold", "judged" or "regression"


class CheckReport(pytest.TestReport):
    """A gate or a regression, reported like a test."""

    ragbench_category = ""  # the words of the summary line it is counted under, if any

    @property
    def count_towards_summary(self) -> bool:
        """Only what the summary line names counts: a passed gate is no extra test."""
        return bool(self.ragbench_category)


def _testcase_name(text: str) -> str:
    return " ".join(str(text).replace(" [", "[").split())


def gate_reports(document: dict[str, Any], location: str) -> Iterator[tuple[CheckReport, str]]:
    """``(report, category)`` of every gate checked (a gate not checked passes)."""
    # lazy: kept out of a plain pytest run
    from pytest_ragbench.report.gates import gate_line

    for verdict in document.get("gates") or []:
        line = gate_line(verdict)
        kind = "threshold" if verdict.get("source") == "threshold" else "gate"
        outcome = {False: "failed", None: "skipped"}.get(verdict.get("passed"), "passed")
        properties = [("ragbench.check", kind), ("ragbench.message", line),
                      ("ragbench.value", verdict.get("value")),
                      ("ragbench.bound", verdict.get("bound")), ("ragbench.n", verdict.get("n"))]
        yield _report(f"ragbench::{kind}[{_testcase_name(verdict['gate'])}]", location,
                      outcome, line, properties, kind), outcome


def judged_reports(document: dict[str, Any], location: str
                   ) -> Iterator[tuple[CheckReport, str]]:
    """``(report, category)`` of every judged metric: failed when too many went unscored."""
    # lazy: kept out of a plain pytest run
    from pytest_ragbench.report.judging import failure_line

    judge = document.get("judge") or {}
    limit = float(judge.get("max_unscored", 0.2))
    for kind, metrics in sorted((judge.get("metrics") or {}).items()):
        for metric, entry in sorted(metrics.items()):
            if entry.get("over_limit"):
                outcome, line = "failed", failure_line(kind, metric, entry, limit)
            else:
                outcome = "passed"
                line = (f"judged metric {kind}.{metric}: {entry.get('n_unscored')}/"
                        f"{entry.get('n_items')} items unscored, at most "
                        f"--ragbench-max-unscored {limit:g}")
            properties = [("ragbench.check", "judged"), ("ragbench.message", line),
                          ("ragbench.unscored_share", entry.get("unscored_share"))]
            yield _report(f"ragbench::judged[{kind}.{metric}]", location, outcome, line,
                          properties, "judged"), outcome


def regression_reports(document: dict[str, Any], location: str, gated: bool
                       ) -> Iterator[tuple[CheckReport, str]]:
    """``(report, category)`` of every regression found; failed only when regressions fail."""
    # lazy: kept out of a plain pytest run
    from pytest_ragbench.report.gates import regression_line

    label = (document.get("baseline") or {}).get("label") or "baseline"
    for c in document.get("regressions") or []:
        line = regression_line(c, label)
        properties = [("ragbench.check", "regression"), ("ragbench.message", line),
                      ("ragbench.delta", c.get("delta")), ("ragbench.p_holm", c.get("p_holm"))]
        name = f"ragbench::regression[{c.get('name')}:{c.get('kind')}.{c.get('metric')}]"
        outcome = "failed" if gated else "passed"
        yield _report(name, location, outcome, line, properties, "regression"), outcome


def _report(nodeid: str, location: str, outcome: str, line: str,
            properties: list[tuple[str, Any]], check: str) -> CheckReport:
    longrepr: Any = None
    if outcome == "failed":
        longrepr = line
    elif outcome == "skipped":  # pytest's form of a skip: (path, line, reason)
        longrepr = (location, 0, f"Skipped: {line}")
    report = CheckReport(nodeid=nodeid, location=(location, None, nodeid.partition("::")[2]),
                         keywords={}, outcome=outcome,  # type: ignore[arg-type]
                         longrepr=longrepr, when="call",
                         user_properties=[(k, "" if v is None else v) for k, v in properties])
    setattr(report, CHECK_ATTRIBUTE, check)
    return report


def teardown(report: CheckReport) -> CheckReport:
    """The passing teardown that closes a check's testcase (and writes its properties)."""
    closing = CheckReport(nodeid=report.nodeid, location=report.location, keywords={},
                          outcome="passed", longrepr=None, when="teardown",
                          user_properties=report.user_properties)
    setattr(closing, CHECK_ATTRIBUTE, getattr(report, CHECK_ATTRIBUTE))
    return closing


def category(check: str, outcome: str, counts: dict[tuple[str, str], int]) -> str:
    """The summary line's words: ``gates missed``, ``judged metric unscored``, ``regression``.

    A passed or unchecked gate gets none (it is not counted); a regression that does not
    fail the session (no ``--ragbench-fail-on regression``) is still named, as found.
    """
    many = counts.get((check, outcome), 0) != 1
    if check == "regression":
        noun = "regressions" if many else "regression"
        return noun if outcome == "failed" else f"{noun} found"
    if outcome != "failed":
        return ""
    if check == "judged":
        return "judged metrics unscored" if many else "judged metric unscored"
    noun = {"gate": "gates" if many else "gate",
            "threshold": "thresholds" if many else "threshold"}.get(check, check)
    return f"{noun} missed"


def emit(config: pytest.Config, document: dict[str, Any], location: str, gated: bool) -> int:
    """Send every check's reports through ``pytest_runtest_logreport``; returns how many failed."""
    checks = [*gate_reports(document, location), *judged_reports(document, location),
              *regression_reports(document, location, gated)]
    counts: dict[tuple[str, str], int] = {}
    for report, outcome in checks:
        key = (getattr(report, CHECK_ATTRIBUTE), outcome)
        counts[key] = counts.get(key, 0) + 1
    failed = sum(report.failed for report, _ in checks)
    if failed:
        # pytest draws its last line red only when "failed" is among the terminal's
        # stats; the checks are counted under their own words, so add the key, empty.
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(terminal, "stats", None)
        if isinstance(stats, dict):
            stats.setdefault("failed", [])
    for report, outcome in checks:
        report.ragbench_category = category(getattr(report, CHECK_ATTRIBUTE), outcome, counts)
        config.hook.pytest_runtest_logreport(report=report)
        config.hook.pytest_runtest_logreport(report=teardown(report))
    return failed


def teststatus(report: Any) -> tuple[str, str, str] | None:
    """The ``pytest_report_teststatus`` answer for a check's report (None for others).

    No letter and no word: the ragbench section prints the checks' lines itself.
    """
    if not isinstance(report, CheckReport):
        return None
    return report.ragbench_category, "", ""
