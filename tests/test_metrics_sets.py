"""Set-based memory metrics: set precision/recall/F1 and the negative scenario."""

from __future__ import annotations

import pytest

from pytest_ragbench.metrics import Unscored, set_metrics


def test_seed_formulas_on_a_partial_retrieval() -> None:
    # Expected turns 1 and 2; the store returned 2, 0, 3 with these similarities.
    result = set_metrics(["m2", "m0", "m3"], ["m1", "m2"], scores=[0.9, 0.6, 0.4])
    assert result.true_positives == 1
    assert result.precision == pytest.approx(1 / 3)
    assert result.recall == pytest.approx(1 / 2)
    assert result.f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert result.relevance_score == pytest.approx(0.9)
    assert (result.retrieved_count, result.expected_count) == (3, 2)


def test_perfect_retrieval_scores_one_and_relevance_is_mean_similarity() -> None:
    result = set_metrics([1, 2], [2, 1], scores=[0.8, 0.7])
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)
    assert result.relevance_score == pytest.approx(0.75)
    assert result.as_metrics() == {"precision": 1.0, "recall": 1.0, "f1": 1.0,
                                   "relevance_score": pytest.approx(0.75)}


def test_nothing_retrieved_for_a_positive_case_scores_zero() -> None:
    result = set_metrics([], ["m1"], scores=[])
    assert (result.precision, result.recall, result.f1, result.relevance_score) == (0, 0, 0, 0)


def test_negative_case_scores_one_only_when_nothing_is_returned_above_min_score() -> None:
    empty = set_metrics([], [], scores=[])
    assert (empty.precision, empty.recall, empty.f1, empty.relevance_score) == (1, 1, 1, 1)
    below_floor = set_metrics(["m0", "m1"], [], scores=[0.31, 0.2], min_score=0.5)
    assert below_floor.f1 == 1.0 and below_floor.retrieved_count == 0
    false_positive = set_metrics(["m0", "m1"], [], scores=[0.51, 0.2], min_score=0.5)
    assert (false_positive.precision, false_positive.recall, false_positive.f1,
            false_positive.relevance_score) == (0, 0, 0, 0)
    no_floor = set_metrics(["m0"], [], scores=[0.01])
    assert no_floor.precision == 0.0


def test_min_score_drops_weak_hits_before_counting() -> None:
    result = set_metrics(["m1", "m2", "m3"], ["m1", "m3"], scores=[0.9, 0.8, 0.3],
                         min_score=0.5)
    assert result.retrieved_count == 2
    assert result.precision == 0.5 and result.recall == 0.5
    assert result.relevance_score == pytest.approx(0.9)


def test_duplicates_count_once_at_their_first_position() -> None:
    result = set_metrics(["m1", "m1", "m2"], ["m1"], scores=[0.9, 0.2, 0.5])
    assert result.retrieved_count == 2
    assert result.precision == 0.5
    assert result.relevance_score == pytest.approx(0.9)


def test_relevance_needs_scores_and_similarity_range() -> None:
    without = set_metrics(["m1"], ["m1"])
    assert without.precision == 1.0
    assert isinstance(without.relevance_score, Unscored)
    assert "no retrieval scores" in without.relevance_score.reason
    bm25_like = set_metrics(["m1"], ["m1"], scores=[7.5])
    assert isinstance(bm25_like.relevance_score, Unscored)
    assert set_metrics(["m1"], ["m1"], scores=[1.0000001]).relevance_score == 1.0


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="2 scores for 1 retrieved"):
        set_metrics(["m1"], ["m1"], scores=[0.1, 0.2])
    with pytest.raises(ValueError, match="min_score needs the scores"):
        set_metrics(["m1"], ["m1"], min_score=0.2)
    with pytest.raises(ValueError, match="NaN score"):
        set_metrics(["m1"], ["m1"], scores=[float("nan")])
