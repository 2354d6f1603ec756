"""One pytester project for a ragbench run: write its files, run pytest, read its reports.

A test that runs pytest on a ragbench project builds it through :class:`RagbenchProject`::

    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", CASES_YAML)
    project.run("--ragbench", "-q").assert_outcomes(passed=3)
    assert project.items_by_case()["lakers_points"]["status"] == "passed"

Anything else of :class:`pytest.Pytester` (``runpytest``, ``makepyfile``, ``mkdir``, ...)
is reached through the project, so a test reads ``project.runpytest(...)`` as before.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_scores_db

REPORT = ".ragbench"  # the default report dir (--ragbench-report=DIR moves it)


def validate_results(path: Path) -> dict[str, Any]:
    """``results.json`` at ``path``, checked against the schema the package ships.

    The schema written beside it must be the shipped one too. Every run of a project
    (:meth:`RagbenchProject.run`) and every read of its results passes through here.
    """
    from pytest_ragbench.results.document import SCHEMA_FILE, schema_text

    data: dict[str, Any] = json.loads(path.read_text())
    beside = path.parent / SCHEMA_FILE
    assert beside.is_file(), f"{beside} was not written beside {path}"
    assert json.loads(beside.read_text()) == json.loads(schema_text()), \
        f"{beside} is not the shipped schema"
    problems = schema_problems(data)
    assert not problems, f"{path} does not match results.schema.json: " + "; ".join(problems)
    differ = entry_problems(data)
    assert not differ, f"{path}: not the typed entries' objects: " + "; ".join(differ[:5])
    return data


def entry_problems(document: dict[str, Any]) -> list[str]:
    """The metric cells, gates and comparisons that the typed entries do not read back as they are.

    An object with a key its entry lacks, or without one it has, is named by its path.
    """
    from pytest_ragbench.results.entries import Comparison, Entry, GateVerdict, MetricStats

    found: list[str] = []

    def check(kind: type[Entry], value: dict[str, Any], where: str) -> None:
        if kind.from_dict(value).to_dict() != value:
            found.append(where)

    for kind, by_metric in (document.get("metrics") or {}).items():
        for metric, cell in by_metric.items():
            check(MetricStats, cell, f"metrics/{kind}/{metric}")
    for kind, by_field in (document.get("breakdowns") or {}).items():
        for field, by_value in by_field.items():
            for value, by_metric in by_value.items():
                for metric, cell in by_metric.items():
                    check(MetricStats, cell, f"breakdowns/{kind}/{field}/{value}/{metric}")
    for name, by_kind in (document.get("comparisons") or {}).items():
        for kind, by_metric in by_kind.items():
            for metric, comparison in by_metric.items():
                check(Comparison, comparison, f"comparisons/{name}/{kind}/{metric}")
    for index, comparison in enumerate(document.get("regressions") or ()):
        check(Comparison, comparison, f"regressions/{index}")
    for index, gate in enumerate(document.get("gates") or ()):
        check(GateVerdict, gate, f"gates/{index}")
    return found


def schema_problems(document: dict[str, Any]) -> list[str]:
    """Where a results document (as JSON) breaks the shipped schema (the first five)."""
    import jsonschema

    from pytest_ragbench.results.document import schema_text

    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    errors = sorted(validator.iter_errors(json.loads(json.dumps(document))), key=str)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
            for e in errors[:5]]


class RagbenchProject:
    """A ragbench project in a pytester directory: case files, settings, runs and reports."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester

    def __getattr__(self, name: str) -> Any:
        """Everything else is the underlying pytester's (``runpytest``, ``makepyfile``...)."""
        return getattr(self.pytester, name)

    @property
    def path(self) -> Path:
        """The project's root directory."""
        return Path(self.pytester.path)

    # -- writing the project ---------------------------------------------------------------

    def cases_dir(self) -> Path:
        """``test_cases/``, made if missing (a project whose case files come later)."""
        folder = self.path / "test_cases"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def cases(self, name: str, content: str | list[dict[str, Any]]) -> Path:
        """Write ``test_cases/<name>``: text as given, a list of records as JSON lines."""
        path = self.path / "test_cases" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(content, str):
            content = "".join(json.dumps(record) + "\n" for record in content)
        path.write_text(content, encoding="utf-8")
        return path

    def corpus(self, documents: dict[str, str]) -> Path:
        """Write documents into ``test_cases/corpus/`` (name: text)."""
        folder = self.path / "test_cases" / "corpus"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in documents.items():
            (folder / name).write_text(text, encoding="utf-8")
        return folder

    def ini(self, text: str = "", **keys: str | int | float) -> RagbenchProject:
        """Write ``pytest.ini``: a ``[pytest]`` section with ``keys`` and then ``text``."""
        if text.lstrip().startswith("[pytest]") and not keys:
            self.pytester.makeini(text)  # a whole ini file, as given
            return self
        lines = ["[pytest]"] + [f"{key} = {value}" for key, value in keys.items()]
        self.pytester.makeini("\n".join(lines) + "\n" + text)
        return self

    def conftest(self, source: str) -> RagbenchProject:
        """Write the project's ``conftest.py``."""
        self.pytester.makeconftest(source)
        return self

    def gates(self, toml: str) -> Path:
        """Write ``test_cases/ragbench.toml`` (thresholds and session gates)."""
        path = self.path / "test_cases" / "ragbench.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(toml, encoding="utf-8")
        return path

    def pyproject(self, toml: str) -> Path:
        """Write ``pyproject.toml`` (its ``[tool.ragbench]`` tables)."""
        path = self.path / "pyproject.toml"
        path.write_text(toml, encoding="utf-8")
        return path

    def scores_db(self, name: str = "scores.db") -> Path:
        """The small teams/scores SQLite database (:func:`tests.helpers.make_scores_db`)."""
        return make_scores_db(self.path / name)

    # -- running ---------------------------------------------------------------------------

    def run(self, *args: str, subprocess: bool = False,
            timeout: float | None = None) -> pytest.RunResult:
        """Run pytest in the project: in-process, or in a fresh interpreter."""
        if subprocess:
            result = self.pytester.runpytest_subprocess(*args, timeout=timeout)
        else:
            result = self.pytester.runpytest(*args)
        reports = [a.partition("=")[2] for a in args if a.startswith("--ragbench-report=")]
        for report in reports or [REPORT]:
            found = self.path / report / "results.json"
            if found.is_file() and found.stat().st_mtime >= self._started(result):
                validate_results(found)
        return result

    @staticmethod
    def _started(result: pytest.RunResult) -> float:
        """When the run began (a results.json older than that is an earlier run's)."""
        import time

        return time.time() - result.duration - 1.0

    # -- reading the reports ---------------------------------------------------------------

    def report_dir(self, report: str = REPORT) -> Path:
        """The report dir (``.ragbench`` unless the run moved it)."""
        return self.path / report

    def results(self, report: str = REPORT) -> dict[str, Any]:
        """The session's ``results.json`` (checked against the shipped schema)."""
        return validate_results(self.report_dir(report) / "results.json")

    def items(self, report: str = REPORT) -> list[dict[str, Any]]:
        """The session's ``items.jsonl`` records, in file order."""
        text = (self.report_dir(report) / "items.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    def items_by_case(self, report: str = REPORT, kind: str | None = None
                      ) -> dict[str, dict[str, Any]]:
        """The ``items.jsonl`` records by case id (only ``kind``'s, if given)."""
        return {record["case_id"]: record for record in self.items(report)
                if kind is None or record["kind"] == kind}

    def items_by_name(self, report: str = REPORT) -> dict[str, dict[str, Any]]:
        """The ``items.jsonl`` records by test name (``kind[id]``, the node id's last part)."""
        return {record["nodeid"].rpartition("::")[2]: record for record in self.items(report)}

    def leaderboard(self, report: str = REPORT) -> list[dict[str, str]]:
        """The rows of ``leaderboard.csv``, by column name."""
        with (self.report_dir(report) / "leaderboard.csv").open(newline="") as handle:
            return list(csv.DictReader(handle))

    def leaderboard_rows(self, report: str = REPORT) -> list[list[str]]:
        """The rows of ``leaderboard.csv`` as written, header first."""
        with (self.report_dir(report) / "leaderboard.csv").open(newline="") as handle:
            return list(csv.reader(handle))

    def html(self, report: str = REPORT) -> str:
        """The text of ``report.html``."""
        return (self.report_dir(report) / "report.html").read_text(encoding="utf-8")

    def junit(self, name: str = "junit.xml") -> ET.Element:
        """The ``<testsuite>`` of a ``--junitxml`` file (relative to the project)."""
        suite = ET.parse(self.path / name).getroot().find("testsuite")
        assert suite is not None, f"{name} has no <testsuite>"
        return suite
