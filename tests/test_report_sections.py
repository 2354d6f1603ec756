"""A conftest.py adds a report section through ``pytest_ragbench_report_sections``.

The section reaches the terminal summary, report.html, results.json (its data under its
key, and its entry in ``sections``), the report dir (a file it writes) and
leaderboard.csv, without any change to the package; with pytest-xdist too (the hook runs
in the controller, over every worker's records). A section that breaks or is not valid
is left out with a warning that names it, and the rest of the report stands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import XDIST_MODES
from tests.toy_project import make_toy_project

SECTION = '''

from pytest_ragbench import LeaderboardRow, ReportSection


def pytest_ragbench_report_sections(config, document):
    toy = [r for r in document.records if r.kind == "toy"]
    exact = [r.metrics["exact_match"] for r in toy if "exact_match" in r.metrics]
    share = sum(exact) / len(exact)
    return ReportSection(
        key="exact_share", title="exact answers: share per category",
        data={"items": len(toy), "share": share},
        table=[["category", "items", "share"],
               *([c, sum(r.category == c for r in toy),
                  sum(r.metrics["exact_match"] for r in toy if r.category == c)
                  / sum(r.category == c for r in toy)]
                 for c in sorted({r.category for r in toy}))],
        text=[f"{sum(exact):g} of {len(exact)} answers were exact"],
        files={"exact_share.txt": lambda path: path.write_text(f"{share!r}\\n")},
        leaderboard=[LeaderboardRow("", "toy", "", "exact_share", len(exact), share)])
'''


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=["in-process", "xdist"])
def test_a_conftest_section_reaches_every_report(pytester: pytest.Pytester,
                                                 mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 8, conftest=SECTION)
    result = project.run("--ragbench", *mode)
    assert result.ret == pytest.ExitCode.OK
    results = project.results()  # validated against results.schema.json
    exact = [i["metrics"]["exact_match"] for i in results["items"]]
    share = sum(exact) / len(exact)
    assert results["exact_share"] == {"items": 8, "share": share}
    entry = next(s for s in results["sections"] if s["key"] == "exact_share")
    assert entry["title"] == "exact answers: share per category"
    assert entry["files"] == ["exact_share.txt"]
    # the built-in sections come first, through the same hook
    assert [s["key"] for s in results["sections"]] == ["robustness", "ragcsv", "beir",
                                                       "traffic", "exact_share"]

    output = result.stdout.str().splitlines()
    start = output.index("exact answers: share per category")
    head, *rows = output[start + 1:start + 1 + len(entry["table"])]
    assert head.split() == ["category", "items", "share"]
    categories = results["counts"]["toy"]["categories"]
    assert [row.split()[0] for row in rows] == sorted(categories)
    assert [row.split()[1] for row in rows] == [str(categories[c]["items"])
                                                for c in sorted(categories)]
    # numbers through the shared formatter: 3 decimals, integers as they are
    for row, cells in zip(rows, entry["table"][1:], strict=True):
        assert row.split()[1:] == [str(cells[1]), f"{cells[2]:.3f}"]
    assert output[start + len(entry["table"]) + 1] == \
        f"{sum(exact):g} of {len(exact)} answers were exact"

    page = project.html()
    assert "<h2>exact answers: share per category</h2>" in page
    assert f"<td>{entry['table'][1][2]:.3f}</td>" in page
    assert (project.report_dir() / "exact_share.txt").read_text() == f"{share!r}\n"
    board = [row for row in project.leaderboard() if row["metric"] == "exact_share"]
    assert [(row["kind"], row["n"], float(row["mean"])) for row in board] == [
        ("toy", "8", share)]


BROKEN = '''

from pytest_ragbench import ReportSection


class Raises:
    def pytest_ragbench_report_sections(self, config, document):
        raise RuntimeError("the section's own bug")


class Invalid:
    def pytest_ragbench_report_sections(self, config, document):
        return [ReportSection(key="metrics", title="takes a key the document has"),
                ReportSection(key="Bad Key", title="not a key"),
                ReportSection(key="escapes", title="writes outside",
                              files={"../outside.txt": lambda path: path.write_text("x")}),
                {"key": "plain_dict"},
                ReportSection(key="kept", title="the valid one", text=["still here"])]


def pytest_configure(config):
    config.pluginmanager.register(Raises(), "raising-sections")
    config.pluginmanager.register(Invalid(), "invalid-sections")
'''


def test_a_broken_or_invalid_section_is_left_out_and_named(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 4, conftest=BROKEN)
    result = project.run("--ragbench")
    assert result.ret == pytest.ExitCode.OK
    text = result.stdout.str()
    assert "the report sections of raising-sections could not be made (RuntimeError: " \
        "the section's own bug)" in text
    assert "report section 'metrics': results.json has that key already: left out" in text
    assert "report section 'Bad Key': the key must be lower-case" in text
    assert "report section 'escapes': a file name must be a plain name" in text
    assert "a report section must be a ReportSection, not dict: left out" in text
    results = project.results()
    assert [s["key"] for s in results["sections"]][-1] == "kept"
    assert "escapes" not in results and "Bad Key" not in results
    assert isinstance(results["metrics"]["toy"], dict)  # the document's own key stands
    assert not (project.path / "outside.txt").exists()
    assert "the valid one" in text and "still here" in text


def test_the_files_a_section_wrote_are_the_previous_runs_files(tmp_path: Path) -> None:
    """Before a run writes its report, the files the last run's sections wrote are removed."""
    import json

    from pytest_ragbench.render import files

    for name in ("results.json", "report.html", "exact_share.txt", "keep.txt", "other.csv"):
        (tmp_path / name).write_text("x")
    (tmp_path / "results.json").write_text(json.dumps({"sections": [
        {"key": "exact_share", "files": ["exact_share.txt", "gone.txt", "../keep.txt"]}]}))
    assert files.previous_run_files(tmp_path) == ["results.json", "report.html",
                                                  "exact_share.txt"]
    (tmp_path / "results.json").write_text("{not json")
    assert files.previous_run_files(tmp_path) == ["results.json", "report.html"]


