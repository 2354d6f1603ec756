"""The ``sql`` case kind: ``sql_ground_truth[...]`` and ``sql[...]`` items."""

from __future__ import annotations

from typing import Any


def answers_sql(system: Any) -> bool:
    """False for a system that says it answers no SQL questions: its sql items skip unasked."""
    return getattr(system, "answers_sql", True) is not False
