"""Logged interactions of a deployed app: the ``ragbench.traffic/1`` JSONL schema.

One JSON object per line (what :mod:`pytest_ragbench.monitor` writes)::

    {"timestamp": "2026-11-28T09:14:03.120+00:00",      required, ISO 8601 (naive = UTC)
     "query": "How do I reset my password?",             required, a string
     "retrieved": [{"content": "...", "score": 0.82,     required, a list (may be empty):
                    "id": "kb-17", "metadata": {}}],       content required, others optional
     "answer": "...",                                    optional
     "user_feedback": true | 0.75 | {"rating": 4, "scale": 5},   optional
     "latency_s": 0.42, "session_id": "...", "user_id": "...",   optional
     "metadata": {...}}                                  optional

A retrieved entry may also be a plain string (its content). A score (or id) missing from
an entry is read from its ``metadata.score`` (``metadata.id``) when there.
``user_feedback``: true/false is a thumbs up/down (1/0), a number is already in [0, 1], a
rating is scaled to [0, 1] as ``(rating - 1) / (scale - 1)``. User ids are hashed as soon
as they are read.

Reading streams: :func:`read_traffic` yields one :class:`Interaction` (or one
:class:`~pytest_ragbench.errors.CaseError` naming the file, line and field) per line.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pytest_ragbench.errors import CaseError

TRAFFIC_SUFFIX = ".traffic.jsonl"


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One passage the app's retriever returned."""

    content: str
    score: float | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Interaction:
    """One logged query of the app, whatever it was read from."""

    number: int                  # 1-based position in its file: traffic[<stem>:<number>]
    line: int                    # the line it was read from
    timestamp: dt.datetime       # aware, UTC
    query: str
    retrieved: tuple[Retrieved, ...]
    answer: str | None = None
    user_feedback: float | None = None  # in [0, 1]
    latency_ms: float | None = None
    session_id: str | None = None
    user: str | None = None      # the user id, hashed
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def scores(self) -> list[float]:
        """The logged similarity scores (entries without one left out)."""
        return [r.score for r in self.retrieved if r.score is not None]


def hash_user(user_id: Any) -> str | None:
    """A user id as a short stable hash: reports never show the id itself."""
    if user_id is None or user_id == "":
        return None
    return "u-" + hashlib.sha256(str(user_id).encode("utf-8")).hexdigest()[:12]


def parse_timestamp(value: Any) -> dt.datetime:
    """An ISO 8601 string, or seconds since the epoch, as an aware UTC datetime."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(float(value), dt.UTC)
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO 8601 string, not {type(value).__name__}")
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def feedback_value(value: Any) -> float | None:
    """``user_feedback`` scaled to [0, 1] (see the module docstring); None when absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, Mapping):
        rating, scale = value.get("rating"), value.get("scale", 5)
        if not (_number(rating) and _number(scale)
                and 1 <= rating <= scale and scale > 1):  # type: ignore[operator]
            raise ValueError("a rating must be {\"rating\": r, \"scale\": s} with 1 <= r <= s")
        return (float(rating) - 1.0) / (float(scale) - 1.0)  # type: ignore[arg-type]
    if _number(value) and 0.0 <= value <= 1.0:
        return float(value)
    raise ValueError(f"must be true/false, a number in [0, 1] or a rating, not {value!r}")


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def retrieved_entry(entry: Any, where: str) -> Retrieved:
    """One entry of ``retrieved``: a string, or an object with ``content``."""
    if isinstance(entry, str):
        return Retrieved(entry)
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: must be a string or an object with \"content\"")
    content = entry.get("content", entry.get("text", entry.get("page_content")))
    if not isinstance(content, str):
        raise ValueError(f"{where}: \"content\" is missing or not a string")
    score = entry.get("score")
    metadata = entry.get("metadata")
    if score is None and isinstance(metadata, Mapping):
        score = metadata.get("score")
    if score is not None and not _number(score):
        raise ValueError(f"{where}: \"score\" must be a finite number, not {score!r}")
    ident = entry.get("id")
    if ident is None and isinstance(metadata, Mapping):
        ident = metadata.get("id")
    return Retrieved(content, None if score is None else float(score),
                     None if ident is None else str(ident))


def _opened(path: Path, shown: str) -> IO[str]:
    try:
        return path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CaseError(f"cannot read: {exc.strerror or exc}", file=shown) from None


class _FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def interaction_from(record: Any, number: int, line: int) -> Interaction:
    """One JSON object of the schema as an :class:`Interaction`; ``_FieldError`` if not."""
    if not isinstance(record, Mapping):
        raise _FieldError("", f"a line must hold a JSON object, not {type(record).__name__}")
    for name in ("timestamp", "query", "retrieved"):
        if record.get(name) is None:
            raise _FieldError(name, "required field is missing")
    try:
        timestamp = parse_timestamp(record["timestamp"])
    except ValueError as exc:
        raise _FieldError("timestamp", str(exc)) from None
    query = record["query"]
    if not isinstance(query, str) or not query.strip():
        raise _FieldError("query", "must be a non-empty string")
    entries = record["retrieved"]
    if not isinstance(entries, list):
        raise _FieldError("retrieved", "must be a list (empty when nothing was found)")
    try:
        retrieved = tuple(retrieved_entry(e, f"entry {i}") for i, e in enumerate(entries))
    except ValueError as exc:
        raise _FieldError("retrieved", str(exc)) from None
    answer = record.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise _FieldError("answer", "must be a string")
    try:
        feedback = feedback_value(record.get("user_feedback"))
    except ValueError as exc:
        raise _FieldError("user_feedback", str(exc)) from None
    latency = record.get("latency_s")
    if latency is not None and not (_number(latency) and latency >= 0):
        raise _FieldError("latency_s", f"must be a number of seconds >= 0, not {latency!r}")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise _FieldError("metadata", "must be an object")
    session = record.get("session_id")
    return Interaction(number=number, line=line, timestamp=timestamp, query=query,
                       retrieved=retrieved, answer=answer, user_feedback=feedback,
                       latency_ms=None if latency is None else float(latency) * 1000.0,
                       session_id=None if session is None else str(session),
                       user=hash_user(record.get("user_id")), metadata=metadata)


def read_traffic(path: str | Path, shown: str | None = None
                 ) -> Iterator[Interaction | CaseError]:
    """Each line of a ``*.traffic.jsonl`` file: an interaction, or the error that stops it.

    Blank lines are skipped and not numbered. Memory stays bounded: one line at a time.
    """
    shown = shown or str(path)
    number = 0
    with _opened(Path(path), shown) as handle:
        for line_number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            number += 1
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                yield CaseError(f"not valid JSON: {exc.msg} (column {exc.colno})",
                                file=shown, line=line_number)
                continue
            try:
                yield interaction_from(record, number, line_number)
            except _FieldError as exc:
                yield CaseError(str(exc), file=shown, line=line_number,
                                field=exc.field or None)
