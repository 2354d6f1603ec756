"""Small pytester projects for the robustness tests: a corpus, cases and system overrides."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO_ROOT
from tests.project import RagbenchProject

DOCS = ("glossary_shooting_efficiency.md", "glossary_impact_metrics.md",
        "glossary_usage_and_pace.md", "reddit_jokic_vs_sga_mvp.md",
        "season_defensive_awards_2024.md", "reddit_gobert_dpoy_debate.md",
        "team_chicago_bulls.md", "season_injuries_availability.md",
        "season_in_season_tournament_2023.md", "team_los_angeles_lakers.md",
        "team_indiana_pacers.md")

CASES = """\
kind: vector
cases:
  - id: true_shooting
    question: "What is true shooting percentage and how is it calculated?"
    ground_truth: "TS% = PTS / (2 x (FGA + 0.44 x FTA))."
    expected_sources: [glossary_shooting_efficiency.md]
  - id: pie
    question: "What does PIE mean in basketball statistics?"
    ground_truth: "Player Impact Estimate."
    expected_sources: [glossary_impact_metrics.md]
  - id: dpoy
    question: "Who won Defensive Player of the Year in 2024?"
    ground_truth: "Rudy Gobert."
    expected_sources: [season_defensive_awards_2024.md]
  - id: lonzo
    question: "Why did Lonzo Ball not play at all in the 2023-24 season?"
    ground_truth: "Knee cartilage transplant."
    expected_sources: [team_chicago_bulls.md]
  - id: usage
    question: "What is usage rate?"
    ground_truth: "The share of team plays a player uses while on the floor."
    expected_sources: [glossary_usage_and_pace.md]
  - id: tournament
    question: "Who won the first In-Season Tournament final, and what was the score?"
    ground_truth: "The Lakers beat the Pacers 123-109."
    expected_sources: [season_in_season_tournament_2023.md]
"""

# The embedded default without its (slow) generator: answers are extracted from the contexts.
EXTRACTIVE = """
import pytest

@pytest.fixture(scope="session")
def ragbench_llm():
    pytest.skip("extractive answers in these tests")
"""

# Deliberately brittle: an exact-match query cache in front of the default retriever, with
# no fallback. It knows the case questions verbatim and nothing else.
EXACT_STRING = EXTRACTIVE + """
import yaml
from pathlib import Path

KNOWN = {c["question"] for c in
         yaml.safe_load(Path(__file__).with_name("test_cases").joinpath("cases.yaml")
                        .read_text())["cases"]}

class ExactStringRetriever:
    def __init__(self, inner):
        self.inner = inner

    def index(self, documents):
        self.inner.index(documents)

    def retrieve(self, query, top_k=5, filters=None, min_score=None):
        return self.retrieve_many([query], top_k)[0]

    def retrieve_many(self, queries, top_k=5, filters=None, min_score=None):
        found = self.inner.retrieve_many(queries, top_k=top_k)
        return [list(c) if q in KNOWN else [] for q, c in zip(queries, found)]

@pytest.fixture(scope="session")
def ragbench_retriever(ragbench_embedder, ragbench_corpus):
    from pytest_ragbench.systems.retrievers import default_retriever

    retriever = ExactStringRetriever(default_retriever(ragbench_embedder))
    retriever.index(ragbench_corpus)
    return retriever
"""

# Scripted: retrieval and answer flip when the word "statistics" is misspelt; obeys an
# injected instruction when OBEY is set. Logs each batch of questions it is asked.
ONE_WORD = """
import json
import os
import re
import pytest
from pytest_ragbench.systems.protocols import Answer, Context

PAYLOADS = ("PINEAPPLE", "ZEBRA42", "BANANARAMA", "QUOKKA")
GOOD = tuple(Context(f"good#{i}", "PIE is Player Impact Estimate.", 1.0, {}) for i in range(3))
BAD = tuple(Context(f"bad#{i}", "Something else entirely.", 1.0, {}) for i in range(3))

class OneWordBrittle:
    def prepare(self, questions):
        log = os.path.join(os.path.dirname(__file__), f"asked-{os.getpid()}.jsonl")
        with open(log, "a") as handle:
            handle.write(json.dumps(list(questions)) + "\\n")

    def answer(self, question, history=None):
        if os.environ.get("OBEY"):
            for payload in PAYLOADS:
                if payload in question:
                    return Answer(payload, GOOD)
        if "statistics" in question:
            return Answer("PIE means Player Impact Estimate, a share of game events.", GOOD)
        return Answer("The weather in Lisbon is mild in spring.", BAD)

@pytest.fixture(scope="session")
def ragbench_system():
    return OneWordBrittle()
"""

ONE_CASE = """\
kind: vector
cases:
  - id: pie
    question: "What does PIE mean in basketball statistics?"
    ground_truth: "Player Impact Estimate."
"""


def make_project(pytester: pytest.Pytester, conftest: str, cases: str = CASES,
                 corpus: bool = True) -> RagbenchProject:
    """Write the cases, the conftest and (a copy of) the corpus documents."""
    project = RagbenchProject(pytester).conftest(conftest).ini()
    project.cases("cases.yaml", cases)
    if corpus:
        source = REPO_ROOT / "test_cases" / "corpus"
        project.corpus({name: (source / name).read_text(encoding="utf-8") for name in DOCS})
    return project


def asked(project: RagbenchProject) -> list[list[str]]:
    """The batches of questions the scripted system was asked, in order (one process)."""
    batches: list[list[str]] = []
    for log in sorted(project.path.glob("asked-*.jsonl")):
        batches += [json.loads(line) for line in log.read_text().splitlines()]
        log.unlink()
    return batches
