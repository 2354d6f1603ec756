"""A toy ragbench project for the report tests: a test-only kind, a lookup-table system.

The ``toy`` kind (cases and items, added through ``pytest_ragbench_item_kinds`` as a
plugin would) reads ``toy`` cases; a lookup-table system answers (overriding
``ragbench_system`` in the project's conftest.py, and registered there as the named systems
``exact``, ``terse`` and ``halves`` through ``pytest_ragbench_systems``, as a user would plug
in their own), prefetched like any system's answers, and the real
``token_f1``/``exact_match`` metrics score the answer. It gives continuous metrics in
real pytest sessions, under pytest-xdist too (workers import the same conftest.py), until
the evaluation kinds land. ``degrade.txt`` in the project makes the system worse; a
question containing ``CRASH`` kills the worker, ``INTERRUPT`` raises KeyboardInterrupt.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.project import RagbenchProject

CONFTEST = '''
import json
import threading
from pathlib import Path

import pytest

from pytest_ragbench.cases.build import optional_text, text
from pytest_ragbench.kinds import CaseKind, Field, ItemKind
from pytest_ragbench.systems.components import set_component
from pytest_ragbench.systems.protocols import Answer

TOY_CASES = CaseKind(
    "toy", {"question": Field(True, text), "ground_truth": Field(True, text),
            "doc_type": Field(convert=optional_text), "question_type": Field(convert=optional_text),
            "difficulty": Field(convert=optional_text)},
    breakdown=("doc_type", "question_type", "difficulty"))
TOY = ItemKind(name="toy", case_kind="toy", runner="toy_runner:run",
               description="the test-only kind",
               fixtures=("ragbench_config", "ragbench_system"),
               metrics=("token_f1", "exact_match", "faithfulness"))
BUILT = []  # every toy system made in this process, in order


def pytest_ragbench_item_kinds(config):
    return [TOY_CASES, TOY]


def pytest_collection_modifyitems(items):
    """The project evaluates its toy kind only: built-in evaluation items are left out."""
    kinds = [getattr(item, "item_kind", None) for item in items]
    items[:] = [item for item, kind in zip(items, kinds)
                if kind is None or kind is TOY or kind.family == "verification"]


def _drop(text, every):
    return " ".join(w for i, w in enumerate(text.split()) if i % every != every - 1)


class ToySystem:
    """Answers from a lookup table, dropping every n-th word: a user's own RAG app."""

    def __init__(self, name, answers, every):
        self.name, self.answers, self.every = name, answers, every
        self.asked = []

    def describe(self):
        return f"toy {self.name}" + (f", drops every word {self.every}" if self.every else "")

    def answer(self, question, history=None):
        self.asked.append((question, threading.current_thread().name))
        text = self.answers[question]
        return Answer(_drop(text, self.every) if self.every else text)


def toy_system(request, name):
    root = Path(str(request.config.rootpath))
    degrade = (root / "degrade.txt").is_file()
    answers = json.loads((root / "answers.data").read_text())
    set_component(request.config, "generator",
                  "toy lookup table" + (" (degraded)" if degrade else ""))
    set_component(request.config, "judge", "none: judge metrics unscored")
    every = {"exact": 2 if degrade else 0, "terse": 3, "halves": 2}[name]
    BUILT.append(ToySystem(name, answers, every))
    return BUILT[-1]


def pytest_ragbench_systems(config):
    return {name: lambda request, name=name: toy_system(request, name)
            for name in ("exact", "terse", "halves")}


@pytest.fixture(scope="session")
def ragbench_system(request):
    return toy_system(request, "exact")
'''

RUNNER = '''
"""The test-only ``toy`` kind: the chosen toy system answers, token F1 scores it."""
import os

from pytest_ragbench.metrics import exact_match, token_f1
from pytest_ragbench.kinds import Outcome


def run(case, item):
    if "CRASH" in case.question:
        os._exit(3)
    if "INTERRUPT" in case.question:
        raise KeyboardInterrupt
    answer = item.answer(case.question).text
    words = len(answer.split())
    return Outcome(
        metrics={"token_f1": token_f1(answer, case.ground_truth),
                 "exact_match": exact_match(answer, case.ground_truth)},
        unscored={"faithfulness": "no judge configured (--ragbench-judge-url)"},
        usage={"generator": {"calls": 1, "prompt_tokens": len(case.question.split()),
                             "completion_tokens": words, "cache_hits": words % 2,
                             "latency_s": [0.001 * words]}},
        evidence={"answer": answer})
'''

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
         "sierra", "tango", "uniform", "victor", "whiskey", "xray")
CATEGORIES = ("lookup", "reasoning", "summary")
DIFFICULTIES = ("easy", "medium", "hard")


def toy_cases(count: int, seed: int = 7) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``count`` toy cases and the exact system's answers (some words wrong, some exact)."""
    rng = random.Random(seed)
    cases, answers = [], {}
    for index in range(count):
        truth = rng.sample(WORDS, rng.randint(6, 12))
        answer = list(truth)
        for position in rng.sample(range(len(answer)), rng.choice((0, 0, 1, 2, 3))):
            answer[position] = rng.choice(WORDS)
        question = f"question {index:03d} about {truth[0]}?"
        cases.append({"id": f"q{index:03d}", "kind": "toy", "question": question,
                      "ground_truth": " ".join(truth),
                      "category": CATEGORIES[index % 3],
                      "difficulty": DIFFICULTIES[(index // 3) % 3],
                      "doc_type": "pdf" if index % 2 else "html",
                      "question_type": "factual"})
        answers[question] = " ".join(answer)
    return cases, answers


def make_toy_project(pytester: pytest.Pytester, count: int = 30,
                     extra_cases: list[dict[str, Any]] | None = None,
                     pyproject: str = "", ini: str = "[pytest]\n",
                     conftest: str = "") -> RagbenchProject:
    """A project with ``count`` toy cases in ``test_cases/toy.jsonl`` (``conftest``: added code)."""
    cases, answers = toy_cases(count)
    for extra in extra_cases or []:
        cases.append(extra)
        answers.setdefault(extra["question"], extra["ground_truth"])
    project = RagbenchProject(pytester).conftest(CONFTEST + conftest).ini(ini)
    (project.path / "toy_runner.py").write_text(RUNNER)
    (project.path / "answers.data").write_text(json.dumps(answers))
    project.cases("toy.jsonl", cases)
    project.pyproject(pyproject or "[tool.ragbench]\n")
    return project


TIMING_KEYS = ("duration", "latency_s", "latency_p50_s", "latency_p95_s", "service_s",
               "service_p50_s", "service_p95_s")


def without_timings(value: Any) -> Any:
    """A results document minus what legitimately differs between runs: run info, timings."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if k not in TIMING_KEYS and k not in ("run", "timing")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def report_files(folder: Path) -> list[Path]:
    """Every file under the report dir."""
    return sorted(p for p in folder.rglob("*") if p.is_file())
