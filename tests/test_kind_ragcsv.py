"""``ragcsv[<file-stem>:<row>]`` items: the RAGCSV benchmark through real pytest sessions.

The generator and the judge are scripted OpenAI-compatible servers on 127.0.0.1
(``pytest_ragbench.testing``) running in this process; the pytest session under
test runs in a subprocess and talks to them over HTTP. The no-judge path uses the real
all-MiniLM-L6-v2 embedder.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_ragbench.kinds.ragcsv.runner import answer_messages
from pytest_ragbench.testing import LoopbackServer
from tests.helpers import XDIST_MODES, failure_section
from tests.project import RagbenchProject

SYSTEM = "You are a helpful assistant. Answer the question based only on the provided documents."
# (expected answer, fragment title, fragment text, question, scripted answer, scripted grade)
ROWS = [
    ("Paris", "France", "Paris is the capital of France.", "What is the capital of France?",
     "The capital is Paris.", '{"score": 95}'),
    ("Berlin", "Germany", "Berlin is the capital of Germany.", "What is the capital of Germany?",
     "The capital is Bonn.", '{"score": 60}'),
    ("Rome", "Italy", "Rome is the capital of Italy.", "What is the capital of Italy?",
     "The capital is Rome.", "I cannot grade this."),
    ("Madrid", "Spain", "Madrid is the capital of Spain.", "What is the capital of Spain?",
     "The capital is Madrid.", '{"score": 85}'),
    ("Lisbon", "Portugal", "Lisbon is the capital of Portugal.",
     "What is the capital of Portugal?", "The capital is Lisbon.", '{"score": 150}'),
]


def ragcsv_text(rows: list[tuple[str, ...]], bad_row_at: int | None = None) -> str:
    """A headerless RAGCSV file; ``bad_row_at`` inserts a row whose fragments are not a literal."""
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


def test_judge_grades_rows_answered_concurrently(pytester: pytest.Pytester,
                                                 generator: LoopbackServer,
                                                 judge: LoopbackServer) -> None:
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS, bad_row_at=3))
    project.gates('[thresholds]\n"ragcsv.accuracy" = 75\n')
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-rN", "-p", "no:cacheprovider", "--ragbench-llm-url", generator.url,
        "--ragbench-judge-url", judge.url)
    # rows 1-2 and 4-6 ran; row 3 is the broken one; Berlin's grade 60 misses 75
    result.assert_outcomes(passed=4, failed=2)
    output = result.stdout.str()

    items = project.items_by_case()
    assert items["ragcsv[capitals:3]"]["status"] == "error"  # the row that could not be read
    accuracy = {case: item["metrics"].get("accuracy") for case, item in items.items()
                if item["status"] != "error"}
    assert accuracy == {"capitals:1": 95.0, "capitals:2": 60.0, "capitals:4": None,
                        "capitals:5": 85.0, "capitals:6": None}
    assert items["capitals:4"]["unscored"]["accuracy"] == (
        "the judge's reply is not a grade from 0 to 100 ({\"score\": <integer>}): "
        "'I cannot grade this.'")
    assert "'{\"score\": 150}'" in items["capitals:6"]["unscored"]["accuracy"]  # off the scale
    assert items["capitals:1"]["evidence"]["accuracy_method"] == "judge grade 0-100"
    assert items["capitals:1"]["evidence"]["judge_reply"] == '{"score": 95}'
    assert items["capitals:1"]["judge"]["samples"] == {"accuracy": [95.0]}
    assert items["capitals:1"]["judge"]["structured_output"] == "json_schema"
    assert all(items[c]["metrics"]["total_time_ms"] >= 300.0 for c in
               ("capitals:1", "capitals:2", "capitals:4"))  # generator latency 0.3 s + judge
    assert items["capitals:1"]["usage"]["judge"]["calls"] == 1

    section = failure_section(output, "ragcsv: capitals:2")
    assert "accuracy = 60, needs >= 75" in section
    assert "question: What is the capital of Germany?" in section
    assert "expected: Berlin" in section and "got: The capital is Bonn." in section
    assert ("invalid case: test_cases/capitals.ragcsv.csv:3: field 'column 1 (fragments)': "
            "not a Python literal") in output

    # The calls were made concurrently (prefetched), with the RAG and grading prompts.
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
    assert graded["response_format"]["json_schema"]["schema"]["properties"]["score"] == {
        "type": "integer", "minimum": 0, "maximum": 100, "enum": list(range(101))}
    assert '{"score": <integer from 0 to 100>}' in graded["messages"][0]["content"]
    assert _question(graded) == ("Expected answer: Paris\n\nActual answer: The capital is "
                                 "Paris.\n\nAccuracy score (0-100):")

    # The RAGCSV quantile blocks: accuracy over the 3 graded rows, time over the 5 answered.
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
    for reply in ("'I cannot grade this.'", """'{"score": 150}'"""):
        assert ("ragcsv.accuracy: 1 unscored: the judge's reply is not a grade from 0 to 100 "
                '({"score": <integer>}): ' + reply) in output
    # 2 of 5 graded rows unscored: more than the default limit of 0.2 fails the session
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "FAILED judged metric ragcsv.accuracy: 2/5 items unscored (40.0%), more than "
        "--ragbench-max-unscored 0.2; most common (2): the judge's reply is not a grade *"])


def test_the_same_grades_under_xdist(pytester: pytest.Pytester, generator: LoopbackServer,
                                     judge: LoopbackServer) -> None:
    """Workers answer their own rows (nothing is prefetched there); the records agree."""
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS))
    runs = []
    for flags in ((), ("-n", "2")):
        result = project.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-no-cache",
            "--ragbench-llm-url", generator.url, "--ragbench-judge-url", judge.url, *flags)
        result.assert_outcomes(passed=5)
        runs.append({case: (item["metrics"].get("accuracy"), item["unscored"])
                     for case, item in project.items_by_case().items()})
    assert runs[0] == runs[1] and len(runs[0]) == 5
    assert len(generator.requests) == 10  # no cache: every row asked once per run


def test_without_a_judge_accuracy_is_semantic_similarity(pytester: pytest.Pytester) -> None:
    """The real embedder scores the answers; the report says how accuracy was measured."""
    answers = {ROWS[0][3]: "Paris", ROWS[1][3]: "Bananas are a yellow fruit rich in potassium.",
               ROWS[2][3]: ""}
    with LoopbackServer(lambda body: answers[_question(body)]) as server:
        project = RagbenchProject(pytester)
        project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:3]))
        result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p",
                                              "no:cacheprovider", "--ragbench-llm-url",
                                              server.url)
    result.assert_outcomes(passed=2, failed=1)  # record-only rows; the empty answer fails
    items = project.items_by_case()
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
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:2]))
    project.cases("other.csv", ragcsv_text(ROWS[:1]))  # not a RAGCSV name, not in ini
    data = project.mkdir("data")
    (data / "eval.csv").write_text(ragcsv_text(ROWS[:1]))
    project.ini(ragbench_ragcsv="data/eval.csv")
    result = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = project.runpytest("--ragbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["data/eval.csv::ragcsv[eval:1]",
                                 "test_cases/capitals.ragcsv.csv::ragcsv[capitals:1]",
                                 "test_cases/capitals.ragcsv.csv::ragcsv[capitals:2]"],
                                consecutive=False)
    assert "other" not in result.stdout.str()


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


def _answers() -> LoopbackServer:
    answers = {row[3]: row[4] for row in ROWS}
    return LoopbackServer(lambda body: answers.get(_question(body), "no idea"))


def _actual(body: dict[str, Any]) -> str:
    return _question(body).split("Actual answer: ", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("flags", XDIST_MODES)
def test_a_judge_whose_every_reply_is_unusable_fails_the_session(
        pytester: pytest.Pytester, flags: tuple[str, ...]) -> None:
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:4]))
    with _answers() as generator, \
            LoopbackServer("Sure! I would rate this answer highly.") as judge:
        result = project.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-llm-url", generator.url,
            "--ragbench-judge-url", judge.url, *flags)
    result.assert_outcomes(passed=4)  # no item threshold: the session fails, not the rows
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "judged metrics (unscored limit 0.2):",
        "judged metric    items  scored  unscored  share   most common reason",
        "ragcsv.accuracy  4      0       4         100.0%  the judge's reply is not a grade*",
        "FAILED judged metric ragcsv.accuracy: 4/4 items unscored (100.0%), more than "
        "--ragbench-max-unscored 0.2; most common (4): the judge's reply is not a grade from "
        "0 to 100 ({\"score\": <integer>}): 'Sure! I would rate this answer highly.'"],
        consecutive=False)
    items = project.items_by_case()
    for item in items.values():  # the answers, their time and the judge's calls are kept
        assert item["evidence"]["got"].startswith("The capital is")
        assert item["metrics"]["total_time_ms"] >= 0.0
        assert item["usage"]["judge"]["calls"] == 1  # answered, though unusable
    results = project.results()
    entry = results["judge"]["metrics"]["ragcsv"]["accuracy"]
    assert (entry["n_items"], entry["n_unscored"], entry["over_limit"]) == (4, 4, True)
    assert results["usage"]["judge"]["calls"] == 4
    assert results["failures"] == results["judge"]["failures"]


def test_a_refusing_judge_leaves_accuracy_unscored_and_keeps_the_row(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:2]))
    with _answers() as generator, LoopbackServer('{"score": 90}') as judge:
        judge.fail("401", "401")  # refused, not retried
        result = project.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-llm-url", generator.url,
            "--ragbench-judge-url", judge.url, "--ragbench-max-unscored=1")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK  # the limit allows every item unscored
    items = project.items_by_case()
    for item in items.values():
        assert "HTTP 401" in item["unscored"]["accuracy"]
        assert item["evidence"]["got"].startswith("The capital is")
        assert "total_time_ms" in item["metrics"]
        assert item["usage"]["judge"]["calls"] == 0  # nothing answered


def test_repeated_grades_are_averaged_and_an_undecided_row_is_inconclusive(
        pytester: pytest.Pytester) -> None:
    # Grades by seed (sample) for each row's answer; threshold 75.
    by_answer = {"The capital is Paris.": (70, 75, 80, 85),  # interval holds 75
                 "The capital is Bonn.": (95, 96, 97, 95),  # clearly above
                 "The capital is Rome.": (10, 12, 14, 10),  # clearly below
                 "The capital is Madrid.": (60, 90, 90, 90)}  # wide, holds 75

    def grade(body: dict[str, Any]) -> str:
        return json.dumps({"score": by_answer[_actual(body)][body["seed"]]})

    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:4]))
    project.gates('[thresholds]\n"ragcsv.accuracy" = 75\n')
    with _answers() as generator, LoopbackServer(grade) as judge:
        args = ("--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-llm-url",
                generator.url, "--ragbench-judge-url", judge.url)
        result = project.runpytest_subprocess(*args, "--ragbench-judge-samples", "3")
        result.assert_outcomes(passed=3, failed=1, warnings=2)
        asked = len(judge.requests)
        assert asked == 12 and sorted({r["seed"] for r in judge.requests}) == [0, 1, 2]
        assert {r["temperature"] for r in judge.requests} == {0.7}
        items = project.items_by_case()
        paris, bonn, rome, madrid = (items[f"capitals:{n}"] for n in (1, 2, 3, 4))
        assert paris["metrics"]["accuracy"] == 75.0 and paris["status"] == "warning"
        assert paris["judge"]["samples"] == {"accuracy": [70.0, 75.0, 80.0]}
        assert "accuracy: inconclusive, threshold >= 75 lies inside the judge interval" in \
            paris["warnings"][0]
        assert paris["evidence"]["judge_reply"] == ['{"score": 70}', '{"score": 75}',
                                                    '{"score": 80}']
        assert paris["evidence"]["judge samples"] == "accuracy: 70, 75, 80 (mean 75, sd 5)"
        assert bonn["status"] == "passed" and bonn["metrics"]["accuracy"] == 96.0
        assert rome["status"] == "failed" and madrid["status"] == "warning"
        results = project.results()
        entry = results["judge"]["metrics"]["ragcsv"]["accuracy"]
        assert entry["n_samples"] == 3 and entry["n_inconclusive"] == 2
        assert entry["within_item_sd"] == pytest.approx((5 + 1 + 2 + 300 ** 0.5) / 4)
        assert entry["verdict_flip_share"] == 0.5 and entry["n_verdict_items"] == 4
        assert results["judge"]["temperature"] == 0.7
        result.stdout.fnmatch_lines([
            "judged metrics (unscored limit 0.2; 3 samples per item at temperature 0.7, "
            "inconclusive items pass):",
            "judged metric    items  scored  unscored  share  samples  within-item sd  "
            "verdict flips  inconclusive  most common reason",
            "ragcsv.accuracy  4 * 4 * 0 * 0.0% * 3 * 6.330 * 50.0% of 4 * 2 * -"])

        again = project.runpytest_subprocess(*args, "--ragbench-judge-samples", "3",
                                             "--ragbench-inconclusive=fail")
        again.assert_outcomes(passed=1, failed=3)
        assert len(judge.requests) == asked  # a rerun asks nothing again
        assert "accuracy: inconclusive, threshold >= 75" in failure_section(
            again.stdout.str(), "ragcsv: capitals:1")

        more = project.runpytest_subprocess(*args, "--ragbench-judge-samples", "4")
        more.assert_outcomes(passed=3, failed=1, warnings=2)  # both still undecided
        assert [r["seed"] for r in judge.requests[asked:]] == [3, 3, 3, 3]  # only the new one
        assert project.items_by_case()["capitals:4"]["metrics"]["accuracy"] == 82.5


def test_a_judge_answering_as_another_model_is_a_warning_line(pytester: pytest.Pytester) -> None:
    """The reply's ``model`` is recorded per role; a model not asked for is warned about.

    The generator answers as the model it was asked for, the judge as another one; a warm
    rerun (every reply from the cache) says the same.
    """
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:3]))
    with _answers() as generator, LoopbackServer('{"score": 90}',
                                                 model="cheap-judge-1b") as judge:
        args = ("--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-cache=cache",
                "--ragbench-llm-url", generator.url, "--ragbench-judge-url", judge.url,
                "--ragbench-judge-model", "big-judge-70b")
        runs = [project.runpytest_subprocess(*args) for _ in range(2)]
        assert len(judge.requests) == 3  # the second run asked nothing
    warning = ("WARNING served model: judge: asked for model 'big-judge-70b', the server "
               "answered as 'cheap-judge-1b' (3 of 3 calls)")
    for result in runs:
        result.assert_outcomes(passed=3)
        output = result.stdout.str()
        assert output.count("WARNING served model:") == 1, output
        result.stdout.fnmatch_lines([warning, "verdict: PASSED"])
        result.stdout.fnmatch_lines(["model usage*served model",
                                     "generator *default", "judge *cheap-judge-1b"])
        usage = project.results()["usage"]
        assert usage["judge"]["models"] == {"big-judge-70b": {"cheap-judge-1b": 3}}
        assert usage["generator"]["models"] == {"default": {"default": 3}}
        page = (project.report_dir() / "report.html").read_text(encoding="utf-8")
        assert ("Served model: judge: asked for model &#x27;big-judge-70b&#x27;, the server "
                "answered as &#x27;cheap-judge-1b&#x27; (3 of 3 calls)") in page
    item = project.items_by_case()["capitals:1"]
    assert item["usage"]["judge"]["models"] == {"big-judge-70b": {"cheap-judge-1b": 1}}
