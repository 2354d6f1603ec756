"""What the system under test answered, as the report's per-item drill-down shows it.

An item records one trace per system call (:func:`answer_trace`): the question, the
answer's text and SQL, the retrieved contexts (id, source, score and the start of the
text), the service time the plugin measured around the call and the system's own
``latency_s``. Texts are cut so that a 10,000-item report stays small. Any object with
the attributes of an ``Answer`` works (duck typing, as for a user's own system).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

ANSWER_CHARS = 4000
CONTEXT_CHARS = 1000
MAX_CONTEXTS = 20
MAX_TRACES = 5  # per item; a kind that asks many questions keeps the first few


def cut(text: Any, limit: int) -> str:
    """``text`` as a string of at most ``limit`` characters, saying how much was cut."""
    value = "" if text is None else str(text)
    if len(value) <= limit:
        return value
    return f"{value[:limit]} … ({len(value) - limit} more characters)"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def context_trace(rank: int, context: Any) -> dict[str, Any]:
    """One retrieved context: rank, id, source, score and the start of its text."""
    metadata = getattr(context, "metadata", None)
    metadata = metadata if isinstance(metadata, Mapping) else {}
    source = metadata.get("source") or metadata.get("title")
    return {"rank": rank, "id": str(getattr(context, "id", "") or ""),
            "source": None if source is None else str(source),
            "score": _number(getattr(context, "score", None)),
            "text": cut(getattr(context, "text", None) or "", CONTEXT_CHARS)}


def answer_trace(question: str, answer: Any, service_s: float | None,
                 history: Sequence[Any] = ()) -> dict[str, Any]:
    """The record of one answer of the system (JSON-safe)."""
    contexts = getattr(answer, "contexts", None) or ()
    try:
        listed = list(contexts)
    except TypeError:
        listed = []
    sql = getattr(answer, "sql", None)
    trace: dict[str, Any] = {
        "question": cut(question, ANSWER_CHARS),
        "text": cut(getattr(answer, "text", None) or "", ANSWER_CHARS),
        "sql": cut(sql, ANSWER_CHARS) if sql else None,
        "contexts": [context_trace(rank, c)
                     for rank, c in enumerate(listed[:MAX_CONTEXTS], start=1)],
        "n_contexts": len(listed),
        "service_s": _number(service_s),
        "latency_s": _number(getattr(answer, "latency_s", None)) or None,  # 0.0: not given
        "cached": bool(getattr(answer, "cached", False)),
    }
    for name in ("ttft_s", "itl_s"):  # a streamed answer's (--ragbench-stream)
        value = _number(getattr(answer, name, None))
        if value is not None:
            trace[name] = value
    if history:
        trace["history_turns"] = len(history)
    return trace
