"""How a case record without ``kind:`` is told apart among the built-in case kinds.

Case files written before ``kind:`` existed say what they are by their fields: the SQL
kinds by ``expected_sql`` (hybrid when the answer is described too, or the record says
``query_type: HYBRID``), the document kinds by ``ground_truth`` (ragas when the record has
a NormalizedSample's fields). A Python case module's list name may say it too
(``HYBRID_TEST_CASES``). A kind that sets ``CaseKind.identify_by`` is recognised before
these rules apply.
"""

from __future__ import annotations

from typing import Any

_SAMPLE_FIELDS = ("contexts", "answer", "doc_type", "question_type", "source_dataset")


def guess_kind(data: dict[str, Any], known: list[str], hint: str | None) -> str | None:
    """The case kind of a record without ``kind:`` (one of ``known``), or None."""
    raw_type = data.get("query_type")
    query_type = str(raw_type).upper() if isinstance(raw_type, str | int) else ""
    if query_type == "HYBRID" and "hybrid" in known:
        return "hybrid"
    hinted = hinted_kind(hint, known)
    if hinted is not None:
        return hinted
    if "expected_sql" in data:
        return "sql" if "ground_truth_data" in data and query_type != "HYBRID" else "hybrid"
    if "ground_truth_answer" in data:
        return "hybrid"
    if "ground_truth" in data:
        return "ragas" if any(f in data for f in _SAMPLE_FIELDS) else "vector"
    return None


def hinted_kind(hint: str | None, known: list[str]) -> str | None:
    """The kind a Python module's list name starts with (``HYBRID_TEST_CASES``: hybrid)."""
    if not hint:
        return None
    name = hint.lower()
    return next((k for k in sorted(known, key=len, reverse=True) if name.startswith(k)), None)
