"""``ragbench verify sql|hybrid`` and the verification scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.project import RagbenchProject

GOOD = ("- {id: lakers, question: q, expected_sql: \"SELECT points FROM scores WHERE "
        "team = 'Lakers'\", ground_truth_data: {points: 9500}}\n"
        "- {id: heat, question: q, expected_sql: \"SELECT points FROM scores WHERE "
        "team = 'Heat'\", ground_truth_data: {points: 8900}}\n")
BAD = "- {id: wrong, question: q, expected_sql: SELECT 1 AS n, ground_truth_data: {n: 2}}\n"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("good.yaml", GOOD)
    return project


def test_verify_prints_the_seed_summary_and_exits_zero(project: RagbenchProject) -> None:
    result = _run(project.path, "verify", "sql")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2/2 passed, 100.0% success rate" in result.stdout
    assert "PASS  test_cases/good.yaml::sql_ground_truth[lakers]" in result.stdout


def test_verify_exits_non_zero_on_a_failure(project: RagbenchProject) -> None:
    project.cases("bad.yaml", BAD)
    result = _run(project.path, "verify", "sql")
    assert result.returncode == 1
    assert "2/3 passed, 66.7% success rate" in result.stdout
    assert "FAIL  test_cases/bad.yaml::sql_ground_truth[wrong]" in result.stdout
    assert "the result differs from ground_truth_data" in result.stdout


def test_verify_takes_paths_and_a_database_url(project: RagbenchProject, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "cases.yaml").write_text(BAD)
    result = _run(project.path, "verify", "sql", str(other / "cases.yaml"),
                  "--db-url", f"sqlite:///{project.path / 'scores.db'}")
    assert result.returncode == 1
    assert "0/1 passed, 0.0% success rate" in result.stdout


def test_verify_with_no_cases_is_an_error(tmp_path: Path) -> None:
    result = _run(tmp_path, "verify", "sql")
    assert result.returncode != 0
    assert "no sql cases found" in result.stderr


def test_console_script_help() -> None:
    script = Path(sys.executable).with_name("ragbench")
    result = subprocess.run([str(script), "verify", "--help"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0
    assert "N/M passed, X% success rate" in result.stdout


def test_bundled_sql_cases_pass_through_the_verification_script() -> None:
    """The repository's own NBA cases: at least 30, all verified against the built DB."""
    result = subprocess.run(
        [sys.executable, "verification/verify_all_sql_ground_truth.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = [line for line in result.stdout.splitlines() if "success rate" in line][-1]
    passed, total = map(int, summary.split(" ")[0].split("/"))
    assert passed == total >= 30


def test_bundled_cases_have_readable_ids_and_pass_under_k(tmp_path: Path) -> None:
    # the report goes to tmp_path: the repository's own .ragbench/ is the user's last run
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-k", "sql_ground_truth", "-q", "-p",
         "no:cacheprovider", "-rA", f"--ragbench-report={tmp_path / 'report'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "test_cases/nba_sql.yaml::sql_ground_truth[lakers_avg_fg_pct]" in result.stdout
    passed = [line for line in result.stdout.splitlines() if line.startswith("PASSED")]
    assert len(passed) >= 30


def test_verify_writes_no_report_unless_asked(project: RagbenchProject) -> None:
    """An evaluation run's report is never replaced (or its leaderboard appended)."""
    report = project.path / ".ragbench"
    report.mkdir()
    for name in ("results.json", "report.html", "leaderboard.csv"):
        (report / name).write_text(f"{name} of the evaluation run")
    result = _run(project.path, "verify", "sql")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("results.json", "report.html", "leaderboard.csv"):
        assert (report / name).read_text() == f"{name} of the evaluation run"
    assert sorted(p.name for p in report.iterdir()) == ["leaderboard.csv", "report.html",
                                                        "results.json"]


def test_verify_writes_its_report_where_asked(project: RagbenchProject) -> None:
    result = _run(project.path, "verify", "sql", "--report", "verify-report")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = project.path / "verify-report"
    assert {"results.json", "items.jsonl", "report.html"} <= {p.name for p in folder.iterdir()}
    assert not (project.path / ".ragbench").exists()
    assert "2/2 passed, 100.0% success rate" in result.stdout
