"""Interrupted runs, through real signals to a real pytest process, and ``--ragbench-resume``.

A toy project (tests/toy_project.py) answers through a slow system that writes
each question it is asked to ``calls.log``, so the run is mid-way when the signal comes.
The test waits until the run's journal holds some finished records, notes them, sends
SIGINT or SIGTERM with ``os.kill`` (to pytest, or to its whole process group as a
terminal's Ctrl-C and CI runners do), and reads every report file. Then the run is
continued with ``--ragbench-resume``: the kept items must not be asked again, and the
report must cover the whole run under one run id.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.render import files
from pytest_ragbench.run import journal, resume
from pytest_ragbench.run.interruption import run_status
from tests.browser import browser, require_chromium
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

CASES = 16
SLOW_SYSTEM = '''

import os
import time


class SlowSystem:
    """The exact toy system, slowed down; every question asked goes to calls.log."""

    def __init__(self, inner, root):
        self.inner, self.root = inner, root

    def describe(self):
        return "slow toy"

    def answer(self, question, history=None):
        with open(os.path.join(self.root, "calls.log"), "a") as out:
            out.write(question + "\\n")
        time.sleep(float(os.environ.get("TOY_DELAY", "0.25")))
        return self.inner.answer(question)


@pytest.fixture(scope="session")
def ragbench_system(request):
    return SlowSystem(toy_system(request, "exact"), str(request.config.rootpath))
'''
MODES = {"plain": (), "n2": ("-n", "2"), "no-xdist": ("-p", "no:xdist")}


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    """16 toy cases answered by the slow system."""
    return make_toy_project(pytester, CASES, conftest=SLOW_SYSTEM)


def start(project: RagbenchProject, *args: str,
          cacheprovider: bool = False) -> subprocess.Popen[str]:
    """pytest in its own process group (so a signal to the group reaches only it).

    It gets Ctrl-C as pytest in a terminal does, however this suite was started: a shell
    starts a background job (``pytest tests &`` in a script) with SIGINT ignored, and a
    child inherits an ignored signal, so SIGINT would not reach the run at all.
    """
    cache = () if cacheprovider else ("-p", "no:cacheprovider")  # --lf needs it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-concurrency=1",
             *cache, "-q", *args],
            cwd=project.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        signal.signal(signal.SIGINT, previous)


def journal_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every record in the report dir's journals, by node id."""
    found: dict[str, dict[str, Any]] = {}
    for path in journal.journals(folder):
        found.update(journal.read(path).records)
    return found


def interrupt(project: RagbenchProject, process: subprocess.Popen[str], signum: int, *,
              after: int = 4, group: bool = False) -> tuple[set[str], str]:
    """Wait for ``after`` finished records, send ``signum``; the records then, and the output."""
    deadline = time.monotonic() + 90
    finished: dict[str, Any] = {}
    while len(finished) < after:
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "the run did not get going"
        time.sleep(0.05)
        finished = journal_records(project.report_dir())
    if group:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    output, _ = process.communicate(timeout=90)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    return set(finished), output


def calls(project: RagbenchProject) -> list[str]:
    """The case ids whose questions the slow system was asked, in order."""
    path = project.path / "calls.log"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [f"q{line.split()[1]}" for line in lines]  # "question 007 about ..." -> q007


def html_run(project: RagbenchProject) -> tuple[dict[str, str], str]:
    """report.html's ``ragbench-run-*`` meta tags, and the page."""
    page = project.html()
    return dict(re.findall(r'<meta name="ragbench-run-(\w+)" content="([^"]*)">', page)), page


