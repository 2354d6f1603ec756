"""Which component moved: retrieval metrics and answer metrics of real paired comparisons."""

from __future__ import annotations

import random

import pytest

from pytest_ragbench.results import comparisons as compare
from pytest_ragbench.results import stages
from pytest_ragbench.results.records import ItemRecord


@pytest.mark.parametrize(("metric", "stage"), [
    ("nDCG@10", "retrieval"), ("P@5", "retrieval"), ("MRR", "retrieval"),
    ("source_hit@5", "retrieval"), ("id_context_recall", "retrieval"),
    ("context_precision", "retrieval"), ("recall", "retrieval"), ("top_similarity", "retrieval"),
    ("semantic_similarity", "answer"), ("token_f1", "answer"), ("faithfulness", "answer"),
    ("answer_relevancy", "answer"), ("rouge", "answer"), ("lexical_faithfulness", "answer"),
    ("match", "answer"), ("value_recall", "answer"), ("answered", "answer"),
    ("accuracy", "answer"), ("total_time_ms", None), ("NumRet", None), ("my_metric", None),
])
def test_metrics_are_retrieval_or_answer_metrics(metric: str, stage: str | None) -> None:
    assert stages.stage_of(metric) == stage


def _records(seed: int = 3) -> list[ItemRecord]:
    """Two systems: the same retrieval, system b's answers clearly worse."""
    rng = random.Random(seed)
    records = []
    for index in range(40):
        recall = rng.choice((0.5, 1.0))
        similarity = rng.uniform(0.5, 0.9)
        for system, worse in (("a", 0.0), ("b", 0.12)):
            records.append(ItemRecord(
                nodeid=f"v.yaml::vector[{system}-c{index}]", kind="vector", case_kind="vector",
                case_id=f"c{index}", file="v.yaml", line=index, status="passed",
                system=system, metrics={"id_context_recall": recall,
                                        "semantic_similarity": similarity - worse
                                        + rng.gauss(0, 0.01),
                                        "total_time_ms": rng.uniform(1, 9)}))
    return records


def test_retrieval_unchanged_answers_worse() -> None:
    comparisons = compare.nest(compare.system_comparisons(_records(), ["b", "a"]))
    (name, lines), = stages.lines(comparisons)
    assert name == "b_vs_a"
    moved = comparisons["b_vs_a"]["vector"]["semantic_similarity"]
    assert moved["worse"] and not comparisons["b_vs_a"]["vector"]["id_context_recall"]["worse"]
    assert lines == [f"vector: retrieval unchanged, answers worse (semantic_similarity "
                     f"−{abs(moved['delta']):.3g}, p = {moved['p_holm']:.2g})"]
    (move,) = stages.moves(comparisons)
    assert move.moved and move.stages["retrieval"].verdict == "unchanged"


def test_both_stages_and_mixed_moves() -> None:
    def c(metric: str, delta: float, worse: bool, better: bool) -> dict[str, object]:
        return {"delta": delta, "p_holm": 0.001 if worse or better else 0.4, "worse": worse,
                "better": better}

    comparisons = {"x_vs_baseline": {
        "hybrid": {"id_context_recall": c("id_context_recall", -0.2, True, False),
                   "semantic_similarity": c("semantic_similarity", -0.1, True, False)},
        "sql": {"match": c("match", 0.3, False, True), "value_recall": c("v", -0.2, True, False),
                "total_time_ms": c("t", 900.0, True, False)},
        "memory": {"total_time_ms": c("t", 1.0, False, False)}}}
    (_, lines), = stages.lines(comparisons)
    assert lines[0].startswith("hybrid: retrieval worse (id_context_recall −0.2, p = 0.001), "
                               "answers worse (semantic_similarity −0.1")
    assert lines[1] == ("sql: answers mixed (value_recall −0.2, p = 0.001; match +0.3, "
                        "p = 0.001)")
    assert lines[2] == "memory: no retrieval or answer metric compared"
