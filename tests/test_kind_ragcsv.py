"""``ragcsv[<file-stem>:<row>]`` items: seed 003's RAGCSV benchmark through real pytest sessions.

The generator and the judge are scripted OpenAI-compatible servers on 127.0.0.1
(``pytest_ragbench.system.loopback``) running in this process; the pytest session under
test runs in a subprocess and talks to them over HTTP. The no-judge path uses the real
all-MiniLM-L6-v2 embedder.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.kinds.ragcsv import answer_messages, parse_grade
from pytest_ragbench.system.loopback import LoopbackServer
from tests.helpers import failure_section

SYSTEM = "You are a helpful assistant. Answer the question based only on the provided documents."
# (expected answer, fragment title, fragment text, question, scripted answer, scripted grade)
ROWS = [
    ("Paris", "France", "Paris is the capital of France.", "What is the capital of France?",
     "The capital is Paris.", "95"),
    ("Berlin", "Germany", "Berlin is the capital of Germany.", "What is the capital of Germany?",
     "The capital is Bonn.", "Score: 60"),
    ("Rome", "Italy", "Rome is the capital of Italy.", "What is the capital of Italy?",
     "The capital is Rome.", "I cannot grade this."),
    ("Madrid", "Spain", "Madrid is the capital of Spain.", "What is the capital of Spain?",
     "The capital is Madrid.", "85/100"),
    ("Lisbon", "Portugal", "Lisbon is the capital of Portugal.",
     "What is the capital of Portugal?", "The capital is Lisbon.", "150"),
]


def ragcsv_text(rows: list[tuple[str, ...]], bad_row_at: int | None = None) -> str:
    """Seed 003's headerless CSV; ``bad_row_at`` inserts a row whose fragments are not a literal."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for index, (expected, title, text, question, *_) in enumerate(rows, start=1):
        if index == bad_row_at:
            writer.writerow(["Oslo", "[{'page_content': 'Oslo is', 'metadata': {'title': 'N'}",
                             "", "2024-01-01", "What is the capital of Norway?"])
        fragments = repr([{"page_content": text, "metadata": {"title": title}}])
        writer.writerow([expected, fragments, "flag a wrong city", "2024-01-01", question])
    return buffer.getvalue()


