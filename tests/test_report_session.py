"""The session report through real pytest sessions: same numbers with and without xdist,
crashed workers, interrupted runs, ``-x``, ``--lf``, ``--junitxml``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from tests.helpers import SQL_CASES_ONE_WRONG, XDIST_MODES, ragbench_section
from tests.project import RagbenchProject
from tests.toy_project import (
    make_toy_project,
    report_files,
    without_timings,
)

MODE_IDS = ["plain", "n2", "no-xdist"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    """24 toy cases and two SQL ground-truth cases (one wrong)."""
    project = make_toy_project(pytester, 24, ini="[pytest]\nragbench_db_url = sqlite:///scores.db\n",
                               pyproject='[tool.ragbench.thresholds]\n"toy.token_f1" = 0.6\n')
    project.scores_db()
    project.cases("scores.yaml", SQL_CASES_ONE_WRONG)
    return project


def _section_without_timings(output: str) -> list[str]:
    """The whole ragbench section, minus the tables of times (usage, per item: they vary)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "= ragbench =" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("report: "))
    section, skipping = [], False
    for line in lines[start + 1:end]:
        skipping = line.startswith(("time per item", "model usage")) \
            or (skipping and bool(line.strip()))
        if not skipping:
            section.append(line)
    return section


def test_numbers_and_files_are_the_same_with_and_without_xdist(
        project: RagbenchProject) -> None:
    systems = ("--ragbench", "--ragbench-systems", "exact,terse")
    project.runpytest(*systems, "--ragbench-report", "base", "--ragbench-save", "b", "-n", "2")
    (project.path / "degrade.txt").write_text("x")  # so that the comparisons find something
    compare = ("--ragbench-compare", str(project.path / "base" / "runs" / "0001_b.json"))
    modes: dict[str, tuple[str, ...]] = {"plain": (), "no-xdist": ("-p", "no:xdist"),
                                         "n2": ("-n", "2"), "n4": ("-n", "4")}
    seen: dict[str, dict[str, Any]] = {}
    for name, args in modes.items():
        result = project.runpytest(*systems, *compare, "--ragbench-report", f"out-{name}",
                                   *args)
        folder = project.path / f"out-{name}"
        items = [without_timings(item) for item in project.items(f"out-{name}")]
        rows = [row[3:] for row in  # without time, run id, commit
                project.leaderboard_rows(f"out-{name}")]
        seen[name] = {"results": without_timings(project.results(f"out-{name}")),
                      "items": items, "leaderboard": rows,
                      "section": _section_without_timings(result.stdout.str()),
                      "files": [p.name for p in report_files(folder)],
                      "outcomes": {k: v for k, v in result.parseoutcomes().items()
                                   if k not in ("warnings", "warning")}}
    reference = seen.pop("plain")
    assert reference["outcomes"]["failed"] >= 2  # a wrong SQL case and low token F1
    for name, other in seen.items():
        for key in reference:
            assert other[key] == reference[key], f"{key} differs in mode {name}"
    # And the numbers are the ones the records carry.
    data = reference["results"]
    f1 = [i["metrics"]["token_f1"] for i in reference["items"] if i["system"] == "exact"]
    cell = data["metrics"]["toy"]["token_f1"]["systems"]["exact"]
    assert cell["n"] == 24 and cell["mean"] == pytest.approx(sum(f1) / 24)
    assert cell["pass_rate"] == pytest.approx(sum(v >= 0.6 for v in f1) / 24)
    assert set(data["comparisons"]) == {"exact_vs_terse", "exact_vs_baseline",
                                        "terse_vs_baseline", "current_vs_baseline"}
    assert list(data["comparisons"]["current_vs_baseline"]) == ["sql_ground_truth"]
    assert data["comparisons"]["exact_vs_baseline"]["toy"]["token_f1"]["worse"]
    assert data["components"] == {"generator": "toy lookup table (degraded)",
                                  "judge": "none: judge metrics unscored",
                                  "system exact": "toy exact, drops every word 2",
                                  "system terse": "toy terse, drops every word 3"}
    assert {i["nodeid"].rpartition("::")[2] for i in reference["items"]
            if i["case_id"] == "q000"} == {"toy[exact-q000]", "toy[terse-q000]"}


