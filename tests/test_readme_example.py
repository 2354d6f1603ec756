"""The README's conftest.py example runs as printed, and it is the override that answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.project import RagbenchProject

README = Path(__file__).resolve().parent.parent / "README.md"

MYAPP = '''
import json, pathlib

DOCS = [("d1", "The Lakers average field goal percentage is 51.5.", 0.9, "lakers.md"),
        ("d2", "The Celtics play in Boston.", 0.2, "celtics.md")]

def search(question, k=5):
    pathlib.Path("calls.jsonl").open("a").write(json.dumps({"search": question}) + "\\n")
    return DOCS[:k]

def generate(question, texts, history):
    pathlib.Path("calls.jsonl").open("a").write(json.dumps({"generate": question}) + "\\n")
    return "From my app: " + texts[0]
'''

CASES = """
kind: sql
cases:
  - id: lakers_fg
    question: What is the Lakers' average field goal percentage?
    expected_sql: SELECT 51.5 AS avg_fg_pct
    ground_truth_data: {avg_fg_pct: 51.5}
  - id: celtics_fg
    question: What is the Celtics' average field goal percentage?
    expected_sql: SELECT 47.1 AS avg_fg_pct
    ground_truth_data: {avg_fg_pct: 47.1}
"""


def readme_conftest() -> str:
    """The first Python block of the README section on evaluating your own system."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Evaluating your own RAG system", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README section has no Python example"
    return match.group(1)


def test_the_readme_override_is_what_answers(pytester: pytest.Pytester) -> None:
    code = readme_conftest()
    assert len([line for line in code.splitlines() if line.strip()]) <= 14
    project = RagbenchProject(pytester).conftest(code).ini(ragbench_db_url="sqlite://")
    project.makepyfile(myapp=MYAPP)
    project.cases("cases.yaml", CASES)
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider", "-k", "sql[")
    # The app's answer states 51.5 (it always quotes the Lakers document): one pass, one fail.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*From my app: The Lakers average*"])
    calls = [json.loads(line) for line in (project.path / "calls.jsonl").read_text().splitlines()]
    asked = {c.get("generate") for c in calls} - {None}
    assert asked == {"What is the Lakers' average field goal percentage?",
                     "What is the Celtics' average field goal percentage?"}
    assert sum("search" in c for c in calls) == 2  # each question asked once (prefetched)
