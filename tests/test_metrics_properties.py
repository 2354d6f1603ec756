"""Properties of metrics and statistics that must hold for any input (hypothesis)."""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_ragbench.metrics import (
    Unscored,
    evaluate_run,
    exact_match,
    numeric_match,
    parse_metric,
    set_metrics,
    token_f1,
)
from pytest_ragbench.metrics.ir import trec_order
from pytest_ragbench.stats import core as stats

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
MEASURES = ["nDCG@5", "nDCG", "P@3", "R@5", "AP", "AP@5", "RR", "Rprec", "Bpref", "Success@3",
            "num_ret", "num_rel", "num_rel_ret"]

doc_ids = st.sampled_from([f"d{i}" for i in range(12)])
grades = st.integers(min_value=-2, max_value=3)  # trec_eval allows negative grades
scores = st.floats(min_value=-5, max_value=5, allow_nan=False).map(lambda x: round(x, 1))


@st.composite
def collections(draw: st.DrawFn) -> tuple[dict, dict]:
    """Graded qrels and a run (with ties) over a few queries."""
    qrels, run = {}, {}
    for q in range(draw(st.integers(1, 4))):
        qid = f"q{q}"
        qrels[qid] = draw(st.dictionaries(doc_ids, grades, min_size=1, max_size=8))
        ranking = draw(st.dictionaries(doc_ids, scores, max_size=10))
        if ranking:
            run[qid] = ranking
    return qrels, run


@PROPERTY
@given(collections())
def test_ir_measures_stay_in_their_declared_ranges(data: tuple[dict, dict]) -> None:
    per_query = evaluate_run(*data, MEASURES, per_query=True, complete=True)
    for values in per_query.values():
        for name, value in values.items():
            spec = parse_metric(name).spec
            assert isinstance(value, float) and spec.low <= value <= spec.high, (name, value)


@PROPERTY
@given(st.dictionaries(doc_ids, st.integers(1, 3), min_size=1, max_size=10))
def test_a_perfect_ranking_scores_one(relevant: dict[str, int]) -> None:
    qrels = {"q": {**relevant, "junk1": 0, "junk2": 0}}
    ranking = {doc: float(10 * grade + i) for i, (doc, grade) in
               enumerate(sorted(relevant.items(), key=lambda kv: kv[1]))}
    ranking.update({"junk1": -1.0, "junk2": -2.0})
    names = ["nDCG", "nDCG@3", "AP", "RR", "Rprec", "Success@1", "Bpref",
             f"P@{len(relevant)}", f"R@{len(relevant)}"]
    result = evaluate_run(qrels, {"q": ranking}, names)
    assert result == dict.fromkeys(names, 1.0)


@PROPERTY
@given(collections())
def test_recall_never_decreases_with_k(data: tuple[dict, dict]) -> None:
    cutoffs = [1, 2, 3, 5, 8, 13]
    result = evaluate_run(*data, [f"R@{k}" for k in cutoffs])
    assume(not any(isinstance(v, Unscored) for v in result.values()))
    values = [result[f"R@{k}"] for k in cutoffs]
    assert values == sorted(values)


@PROPERTY
@given(collections(), st.randoms(use_true_random=False))
def test_reordering_queries_and_documents_changes_nothing(data: tuple[dict, dict],
                                                          rnd: random.Random) -> None:
    qrels, run = data

    def shuffled(mapping: dict) -> dict:
        items = list(mapping.items())
        rnd.shuffle(items)
        return dict(items)

    run2 = shuffled({q: shuffled(r) for q, r in run.items()})
    assert evaluate_run(shuffled(qrels), run2, MEASURES) == evaluate_run(qrels, run, MEASURES)


@PROPERTY
@given(collections())
def test_ties_follow_trec_order(data: tuple[dict, dict]) -> None:
    qrels, run = data
    explicit = {q: {doc: float(len(r) - i) for i, (doc, _) in enumerate(trec_order(r))}
                for q, r in run.items()}
    assert evaluate_run(qrels, explicit, MEASURES, per_query=True) == \
        evaluate_run(qrels, run, MEASURES, per_query=True)