def test_terminal_section_reads_at_a_glance(project: RagbenchProject) -> None:
    result = project.runpytest("--ragbench", "-n", "2")
    section = result.stdout.str()
    assert ragbench_section(section)[:2] == [
        "kind              category   items  passed  failed  warning  error  skipped  lost",
        "sql_ground_truth  (all)      2      1       1       0        0      0        0",
    ]
    result.stdout.fnmatch_lines([
        "metrics: mean and 95% CI (Wilson for 0/1 metrics, with Poisson bounds at 1-2 "
        "successes or failures; skew-corrected t clipped to the metric's range below n=30, "
        "BCa bootstrap with 10000 seeded resamples from there; none below n=2; *",
        "kind * metric * n * unscored * mean * 95% CI * CI method * std * threshold * "
        "pass rate [[]95% CI]",
        "sql_ground_truth * match * 2 * 0 * 0.500 * [[]0.026, 0.974] * Wilson * 0.707 * >=1 * "
        "50.0% [[]2.6, 97.4]",
        "toy * exact_match * 24 * 0 * * Wilson *",
        "toy * faithfulness * 0 * 24 * - *",
        "toy * token_f1 * 24 * 0 * 0.* [[]0.*, *] * t * 0.* * >=0.6 * *% [[]*]",
        "unscored metrics:",
        "  toy.faithfulness: 24 unscored: no judge configured (--ragbench-judge-url)",
        "toy by category (mean [[]95% CI] method: W Wilson, t, B BCa, * no spread; n<2: none):",
        "category * n * exact_match * token_f1",
        "lookup * 8 * *",
        "toy by difficulty (mean [[]95% CI] method*",
        "model usage * calls * prompt tokens * completion tokens * cache hits * latency p50 *",
        "generator * 24 *",
        "time per item * n * p50 * p95 * total",
        "components:",
        "  generator: toy lookup table",
        "report: .ragbench/ (items.jsonl, results.json, results.schema.json, leaderboard.csv, "
        "report.html)",
    ])


