"""Report sections: what a kind or a plugin adds to the terminal, report.html and results.json.

A section is returned by the hook ``pytest_ragbench_report_sections(config, document)``
(hookspecs.py). It has a title, a table (the first row is the header) and lines of text,
rendered by the shared formatter (:mod:`pytest_ragbench.render.text`), and JSON ``data``
that results.json holds under the section's ``key``. It may also write files into the
report dir (``files``: name to a function that writes the path it is given) and add rows
to leaderboard.csv. More parts are optional: ``alarms`` (lines printed first in the
terminal summary and at the top of report.html), ``failures`` (lines that fail the session,
added to results.json's ``failures``), ``checks`` (session checks run as test items, so
JUnit XML and the last line count them: render/testcases.py) and ``plots``
(estimates with their intervals over an ordered axis, drawn in report.html). The built-in
BEIR, RAGCSV, robustness and traffic sections come through the same hook
(:mod:`pytest_ragbench.kinds.report_sections`).

In results.json, ``sections`` lists each section (key, title, table, text, the files it
wrote, its leaderboard rows): the terminal and report.html draw sections from that list
alone, so a saved document renders without the plugin that made it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]*\Z")
OUTCOMES = ("passed", "failed", "skipped", "found")


@dataclass(frozen=True)
class LeaderboardRow:
    """One row a section adds to leaderboard.csv (time, run id and status are added)."""

    system: str
    kind: str
    dataset: str
    metric: str
    n: int | None
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class SectionCheck:
    """One check a section adds to the session's checks (a testcase of JUnit XML).

    ``name``: the testcase's name (``trigger[traffic.no_results]``). ``check``: its type,
    the word the last line counts it under. ``outcome``: ``passed``, ``failed`` (fails the
    session), ``skipped`` (not checked) or ``found`` (reported, fails nothing). ``line``:
    its one-line message. ``properties``: the ``ragbench.*`` JUnit properties, in order.
    """

    name: str
    check: str
    outcome: str
    line: str
    properties: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The check's entry in its section's ``checks``."""
        return {"name": self.name, "check": self.check, "outcome": self.outcome,
                "line": self.line, "properties": dict(self.properties)}


@dataclass(frozen=True)
class BandPanel:
    """One panel of an :class:`BandPlot`: an estimate and its interval at each point."""

    title: str
    mean: Sequence[float | None]
    low: Sequence[float | None]
    high: Sequence[float | None]


@dataclass(frozen=True)
class BandPlot:
    """Estimates over an ordered axis (``x``), one panel each, the interval as a band."""

    x: Sequence[str]
    panels: Sequence[BandPanel]

    def to_json(self) -> dict[str, Any]:
        """The plot's entry in its section's ``plots``: what report.html draws."""
        return {"x": list(self.x),
                "panels": [{"title": p.title, "mean": list(p.mean), "low": list(p.low),
                            "high": list(p.high)} for p in self.panels]}


@dataclass(frozen=True)
class ReportSection:
    """One section of the report.

    ``key``: where results.json holds ``data`` (lower-case letters, digits and ``_``; not a
    key the document has already). ``title``: the heading (the terminal prints it as the
    section's first line). ``table``: rows of cells, the header first; numbers are
    formatted like every other table's, text is printed as it is. ``text``: lines printed
    after the table. ``files``: ``{file name: write(path)}`` for files of the report dir.
    ``alarms``: lines for the top of the summary and the page; ``failures``: lines that
    fail the session (they join results.json's ``failures``, as does the line of each
    failed check); ``checks``: session checks (:class:`SectionCheck`); ``plots``: figures
    of report.html (:class:`BandPlot`).
    """

    key: str
    title: str
    data: Any = None
    table: Sequence[Sequence[Any]] = ()
    text: Sequence[str] = ()
    files: Mapping[str, Callable[[Path], object]] = field(default_factory=dict)
    leaderboard: Sequence[LeaderboardRow] = ()
    alarms: Sequence[str] = ()
    failures: Sequence[str] = ()
    checks: Sequence[SectionCheck] = ()
    plots: Sequence[BandPlot] = ()

    def to_json(self) -> dict[str, Any]:
        """The section's entry in results.json's ``sections`` (its data sits under ``key``)."""
        return {"key": self.key, "title": self.title,
                "table": [list(row) for row in self.table], "text": list(self.text),
                "files": sorted(self.files),
                "leaderboard": [[r.system, r.kind, r.dataset, r.metric, r.n, r.mean,
                                 r.ci_low, r.ci_high] for r in self.leaderboard],
                "alarms": [str(line) for line in self.alarms],
                "checks": [check.to_json() for check in self.checks],
                "plots": [plot.to_json() for plot in self.plots]}


def failure_lines(section: ReportSection) -> list[str]:
    """The lines with which ``section`` fails the session: its failures, its failed checks."""
    lines = [str(line) for line in section.failures]
    return lines + [c.line for c in section.checks
                    if c.outcome == "failed" and c.line not in lines]


def flatten(results: Iterable[Any]) -> list[Any]:
    """The hook's results (a section, a list of them, or None per implementation) in order."""
    found: list[Any] = []
    for result in results:
        if result is None:
            continue
        found += list(result) if isinstance(result, list | tuple) else [result]
    return found


def accepted(found: Iterable[Any], taken: Iterable[str], problems: list[str]
             ) -> list[ReportSection]:
    """The valid sections; each one left out is named in ``problems``."""
    keys = set(taken)
    kept: list[ReportSection] = []
    for section in found:
        # by name: a module imported afresh (pytester's in-process runs) has its own class
        if not isinstance(section, ReportSection) \
                and type(section).__qualname__ != ReportSection.__qualname__:
            problems.append(f"a report section must be a ReportSection, not "
                            f"{type(section).__name__}: left out")
            continue
        if not isinstance(section.key, str) or not KEY_PATTERN.match(section.key):
            problems.append(f"report section {section.key!r}: the key must be lower-case "
                            "letters, digits and _: left out")
            continue
        bad = [n for n in section.files if not isinstance(n, str) or not n
               or "/" in n or "\\" in n or n.startswith(".")]
        if bad:
            problems.append(f"report section {section.key!r}: a file name must be a plain "
                            f"name in the report dir, not {bad[0]!r}: left out")
            continue
        outcomes = [c.outcome for c in section.checks]
        if any(o not in OUTCOMES for o in outcomes):
            problems.append(f"report section {section.key!r}: a check's outcome must be one "
                            f"of {', '.join(OUTCOMES)}, not "
                            f"{next(o for o in outcomes if o not in OUTCOMES)!r}: left out")
            continue
        if section.key in keys:
            problems.append(f"report section {section.key!r}: results.json has that key "
                            "already: left out")
            continue
        keys.add(section.key)
        kept.append(section)
    return kept


def from_hook(config: Any, document: Any, problems: list[str]) -> list[Any]:
    """Each implementation's sections, in the hook's call order; one that raises is named."""
    hook = config.hook.pytest_ragbench_report_sections
    arguments = {"config": config, "document": document}
    found: list[Any] = []
    for impl in reversed(hook.get_hookimpls()):  # pluggy calls the last one first
        try:
            result = impl.function(*(arguments[name] for name in impl.argnames))
            found += flatten([result])
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            problems.append(f"the report sections of {impl.plugin_name} could not be made "
                            f"({detail})")
    return found
