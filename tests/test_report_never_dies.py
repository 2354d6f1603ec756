"""The report never kills the session, never loses data, never leaves a stale file current.

A part of the report is broken on purpose (one function of the report replaced by one
that raises, as a bug would): the session ends with the exit code its
items and gates give, one warning names the part, and every other file is written.
The last test is the session of the bug report: the real ``vector`` kind, a user's own
system returning five contexts of which one is relevant, so that every category scores
``id_context_precision`` 0.2 and means land a rounding step from their intervals.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragbench.render import html, plots, terminal
from pytest_ragbench.results import document
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

GATE = '[tool.ragbench.gates]\n"toy.token_f1" = 0.5\n'


def broken(*args: Any, **kwargs: Any) -> Any:
    """A report function with a bug (the sessions run in this process: monkeypatch reaches)."""
    raise ValueError("'xerr' must not contain negative values")


def _run_id(project: RagbenchProject) -> str:
    return str(project.results()["run"]["id"])


def test_a_plot_that_fails_is_one_warning_and_the_page_is_still_written(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATE)
    monkeypatch.setattr(plots, "interval_plot", broken)
    result = project.runpytest("--ragbench")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*RagbenchReportWarning: ragbench report: report.html: plot toy by category could not "
        "be drawn (ValueError: 'xerr' must not contain negative values)",
        "*= ragbench =*",
        "verdict: PASSED*",
        "report: .ragbench/ (items.jsonl, results.json, results.schema.json, leaderboard.csv, "
        "report.html)",
        "*12 passed, 1 warning, 1 gate passed in*"])
    page = project.html()
    assert _run_id(project) in page
    assert "plot toy by category could not be drawn" in page
    assert 'class="verdict passed"' in page and "ragbench-items" in page


def test_a_page_that_cannot_be_rendered_is_replaced_by_one_that_says_so(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATE)
    monkeypatch.setattr(html, "render", broken)
    result = project.runpytest("--ragbench")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*ragbench report: report.html could not be rendered "
                                 "(ValueError: *); a page saying so was written instead"])
    page = project.html()
    assert "report.html could not be rendered" in page and 'class="verdict passed"' in page
    assert project.results()["gates"][0]["passed"] is True


def test_a_document_that_cannot_be_built_removes_the_stale_files(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, 6)
    project.runpytest("--ragbench")
    folder = project.path / ".ragbench"
    assert (folder / "results.json").is_file() and (folder / "report.html").is_file()
    monkeypatch.setattr(document, "assemble", broken)
    first_four = (project.path / "test_cases" / "toy.jsonl").read_text().splitlines()[:4]
    project.cases("toy.jsonl", "".join(line + "\n" for line in first_four))
    result = project.runpytest("--ragbench")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*ragbench: building the results document failed "
                                 "(ValueError: *)"])
    assert len(project.items()) == 4  # this run's records are kept
    assert not (folder / "results.json").exists()  # the earlier run's are gone
    assert not (folder / "report.html").exists()


def test_a_terminal_part_that_fails_leaves_the_rest_of_the_section(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, 12, pyproject=GATE)
    monkeypatch.setattr(terminal, "PARTS", tuple(
        (name, broken if name == "the breakdowns" else part) for name, part in terminal.PARTS))
    result = project.runpytest("--ragbench", "-W", "error::UserWarning")
    assert result.ret == pytest.ExitCode.OK  # even where warnings are errors
    result.stdout.fnmatch_lines([
        "*= ragbench =*", "metrics: mean and 95% CI*", "gate toy.token_f1 >= 0.5: passed*",
        "verdict: PASSED*", "report: .ragbench/*",
        "ragbench: the terminal summary: the breakdowns could not be printed (ValueError: *)"])
    assert "toy by category" not in result.stdout.str()
    assert (project.path / ".ragbench" / "report.html").is_file()


CONFTEST_FIVE_CONTEXTS = '''
import time

import pytest

from pytest_ragbench.systems.protocols import Answer, Context


class FiveContexts:
    """A user's RAG app: five contexts, the first from the expected source."""

    def answer(self, question, history=None):
        time.sleep(0.05)
        contexts = tuple(Context(f"doc{i}", f"passage {i} about {question}", 1.0 - i / 10,
                                 {"source": f"s{i}.md"}) for i in range(5))
        return Answer(text=f"An answer about {question}", contexts=contexts, latency_s=1.5)


@pytest.fixture(scope="session")
def ragbench_system():
    return FiveContexts()
'''


def test_every_category_at_one_fifth_finishes_with_its_report(
        pytester: pytest.Pytester) -> None:
    cases = "".join(
        f"  - id: c{i}\n    category: {('simple', 'noisy', 'multi')[i % 3]}\n"
        f"    question: What about topic {i}?\n    ground_truth: Topic {i} is explained.\n"
        f"    expected_sources: [s0.md]\n    thresholds: {{}}\n" for i in range(15))
    project = RagbenchProject(pytester).conftest(CONFTEST_FIVE_CONTEXTS).ini()
    project.cases("vector.yaml", f"kind: vector\ncases:\n{cases}")
    result = project.run("--ragbench", "-p", "no:cacheprovider", subprocess=True)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "ragbench report:" not in result.stdout.str()  # no part of the report failed
    data = project.results()
    cells = [c["id_context_precision"] for c in data["breakdowns"]["vector"]["category"].values()]
    assert len(cells) == 3
    for cell in [data["metrics"]["vector"]["id_context_precision"], *cells]:
        assert cell["mean"] == pytest.approx(0.2, abs=1e-12)
    page = project.html()
    assert "vector.id_context_precision" not in page.split("id=plots")[0]  # no crash note
    assert page.count("<img ") >= 1  # the category intervals are drawn
    # the user's system is named by its class and module, and timed by the plugin
    assert data["components"]["system"] == "FiveContexts (conftest)"
    system = data["usage"]["system"]
    assert system["latency_p50_s"] == pytest.approx(1.5)  # what the system said
    assert 0.04 <= system["service_p50_s"] < 1.0  # what the plugin measured
    trace = data["items"][0]["answers"][0]
    assert [c["source"] for c in trace["contexts"]] == [f"s{i}.md" for i in range(5)]
    assert trace["contexts"][0]["id"] == "doc0" and trace["contexts"][1]["score"] == 0.9
    assert trace["latency_s"] == 1.5 and 0.04 <= trace["service_s"] < 1.0