ALARMS = '''

from pytest_ragbench import BandPanel, BandPlot, ReportSection, SectionCheck


def pytest_ragbench_report_sections(config, document):
    toy = [r for r in document.records if r.kind == "toy"]
    exact = [r.metrics["exact_match"] for r in toy if "exact_match" in r.metrics]
    share = sum(exact) / len(exact)
    line = f"watch: exact share {share:.3f} is below 2"
    return ReportSection(
        key="watch", title="watch", data={"share": share}, text=[line],
        alarms=[line.upper()],
        checks=[SectionCheck("watch[toy.exact_share]", "watch", "failed", line,
                             {"ragbench.value": share}),
                SectionCheck("watch[toy.items]", "watch", "found", f"{len(toy)} items")],
        plots=[BandPlot(x=["first", "second"],
                        panels=[BandPanel("toy.exact_share", [share, share], [0.0, 0.1],
                                          [1.0, None]),
                                BandPanel("never measured", [None, None], [None, None],
                                          [None, None])])])
'''


def test_a_section_adds_alarms_checks_and_a_plot(pytester: pytest.Pytester) -> None:
    """Alarms open the summary and the page, checks are JUnit testcases, plots are drawn."""
    import xml.etree.ElementTree as ET

    project = make_toy_project(pytester, 4, conftest=ALARMS)
    result = project.run("--ragbench", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the failed check fails the session
    results = project.results()  # validated against results.schema.json
    entry = next(s for s in results["sections"] if s["key"] == "watch")
    share = results["watch"]["share"]
    alarm = f"WATCH: EXACT SHARE {share:.3f} IS BELOW 2"
    assert entry["alarms"] == [alarm]
    assert [c["outcome"] for c in entry["checks"]] == ["failed", "found"]
    output = result.stdout.str().splitlines()
    assert output[output.index(next(line for line in output if "ragbench" in line
                                     and line.startswith("="))) + 1] == alarm
    assert output[-1].startswith("=") and "1 watch failed, 1 watch found" in output[-1]
    cases = {case.get("name"): case for case in
             ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    assert cases["watch[toy.exact_share]"].find("failure") is not None
    assert cases["watch[toy.items]"].find("failure") is None
    page = project.html()
    assert page.index(f"<p class=problem>{alarm}</p>") < page.index("<h2>watch</h2>")
    # one panel drawn (the one never measured is left out), after the section
    assert page.count('<img alt="plot"') - page[:page.index("<h2>watch</h2>")].count(
        '<img alt="plot"') == 1
