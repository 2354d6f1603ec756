"""The ``ragas`` kind: RAGAS metrics on NormalizedSample records."""

from __future__ import annotations

from typing import Any

from pytest_ragbench.kinds import AS_GIVEN, ASKS_SYSTEM, FROM_PASSAGES


def answer_source(case: Any) -> str:
    """Where a sample's answer comes from (``ItemKind.answers``).

    A sample with its answer and contexts is scored as given; one with contexts but no
    answer is answered from those contexts (kinds/passages.py); one with neither asks the
    system under test.
    """
    if not getattr(case, "contexts", None):
        return ASKS_SYSTEM
    return AS_GIVEN if getattr(case, "answer", None) else FROM_PASSAGES