def _question(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


@pytest.fixture
def generator() -> Iterator[LoopbackServer]:
    answers = {row[3]: row[4] for row in ROWS}
    with LoopbackServer(lambda body: answers.get(_question(body), "no idea"),
                        latency_s=0.3) as server:
        yield server


@pytest.fixture
def judge() -> Iterator[LoopbackServer]:
    grades = {row[4]: row[5] for row in ROWS}

    def grade(body: dict[str, Any]) -> str:
        prompt = _question(body)
        actual = prompt.split("Actual answer: ", 1)[1].split("\n\n", 1)[0]
        return grades.get(actual, "0")

    with LoopbackServer(grade, latency_s=0.1) as server:
        yield server


def _items(folder: Path) -> dict[str, dict[str, Any]]:
    lines = (folder / ".ragbench" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    return {item["case_id"]: item for item in map(json.loads, lines)}


def test_judge_grades_rows_answered_concurrently(pytester: pytest.Pytester,
                                                 generator: LoopbackServer,
                                                 judge: LoopbackServer) -> None:
    cases = pytester.mkdir("test_cases")
    (cases / "capitals.ragcsv.csv").write_text(ragcsv_text(ROWS, bad_row_at=3))
    (cases / "ragbench.toml").write_text('[thresholds]\n"ragcsv.accuracy" = 75\n')
    result = pytester.runpytest_subprocess(
        "--ragbench", "-q", "-rN", "-p", "no:cacheprovider", "--ragbench-llm-url", generator.url,
        "--ragbench-judge-url", judge.url)
    # rows 1-2 and 4-6 ran; row 3 is the broken one; Berlin's grade 60 misses 75
    result.assert_outcomes(passed=4, failed=2)
    output = result.stdout.str()

    items = _items(pytester.path)
    assert items["ragcsv[capitals:3]"]["status"] == "error"  # the row that could not be read
    accuracy = {case: item["metrics"].get("accuracy") for case, item in items.items()
                if item["status"] != "error"}
    assert accuracy == {"capitals:1": 95.0, "capitals:2": 60.0, "capitals:4": None,
                        "capitals:5": 85.0, "capitals:6": None}
    assert "not a grade from 0 to 100: 'I cannot grade this.'" in \
        items["capitals:4"]["unscored"]["accuracy"]
    assert "'150'" in items["capitals:6"]["unscored"]["accuracy"]  # out of range
    assert items["capitals:1"]["evidence"]["accuracy_method"] == "judge grade 0-100"
    assert items["capitals:1"]["evidence"]["judge_reply"] == "95"
    assert all(items[c]["metrics"]["total_time_ms"] >= 300.0 for c in
               ("capitals:1", "capitals:2", "capitals:4"))  # generator latency 0.3 s + judge
    assert items["capitals:1"]["usage"]["judge"]["calls"] == 1

    section = failure_section(output, "ragcsv: capitals:2")
    assert "accuracy = 60, needs >= 75" in section
    assert "question: What is the capital of Germany?" in section
    assert "expected: Berlin" in section and "got: The capital is Bonn." in section
    assert ("invalid case: test_cases/capitals.ragcsv.csv:3: field 'column 1 (fragments)': "
            "not a Python literal") in output

    # The calls were made concurrently (prefetched), with seed 003's prompts.
    assert generator.max_in_flight >= 2
    assert len(generator.requests) == 5 and len(judge.requests) == 5
    paris = next(b for b in generator.requests if _question(b) == ROWS[0][3])
    assert paris["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Document: France\nParis is the capital of France."},
        {"role": "user", "content": "What is the capital of France?"}]
    assert paris["temperature"] == 0.0 and paris["max_tokens"] == 512
    graded = next(b for b in judge.requests if "Paris" in _question(b))
    assert graded["temperature"] == 0.0 and graded["max_tokens"] == 16
    assert _question(graded) == ("Expected answer: Paris\n\nActual answer: The capital is "
                                 "Paris.\n\nAccuracy score (0-100):")

    # Seed 003's quantile blocks: accuracy over the 3 graded rows, time over the 5 answered.
    result.stdout.fnmatch_lines([
        "=== RAGCSV Eval Accuracy (n=3) ===",
        "  accuracy: judge grade 0-100",
        "  min:  60.0%",
        "  p25:  60.0%",
        "  p50:  85.0%",
        "  p75:  95.0%",
        "  p90:  95.0%",
        "  p99:  95.0%",
        "  max:  95.0%",
        "  avg:  80.0%",
        "  pass (>=75%): 2/3",
        "",
        "=== RAGCSV Eval Total Time (n=5) ===",
        "  min:  *ms",
        "  p25:  *ms",
        "  p50:  *ms",
        "  p75:  *ms",
        "  p90:  *ms",
        "  p99:  *ms",
        "  max:  *ms",
        "  avg:  *ms",
    ])
    for reply in ("'I cannot grade this.'", "'150'"):
        assert ("ragcsv.accuracy: 1 unscored: the judge's reply is not a grade from 0 to 100: "
                + reply) in output


def test_the_same_grades_under_xdist(pytester: pytest.Pytester, generator: LoopbackServer,
                                     judge: LoopbackServer) -> None:
    """Workers answer their own rows (nothing is prefetched there); the records agree."""
    (pytester.mkdir("test_cases") / "capitals.ragcsv.csv").write_text(ragcsv_text(ROWS))
    runs = []
    for flags in ((), ("-n", "2")):
        result = pytester.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-no-cache",
            "--ragbench-llm-url", generator.url, "--ragbench-judge-url", judge.url, *flags)
        result.assert_outcomes(passed=5)
        runs.append({case: (item["metrics"].get("accuracy"), item["unscored"])
                     for case, item in _items(pytester.path).items()})
    assert runs[0] == runs[1] and len(runs[0]) == 5
    assert len(generator.requests) == 10  # no cache: every row asked once per run