def assert_partial_everywhere(project: RagbenchProject, finished: set[str], output: str,
                              signal_name: str) -> dict[str, Any]:
    """Every record finished before the signal is kept, and every file says the run is partial."""
    run = project.results()["run"]
    items = project.items()
    kept = {item["nodeid"] for item in items}
    assert finished <= kept, "a record finished before the signal is missing"
    assert all(item["status"] == "passed" for item in items), "an interrupted item is no failure"
    assert run["status"] == "interrupted"
    assert run["items_not_run"] == CASES - len(kept) > 0
    assert signal_name in run["interrupted_by"]
    assert {(i["run"]["id"], i["run"]["status"]) for i in items} == {(run["id"], "interrupted")}
    rows = project.leaderboard()
    assert rows and {(r["run_id"], r["status"]) for r in rows} == {(run["id"], "interrupted")}
    meta, page = html_run(project)
    assert meta == {"id": run["id"], "status": "interrupted"}
    assert f"Partial run: the run was interrupted ({signal_name}" in page
    assert f"{run['items_not_run']} items not run" in page
    assert f"PARTIAL RUN: the run was interrupted ({signal_name}" in output
    assert f"{run['items_not_run']} items not run): the numbers cover the finished items " \
           "only" in output
    assert "continue it with --ragbench-resume" in output
    assert project.results()["counts"]["toy"]["all"]["items"] == len(kept)
    return run


def assert_resumed_whole_run(project: RagbenchProject, interrupted: dict[str, Any],
                             mode: tuple[str, ...]) -> None:
    """``--ragbench-resume`` asks only the items not kept; the report covers the whole run."""
    # Under xdist, workers may finish items while the report is written: those are in the
    # journal only, and kept as well.
    kept = journal_records(project.report_dir())
    assert {item["nodeid"] for item in project.items()} <= set(kept)
    before = len(calls(project))
    process = start(project, "--ragbench-resume", *mode)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == pytest.ExitCode.OK, output
    asked = calls(project)[before:]
    assert not set(asked) & {item["case_id"] for item in kept.values()}, "a kept item ran again"
    assert len(asked) == len(set(asked)) == CASES - len(kept)
    run = project.results()["run"]
    assert (run["id"], run["status"], run["items_not_run"]) == (interrupted["id"], "complete", 0)
    assert run["resumed"] == {"sessions": 2, "kept_items": len(kept),
                              "run_now": CASES - len(kept)}
    items = project.items()
    assert len(items) == CASES and {i["run"]["id"] for i in items} == {run["id"]}
    for item in items:  # the kept records are the interrupted session's own
        if item["nodeid"] in kept:
            assert item["duration"] == kept[item["nodeid"]]["duration"]
    assert project.results()["metrics"]["toy"]["token_f1"]["n"] == CASES
    rows = project.leaderboard()  # appended: the partial rows, then the whole run's
    assert {r["run_id"] for r in rows} == {run["id"]}
    assert {(r["status"], r["n"]) for r in rows[-2:]} == {("complete", str(CASES))}
    assert {r["status"] for r in rows[:-2]} == {"interrupted"}
    meta, page = html_run(project)
    assert meta == {"id": run["id"], "status": "complete"}
    assert "Partial run" not in page
    assert f'<div class="banner resumed">Resumed run {run["id"]} (session 2): ' \
           f"{len(kept)} items kept" in page
    assert f"resumed run {run['id']} (session 2): {len(kept)} items kept" in output
    assert not (project.report_dir() / "journal").exists()  # the run is finished


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", ["plain", "n2"])
def test_a_signal_keeps_every_finished_record_and_resume_finishes_the_run(
        project: RagbenchProject, signum: signal.Signals, mode: str) -> None:
    finished, output = interrupt(project, start(project, *MODES[mode]), signum)
    run = assert_partial_everywhere(project, finished, output, signum.name)
    assert_resumed_whole_run(project, run, MODES[mode])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_without_the_xdist_plugin(project: RagbenchProject,
                                           signum: signal.Signals) -> None:
    finished, output = interrupt(project, start(project, "-p", "no:xdist"), signum)
    assert_partial_everywhere(project, finished, output, signum.name)
    # In a real browser the banner is seen first, above the verdict, and stands out.
    chromium = require_chromium()
    with browser(chromium) as page:
        page.open((project.report_dir() / "report.html").as_uri())
        shown = page.evaluate(
            "(() => { const b = document.querySelector('.banner.partial');"
            " const v = document.getElementById('verdict');"
            " return b && [b.checkVisibility(), b.getBoundingClientRect().top,"
            " v.getBoundingClientRect().top, b.innerText,"
            " getComputedStyle(b).backgroundColor]; })()")
    assert shown, "no partial-run banner"
    visible, top, verdict_top, text, background = shown
    assert visible and top < verdict_top and top < 300
    assert text.startswith(f"Partial run: the run was interrupted ({signum.name}")
    assert background not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_whole_process_group_under_xdist(
        project: RagbenchProject, signum: signal.Signals) -> None:
    """Ctrl-C in a terminal, or a CI runner stopping the job: the workers get it too."""
    process = start(project, "-n", "2")
    finished, output = interrupt(project, process, signum, group=True)
    run = assert_partial_everywhere(project, finished, output, signum.name)
    assert "lost" not in {i["status"] for i in project.items()}
    assert_resumed_whole_run(project, run, ("-n", "2"))


