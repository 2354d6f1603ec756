"""k follows the system: source metrics at the k it was asked for, compared across k.

A system's ``top_k`` (else ini ``ragbench_k``, else the number of contexts it returned)
is the cut-off of ``source_hit@k``, ``source_recall@k`` and ``source_ndcg@k``. Runs or
systems that used different k are compared as ``source_hit@k`` (each at its own k) and at
the common k (rescored from the ranked source names the records keep); what cannot be
compared is listed, and no stage is called unchanged with a metric left out.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_ragbench.kinds.answer_common import Scores, retrieval_k, score_sources
from pytest_ragbench.metrics.registry import REGISTRY
from pytest_ragbench.results import comparisons as compare
from pytest_ragbench.results import cutoffs, gates, stages
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.systems.protocols import Context
from tests.project import RagbenchProject


def ranked(*sources: str) -> list[Context]:
    return [Context(f"{s}#{i}", f"text of {s}", 1.0 / (i + 1), {"source": s})
            for i, s in enumerate(sources)]


SEVEN = ranked("a", "b", "c", "d", "e", "f", "wanted", "h", "i", "j")


def test_a_system_at_top_k_10_scores_the_source_at_rank_7_and_one_at_5_does_not() -> None:
    results = {}
    for top_k in (5, 10):
        system = SimpleNamespace(top_k=top_k)
        k = retrieval_k(system, SEVEN[:top_k])
        scores = Scores()
        score_sources(scores, ["wanted"], SEVEN[:top_k], k)
        results[top_k] = scores.metrics
    assert results[10]["source_hit@10"] == 1.0 and results[10]["source_recall@10"] == 1.0
    assert results[10]["source_ndcg@10"] == pytest.approx(1 / 3)  # 1 / log2(7 + 1)
    assert results[5]["source_hit@5"] == 0.0 and results[5]["source_ndcg@5"] == 0.0


def test_ndcg_at_k_reads_the_first_k_contexts_only() -> None:
    scores = Scores()  # one source's chunks fill the top 5; the expected one is 6th
    score_sources(scores, ["b"], ranked("a", "a", "a", "a", "a", "b"), 5)
    assert scores.metrics["source_ndcg@5"] == 0.0 and scores.metrics["source_hit@5"] == 0.0
    assert scores.metrics["source_mrr"] == pytest.approx(0.5)  # every context, a source once


def test_a_kept_ranking_rescores_at_a_smaller_k_as_scoring_there_would() -> None:
    contexts = ranked("x", "b", "y", "a", "z")
    scores = Scores()
    hits = score_sources(scores, ["a", "b"], contexts, 5)
    record = ItemRecord("n", "vector", "vector", "c", "f", 1, "passed",
                        metrics=scores.metrics, retrieval=hits.kept())
    for k in (1, 2, 3, 4):
        direct = Scores()
        score_sources(direct, ["a", "b"], contexts[:k], k)
        for stem in cutoffs.SYSTEM_K:
            assert cutoffs.value_at(record, stem, k) == pytest.approx(
                direct.metrics[f"{stem}@{k}"])
    assert cutoffs.value_at(record, "source_hit", 6) is None  # never asked for 6
    tampered = ItemRecord("n", "vector", "vector", "c", "f", 1, "passed",
                          metrics={**scores.metrics, "source_recall@5": 0.5},
                          retrieval=hits.kept())
    assert cutoffs.value_at(tampered, "source_recall", 2) is None  # kept != recorded


def test_source_hit_at_k_is_a_registered_name() -> None:
    spec = REGISTRY.lookup("source_hit@k")
    assert spec is not None and spec.name == "source_hit"
    assert REGISTRY.direction("source_ndcg@k") == "higher"
    assert stages.stage_of("source_recall@k") == "retrieval"


def _records(k: int, ranks: list[int], system: str | None = None,
             keep: bool = True) -> list[ItemRecord]:
    """One vector item per case: the expected source at ``ranks[i]``, the system at ``k``."""
    out = []
    for index, rank in enumerate(ranks):
        sources = [f"other{j}" for j in range(1, 6)]
        sources.insert(rank - 1, "wanted")
        contexts = ranked(*sources)[:k]
        scores = Scores()
        hits = score_sources(scores, ["wanted"], contexts, k)
        out.append(ItemRecord(
            f"v.yaml::vector[{system + '-' if system else ''}c{index}]", "vector", "vector",
            f"c{index}", "v.yaml", index + 1, "passed", system=system, metrics=scores.metrics,
            retrieval=hits.kept() if keep else {}))
    return out


LOST = [3] * 12 + [1] * 8  # 12 of 20 cases have their source at rank 3: lost at k = 2


def test_a_run_at_a_smaller_k_is_worse_on_source_hit_at_k() -> None:
    compared, counts = compare.compare_baseline(_records(2, LOST), _records(4, LOST))
    assert counts["paired"] == 20 and compared.not_compared == []
    found = compare.nest(compared.comparisons)["current_vs_baseline"]["vector"]
    asked = found["source_hit@k"]
    assert asked["worse"] and asked["delta"] == pytest.approx(-0.6)
    assert (asked["mean_a"], asked["mean_b"]) == (pytest.approx(0.4), 1.0)
    common = found["source_hit@2"]  # the same ranking cut at 2 on both sides
    assert common["delta"] == 0.0 and not common["worse"]
    assert {"source_recall@k", "source_recall@2", "source_ndcg@k", "source_ndcg@2",
            "source_mrr"} <= set(found)
    assert "source_hit@4" not in found  # compared as source_hit@k and source_hit@2
    (_, (line,)), = stages.lines(compare.nest(compared.comparisons), compared.not_compared)
    assert line.startswith("vector: retrieval worse (")
    assert f"source_hit@k −0.6, p = {asked['p_holm']:.2g}" in line


def test_one_lost_source_is_named_worse_but_not_significantly() -> None:
    one = [3] + [1] * 16
    compared, _ = compare.compare_baseline(_records(2, one), _records(4, one))
    found = compare.nest(compared.comparisons)
    asked = found["current_vs_baseline"]["vector"]["source_hit@k"]
    assert asked["mean_a"] == pytest.approx(16 / 17) and not asked["worse"]
    (_, (line,)), = stages.lines(found, compared.not_compared)
    # fewer contexts: id_context_precision is better; the lost source is named all the same
    assert "worse, not significantly (" in line and "source_hit@k −0.0588, p = 1" in line
    assert "unchanged" not in line


def test_records_that_keep_no_ranking_list_the_common_k_as_not_compared() -> None:
    compared, _ = compare.compare_baseline(_records(2, LOST),
                                           _records(4, LOST, keep=False))  # an old saved run
    missing = {c["metric"]: c["reason"] for c in compared.not_compared}
    assert set(missing) == {"source_hit@2", "source_recall@2", "source_ndcg@2"}
    assert missing["source_hit@2"] == ("the records of 20 of 20 pairs keep no ranking to "
                                       "rescore it at the common k = 2")
    nested = compare.nest(compared.comparisons)
    assert "source_hit@k" in nested["current_vs_baseline"]["vector"]
    (move,) = stages.moves(nested, compared.not_compared)
    assert len(move.stages["retrieval"].missing) == 3
    assert "not compared: source_hit@2 (the records of 20 of 20" in move.line()


def test_the_terminal_and_the_page_list_what_was_not_compared() -> None:
    from pytest_ragbench.render import html, terminal

    compared, _ = compare.compare_baseline(_records(2, LOST), _records(4, LOST, keep=False))
    document = {"comparisons": compare.nest(compared.comparisons),
                "not_compared": compared.not_compared}
    lines = terminal.comparison_lines(document)
    start = lines.index("not compared (3 metric(s) recorded but not paired):")
    assert lines[start + 1] == ("  current_vs_baseline vector.source_hit@2: the records of 20 "
                                "of 20 pairs keep no ranking to rescore it at the common k = 2")
    assert any(line.startswith("    vector: retrieval worse (") for line in lines)
    page = html.comparisons_section(document, html.Page([]))
    assert "not compared (3 metric(s) recorded but not paired):" in page
    assert "current_vs_baseline vector.source_ndcg@2: the records of 20 of 20" in page
    assert "not compared: source_hit@2 (the records" in html.gates_section(document)


def test_a_metric_on_one_side_only_is_listed_and_its_stage_not_called_unchanged() -> None:
    current = _records(4, [1] * 10)
    baseline = [ItemRecord(r.nodeid, r.kind, r.case_kind, r.case_id, r.file, r.line, r.status,
                           metrics={m: v for m, v in r.metrics.items() if m != "source_ndcg@4"},
                           retrieval=r.retrieval) for r in current]
    compared, _ = compare.compare_baseline(current, baseline)
    assert compared.not_compared == [{"name": "current_vs_baseline", "kind": "vector",
                                      "system": None, "metric": "source_ndcg@4",
                                      "reason": "only in the current run"}]
    (_, (line,)), = stages.lines(compare.nest(compared.comparisons), compared.not_compared)
    assert "unchanged" not in line
    assert line == ("vector: retrieval: no difference in the 5 metric(s) compared; not "
                    "compared: source_ndcg@4 (only in the current run)")


def test_systems_of_different_k_are_compared_at_their_own_and_the_common_k() -> None:
    records = _records(2, LOST, "k2") + _records(4, LOST, "k4")
    compared = compare.compare_systems(records, ["k2", "k4"])
    found = compare.nest(compared.comparisons)["k2_vs_k4"]["vector"]
    assert found["source_hit@k"]["worse"] and found["source_hit@2"]["delta"] == 0.0
    assert compared.not_compared == []


def test_a_gate_at_k_bounds_the_metric_at_the_k_recorded() -> None:
    gate = gates.parse_gates({"vector.source_hit@k": 0.9})[0]
    (concrete,) = gates.at_recorded_k(gate, ["source_hit@4", "source_mrr"])
    assert concrete.metric == "source_hit@4" and concrete.name == "vector.source_hit@k"
    cell = gates.gate_cells(concrete, [])[0]
    result = gates.check(concrete, cell, {"n": 10, "mean": 0.5}, "mean")
    assert result["passed"] is False
    assert gates.gate_line(result).startswith("gate vector.source_hit@k (source_hit@4) >= 0.9: "
                                              "MISSED (mean 0.5")
    assert gates.at_recorded_k(gate, ["source_mrr"]) == [gate]  # nothing at any k: as it is


# -- a session: save at top_k 4, rerun at top_k 2 ---------------------------------------------

SYSTEM = '''
import zlib
from pathlib import Path

import numpy as np
import pytest
from pytest_ragbench.protocols import Answer, Context


class Ranked:
    """Returns s1.md ... s6.md in that order, cut at top_k (k.txt), or all six without it."""

    def __init__(self, top_k):
        if top_k:
            self.top_k = top_k

    def answer(self, question, history=None):
        found = tuple(Context(f"c{i}", f"passage {i}", 1.0 - i / 10, {"source": f"s{i}.md"})
                      for i in range(1, 7))
        return Answer("An answer.", found[:getattr(self, "top_k", 6)])


class Words:
    def embed(self, texts):
        rows = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in text.lower().split():
                row[zlib.crc32(word.encode()) % 16] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="session")
def ragbench_system(request):
    path = Path(str(request.config.rootpath)) / "k.txt"
    return Ranked(int(path.read_text()) if path.exists() else None)


@pytest.fixture(scope="session")
def ragbench_embedder():
    return Words()
'''


def _cases() -> str:
    lines = ["kind: vector", "thresholds: {}", "cases:"]
    for index in range(16):
        rank = 3 if index < 12 else 1  # 12 sources at rank 3, lost at top_k 2
        lines += [f"  - id: c{index:02d}", f"    question: Where is item {index}?",
                  "    ground_truth: In a passage.", f"    expected_sources: [s{rank}.md]"]
    return "\n".join(lines) + "\n"


def test_a_top_k_4_to_2_regression_is_reported_worse_on_source_hit_at_k(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).conftest(SYSTEM)
    project.cases("vector.yaml", _cases())
    (project.path / "k.txt").write_text("4")
    # subprocesses: the session imports ragas, which cannot be imported twice in one process
    saved = project.runpytest_subprocess("--ragbench", "--ragbench-save=k4", "-p",
                                         "no:cacheprovider")
    saved.assert_outcomes(passed=16)
    assert {r["retrieval"]["k"] for r in project.items()} == {4}
    (project.path / "k.txt").write_text("2")
    result = project.runpytest_subprocess("--ragbench", "--ragbench-compare=k4", "-p",
                                          "no:cacheprovider")
    result.stdout.fnmatch_lines(["current_vs_baseline * vector * source_hit@k * -0.75* WORSE",
                                 "*vector: retrieval worse (*source_hit@k −0.75*"])
    data = project.results()
    assert data["not_compared"] == []
    common = data["comparisons"]["current_vs_baseline"]["vector"]["source_hit@2"]
    assert common["delta"] == 0.0
    assert project.items_by_case()["c00"]["metrics"]["source_hit@2"] == 0.0
    # a system that says no top_k is scored at ini ragbench_k
    (project.path / "k.txt").unlink()
    project.ini(ragbench_k=3)
    project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider").assert_outcomes(
        passed=16)
    assert project.items_by_case()["c00"]["metrics"]["source_hit@3"] == 1.0
    assert project.results()["config"]["k"] == 3