def test_breakdown_flag_picks_the_fields(project: RagbenchProject) -> None:
    result = project.runpytest("--ragbench", "--ragbench-breakdown", "difficulty,doc_type")
    output = result.stdout.str()
    assert "toy by difficulty (mean [95% CI] method" in output
    assert "toy by doc_type (mean [95% CI] method" in output
    assert "toy by category" not in output
    breakdowns = project.results()["breakdowns"]["toy"]
    assert set(breakdowns) == {"difficulty", "doc_type"}
    f1 = {i["case_id"]: i["metrics"]["token_f1"] for i in project.items()
          if i["kind"] == "toy"}
    hard = [f1[f"q{n:03d}"] for n in range(24) if (n // 3) % 3 == 2]
    cell = breakdowns["difficulty"]["hard"]["token_f1"]
    assert cell["n"] == len(hard) and cell["mean"] == pytest.approx(sum(hard) / len(hard))
    assert cell["ci_low"] <= cell["mean"] <= cell["ci_high"]


@pytest.mark.parametrize("workers", ["2", "4"])
def test_a_crashed_worker_loses_only_its_item(pytester: pytest.Pytester, workers: str) -> None:
    crash = {"id": "boom", "kind": "toy", "question": "CRASH now", "ground_truth": "x y",
             "category": "lookup"}
    project = make_toy_project(pytester, 12, extra_cases=[crash])
    result = project.runpytest("--ragbench", "-n", workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*toy[[]boom[]]*"])
    items = {i["case_id"]: i for i in project.items()}
    assert set(items) == {f"q{i:03d}" for i in range(12)} | {"boom"}
    assert items["boom"]["status"] == "lost" and items["boom"]["kind"] == "toy"
    assert all(items[f"q{i:03d}"]["status"] == "passed" for i in range(12))
    counts = project.results()["counts"]["toy"]["all"]
    assert (counts["items"], counts["passed"], counts["lost"]) == (13, 12, 1)
    assert project.results()["metrics"]["toy"]["token_f1"]["n"] == 12


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_keyboard_interrupt_keeps_the_finished_items(pytester: pytest.Pytester,
                                                     mode: tuple[str, ...]) -> None:
    stop = {"id": "zz_stop", "kind": "toy", "question": "INTERRUPT here",
            "ground_truth": "x y"}
    project = make_toy_project(pytester, 10, extra_cases=[stop])
    result = project.runpytest("--ragbench", *mode, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    finished = result.parseoutcomes().get("passed", 0)
    assert finished >= 1
    items = project.items()
    # The interrupted item did not run (under xdist too, where its worker was interrupted:
    # it did not crash, so its item is not 'lost').
    assert len(items) == finished and all(i["status"] == "passed" for i in items)
    assert project.results()["metrics"]["toy"]["token_f1"]["n"] == finished
    run = project.results()["run"]
    assert (run["status"], run["items_not_run"]) == ("interrupted", 11 - finished)
    assert "= ragbench =" in result.stdout.str()
    result.stdout.fnmatch_lines(["PARTIAL RUN: the run was interrupted (*; "
                                 f"{11 - finished} item* not run)*"])


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_exitfirst_still_writes_the_report(project: RagbenchProject,
                                           mode: tuple[str, ...]) -> None:
    result = project.runpytest("--ragbench", "-x", *mode)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] >= 1
    ran = outcomes.get("passed", 0) + outcomes["failed"]
    assert ran < 26
    items = project.items()
    assert len(items) == ran
    assert sum(i["status"] == "failed" for i in items) == outcomes["failed"]


def test_last_failed_reruns_only_the_failures(project: RagbenchProject) -> None:
    first = project.runpytest("--ragbench")
    failed = {i["nodeid"] for i in project.items() if i["status"] == "failed"}
    assert len(failed) == first.parseoutcomes()["failed"] >= 2
    again = project.runpytest("--ragbench", "--lf")
    assert "known failures not in selected tests" not in again.stdout.str()
    again.assert_outcomes(failed=len(failed))
    assert {i["nodeid"] for i in project.items()} == failed
    assert sum(c["all"]["items"] for c in project.results()["counts"].values()) == len(failed)


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_metrics_are_junit_properties(project: RagbenchProject, mode: tuple[str, ...]) -> None:
    # properties lie outside pytest's xunit2 schema: written only when asked
    project.runpytest("--ragbench", "--junitxml=junit.xml", "-o", "ragbench_junit_properties=true",
                      *mode)
    tree = ET.parse(project.path / "junit.xml")
    cases = {case.get("name"): case for case in tree.iter("testcase")}
    toy = cases["toy[q000]"]
    properties = {p.get("name"): p.get("value") for p in toy.iter("property")}
    record = next(i for i in project.items() if i["case_id"] == "q000")
    assert float(properties["ragbench.metric.token_f1"]) == pytest.approx(
        record["metrics"]["token_f1"])
    assert properties["ragbench.status"] == record["status"]
    assert properties["ragbench.unscored.faithfulness"].startswith("no judge configured")
    sql = {p.get("name"): p.get("value") for p in cases["sql_ground_truth[heat]"].iter("property")}
    assert sql == {"ragbench.status": "failed", "ragbench.metric.match": "0.0"}


def test_no_records_no_report_dir(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    pytester.runpytest("--ragbench").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / ".ragbench").exists()


def test_an_unwritable_report_dir_is_reported_and_the_results_stand(
        project: RagbenchProject) -> None:
    (project.path / "taken").write_text("a file where the report dir should be")
    result = project.runpytest("--ragbench", "--ragbench-report", "taken")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the two failing items, nothing more
    result.stdout.fnmatch_lines(["ragbench: could not write the report to *taken*"])
    assert "= ragbench =" in result.stdout.str()


def test_report_dir_option(project: RagbenchProject) -> None:
    first = project.runpytest("--ragbench", "--ragbench-report", "eval-out")
    # The report's own files (items.jsonl, runs) are never collected as cases.
    second = project.runpytest("--ragbench", "--ragbench-report", "eval-out")
    assert second.parseoutcomes() == first.parseoutcomes()
    assert "invalid_case" not in second.stdout.str()
    project.runpytest("--ragbench", "--ragbench-report", "build/eval")
    assert (project.path / "build" / "eval" / "results.json").is_file()
    assert not (project.path / ".ragbench").exists()
    data = project.results("build/eval")
    assert data["run"]["git_commit"] is None  # not a git work tree
    assert data["run"]["versions"]["pytest"] == pytest.__version__
    assert data["run"]["machine"]["python"]
