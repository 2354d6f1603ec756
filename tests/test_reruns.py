"""pytest-rerunfailures' ``--reruns`` asks the system again: a result fetched ahead is used once.

A flaky system fails the first time each question is asked (a transient error, as a
model server restarting gives) and answers after. Its answers were fetched ahead of the
items, so the first attempt of every item fails; the rerun must ask the system again
and pass, and the system must have seen exactly two calls per question. First the
prefetcher on its own, then real sessions: the toy kind (answers through
``context.answer``), serially and under xdist, and ragas samples the system answers
(the ragas kind's own stage of model work).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.run.prefetch import Prefetcher
from pytest_ragbench.systems.protocols import Answer, AnswerRequest
from tests.ragas_samples import SAMPLES, warm_embedding_cache
from tests.toy_project import make_toy_project

pytest.importorskip("pytest_rerunfailures")


class FlakySystem:
    """Fails the first call of each question, answers the later ones."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def answer(self, question: str, history: object = None) -> Answer:
        with self.lock:
            self.calls[question] += 1
            first = self.calls[question] == 1
        if first:
            raise ConnectionError(f"transient: {question}")
        return Answer(f"answer to {question}")


def test_a_prefetched_exception_is_used_once() -> None:
    system = FlakySystem()
    prefetcher = Prefetcher(2)
    try:
        request = AnswerRequest("q1")
        prefetcher.submit_answers(system, {"item": request})
        with pytest.raises(ConnectionError):
            prefetcher.answer("item", system, request)
        assert prefetcher.answer("item", system, request).text == "answer to q1"  # the rerun
        assert prefetcher.answer("item", system, request).text == "answer to q1"  # and again
        assert system.calls == {"q1": 3}
    finally:
        prefetcher.close()


def test_a_shared_result_is_fetched_once_per_taker() -> None:
    """RAGCSV rows answered by the generator share one reply across systems, per item."""
    calls = Counter[str]()

    def job() -> int:
        calls["row"] += 1
        return calls["row"]

    prefetcher = Prefetcher(2)
    try:
        prefetcher.submit("file#1", job)
        assert prefetcher.result("file#1", taker="a::ragcsv[x]") == 1
        assert prefetcher.result("file#1", taker="b::ragcsv[x]") == 1  # another system's row
        assert prefetcher.result("file#1", taker="a::ragcsv[x]") == 2  # the first one, rerun
        assert calls["row"] == 2
    finally:
        prefetcher.close()


FLAKY_TOY = '''

import os


class FlakyToy:
    """The exact toy system; each question's first call fails. Calls go to calls.log."""

    def __init__(self, inner, root):
        self.inner, self.log = inner, os.path.join(root, "calls.log")

    def answer(self, question, history=None):
        with open(self.log, "a") as out:
            out.write(question + "\\n")
        with open(self.log) as seen:
            first = sum(line == question + "\\n" for line in seen) == 1
        if first:
            raise ConnectionError(f"transient: the server is restarting ({question})")
        return self.inner.answer(question)


@pytest.fixture(scope="session")
def ragbench_system(request):
    return FlakyToy(toy_system(request, "exact"), str(request.config.rootpath))
'''


def asked(path: Path) -> Counter[str]:
    """How many times each question was asked (calls.log)."""
    return Counter(path.read_text().splitlines())


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "n2"])
def test_reruns_ask_the_system_again(pytester: pytest.Pytester,
                                     workers: tuple[str, ...]) -> None:
    cases = 6
    project = make_toy_project(pytester, cases, conftest=FLAKY_TOY)
    result = project.runpytest_subprocess("--ragbench", "--reruns=2", *workers, timeout=300)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert result.parseoutcomes() == {"passed": cases, "rerun": cases}
    calls = asked(project.path / "calls.log")
    assert len(calls) == cases and set(calls.values()) == {2}, calls
    items = project.items()
    assert len(items) == cases and {i["status"] for i in items} == {"passed"}
    assert project.results()["run"]["status"] == "complete"


FLAKY_RAGAS = '''
import os

import pytest
from pytest_ragbench.systems.protocols import Answer, Context

ANSWERS = {answers!r}


class FlakySystem:
    """Answers each sample's question with its answer; the first call of each fails."""

    def answer(self, question, history=None):
        log = os.path.join(os.path.dirname(__file__), "calls.log")
        with open(log, "a") as out:
            out.write(question + "\\n")
        with open(log) as seen:
            if sum(line == question + "\\n" for line in seen) == 1:
                raise ConnectionError("transient: the server is restarting")
        text, context = ANSWERS[question]
        return Answer(text, (Context("museum", context, 0.9),))


@pytest.fixture(scope="session")
def ragbench_system():
    return FlakySystem()
'''


def test_reruns_of_ragas_items_ask_the_system_again(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    embeddings = warm_embedding_cache(tmp_path_factory)
    # The samples without contexts: the system answers them (the same texts as the
    # samples' own, whose embeddings the cache holds).
    samples = [{k: v for k, v in s.items() if k not in ("answer", "contexts")}
               for s in SAMPLES[:4]]
    answers = {s["question"]: (s["answer"], s["contexts"][0]) for s in SAMPLES[:4]}
    pytester.makeconftest(FLAKY_RAGAS.format(answers=answers))
    (pytester.path / "test_cases").mkdir()
    (pytester.path / "test_cases" / "samples.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in samples))
    result = pytester.runpytest_subprocess("--ragbench", "--reruns=2", "-p", "no:xdist",
                                           f"--ragbench-cache={embeddings}", timeout=600)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert result.parseoutcomes() == {"passed": len(samples), "rerun": len(samples)}
    calls = asked(pytester.path / "calls.log")
    assert calls == dict.fromkeys(answers, 2)
    lines = (pytester.path / ".ragbench" / "items.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines]
    assert {i["status"] for i in items} == {"passed"}
    assert sorted(i["evidence"]["answer"] for i in items) == sorted(a for a, _ in answers.values())