@PROPERTY
@given(collections())
def test_relevance_level_equals_zeroing_lower_grades(data: tuple[dict, dict]) -> None:
    qrels, run = data
    binary = ["P@3", "R@5", "AP", "RR", "Rprec", "Success@3", "num_rel", "num_rel_ret"]
    lowered = {q: {d: (g if g >= 2 else 0) for d, g in rels.items()} for q, rels in qrels.items()}
    assert evaluate_run(qrels, run, binary, relevance_level=2, per_query=True) == \
        evaluate_run(lowered, run, binary, per_query=True)


@PROPERTY
@given(collections())
def test_complete_mean_is_the_sum_over_every_judged_query(data: tuple[dict, dict]) -> None:
    qrels, run = data
    per_query = evaluate_run(qrels, run, ["AP", "P@3"], per_query=True, complete=True)
    assert set(per_query) == set(qrels)
    mean = evaluate_run(qrels, run, ["AP", "P@3"], complete=True)
    for name in ("AP", "P@3"):
        expected = math.fsum(v[name] for v in per_query.values()) / len(qrels)
        assert mean[name] == expected or math.isclose(mean[name], expected, abs_tol=1e-12)


# ---------------------------------------------------------------- answer and set metrics

texts = st.text(st.characters(codec="ascii", categories=["L", "N", "P", "Zs"]), max_size=40)


@PROPERTY
@given(texts, st.lists(texts, min_size=1, max_size=3))
def test_answer_metrics_stay_in_range(prediction: str, references: list[str]) -> None:
    f1 = token_f1(prediction, references)
    em = exact_match(prediction, references)
    assert 0.0 <= f1 <= 1.0 and em in (0.0, 1.0)
    if em == 1.0:
        assert f1 == 1.0


@PROPERTY
@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_formatted_numbers_match_their_value(value: float) -> None:
    sign, size = ("-" if value < 0 else ""), abs(value)
    for text in (f"{value:,.2f}", f"{value:.4f}", f"{sign}${size / 1e6:.2f} million",
                 f"{sign}{size / 1e3:.1f}k", f"{sign}{size / 1e9:.3f} billion"):
        assert numeric_match(f"It was {text}.", value) == 1.0, text


@PROPERTY
@given(st.lists(st.sampled_from(range(8)), max_size=8), st.lists(st.sampled_from(range(8)),
                                                                 max_size=5))
def test_set_metrics_stay_in_range(retrieved: list[int], expected: list[int]) -> None:
    result = set_metrics(retrieved, expected, scores=[0.5] * len(retrieved))
    for value in (result.precision, result.recall, result.f1, result.relevance_score):
        assert isinstance(value, float) and 0.0 <= value <= 1.0
    assert min(result.precision, result.recall) <= result.f1 <= max(result.precision,
                                                                    result.recall)


# ---------------------------------------------------------------- statistics

samples = st.lists(st.floats(min_value=-100, max_value=100, allow_nan=False), min_size=1,
                   max_size=60)


@settings(max_examples=40, deadline=None)
@given(samples, st.sampled_from(["bca", "percentile"]))
def test_confidence_intervals_contain_the_sample_mean(values: list[float], method: str) -> None:
    mean = math.fsum(values) / len(values)
    slack = 1e-9 * max(1.0, max(abs(v) for v in values))
    for ci in (stats.bootstrap_ci(values, method=method, n_resamples=2_000),  # type: ignore[arg-type]
               stats.batch_bootstrap_ci([values], method=method, n_resamples=2_000)[0],  # type: ignore[arg-type]
               stats.t_ci(values)):
        assert ci.low - slack <= mean <= ci.high + slack, ci
        assert math.isfinite(ci.low) and math.isfinite(ci.high)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=0, max_size=40),
       st.sampled_from(["randomization", "t", "wilcoxon", "mcnemar"]))
def test_identical_paired_samples_are_never_significant(values: list[float], test: str) -> None:
    if test == "mcnemar":
        values = [float(v >= 0.5) for v in values]
    result = stats.paired_test(values, list(values), test=test, n_resamples=500)  # type: ignore[arg-type]
    assert result.p_value == 1.0
    assert result.effect_size == 0.0 and result.diff_mean == 0.0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=12))
def test_holm_is_monotone_and_between_raw_and_bonferroni(p_values: list[float]) -> None:
    holm = stats.adjust_pvalues(p_values)
    bonferroni = stats.adjust_pvalues(p_values, "bonferroni")
    for raw, h, b in zip(p_values, holm, bonferroni, strict=True):
        assert raw <= h <= b <= 1.0
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    assert [holm[i] for i in order] == sorted(holm)
