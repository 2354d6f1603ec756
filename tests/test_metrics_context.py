"""ragas context and overlap metrics without a judge: thin wrappers, checked by hand and
against the libraries ragas calls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragbench.metrics import Unscored
from pytest_ragbench.metrics import context as ctx

pytest.importorskip("ragas")

PARIS = "Paris is the capital of France."
TOWER = "The Eiffel Tower is in Paris."
BANANA = "Bananas are a yellow fruit rich in potassium."


def test_non_llm_context_precision_is_average_precision_of_matching_contexts() -> None:
    reference = [PARIS, TOWER]
    # Relevant at ranks 1 and 3: AP = (1/1 + 2/3) / 2.
    assert ctx.non_llm_context_precision([PARIS, BANANA, TOWER], reference) == \
        pytest.approx((1 + 2 / 3) / 2)
    # Relevant at ranks 2 and 3: AP = (1/2 + 2/3) / 2.
    assert ctx.non_llm_context_precision([BANANA, PARIS, TOWER], reference) == \
        pytest.approx((1 / 2 + 2 / 3) / 2)
    assert ctx.non_llm_context_precision([PARIS, TOWER], reference) == 1.0
    assert ctx.non_llm_context_precision([BANANA], reference) == 0.0


def test_non_llm_context_recall_is_share_of_reference_contexts_found() -> None:
    assert ctx.non_llm_context_recall([PARIS, BANANA], [PARIS, TOWER]) == 0.5
    assert ctx.non_llm_context_recall([], [PARIS]) == 0.0


def test_id_based_context_metrics() -> None:
    assert ctx.id_context_precision(["d1", "d2", "d3"], ["d1", "d3"]) == pytest.approx(2 / 3)
    assert ctx.id_context_precision([1, 2], ["1"]) == 0.5  # ids compare as text
    assert ctx.id_context_recall(["d1"], ["d1", "d3"]) == 0.5
    assert ctx.id_context_recall([], ["d1"]) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 6), st.sampled_from(["d1", "d2", "3"])), max_size=8),
       st.lists(st.one_of(st.integers(0, 6), st.sampled_from(["d1", "d2", "3"])), min_size=1,
                max_size=8))
def test_id_based_metrics_equal_ragas(retrieved: list[object], reference: list[object]) -> None:
    """The ID-based metrics are computed without ragas: they must equal ragas's own."""
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics._context_precision import IDBasedContextPrecision
    from ragas.metrics._context_recall import IDBasedContextRecall

    sample = SingleTurnSample(retrieved_context_ids=[str(i) for i in retrieved],
                              reference_context_ids=[str(i) for i in reference])
    recall = IDBasedContextRecall().single_turn_score(sample)
    assert ctx.id_context_recall(retrieved, reference) == pytest.approx(recall, abs=1e-9)
    if retrieved:
        precision = IDBasedContextPrecision().single_turn_score(sample)
        assert ctx.id_context_precision(retrieved, reference) == pytest.approx(precision,
                                                                               abs=1e-9)


WORDS = st.sampled_from(["Paris", "paris", "capital", "capitals", "France", "the", "is",
                         "running", "runs", "ran", "42", "Louvre", "museum", ",", "."])


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=12), st.lists(WORDS, min_size=1, max_size=12),
       st.sampled_from(["rouge1", "rougeL"]), st.sampled_from(["fmeasure", "precision", "recall"]))
def test_rouge_equals_ragas(response: list[str], reference: list[str], rouge_type: str,
                            mode: str) -> None:
    """ROUGE is computed without ragas: it must equal ragas's RougeScore."""
    from ragas.metrics.collections import RougeScore

    answer, truth = " ".join(response), " ".join(reference)
    found = ctx.rouge(answer, truth, rouge_type=rouge_type, mode=mode)  # type: ignore[arg-type]
    if isinstance(found, Unscored):  # nothing but punctuation is an empty text to ragas too
        assert not answer.strip(" ,.") or not truth.strip(" ,.")
        return
    expected = RougeScore(rouge_type=rouge_type, mode=mode).score(  # type: ignore[arg-type]
        reference=truth, response=answer).value
    assert found == pytest.approx(expected, abs=1e-9)


def test_empty_inputs_are_unscored_with_reasons() -> None:
    cases = [
        ctx.non_llm_context_precision([PARIS], []),
        ctx.non_llm_context_precision([], [PARIS]),
        ctx.non_llm_context_recall([PARIS], []),
        ctx.id_context_precision([], ["d1"]),
        ctx.id_context_recall(["d1"], []),
        ctx.rouge("", PARIS),
        ctx.bleu(PARIS, "  "),
        ctx.chrf("", ""),
    ]
    assert all(isinstance(value, Unscored) and value.reason for value in cases)


def test_rouge_equals_rouge_score_library() -> None:
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    response, reference = "Paris is the capital of France.", "The capital of France is Paris."
    expected = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(
        reference, response)["rougeL"]
    assert ctx.rouge(response, reference) == pytest.approx(expected.fmeasure, abs=1e-9)
    assert ctx.rouge(response, reference, rouge_type="rouge1", mode="recall") == 1.0
    assert ctx.rouge(reference, reference) == 1.0


def test_bleu_and_chrf_equal_sacrebleu() -> None:
    sacrebleu = pytest.importorskip("sacrebleu")
    response = "The cat sat on the mat today"
    reference = "The cat sat on the mat"
    expected_bleu = sacrebleu.corpus_bleu([response], [[reference]]).score / 100
    assert ctx.bleu(response, reference) == pytest.approx(expected_bleu, abs=1e-9)
    expected_chrf = sacrebleu.sentence_chrf(response, [reference]).score / 100
    assert ctx.chrf(response, reference) == pytest.approx(expected_chrf, abs=1e-9)
    assert ctx.bleu(reference, reference) == 1.0
    assert ctx.chrf(reference, reference) == 1.0
    assert 0.0 <= ctx.chrf("zzz qqq", reference) < 0.1  # type: ignore[operator]