def children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux: /proc/<pid>/task/*/children)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_sigterm_to_one_xdist_worker_stops_the_run_and_keeps_every_record(
        project: RagbenchProject) -> None:
    """A worker told to stop (SIGTERM) ends the whole run, marked partial; nothing is lost."""
    process = start(project, "-n", "2")
    deadline = time.monotonic() + 90
    while len(journal_records(project.report_dir())) < 4:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    (worker, *_) = children(process.pid)
    os.kill(worker, signal.SIGTERM)
    output, _ = process.communicate(timeout=90)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    finished = set(journal_records(project.report_dir()))
    run = assert_partial_everywhere(project, finished, output, "SIGTERM")
    assert re.fullmatch(r"SIGTERM to xdist worker gw[01]", run["interrupted_by"])
    assert "lost" not in {i["status"] for i in project.items()}  # stopped, not crashed
    assert_resumed_whole_run(project, run, ("-n", "2"))


@pytest.mark.parametrize("mode", ["plain", "n2"])
def test_sigkill_keeps_the_journal_and_resume_finishes_the_run(project: RagbenchProject,
                                                              mode: str) -> None:
    """Nothing runs at a SIGKILL: the journal written as items finished is what is left."""
    process = start(project, *MODES[mode])
    deadline = time.monotonic() + 90
    while len(journal_records(project.report_dir())) < 4:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    folder = project.report_dir()
    assert not (folder / "results.json").exists()
    finished = journal_records(folder)
    assert len(finished) >= 4 and {r["status"] for r in finished.values()} == {"passed"}
    (path,) = journal.journals(folder)
    before = len(calls(project))
    resumed = start(project, "--ragbench-resume", *MODES[mode])
    output, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == pytest.ExitCode.OK, output
    asked = calls(project)[before:]
    assert not set(asked) & {r["case_id"] for r in finished.values()}
    assert len(asked) == CASES - len(finished)
    run = project.results()["run"]
    assert (run["id"], run["status"]) == (path.stem, "complete")
    assert {i["nodeid"] for i in project.items()} >= set(finished)
    assert len(project.items()) == CASES


def fail_two(project: RagbenchProject) -> set[str]:
    """q000 and q001 miss ``toy.token_f1 = 0.5`` (their answers share no word)."""
    answers = json.loads((project.path / "answers.data").read_text())
    for question in list(answers):
        if question.startswith(("question 000 ", "question 001 ")):
            answers[question] = "nothing alike"
    (project.path / "answers.data").write_text(json.dumps(answers))
    (project.path / "pyproject.toml").write_text('[tool.ragbench.thresholds]\n'
                                                 '"toy.token_f1" = 0.5\n')
    return {"q000", "q001"}


@pytest.mark.parametrize("subset", [("--lf",), ("-k", "q000 or q001 or q012")],
                         ids=["lf", "k"])
def test_a_subset_rerun_after_an_interruption_deletes_no_record(
        project: RagbenchProject, subset: tuple[str, ...]) -> None:
    """After a SIGTERM, ``--lf`` (or ``-k``) reruns part of the run: the run stays resumable.

    The repro: ``--lf`` reran the failures, wrote ``complete`` and deleted the interrupted
    run's journal, so ``--ragbench-resume`` recovered nothing.
    """
    failing = fail_two(project)
    interrupt(project, start(project, cacheprovider=True), signal.SIGTERM, after=5)
    first = project.results()["run"]
    folder = project.report_dir()
    kept = journal_records(folder)  # every record of the interrupted run
    assert failing <= {r["case_id"] for r in kept.values() if r["status"] == "failed"}
    rerun = start(project, *subset, cacheprovider=True)
    output, _ = rerun.communicate(timeout=120)
    assert rerun.returncode == pytest.ExitCode.TESTS_FAILED, output  # the two still fail
    run = project.results()["run"]
    assert run["status"] == "complete" and run["id"] != first["id"]
    assert failing <= {i["case_id"] for i in project.items()} and len(project.items()) <= 3
    assert run["unfinished_runs"] == [{"id": first["id"], "finished_items": len(kept)}]
    assert f"kept: the interrupted run {first['id']} ({len(kept)} finished items), which " \
           "this session did not run whole; continue it with --ragbench-resume" in output
    left = journal.read(journal.journal_path(folder, first["id"])).records
    assert {n: r["status"] for n, r in left.items()} == {n: r["status"] for n, r in kept.items()}
    # --ragbench-resume continues the interrupted run: its finished items are not asked again.
    before = len(calls(project))
    resumed = start(project, "--ragbench-resume")
    output, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == pytest.ExitCode.TESTS_FAILED, output  # kept failures
    asked = calls(project)[before:]
    assert not set(asked) & {r["case_id"] for r in kept.values()}
    assert len(asked) == CASES - len(kept)
    run = project.results()["run"]
    assert (run["id"], run["status"], run["items_not_run"]) == (first["id"], "complete", 0)
    assert "unfinished_runs" not in run
    assert len(project.items()) == CASES
    assert not (folder / "journal").exists()  # the run is finished


def test_an_interruption_before_any_item_finished_still_writes_results(
        pytester: pytest.Pytester) -> None:
    stop = {"id": "a_stop", "kind": "toy", "question": "INTERRUPT here", "ground_truth": "x y"}
    project = make_toy_project(pytester, 3)
    cases = [stop, *(json.loads(line) for line in
                     (project.path / "test_cases" / "toy.jsonl").read_text().splitlines())]
    project.cases("toy.jsonl", cases)  # the first item stops the run
    result = project.runpytest("--ragbench", "-p", "no:xdist", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    run = project.results()["run"]
    everything = [f"test_cases/toy.jsonl::toy[{case['id']}]" for case in cases]
    assert (run["status"], run["items_not_run"]) == ("interrupted", len(cases))
    assert run["not_run_items"] == sorted(everything)
    assert project.items() == [] and project.results()["items"] == []
    assert "Partial run: the run was interrupted (KeyboardInterrupt; 4 items not run)" \
        in project.html()
    result.stdout.fnmatch_lines(["PARTIAL RUN: the run was interrupted (KeyboardInterrupt; "
                                 "4 items not run)*"])
    assert (project.report_dir() / "journal" / f"{run['id']}.jsonl").is_file()
    # Continued without the stopping case: the same run, complete.
    project.cases("toy.jsonl", cases[1:])
    again = project.runpytest("--ragbench", "--ragbench-resume", "-p", "no:xdist")
    again.assert_outcomes(passed=3)
    resumed = project.results()["run"]
    assert (resumed["id"], resumed["status"]) == (run["id"], "complete")
    assert not (project.report_dir() / "journal").exists()


def test_collect_only_writes_no_report_and_no_journal(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 3)
    result = project.runpytest("--ragbench", "--collect-only", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.OK
    assert not project.report_dir().exists()


# -- without signals: the parts on their own --------------------------------------------------

def test_a_kill_while_writing_leaves_the_files_of_one_run(pytester: pytest.Pytester) -> None:
    """The earlier run's files go before this run's are written: never two runs side by side."""
    kill_in_html = '''

import os
import signal
from pytest_ragbench.render import files as _files

if os.environ.get("KILL_IN_HTML"):
    def _killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    _files.write_report_html = _killed
'''
    project = make_toy_project(pytester, 6, conftest=kill_in_html)
    first = project.runpytest_subprocess("--ragbench")
    assert first.ret == pytest.ExitCode.OK
    folder = project.report_dir()
    old_id = project.results()["run"]["id"]
    assert (folder / "report.html").is_file()
    process = subprocess.run([sys.executable, "-m", "pytest", "--ragbench", "-p",
                              "no:cacheprovider"], cwd=project.path, capture_output=True,
                             text=True, env={**os.environ, "KILL_IN_HTML": "1"}, check=False)
    assert process.returncode == -signal.SIGKILL
    new_id = project.results()["run"]["id"]
    assert new_id != old_id
    assert not (folder / "report.html").exists()  # the old one is gone, the new one never came
    assert {i["run"]["id"] for i in project.items()} == {new_id}
    assert (folder / "journal" / f"{new_id}.jsonl").is_file()  # the run did not finish


def test_compare_against_a_partial_run_warns(pytester: pytest.Pytester) -> None:
    stop = {"id": "zz_stop", "kind": "toy", "question": "INTERRUPT here", "ground_truth": "x y"}
    project = make_toy_project(pytester, 6, extra_cases=[stop])
    partial = project.runpytest("--ragbench", "--ragbench-save", "part", no_reraise_ctrlc=True)
    assert partial.ret == pytest.ExitCode.INTERRUPTED
    saved = json.loads(next((project.report_dir() / "runs").glob("*_part.json"))
                       .read_text())
    assert saved["run"]["status"] == "interrupted" and saved["run"]["items_not_run"] == 1
    project.cases("toy.jsonl", (
        "".join(line + "\n" for line in (project.path / "test_cases" / "toy.jsonl")
                .read_text().splitlines() if "INTERRUPT" not in line)))
    result = project.runpytest("--ragbench", "--ragbench-compare", "part")
    assert result.ret == pytest.ExitCode.OK
    text = "the baseline 0001_part is a partial run (interrupted, 1 item not run): " \
           "comparisons cover only the items it finished"
    result.stdout.fnmatch_lines([f"*RagbenchReportWarning: ragbench: {text}"])  # warnings summary
    result.stdout.fnmatch_lines([f"  note: {text}"])  # the verdict's note
    assert project.results()["baseline"]["status"] == "interrupted"


def test_exitfirst_makes_a_partial_run_that_resume_finishes(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 6)
    answers = json.loads((project.path / "answers.data").read_text())
    first_question = next(q for q in answers if q.startswith("question 000 "))
    answers[first_question] = "nothing alike"  # q000, the first item, fails
    (project.path / "answers.data").write_text(json.dumps(answers))
    (project.path / "pyproject.toml").write_text('[tool.ragbench.thresholds]\n'
                                                 '"toy.token_f1" = 0.5\n')
    first = project.runpytest("--ragbench", "-x", "-p", "no:xdist")
    first.assert_outcomes(failed=1)
    run = project.results()["run"]
    assert (run["status"], run["items_not_run"]) == ("interrupted", 5)
    assert run["interrupted_by"] == "stopping after 1 failures"
    again = project.runpytest("--ragbench", "--ragbench-resume", "-p", "no:xdist")
    again.assert_outcomes(passed=5, deselected=1)
    assert again.ret == pytest.ExitCode.TESTS_FAILED  # the kept failure still fails the run
    run = project.results()["run"]
    assert (run["status"], run["items_not_run"]) == ("complete", 0)
    assert {i["status"] for i in project.items()} == {"passed", "failed"}
    assert len(project.items()) == 6


def test_resume_refuses_a_run_with_other_settings(pytester: pytest.Pytester) -> None:
    stop = {"id": "zz_stop", "kind": "toy", "question": "INTERRUPT here", "ground_truth": "x y"}
    project = make_toy_project(pytester, 3, extra_cases=[stop])
    project.runpytest("--ragbench", no_reraise_ctrlc=True)
    result = project.runpytest("--ragbench", "--ragbench-resume", "--ragbench-max-tokens=7")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ragbench-resume: the interrupted run * was started with "
                                 "other settings (max_tokens: None -> 7)*"])


def test_resume_with_nothing_to_resume_starts_a_new_run(project: RagbenchProject) -> None:
    first = project.runpytest("--ragbench", "--ragbench-concurrency=8")
    assert first.ret == pytest.ExitCode.OK
    assert not (project.report_dir() / "journal").exists()
    again = project.runpytest("--ragbench", "--ragbench-resume", "--ragbench-concurrency=8")
    again.assert_outcomes(passed=CASES)
    assert project.results()["run"]["status"] == "complete"
    assert "resumed" not in project.results()["run"]


def test_journal_reading_skips_a_line_cut_short(tmp_path: Path) -> None:
    writer = journal.JournalWriter(journal.journal_path(tmp_path, "r1"), "r1")
    writer.header({"systems": []}, resumed=False)
    writer.record({"nodeid": "a::toy[1]", "status": "passed"})
    writer.close()
    with writer.path.open("a") as handle:
        handle.write('{"nodeid": "a::toy[2]", "sta')  # a SIGKILL in the middle of a write
    writer.record({"nodeid": "a::toy[3]", "status": "failed"})  # reopened: starts a new line
    writer.close()
    read = journal.read(writer.path)
    assert set(read.records) == {"a::toy[1]", "a::toy[3]"} and read.unreadable == 1
    assert read.config == {"systems": []}
    assert resume.kept_records(read).keys() == {"a::toy[1]", "a::toy[3]"}
    part = journal.read(writer.path, size=read.size)
    assert part.records == read.records


def test_old_leaderboard_gets_the_status_column(tmp_path: Path) -> None:
    path = tmp_path / "leaderboard.csv"
    path.write_text("time,run_id,git_commit,system,kind,dataset,metric,n,mean,ci_low,ci_high\n"
                    "t0,old,,,toy,,token_f1,3,0.5,0.1,0.9\n")
    files.append_leaderboard(path, [["t1", "new", "", "", "toy", "", "token_f1", "4", "0.6",
                                     "0.2", "0.8", "interrupted"]])
    files.append_leaderboard(path, [["t2", "new", "", "", "toy", "", "token_f1", "8", "0.7",
                                     "0.5", "0.9", "complete"]])
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["run_id"], r["n"], r["status"]) for r in rows] == [
        ("old", "3", ""), ("new", "4", "interrupted"), ("new", "8", "complete")]


@pytest.mark.parametrize(("selected", "finished", "interrupted", "expected"), [
    ({"a", "b"}, {"a", "b"}, False, ("complete", 0, None)),
    ({"a", "b"}, {"a", "b"}, True, ("complete", 0, None)),  # stopped after the last item
    ({"a", "b"}, {"a"}, True, ("interrupted", 1, "SIGTERM")),
    (None, {"a"}, True, ("interrupted", None, "SIGTERM")),
    (None, {"a"}, False, ("complete", None, None)),
])
def test_run_status(selected: set[str] | None, finished: set[str], interrupted: bool,
                    expected: tuple[Any, ...]) -> None:
    status = run_status(selected, finished, interrupted=interrupted, signal_name="SIGTERM")
    assert (status.status, status.items_not_run, status.interrupted_by) == expected
