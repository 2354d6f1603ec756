"""``fact_recall`` for the answer kinds (vector, hybrid, ragas, ragcsv).

A case's ``expected_facts`` are strings a correct answer states; the metric is the share
of them found in the answer (:func:`pytest_ragbench.metrics.answer.fact_recall`). A case
without them records no ``fact_recall`` at all: no value, so no zero in the means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_ragbench.metrics.answer import fact_recall
from pytest_ragbench.metrics.registry import Unscored

NAME = "fact_recall"
EXPECTED = "expected facts"
MISSING = "facts not in the answer"


def record_facts(facts: Sequence[str], answer: str, metrics: dict[str, float],
                 evidence: dict[str, Any]) -> list[str]:
    """Put ``fact_recall`` in ``metrics`` and the facts in ``evidence``; return the missing ones.

    Nothing is recorded when ``facts`` is empty.
    """
    if not facts:
        return []
    result = fact_recall(answer, facts)
    evidence[EXPECTED] = "; ".join(facts)
    if isinstance(result.score, Unscored):
        return []
    metrics[NAME] = float(result.score)
    if result.missing:
        evidence[MISSING] = "; ".join(result.missing)
    return list(result.missing)


def missing_text(missing: Sequence[str]) -> str | None:
    """The summary line of an answer that leaves facts out (None when none is missing)."""
    if not missing:
        return None
    return "the answer does not state the expected fact(s): " + "; ".join(missing)
