"""Set-based retrieval metrics of memory scenarios: precision, recall, F1, relevance.

Set precision, recall and F1 of the retrieved ids against the expected ones; the relevance
score is the mean similarity of the expected items retrieved. Two choices:
- ``min_score``: a hit scoring below it counts as not returned (a store's search floor).
- A negative scenario (nothing expected) scores 1.0 on every metric when nothing is
  returned at or above ``min_score``, and 0.0 otherwise.
Duplicate ids in the retrieved list count once, at their first position.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from pytest_ragbench.metrics.registry import Score, Unscored


@dataclass(frozen=True)
class SetScores:
    """A memory scenario's set metrics plus the counts behind them."""

    precision: float
    recall: float
    f1: float
    relevance_score: Score
    true_positives: int
    retrieved_count: int
    expected_count: int

    def as_metrics(self) -> dict[str, Score]:
        """Return the four metrics by their registry names."""
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "relevance_score": self.relevance_score}


def set_metrics(retrieved: Sequence[Hashable], expected: Sequence[Hashable],
                scores: Sequence[float] | None = None, min_score: float | None = None,
                ) -> SetScores:
    """Score retrieved ids against expected ids.

    ``scores`` are the similarity scores of ``retrieved`` (same order); they give the
    relevance score (their mean over the retrieved expected items) and apply ``min_score``.
    """
    if scores is not None and len(scores) != len(retrieved):
        raise ValueError(f"{len(scores)} scores for {len(retrieved)} retrieved items")
    if min_score is not None and scores is None:
        raise ValueError("min_score needs the scores of the retrieved items")
    hits: dict[Hashable, float | None] = {}
    for position, item in enumerate(retrieved):
        score = None if scores is None else float(scores[position])
        if score is not None and math.isnan(score):
            raise ValueError(f"retrieved item {item!r} has a NaN score")
        if min_score is not None and score is not None and score < min_score:
            continue
        hits.setdefault(item, score)
    wanted = set(expected)
    if not wanted:
        ok = 1.0 if not hits else 0.0
        return SetScores(ok, ok, ok, ok, 0, len(hits), 0)
    true_positives = sum(1 for item in hits if item in wanted)
    precision = true_positives / len(hits) if hits else 0.0
    recall = true_positives / len(wanted)
    # 2PR / (P + R), written with counts so that F1 never rounds outside [min, max] of P, R.
    f1 = 2 * true_positives / (len(hits) + len(wanted)) if true_positives else 0.0
    return SetScores(precision, recall, f1, _relevance(hits, wanted, scores is not None),
                     true_positives, len(hits), len(wanted))


def _relevance(hits: dict[Hashable, float | None], wanted: set[Hashable],
               have_scores: bool) -> Score:
    if not have_scores:
        return Unscored("no retrieval scores given")
    similarities = [s for item, s in hits.items() if item in wanted and s is not None]
    if not similarities:
        return 0.0
    mean = math.fsum(similarities) / len(similarities)
    if not -1.0 - 1e-6 <= mean <= 1.0 + 1e-6:  # float32 cosines may overshoot 1 a little
        return Unscored(f"retrieval scores are not similarities in [-1, 1] (mean {mean:.4g})")
    return min(max(mean, -1.0), 1.0)
