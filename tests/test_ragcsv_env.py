"""RAGCSV settings as their users know them: RAGCSV_* variables, limit, max tokens, header,
the running progress line and RAGCSV_DEBUG (issue 20, point 3)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from pytest_ragbench.formats.ragcsv import read_ragcsv
from pytest_ragbench.kinds.ragcsv.progress import Tally
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

ROWS = [("Paris", "France", "Paris is the capital of France.", "What is the capital of France?"),
        ("Berlin", "Germany", "Berlin is the capital of Germany.",
         "What is the capital of Germany?"),
        ("Rome", "Italy", "Rome is the capital of Italy.", "What is the capital of Italy?")]
CONFTEST = '''
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from pytest_ragbench.protocols import Generation

LOG = Path(__file__).with_name("calls.log")


class Capitals:
    model_id = "capitals"

    def generate(self, messages, **params):
        with LOG.open("a") as handle:
            handle.write(json.dumps({"params": params, "question": messages[-1]["content"]})
                         + "\\n")
        return Generation(text="The capital is Paris.", model=self.model_id)


class Words:
    model_id = "words"

    def embed(self, texts):
        rows = np.zeros((len(texts), 32), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in text.lower().split():
                row[zlib.crc32(word.strip(".?").encode()) % 32] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="session")
def ragbench_llm():
    return Capitals()


@pytest.fixture(scope="session")
def ragbench_embedder():
    return Words()
'''


def ragcsv_text(header: bool = False, short_row: bool = False) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(["Expected Answer", "Fragments", "Notes", "Timestamp", "Question"])
    for expected, title, text, question in ROWS:
        writer.writerow([expected, repr([{"page_content": text, "metadata": {"title": title}}]),
                         "", "2024-01-01", question])
    if short_row:
        writer.writerow(["Oslo", "[]", "notes"])
    return buffer.getvalue()


def test_a_header_row_is_skipped_and_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "eval.csv"
    path.write_text(ragcsv_text(header=True))
    data = read_ragcsv(path)
    assert not data.errors
    assert [(r.row, r.line, r.question) for r in data.rows] == [
        (1, 2, ROWS[0][3]), (2, 3, ROWS[1][3]), (3, 4, ROWS[2][3])]
    path.write_text(ragcsv_text())  # a headerless RAGCSV file: the first row is data
    assert [r.expected for r in read_ragcsv(path).rows] == ["Paris", "Berlin", "Rome"]


def test_a_row_with_too_few_columns_lists_all_five(tmp_path: Path) -> None:
    path = tmp_path / "eval.csv"
    path.write_text(ragcsv_text(short_row=True))
    data = read_ragcsv(path)
    assert len(data.rows) == 3
    (error,) = data.errors
    assert str(error) == (
        f"{path}:4: field 'column 3 (timestamp)': row has 3 columns, expected 5 (0: expected "
        "answer, 1: fragments, 2: hallucination note, 3: timestamp, 4: question)")


def test_the_progress_line_counts_accuracy_and_passes() -> None:
    tally = Tally(total=100)
    for accuracy in [100.0] * 28 + [0.0] * 10 + [None] * 4:
        tally.add({"metrics": {} if accuracy is None else {"accuracy": accuracy}})
    assert tally.line(83.4) == "[00:01:23] 42/100 | Avg Acc=73.7% | Pass(>=75%)=28/42"
    strict = Tally(total=2)
    strict.add({"metrics": {"accuracy": 80.0}, "thresholds": {"accuracy": 90}})
    assert strict.line(0) == "[00:00:00] 1/2 | Avg Acc=80.0% | Pass(>=90%)=0/1"


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    """Cases outside test_cases: the RAGCSV file (data/eval.csv) comes from RAGCSV_FILE."""
    project = RagbenchProject(pytester).conftest(CONFTEST)
    project.cases_dir()
    (project.mkdir("data") / "eval.csv").write_text(ragcsv_text(header=True))
    return project


def _calls(project: RagbenchProject) -> list[dict[str, object]]:
    return [json.loads(line) for line in
            (project.path / "calls.log").read_text().splitlines()]


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "xdist", "no-xdist"])
def test_the_ragcsv_environment_variables(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch,
                                               mode: tuple[str, ...]) -> None:
    project = _project(pytester)
    for name, value in {"RAGCSV_FILE": "data/eval.csv", "RAGCSV_LIMIT": "2",
                        "RAGCSV_MAX_TOKENS": "33", "RAGCSV_CONCURRENCY": "3",
                        "RAGCSV_MODEL": "granite", "RAGCSV_DEBUG": "1"}.items():
        monkeypatch.setenv(name, value)
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider", *mode)
    # the first two rows of the file (xdist's workers deselect: the controller counts none)
    result.assert_outcomes(passed=2, deselected=0 if mode == ("-n", "2") else 1)
    calls = _calls(project)
    assert sorted(c["question"] for c in calls) == sorted([ROWS[0][3], ROWS[1][3]])
    assert {c["params"]["max_tokens"] for c in calls} == {33}  # type: ignore[index]
    config = project.results()["config"]
    assert (config["concurrency"], config["llm_model"], config["judge_model"],
            config["limit"], config["max_tokens"]) == (3, "granite", "granite", 2, 33)
    result.stdout.fnmatch_lines([
        "RAGCSV_DEBUG eval:1: answer from the generator capitals (ragbench_llm)*",
        "--- prompt ---",
        "[[]system] You are a helpful assistant. Answer the question based only on the "
        "provided documents.",
        "[[]user] Document: France",
        "Paris is the capital of France.",
        f"[[]user] {ROWS[0][3]}",
        "--- answer ---",
        "The capital is Paris.",
        "--- grade ---",
        "accuracy [0-9]*.[0-9] (semantic similarity x 100 (no judge configured))",
    ])
    result.stdout.fnmatch_lines(["ragcsv [[]00:00:[0-9][0-9]] 2/2 | Avg Acc=*% | Pass(>=75%)=*/2"])
    assert result.stdout.str().count("RAGCSV_DEBUG") == 1


def test_flags_and_ini_keys_win_over_the_environment(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(pytester)
    monkeypatch.setenv("RAGCSV_FILE", "data/eval.csv")
    monkeypatch.setenv("RAGCSV_LIMIT", "2")
    monkeypatch.setenv("RAGCSV_CONCURRENCY", "3")
    project.ini(ragbench_concurrency=5)
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider", "--ragbench-limit=1")
    result.assert_outcomes(passed=1, deselected=2)
    config = project.results()["config"]
    assert (config["limit"], config["concurrency"], config["max_tokens"]) == (1, 5, None)
    assert {c["params"]["max_tokens"] for c in _calls(project)} == {512}  # type: ignore[index]
    result.stdout.fnmatch_lines(["ragcsv [[]*] 1/1 | Avg Acc=*% | Pass(>=75%)=*/1"])
    assert "RAGCSV_DEBUG" not in result.stdout.str()

    monkeypatch.setenv("RAGCSV_LIMIT", "all")
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*RAGCSV_LIMIT must be a positive integer, got 'all'*"])
    monkeypatch.setenv("RAGCSV_LIMIT", "2")
    monkeypatch.setenv("RAGCSV_FILE", "data/missing.csv")
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*RAGCSV_FILE=data/missing.csv: no such file*"])


def test_the_limit_applies_to_every_kind_and_keeps_whole_cases(
        pytester: pytest.Pytester) -> None:
    """Per file: the first N cases, with every item of each (ground truth and evaluation)."""
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    cases = "kind: sql\ncases:\n" + "".join(
        f"  - id: q{i}\n    question: Points of team {i}?\n"
        f"    expected_sql: SELECT {i} AS n\n    ground_truth_data: {{n: {i}}}\n"
        for i in range(4))
    project.cases("a.yaml", cases)
    project.cases("b.yaml", cases)
    result = project.runpytest("--ragbench", "--ragbench-limit=2", "--collect-only", "-q",
                               "-p", "no:cacheprovider")
    ids = sorted(line for line in result.stdout.lines if "::" in line)
    assert ids == sorted(f"test_cases/{f}.yaml::{kind}[q{i}]" for f in "ab" for i in range(2)
                         for kind in ("sql", "sql_ground_truth"))
    result = project.runpytest("--ragbench-limit=3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, deselected=2)
