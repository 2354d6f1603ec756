"""The running progress line for RAGCSV rows: ``[00:01:23] 42/100 | Avg Acc=72.3% | ...``.

The ragcsv kind's ``controller_plugin``, registered under ``--ragbench`` where the reports
arrive: the records arrive on the test reports (replayed from the workers under xdist),
so the figures are the same either way; kind and system come from each record, and the
number of rows from the session's selection (``RagbenchSession.selected_count``). A line
``ragcsv [00:00:12] 13/26 | Avg Acc=41.2% | Pass(>=75%)=1/13`` is written after every
tenth of the rows (every row with ``-v``) and after the last one; ``Avg Acc`` is the mean of
the rows scored so far, ``Pass`` counts the rows at or above the pass mark (the item
threshold on ``accuracy`` when one is set, else the RAGCSV pass mark, 75). With ``RAGCSV_DEBUG``
the first row's prompt, answer and grade are printed once. Cheap to import.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_ragbench.results.records import REPORT_ATTRIBUTE

RAGCSV_PASS = 75.0  # the RAGCSV pass mark (kinds/ragcsv/report.py's blocks use it too)
KIND = "ragcsv"


@dataclass
class Tally:
    """The running figures of one system's rows."""

    total: int = 0
    done: int = 0
    scored: int = 0
    accuracy_sum: float = 0.0
    passed: int = 0
    bar: float = RAGCSV_PASS

    def add(self, record: dict[str, Any]) -> None:
        """Count one row's record."""
        self.done += 1
        limit = (record.get("thresholds") or {}).get("accuracy")
        if isinstance(limit, int | float) and not isinstance(limit, bool):
            self.bar = float(limit)
        value = (record.get("metrics") or {}).get("accuracy")
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value):
            self.scored += 1
            self.accuracy_sum += float(value)
            self.passed += value >= self.bar

    def line(self, elapsed: float) -> str:
        """The progress line: elapsed clock, rows done, mean accuracy, rows at the pass mark."""
        seconds = int(elapsed)
        clock = f"[{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}]"
        average = "-" if not self.scored else f"{self.accuracy_sum / self.scored:.1f}%"
        total = self.total if self.total >= self.done else "?"
        return (f"{clock} {self.done}/{total} | Avg Acc={average} | "
                f"Pass(>={self.bar:g}%)={self.passed}/{self.done}")


class RagcsvProgress:
    """Counts RAGCSV rows as their reports arrive and writes the progress line."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tallies: dict[str, Tally] = {}
        self.started = time.monotonic()
        self.first_start = True
        self.debug_shown = False

    def _tally(self, system: str | None) -> Tally:
        """The figures of ``system``'s rows; their number from the session's selection."""
        key = system or ""
        if key not in self.tallies:
            session = self.config.pluginmanager.get_plugin("ragbench-session")
            count = getattr(session, "selected_count", None)
            self.tallies[key] = Tally(total=count(KIND, system) if callable(count) else 0)
        return self.tallies[key]

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """Start the clock as the first item starts (also on an xdist controller)."""
        if self.first_start:
            self.first_start = False
            self.started = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a row when its record arrives; write the line at each tenth."""
        record = getattr(report, REPORT_ATTRIBUTE, None)
        if not isinstance(record, dict) or record.get("kind") != KIND:
            return
        tally = self._tally(record.get("system"))
        tally.add(record)
        writer = self.config.pluginmanager.get_plugin("terminalreporter")
        if writer is None or self.config.get_verbosity() < -1:
            return
        self._debug(writer, record)
        step = 1 if self.config.get_verbosity() > 0 else max(1, math.ceil(tally.total / 10))
        if tally.done % step == 0 or tally.done == tally.total:
            system = record.get("system")
            prefix = f"{KIND}[{system}]" if system else KIND
            _new_line(writer)
            writer.write_line(f"{prefix} {tally.line(time.monotonic() - self.started)}")

    def _debug(self, writer: Any, record: dict[str, Any]) -> None:
        """RAGCSV_DEBUG: the first row's prompt, answer and grade, once."""
        evidence = record.get("evidence") or {}
        if self.debug_shown or "prompt" not in evidence:
            return
        self.debug_shown = True
        accuracy = (record.get("metrics") or {}).get("accuracy")
        shown = f"{accuracy:.1f}" if isinstance(accuracy, int | float) else "unscored"
        grade = evidence.get("judge_reply")
        reply = "" if grade is None else f"; judge reply {grade!r}"
        lines = [f"RAGCSV_DEBUG {record.get('case_id')}: answer from "
                 f"{evidence.get('answer from')}",
                 "--- prompt ---", str(evidence["prompt"]), "--- answer ---",
                 str(evidence.get("got", "")), "--- grade ---",
                 f"accuracy {shown} ({evidence.get('accuracy_method', '')}){reply}"]
        _new_line(writer)
        for line in lines:
            writer.write_line(line)


def _new_line(writer: Any) -> None:
    """Start a line of our own, also after ``-q``'s dots (which the reporter does not track)."""
    writer.ensure_newline()
    if getattr(getattr(writer, "_tw", None), "width_of_current_line", 0):
        writer.write("\n")
