"""Session checks as test items, so every reporter, JUnit XML and pytest's last line count them.

At the end of the session the controller runs one :class:`CheckItem` per gate, per judged
metric (its unscored share against ``--ragbench-max-unscored``) and per regression found
against a baseline, under a session-level node ``ragbench``
(``ragbench::gate[vector.semantic_similarity]``), before ``--junitxml`` writes its file.
Each goes through the phases of a test (``logstart``, setup, call, teardown, one report per
phase, ``logfinish``), so reporters that follow a test's phases (allure-pytest,
teamcity-messages, pytest-html, pytest-sugar, VS Code's runner) show it like a test:
failed when it fails the session, with the terminal's one-line message as an assertion
failure, skipped when it could not be checked. ``pytest_report_teststatus`` files the
checks under their own words, so the last line reads ``291 passed, 2 gates missed,
15 gates passed`` and its numbers add up to the XML's ``tests``.

The reporting hooks are called one plugin at a time: a reporter that raises on a check is
named once in a warning, and every other reporter still gets every check.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHECK_ATTRIBUTE = "ragbench_check"  # "gate", "threshold", "judged" or "regression"
CATEGORY_ATTRIBUTE = "ragbench_category"  # the words of the last line it is counted under
JUNIT_PROPERTIES_INI = "ragbench_junit_properties"
# The hooks that report a test: called one plugin at a time (module docstring).
REPORTING_HOOKS = ("pytest_runtest_logstart", "pytest_runtest_logreport",
                   "pytest_runtest_logfinish")


class CheckMissed(AssertionError):
    """A gate, a judged metric or a regression that fails the session; the message says why."""


@dataclass(frozen=True)
class Check:
    """One check of the session: what it is, how it went, its one-line message."""

    name: str  # ``gate[vector.semantic_similarity]``
    check: str  # "gate", "threshold", "judged" or "regression"
    outcome: str  # "passed", "failed" or "skipped"
    line: str
    properties: tuple[tuple[str, Any], ...]


def _testcase_name(text: str) -> str:
    return " ".join(str(text).replace(" [", "[").split())


def gate_checks(document: dict[str, Any]) -> Iterator[Check]:
    """Every gate checked (a gate not checked is skipped)."""
    from pytest_ragbench.results.gates import gate_line

    for verdict in document.get("gates") or []:
        line = gate_line(verdict)
        kind = "threshold" if verdict.get("source") == "threshold" else "gate"
        outcome = {False: "failed", None: "skipped"}.get(verdict.get("passed"), "passed")
        properties = (("ragbench.check", kind), ("ragbench.message", line),
                      ("ragbench.value", verdict.get("value")),
                      ("ragbench.bound", verdict.get("bound")), ("ragbench.n", verdict.get("n")))
        yield Check(f"{kind}[{_testcase_name(verdict['gate'])}]", kind, outcome, line,
                    properties)


def judged_checks(document: dict[str, Any]) -> Iterator[Check]:
    """Every judged metric: failed when too many of its items went unscored."""
    from pytest_ragbench.results.judging import failure_line

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
            properties = (("ragbench.check", "judged"), ("ragbench.message", line),
                          ("ragbench.unscored_share", entry.get("unscored_share")))
            yield Check(f"judged[{kind}.{metric}]", "judged", outcome, line, properties)


def regression_checks(document: dict[str, Any], gated: bool) -> Iterator[Check]:
    """Every regression found; failed only when regressions fail the session."""
    from pytest_ragbench.results.gates import regression_line

    label = (document.get("baseline") or {}).get("label") or "baseline"
    for c in document.get("regressions") or []:
        line = regression_line(c, label)
        properties = (("ragbench.check", "regression"), ("ragbench.message", line),
                      ("ragbench.delta", c.get("delta")), ("ragbench.p_holm", c.get("p_holm")))
        name = f"regression[{c.get('name')}:{c.get('kind')}.{c.get('metric')}]"
        yield Check(name, "regression", "failed" if gated else "passed", line, properties)


def section_checks(document: dict[str, Any]) -> Iterator[Check]:
    """The checks the report sections add (the traffic kind's triggers and drifts)."""
    for section in document.get("sections") or ():
        if not isinstance(section, dict):
            continue
        for c in section.get("checks") or ():
            yield Check(c["name"], c["check"], c["outcome"], c["line"],
                        tuple((c.get("properties") or {}).items()))


def category(check: str, outcome: str, counts: dict[tuple[str, str], int]) -> str:
    """The last line's words: ``gates missed``, ``gates passed``, ``judged metric unscored``...

    Every check is named, so the numbers of the last line add up to the XML's ``tests``;
    a regression that does not fail the session (no ``--ragbench-fail-on regression``)
    is named as found.
    """
    many = counts.get((check, outcome), 0) != 1
    if check == "regression":
        noun = "regressions" if many else "regression"
        return noun if outcome == "failed" else f"{noun} found"
    if check == "judged":
        noun = "judged metrics" if many else "judged metric"
        return f"{noun} unscored" if outcome == "failed" else f"{noun} scored"
    if check in ("gate", "threshold"):
        noun = f"{check}s" if many else check
        return {"failed": f"{noun} missed", "skipped": f"{noun} not checked"}.get(
            outcome, f"{noun} passed")
    # a report section's check (results/sections.py): a trigger raised or quiet
    noun = f"{check}s" if many else check
    words = {"failed": "failed", "skipped": "not checked",
             "found": "raised" if check == "trigger" else "found",
             "passed": "quiet" if check in ("trigger", "drift") else "passed"}
    return f"{noun} {words.get(outcome, outcome)}"


class ChecksNode(pytest.Collector):
    """The session-level node ``ragbench`` the checks belong to; nothing is collected in it."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        """Nothing: the checks are made at the end of the session."""
        return []


class CheckItem(pytest.Item):
    """One check, run like a test at the end of the session."""

    def __init__(self, *, check: Check, results: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.results = results

    def runtest(self) -> None:
        """Fail with the check's line when it fails the session; skip when not checked."""
        if self.check.outcome == "failed":
            raise CheckMissed(self.check.line)
        if self.check.outcome == "skipped":
            pytest.skip(self.check.line)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        """The check's one line, no traceback of the plugin."""
        if isinstance(excinfo.value, CheckMissed):
            return self.check.line
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """The results file the check was made from."""
        return self.results, None, self.name


class Reporters:
    """Calls a hook one plugin at a time; a plugin that raises is named once in ``problems``."""

    def __init__(self, config: pytest.Config, problems: list[str]) -> None:
        self.config = config
        self.problems = problems
        self.failed: set[str] = set()

    def call(self, name: str, *, pytest_own: bool = True, skip: frozenset[str] = frozenset(),
             **kwargs: Any) -> None:
        """Call hook ``name`` with ``kwargs`` for each plugin, in pluggy's order.

        ``pytest_own=False`` leaves out pytest's own plugins; ``skip`` names others.
        """
        manager = self.config.pluginmanager
        hook = getattr(self.config.hook, name)
        plugins = list(dict.fromkeys(impl.plugin for impl in reversed(hook.get_hookimpls())))
        for plugin in plugins:
            plugin_name = manager.get_name(plugin) or type(plugin).__name__
            if plugin_name in skip or (not pytest_own and _is_pytest_own(plugin)):
                continue
            only = manager.subset_hook_caller(name, [p for p in plugins if p is not plugin])
            module = _module(plugin)
            who = f"the plugin {plugin_name!r}" + (f" ({module})" if module != plugin_name else "")
            self.guard(who, name, kwargs, functools.partial(only, **kwargs))

    def guard(self, who: str, hook: str, kwargs: dict[str, Any],
              action: Callable[[], Any]) -> Any:
        """Run ``action``; an exception becomes one problem line naming ``who`` raised it."""
        try:
            return action()
        except Exception as exc:  # a reporter's bug must not cost the others the checks
            if who not in self.failed:
                self.failed.add(who)
                nodeid = kwargs.get("nodeid") or getattr(kwargs.get("report"), "nodeid", "")
                detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                self.problems.append(f"{who} raised {detail} in {hook} for {nodeid}; the "
                                     "other reporters got every check")
            return None


def _module(plugin: object) -> str:
    """The module a plugin comes from (pytest-sugar registers as ``terminalreporter``)."""
    return plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__


def _is_pytest_own(plugin: object) -> bool:
    """A plugin of pytest itself (runner, capture, logging, the session...)."""
    return _module(plugin).partition(".")[0] in ("_pytest", "pytest")


def _run(item: CheckItem, reporters: Reporters, counts: dict[tuple[str, str], int]) -> bool:
    """Run one check through a test's phases; True when it failed.

    The session's tests are over: pytest's own runner, capture and logging are done with
    (and gone after an interruption), so the setup and teardown hooks reach the other
    plugins only, which follow a test through them (allure-pytest opens its result there).
    """
    config = item.config
    # The ragbench section prints the checks: no empty progress line for them.
    quiet = frozenset({"terminalreporter"})
    reporters.call("pytest_runtest_logstart", skip=quiet, nodeid=item.nodeid,
                   location=item.location)
    failed = False
    for when in ("setup", "call", "teardown"):
        if when == "setup":
            reporters.call("pytest_runtest_setup", pytest_own=False, item=item)
        elif when == "teardown":
            reporters.call("pytest_runtest_teardown", pytest_own=False, item=item, nextitem=None)
        runtest = item.runtest if when == "call" else _nothing
        call = pytest.CallInfo.from_call(runtest, when=when,
                                         reraise=(pytest.exit.Exception, KeyboardInterrupt))
        report = reporters.guard("a plugin's report maker", "pytest_runtest_makereport",
                                 {"nodeid": item.nodeid},
                                 functools.partial(config.hook.pytest_runtest_makereport,
                                                   item=item, call=call))
        if report is None:
            report = pytest.TestReport.from_item_and_call(item, call)
        _label(report, item, counts)
        failed = failed or report.failed
        reporters.call("pytest_runtest_logreport", report=report)
    reporters.call("pytest_runtest_logfinish", skip=quiet, nodeid=item.nodeid,
                   location=item.location)
    return failed


def _nothing() -> None:
    """A check's setup and teardown: it has no fixtures."""


def _label(report: pytest.TestReport, item: CheckItem, counts: dict[tuple[str, str], int]
           ) -> None:
    """Mark the report as a check's; a skip points at the results file, as the check does."""
    setattr(report, CHECK_ATTRIBUTE, item.check.check)
    if report.when == "call":
        setattr(report, CATEGORY_ATTRIBUTE,
                category(item.check.check, item.check.outcome, counts))
        if report.skipped:  # pytest's form of a skip: (path, line, reason)
            report.longrepr = (item.location[0], 0, f"Skipped: {item.check.line}")


def emit(session: pytest.Session, document: dict[str, Any], results: Path, gated: bool,
         problems: list[str]) -> int:
    """Run every check as a test at the end of the session; returns how many failed."""
    config = session.config
    checks = [*gate_checks(document), *judged_checks(document),
              *regression_checks(document, gated), *section_checks(document)]
    if not checks:
        return 0
    counts: dict[tuple[str, str], int] = {}
    for check in checks:
        counts[(check.check, check.outcome)] = counts.get((check.check, check.outcome), 0) + 1
    if any(check.outcome == "failed" for check in checks):
        # pytest draws its last line red only when "failed" is among the terminal's
        # stats; the checks are counted under their own words, so add the key, empty.
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(terminal, "stats", None)
        if isinstance(stats, dict):
            stats.setdefault("failed", [])
    reporters = Reporters(config, problems)
    _announce(config, len(checks), reporters)
    node = ChecksNode.from_parent(session, name="ragbench", nodeid="ragbench")
    with_properties = bool(config.getini(JUNIT_PROPERTIES_INI))
    failed = 0
    for check in checks:
        item = CheckItem.from_parent(node, name=check.name, check=check, results=results)
        if with_properties:
            item.user_properties += [(k, "" if v is None else v) for k, v in check.properties]
        failed += _run(item, reporters, counts)
    return failed


def _announce(config: pytest.Config, how_many: int, reporters: Reporters) -> None:
    """Add the checks to the counts of collected items that reporters announced.

    pytest-sugar draws its progress bar from ``tests_count``; teamcity-messages sent
    ``testCount`` for the items, and PyCharm adds each ``testCount`` to its total.
    """
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    count = getattr(terminal, "tests_count", None)
    if terminal is not None and isinstance(count, int):
        terminal.tests_count = count + how_many
    messages = getattr(getattr(config, "_teamcityReporting", None), "teamcity", None)
    test_count = getattr(messages, "testCount", None)
    if callable(test_count):
        reporters.guard("teamcity-messages", "testCount", {},
                        functools.partial(test_count, how_many))


def teststatus(report: Any) -> tuple[str, str, str] | None:
    """The ``pytest_report_teststatus`` answer for a check's call report (None for others).

    No letter and no word: the ragbench section prints the checks' lines itself.
    """
    words = getattr(report, CATEGORY_ATTRIBUTE, None)
    if words is None or getattr(report, "when", None) != "call":
        return None
    return words, "", ""
