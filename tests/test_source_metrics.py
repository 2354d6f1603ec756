"""Retrieval metrics named with the k actually used, and rank-aware ones (issue 20, point 4)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pytest_ragbench.config.thresholds import for_metrics
from pytest_ragbench.kinds.answer_common import Scores, retrieval_k, score_sources
from pytest_ragbench.systems.protocols import Context
from tests.project import RagbenchProject


def contexts(*sources: str) -> list[Context]:
    return [Context(f"{s}#{i}", f"text of {s}", 1.0 / (i + 1), {"source": s})
            for i, s in enumerate(sources)]


def test_k_is_the_systems_top_k_else_ragbench_k_else_the_number_returned() -> None:
    assert retrieval_k(SimpleNamespace(top_k=3), contexts("a", "b", "c", "d")) == 3
    assert retrieval_k(SimpleNamespace(top_k=10), contexts("a")) == 10  # what it was asked for
    assert retrieval_k(SimpleNamespace(top_k=10), contexts("a"), 3) == 10  # its own top_k wins
    assert retrieval_k(object(), contexts("a", "b", "c", "d"), 3) == 3  # ini ragbench_k
    assert retrieval_k(object(), contexts("a", "b", "c", "d")) == 4
    assert retrieval_k(object(), contexts(*"abcdefg")) == 7  # no cap
    assert retrieval_k(object(), []) == 5
    assert retrieval_k(SimpleNamespace(top_k=True), contexts("a", "b")) == 2  # not a number


def test_hit_recall_mrr_and_ndcg_at_the_k_used() -> None:
    scores = Scores()
    hits = score_sources(scores, ["a", "b"], contexts("x", "a", "y", "b"), k=4)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)  # relevant at ranks 2 and 4
    ideal = 1 + 1 / math.log2(3)
    assert scores.metrics["source_hit@4"] == 1.0
    assert scores.metrics["source_recall@4"] == 1.0
    assert scores.metrics["source_mrr"] == pytest.approx(0.5)
    assert scores.metrics["source_ndcg@4"] == pytest.approx(dcg / ideal)
    assert "source_hit@5" not in scores.metrics and hits.first_rank == 2

    scores = Scores()  # b only at rank 4, outside k = 3; MRR reads every context returned
    score_sources(scores, ["b"], contexts("x", "y", "z", "b"), k=3)
    assert scores.metrics["source_hit@3"] == 0.0
    assert scores.metrics["source_recall@3"] == 0.0
    assert scores.metrics["source_mrr"] == pytest.approx(0.25)
    assert scores.metrics["source_ndcg@3"] == 0.0


def test_chunks_of_one_source_count_once_at_their_first_rank() -> None:
    scores = Scores()
    score_sources(scores, ["b"], contexts("a", "a", "b"), k=3)
    assert scores.metrics["source_mrr"] == pytest.approx(0.5)  # sources a, b: b is 2nd
    assert scores.metrics["source_ndcg@3"] == pytest.approx(1 / math.log2(3))


def test_without_expected_sources_every_source_metric_is_unscored() -> None:
    scores = Scores()
    score_sources(scores, [], contexts("a", "b"), k=2)
    assert set(scores.unscored) == {"source_hit@2", "source_recall@2", "source_mrr",
                                    "source_ndcg@2", "id_context_precision",
                                    "id_context_recall"}
    assert not scores.metrics


def test_a_threshold_at_k_applies_to_the_k_used() -> None:
    limits = {"source_hit@k": 1.0, "answered": 1.0}
    assert for_metrics(limits, ["source_hit@4", "answered"]) == {"answered": 1.0,
                                                                  "source_hit@4": 1.0}
    assert for_metrics({**limits, "source_hit@4": 0.0}, ["source_hit@4"]) == {
        "answered": 1.0, "source_hit@4": 0.0}  # named for its cut-off: it wins
    assert for_metrics(limits, ["source_hit@kx"]) == {"answered": 1.0}


FOUR = '''
import zlib

import numpy as np
import pytest
from pytest_ragbench.protocols import Answer, Context


class FourContexts:  # no top_k: k is the number of contexts it returns
    def answer(self, question, history=None):
        found = tuple(Context(f"c{i}", f"passage {i}", 1.0 - i / 10, {"source": f"s{i}.md"})
                      for i in range(4))
        if "refuse" in question:
            return Answer("I'm sorry, but I can't answer that.", found)
        return Answer("An answer.", found)


class Words:
    def embed(self, texts):
        rows = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in text.lower().split():
                row[zlib.crc32(word.encode()) % 16] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="session")
def ragbench_system():
    return FourContexts()


@pytest.fixture(scope="session")
def ragbench_embedder():
    return Words()
'''
CASES = """kind: vector
cases:
  - id: found
    question: Where is s2?
    ground_truth: In passage 2.
    expected_sources: [s2.md]
  - id: missing
    question: Where is s9?
    ground_truth: Nowhere.
    expected_sources: [s9.md]
  - id: refused
    question: Please refuse this one.
    ground_truth: In passage 1.
"""


def test_a_system_returning_four_contexts_is_scored_at_four(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).conftest(FOUR)
    project.cases("vector.yaml", CASES)
    # a subprocess: the session imports ragas, which cannot be imported twice in one process
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*no expected source in the top 4*",
                                 "source_hit@4 = 0, needs >= 1*"])
    # an answerable case the system refuses fails by default
    result.stdout.fnmatch_lines(["*the answer declines (*) a question the documents answer*",
                                 "answered = 0, needs >= 1*"])
    found = project.items_by_case()
    assert found["found"]["metrics"]["source_mrr"] == pytest.approx(1 / 3)
    assert found["found"]["thresholds"]["source_hit@4"] == 1.0
    assert "source_hit@5" not in found["found"]["metrics"]

    project.gates('[thresholds]\n"vector.answered" = 0\n"vector.source_hit@k" = 0\n')
    project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider").assert_outcomes(
        passed=3)
