"""IR metrics against trec_eval's own test suite and trec_eval's rules."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from pytest_ragbench.errors import CaseError
from pytest_ragbench.metrics import (
    REGISTRY,
    IREvaluator,
    UnknownMetricError,
    Unscored,
    evaluate_run,
    parse_metric,
    read_qrels,
    read_run,
    write_run,
)
from pytest_ragbench.metrics.ir import trec_order
from tests.conftest import oracle_file

# ---------------------------------------------------------------- the trec_eval oracle


def _read_trec_output(path: Path) -> dict[str, dict[str, str]]:
    """``measure<TAB>qid<TAB>value`` lines → {qid: {measure: value}}."""
    table: dict[str, dict[str, str]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        measure, qid, value = (part.strip() for part in line.split("\t"))
        table[qid][measure] = value
    return table


def _registry_measures(oracle_names: list[str]) -> dict[str, list[str]]:
    """Oracle measure → our names for it (trec style and ir_measures style)."""
    covered: dict[str, list[str]] = {}
    for name in oracle_names:
        try:
            measure = parse_metric(name)
        except UnknownMetricError:
            continue
        if measure.spec.family == "ir" and measure.trec_key == name:
            covered[name] = [name, measure.name]
    return covered


@pytest.fixture(scope="module")
def trec() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels = read_qrels(oracle_file("trec_eval", "qrels.test"))
    run = read_run(oracle_file("trec_eval", "results.test"))
    return qrels, run


def _same(ours: float, expected: str) -> bool:
    if "." not in expected:  # num_* are printed as integers
        return ours == int(expected)
    return f"{ours:.4f}" == expected


@pytest.mark.parametrize("output", ["out.test", "out.test.a"])
def test_reproduces_trec_eval_means_for_every_registry_measure(trec: tuple, output: str) -> None:
    expected = _read_trec_output(oracle_file("trec_eval", output))["all"]
    covered = _registry_measures(list(expected))
    names = [n for pair in covered.values() for n in pair]
    ours = evaluate_run(trec[0], trec[1], names)
    wrong = [(oracle, name, ours[name], expected[oracle])
             for oracle, pair in covered.items() for name in pair
             if not _same(ours[name], expected[oracle])]
    assert not wrong
    if output == "out.test.a":
        # Every IR metric of the registry is checked against at least one oracle value.
        families = {parse_metric(name).spec.name for name in covered}
        assert families == {spec.name for spec in REGISTRY.family("ir")}
        # num_* ×4, map Rprec bpref recip_rank, ndcg, 9 cutoffs of P/recall/ndcg_cut/map_cut,
        # success_1/5/10.
        assert len(covered) == 4 + 4 + 1 + 4 * 9 + 3


def test_reproduces_trec_eval_per_query_values(trec: tuple) -> None:
    table = _read_trec_output(oracle_file("trec_eval", "out.test.aq"))
    covered = _registry_measures(list(table["all"]))
    names = list(covered)
    per_query = evaluate_run(trec[0], trec[1], names, per_query=True)
    assert set(per_query) == {"301", "302", "303"}
    checked = 0
    for qid, values in per_query.items():
        for name in names:
            if name == "num_q":  # trec_eval prints num_q only in the summary
                continue
            assert _same(values[name], table[qid][name]), (qid, name, values[name])
            checked += 1
    assert checked == 3 * (len(names) - 1)
    summary = evaluate_run(trec[0], trec[1], names)
    assert all(_same(summary[name], table["all"][name]) for name in names)


def test_agrees_with_elinors_trec_eval_rendering(trec: tuple) -> None:
    data = json.loads(oracle_file("elinor", "trec-eval", "qrels.test.output.json").read_text())
    expected = data["trec_eval_output"]
    covered = _registry_measures(list(expected))
    ours = evaluate_run(trec[0], trec[1], list(covered))
    assert len(covered) == 4 + 4 + 1 + 4 * 9 + 3
    assert all(_same(ours[name], expected[name]) for name in covered)


def test_oracle_run_needs_no_rank_column(trec: tuple, tmp_path: Path) -> None:
    """Ranks are ignored: re-writing the run with our ranks gives the same numbers."""
    qrels, run = trec
    path = tmp_path / "again.run"
    write_run(path, run, tag="STANDARD")
    assert read_run(path) == run
    lines = path.read_text().splitlines()
    assert lines[0].split()[3] == "1"
    names = ["map", "P@10", "nDCG@10", "bpref"]
    assert evaluate_run(qrels, read_run(path), names) == evaluate_run(qrels, run, names)


# ---------------------------------------------------------------- trec_eval's rules


def test_ties_are_broken_by_document_id_descending() -> None:
    qrels = {"q": {"a": 1, "b": 0, "c": 0}}
    # All tied: trec_eval ranks c, b, a, so the relevant 'a' comes third.
    assert evaluate_run(qrels, {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}, ["RR"])["RR"] == 1 / 3
    # strcmp order: 'a' (0x61) > 'B' (0x42), so 'a' ranks first.
    assert evaluate_run(qrels, {"q": {"a": 1.0, "B": 1.0}}, ["RR"])["RR"] == 1.0
    # A higher score always wins over the tie rule.
    assert evaluate_run(qrels, {"q": {"a": 2.0, "z": 1.0}}, ["RR"])["RR"] == 1.0
    assert trec_order({"a": 1.0, "c": 1.0, "b": 3.0}) == [("b", 3.0), ("c", 1.0), ("a", 1.0)]


def test_tied_oracle_run_equals_its_explicit_trec_order(trec: tuple) -> None:
    qrels, run = trec
    explicit = {qid: {doc: float(len(ranking) - i) for i, (doc, _) in
                      enumerate(trec_order(ranking))} for qid, ranking in run.items()}
    names = ["map", "P@5", "P@100", "nDCG@20", "RR", "bpref", "Rprec", "R@200"]
    assert evaluate_run(qrels, explicit, names, per_query=True) == \
        evaluate_run(qrels, run, names, per_query=True)


def test_queries_without_results_are_left_out_unless_complete(trec: tuple) -> None:
    """trec_eval -c on results.test without topic 303, derived from out.test.aq."""
    qrels, run = trec
    table = _read_trec_output(oracle_file("trec_eval", "out.test.aq"))
    partial = {qid: ranking for qid, ranking in run.items() if qid != "303"}
    names = ["map", "P_10", "ndcg_cut_10", "recip_rank", "num_rel", "num_ret", "num_q"]
    plain = evaluate_run(qrels, partial, names)
    complete = evaluate_run(qrels, partial, names, complete=True)
    for name in ["map", "P_10", "ndcg_cut_10", "recip_rank"]:
        values = [float(table[q][name]) for q in ("301", "302")]
        assert plain[name] == pytest.approx(sum(values) / 2, abs=1e-4)
        assert complete[name] == pytest.approx(sum(values) / 3, abs=1e-4)
    assert plain["num_q"] == 2 and complete["num_q"] == 3
    assert plain["num_ret"] == complete["num_ret"] == 1000
    assert plain["num_rel"] == int(table["301"]["num_rel"]) + int(table["302"]["num_rel"])
    assert complete["num_rel"] == int(table["all"]["num_rel"])
    per_query = evaluate_run(qrels, partial, names, per_query=True, complete=True)
    assert per_query["303"]["map"] == 0.0 and per_query["303"]["num_ret"] == 0.0
    assert "303" not in evaluate_run(qrels, partial, names, per_query=True)


def test_empty_rankings_count_as_no_results() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": {"a": 1.0}, "q2": {}}
    assert evaluate_run(qrels, run, ["P@1"]) == {"P@1": 1.0}
    assert evaluate_run(qrels, run, ["P@1"], complete=True) == {"P@1": 0.5}


def test_relevance_level_is_trec_eval_minus_l() -> None:
    qrels = {"q": {"d1": 1, "d2": 2, "d3": 0, "d4": 2}}
    run = {"q": {"d1": 4.0, "d2": 3.0, "d3": 2.0, "d4": 1.0}}
    names = ["P@2", "RR", "num_rel", "R@2"]
    assert evaluate_run(qrels, run, names) == {"P@2": 1.0, "RR": 1.0, "num_rel": 3.0,
                                               "R@2": 2 / 3}
    assert evaluate_run(qrels, run, names, relevance_level=2) == {
        "P@2": 0.5, "RR": 0.5, "num_rel": 2.0, "R@2": 0.5}


def test_queries_judged_only_negative_are_scored_not_crashed() -> None:
    """pytrec_eval alone reports num_ret = 0 here (and may hang with many measures)."""
    qrels = {"q": {"d3": -1}}
    run = {"q": {"d3": 3.8, "d6": -1.7, "d5": 0.9, "d7": -0.7, "d11": 2.4, "d0": 0.2}}
    names = ["num_rel", "RR", "NumQ", "AP@5", "R@5", "num_ret", "AP", "num_rel_ret", "nDCG",
             "Bpref"]
    result = evaluate_run(qrels, run, names, relevance_level=2)
    assert result == {**dict.fromkeys(names, 0.0), "num_ret": 6.0, "NumQ": 1.0}


def test_negative_grades_are_not_judged_non_relevant() -> None:
    """trec_eval: a negative grade is not a judged non-relevant document (bpref)."""
    run = {"q": {"neg": 2.0, "rel": 1.0}}
    assert evaluate_run({"q": {"neg": -1, "rel": 1}}, run, ["Bpref"])["Bpref"] == 1.0
    assert evaluate_run({"q": {"neg": 0, "rel": 1}}, run, ["Bpref"])["Bpref"] == 0.0


def test_graded_ndcg_uses_grades_as_linear_gains() -> None:
    qrels = {"q": {"d1": 1, "d2": 3}}
    dcg = 1 / np.log2(2) + 3 / np.log2(3)
    ideal = 3 / np.log2(2) + 1 / np.log2(3)
    result = evaluate_run(qrels, {"q": {"d1": 2.0, "d2": 1.0}}, ["nDCG@2"])
    assert result["nDCG@2"] == pytest.approx(dcg / ideal, abs=1e-12)


def test_output_keys_are_the_callers_names() -> None:
    qrels = {"q": {"a": 1}}
    result = evaluate_run(qrels, {"q": {"a": 1.0}}, ["ndcg_cut_10", "nDCG@10", "AP", "map"])
    assert list(result) == ["ndcg_cut_10", "nDCG@10", "AP", "map"]
    assert set(result.values()) == {1.0}


def test_score_query_matches_the_per_query_evaluation(trec: tuple) -> None:
    qrels, run = trec
    names = ["nDCG@10", "P@5", "AP", "RR", "R@100", "Success@10", "num_rel_ret"]
    evaluator = IREvaluator(qrels, names)
    per_query = evaluator.evaluate(run, per_query=True)
    for qid, ranking in run.items():
        assert evaluator.score_query(qid, ranking) == per_query[qid]
    unjudged = evaluator.score_query("999", {"x": 1.0})
    assert all(isinstance(v, Unscored) and "no relevance judgments" in v.reason
               for v in unjudged.values())


def test_no_overlap_between_run_and_qrels_is_unscored_not_nan() -> None:
    result = evaluate_run({"q1": {"a": 1}}, {"q2": {"a": 1.0}}, ["map"])
    assert isinstance(result["map"], Unscored)
    assert evaluate_run({"q1": {"a": 1}}, {"q2": {"a": 1.0}}, ["map"], complete=True) == \
        {"map": 0.0}


def test_numpy_scores_and_integer_ids_are_accepted() -> None:
    qrels = {1: {10: 1, 11: 0}}
    run = {1: {10: np.float32(0.9), 11: np.float64(0.1)}}
    assert evaluate_run(qrels, run, ["P@1"]) == {"P@1": 1.0}  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "high", None])
def test_bad_scores_name_the_query_and_document(bad: object) -> None:
    run = {"q": {"a": 1.0, "b": bad}}
    with pytest.raises(ValueError, match=r"query 'q', document 'b'"):
        evaluate_run({"q": {"a": 1}}, run, ["map"])  # type: ignore[arg-type]


def test_bad_grades_measures_and_levels_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"query 'q', document 'a': relevance 0.5"):
        IREvaluator({"q": {"a": 0.5}}, ["map"])  # type: ignore[dict-item]
    with pytest.raises(UnknownMetricError):
        IREvaluator({"q": {"a": 1}}, ["nDCG@ten"])
    with pytest.raises(ValueError, match="not an IR measure"):
        IREvaluator({"q": {"a": 1}}, ["token_f1"])
    with pytest.raises(ValueError, match="relevance_level"):
        IREvaluator({"q": {"a": 1}}, ["map"], relevance_level=0)
    with pytest.raises(ValueError, match="no measures"):
        IREvaluator({"q": {"a": 1}}, [])


def test_trec_file_errors_name_file_line_and_field(tmp_path: Path) -> None:
    qrels = tmp_path / "bad.qrels"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 high\n")
    with pytest.raises(CaseError, match=r"bad.qrels:2: field 'rel': relevance 'high'"):
        read_qrels(qrels)
    run = tmp_path / "bad.run"
    run.write_text("q1 Q0 d1 1 0.5 tag\n\nq1 Q0 d2 2 nan tag\n")
    with pytest.raises(CaseError, match=r"bad.run:3: field 'score'"):
        read_run(run)
    short = tmp_path / "short.run"
    short.write_text("q1 Q0 d1 1 0.5\n")
    with pytest.raises(CaseError, match=r"short.run:1: expected 6 columns"):
        read_run(short)
    twice = tmp_path / "twice.qrels"
    twice.write_text("q1 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(CaseError, match=r"twice.qrels:2: field 'docno'"):
        read_qrels(twice)
