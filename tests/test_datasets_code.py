"""Code adapter on the real SWE-QA-Bench, plus snippet and CodeRepoQA issue records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.datasets.sources import code
from pytest_ragbench.errors import CaseError
from tests.conftest import oracle_file


def test_all_720_swe_qa_questions_adapt() -> None:
    folder = oracle_file("swe-qa-bench")
    result = code.adapt_source(folder, {})
    assert result.errors == [] and not result.skipped
    assert len(result.samples) == 720
    assert len({s.id for s in result.samples}) == 720
    commits = {}
    for line in (folder / "repo_commit.txt").read_text().splitlines():
        if line.strip():
            url, commit = line.split()
            commits[url.removeprefix("https://github.com/")] = commit
    per_repo = Counter(s.metadata["repo"] for s in result.samples)
    assert per_repo == {repo: 48 for repo in commits}
    answers = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            record = json.loads(line)
            answers[record["question"]] = record["answer"]
    for s in result.samples:
        assert s.doc_type == "code_config" and s.source_dataset == "swe-qa-bench"
        assert s.question_type in ("howto", "definition", "lookup", "entity")
        assert s.ground_truth == answers[s.question]
        assert s.contexts == ()  # SWE-QA ships no code: nothing is made up
        assert "no code is available" in s.metadata["contexts_note"]
        assert s.metadata["commit"] == commits[s.metadata["repo"]]
        for file in s.metadata["referenced_files"]:
            assert file in s.ground_truth


def test_swe_qa_flask_record(tmp_path: Path) -> None:
    source = oracle_file("swe-qa-bench", "flask.jsonl")
    first = source.read_text("utf-8").splitlines()[0]
    path = tmp_path / "flask.jsonl"
    path.write_text(first + "\n", encoding="utf-8")
    commits = tmp_path / "commits.txt"
    commits.write_text("https://github.com/pallets/flask 85c5d93\n", encoding="utf-8")
    [s] = code.adapt_source(path, {"commits": str(commits)}).samples
    assert (s.metadata["repo"], s.metadata["commit"]) == ("pallets/flask", "85c5d93")
    assert s.metadata["referenced_files"] == ["src/flask/json/provider.py", "tests/test_json.py"]
    assert "DefaultJSONProvider" in s.metadata["referenced_symbols"]
    assert s.metadata["language"] == "python"
    assert s.metadata["source_file"] == "flask.jsonl" and s.metadata["source_line"] == 1
    assert s.difficulty == "medium"  # two files named
    # without a commits file the repository is the file name and the commit unknown
    (tmp_path / "other").mkdir()
    alone = tmp_path / "other" / "flask.jsonl"
    alone.write_text(first + "\n", encoding="utf-8")
    [t] = code.adapt_source(alone, {}).samples
    assert (t.metadata["repo"], t.metadata["commit"]) == ("flask", None)


def test_snippet_record_is_fenced_with_language_and_header() -> None:
    record = {"question": "What does the authenticate function return?",
              "answer": "A JWT token if credentials are valid, None otherwise.",
              "code": "def authenticate(username, password):\n    ...",
              "file_path": "src/auth/login.py", "repo": "example/webapp"}
    s = code.adapt_record(record)
    assert s is not None
    assert s.contexts == ("```python\n# File: src/auth/login.py\n# Repository: example/webapp\n\n"
                          "def authenticate(username, password):\n    ...\n```",)
    assert (s.question_type, s.metadata["language"], s.difficulty) == (
        "definition", "python", "easy")
    explicit = code.adapt_record({**record, "language": "Cython", "code": "x = '```'"})
    assert explicit is not None
    assert explicit.contexts[0].startswith("````cython\n") and explicit.contexts[0].endswith(
        "\n````")
    unknown = code.adapt_record({**record, "file_path": "Makefile"})
    assert unknown is not None and unknown.metadata["language"] == "text"


@pytest.mark.parametrize(("question", "expected"), [
    ("How to configure the retry policy?", "howto"),
    ("How does the loader resolve plugins?", "howto"),
    ("What is the purpose of conftest?", "definition"),
    ("Why does the cache expire?", "definition"),
    ("Where is the session created?", "lookup"),
    ("Which file defines the CLI?", "lookup"),
    ("Error when calling fit twice", "entity"),
    ("Something unrelated", "lookup"),
])
def test_code_question_types_follow_seed_keywords(question: str, expected: str) -> None:
    s = code.adapt_record({"question": question, "answer": "a", "code": "x = 1"})
    assert s is not None and s.question_type == expected


def test_coderepoqa_issue_record() -> None:
    issue = {"repository_url": "https://api.github.com/repos/pandas-dev/pandas",
             "number": 123, "title": "read_csv fails with error on empty file",
             "body": "Example:\n```python\npd.read_csv('empty.csv')\n```\nThanks",
             "comments_details": [
                 {"body": "+1 same here", "author_association": "NONE"},
                 {"body": "Use `pd.errors.EmptyDataError` handling.",
                  "author_association": "MEMBER"},
                 {"body": "thanks", "author_association": "CONTRIBUTOR"}]}
    s = code.adapt_record(issue)
    assert s is not None
    assert s.ground_truth == "Use `pd.errors.EmptyDataError` handling."
    assert s.question.startswith("read_csv fails with error on empty file\n\nExample:")
    assert s.contexts == ("```python\n# Repository: pandas-dev/pandas\n# Issue: #123\n\n"
                          "pd.read_csv('empty.csv')\n```",)
    assert (s.question_type, s.difficulty, s.id) == ("entity", "medium",
                                                     "coderepoqa-pandas-dev-pandas-123")
    unanswered = dict(issue, comments_details=[{"body": "me too", "author_association": "NONE"}])
    assert code.adapt_record(unanswered) is None


def test_bad_code_records_are_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    good = {"question": "Where is the session created?", "answer": "In sessions.py"}
    lines = [json.dumps(good), "{broken", json.dumps({"question": "No answer"}),
             json.dumps(good), json.dumps([1]), "",
             json.dumps({"title": "t", "comments_details": "x"})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = code.adapt_source(path, {})
    assert len(result.samples) == 1
    assert sorted((e.line, e.field) for e in result.errors) == [
        (2, None), (3, "answer"), (4, "question"), (5, None), (7, "comments_details")]
    assert "duplicate question" in str(next(e for e in result.errors if e.line == 4))


def test_commits_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "repo_commit.txt"
    path.write_text("https://github.com/a/b 123\nnot a line\n\nhttps://x.org/c/d.git 9\n")
    errors: list[CaseError] = []
    assert code.read_commits(path, errors) == {"b": ("a/b", "123"), "d": ("c/d", "9")}
    assert [(e.line, Path(e.file or "").name) for e in errors] == [(2, "repo_commit.txt")]