def test_without_a_judge_accuracy_is_semantic_similarity(pytester: pytest.Pytester) -> None:
    """The real embedder scores the answers; the report says how accuracy was measured."""
    answers = {ROWS[0][3]: "Paris", ROWS[1][3]: "Bananas are a yellow fruit rich in potassium.",
               ROWS[2][3]: ""}
    with LoopbackServer(lambda body: answers[_question(body)]) as server:
        cases = pytester.mkdir("test_cases")
        (cases / "capitals.ragcsv.csv").write_text(ragcsv_text(ROWS[:3]))
        result = pytester.runpytest_subprocess("--ragbench", "-q", "-rN", "-p",
                                               "no:cacheprovider", "--ragbench-llm-url",
                                               server.url)
    result.assert_outcomes(passed=2, failed=1)  # record-only rows; the empty answer fails
    items = _items(pytester.path)
    same, unrelated, empty = (items[f"capitals:{n}"] for n in (1, 2, 3))
    assert same["metrics"]["accuracy"] == pytest.approx(100.0, abs=1e-3)  # identical text
    assert unrelated["metrics"]["accuracy"] < 40.0
    assert empty["metrics"]["accuracy"] == 0.0
    assert "the generator returned an empty answer" in failure_section(
        result.stdout.str(), "ragcsv: capitals:3")
    method = "semantic similarity x 100 (no judge configured)"
    assert {i["evidence"]["accuracy_method"] for i in items.values()} == {method}
    assert "judge" not in same["usage"]
    result.stdout.fnmatch_lines(["=== RAGCSV Eval Accuracy (n=3) ===", f"  accuracy: {method}",
                                 "*pass (>=75%): 1/3"])


def test_ragcsv_files_are_collected_only_with_ragbench(pytester: pytest.Pytester) -> None:
    cases = pytester.mkdir("test_cases")
    (cases / "capitals.ragcsv.csv").write_text(ragcsv_text(ROWS[:2]))
    (cases / "other.csv").write_text(ragcsv_text(ROWS[:1]))  # not a RAGCSV name, not in ini
    data = pytester.mkdir("data")
    (data / "eval.csv").write_text(ragcsv_text(ROWS[:1]))
    pytester.makeini("[pytest]\nragbench_ragcsv = data/eval.csv\n")
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = pytester.runpytest("--ragbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["data/eval.csv::ragcsv[eval:1]",
                                 "test_cases/capitals.ragcsv.csv::ragcsv[capitals:1]",
                                 "test_cases/capitals.ragcsv.csv::ragcsv[capitals:2]"],
                                consecutive=False)
    assert "other" not in result.stdout.str()


@pytest.mark.parametrize(("reply", "grade"), [
    ("85", 85.0), ("Score: 60", 60.0), ("85/100", 85.0), ("72.5%", 72.5), ("0", 0.0),
    ("100", 100.0), (" 90\n", 90.0), ("150", None), ("-5", None), ("I cannot tell", None),
    ("", None), ("ninety", None),
])
def test_grades_are_parsed_from_the_judges_reply(reply: str, grade: float | None) -> None:
    assert parse_grade(reply) == grade


def test_the_prompt_has_one_message_per_fragment() -> None:
    from pytest_ragbench.cases.model import RagcsvCase, RagcsvFragment

    case = RagcsvCase(id="f:1", kind="ragcsv", file="f.csv", line=1, question="Q?", expected="A",
                      row=1, fragments=(RagcsvFragment(page_content="one", title="T1"),
                                        RagcsvFragment(page_content="two")))
    assert answer_messages(case) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Document: T1\none"},
        {"role": "user", "content": "Document: \ntwo"},
        {"role": "user", "content": "Q?"}]
