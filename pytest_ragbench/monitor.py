"""Log a deployed RAG app's interactions for ``pytest --ragbench`` to evaluate later.

::

    from pytest_ragbench.monitor import RetrievalLog

    log = RetrievalLog("logs/app.traffic.jsonl", rotate="day")
    log.log_retrieval(query, retrieved, answer=answer, user_feedback=True, latency_s=0.42)

Each call appends one JSON line (the schema is :data:`SCHEMA`, documented in the README
under "Production traffic", so an app can write it without importing this module). A
line is written with a single ``write`` on a file opened with ``O_APPEND``, which the
kernel keeps whole across threads and processes; rotation takes a lock file so that two
processes do not rename the same file. Logging never raises into the app: a failed write
is counted in :attr:`RetrievalLog.failures` and warned about once.

Only the standard library is used (run/locking.py, for the rotation lock, too): an app
imports this module in production.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pytest_ragbench.run.locking import lock_file

SCHEMA = "ragbench.traffic/1"
SUFFIX = ".traffic.jsonl"
STAR_SCALE = 5  # an integer feedback is a 1..5 star rating (seed 004)

Rotation = Literal["day"] | None


class RetrievalLog:
    """Append interactions to ``path`` (a ``*.traffic.jsonl`` file), one JSON line each.

    ``rotate="day"`` writes each UTC day to its own file (``app-2026-11-28.traffic.jsonl``
    beside ``app.traffic.jsonl``); ``max_bytes`` starts a new file when the current one
    would grow past it (the full one is renamed ``app-<UTC time>.traffic.jsonl``). Both
    kinds of file are collected, as they all end in ``.traffic.jsonl``.
    """

    def __init__(self, path: str | os.PathLike[str], *, rotate: Rotation = None,
                 max_bytes: int | None = None) -> None:
        if rotate not in (None, "day"):
            raise ValueError(f"rotate must be None or 'day', not {rotate!r}")
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.path = Path(path)
        self.rotate = rotate
        self.max_bytes = max_bytes
        self.failures = 0
        self._warned = False
        self._lock = threading.Lock()

    def log_retrieval(self, query: str, retrieved: Iterable[Any], answer: str | None = None,
                      user_feedback: bool | float | int | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      latency_s: float | None = None, session_id: str | None = None,
                      timestamp: dt.datetime | str | None = None) -> bool:
        """Append one interaction; True when it was written, False (never an error) if not.

        ``retrieved``: what the retriever returned, best first: dicts with ``content`` (or
        ``text``/``page_content``), ``score``, ``id``, ``metadata``; plain strings;
        objects with those attributes (a LangChain ``Document``); or ``(document, score)``
        pairs (LangChain's ``similarity_search_with_score``). ``user_feedback``: True/False
        (thumbs up/down), a number in [0, 1], or an integer 1..5 (stars).
        """
        try:
            line = json.dumps(interaction(query, retrieved, answer, user_feedback, metadata,
                                          latency_s, session_id, timestamp),
                              ensure_ascii=False, allow_nan=False) + "\n"
            self._append(line.encode("utf-8"))
            return True
        except Exception as exc:  # logging must never break the app it observes
            self._failed(exc)
            return False

    def _append(self, data: bytes) -> None:
        with self._lock:
            target = self._target()
            target.parent.mkdir(parents=True, exist_ok=True)
            if self.max_bytes is not None:
                self._rotate_if_full(target, len(data))
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, data)
            finally:
                os.close(fd)
            if written != len(data):
                raise OSError(f"short write to {target}: {written} of {len(data)} bytes")

    def _target(self) -> Path:
        if self.rotate != "day":
            return self.path
        day = dt.datetime.now(dt.UTC).date().isoformat()
        return self.path.with_name(f"{_stem(self.path)}-{day}{SUFFIX}")

    def _rotate_if_full(self, target: Path, adding: int) -> None:
        assert self.max_bytes is not None
        with lock_file(target.with_name(target.name + ".lock")):
            try:
                size = target.stat().st_size
            except FileNotFoundError:
                return
            if size and size + adding > self.max_bytes:
                stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
                os.replace(target, target.with_name(f"{_stem(target)}-{stamp}{SUFFIX}"))

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        if not self._warned:
            self._warned = True
            warnings.warn(f"RetrievalLog({str(self.path)!r}): an interaction could not be "
                          f"logged ({type(exc).__name__}: {exc}); later failures are only "
                          "counted (RetrievalLog.failures)", RuntimeWarning, stacklevel=3)


def _stem(path: Path) -> str:
    name = path.name
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else path.stem


def interaction(query: str, retrieved: Iterable[Any], answer: str | None = None,
                user_feedback: bool | float | int | None = None,
                metadata: Mapping[str, Any] | None = None, latency_s: float | None = None,
                session_id: str | None = None,
                timestamp: dt.datetime | str | None = None) -> dict[str, Any]:
    """The JSON object of one interaction, in the ``ragbench.traffic/1`` schema."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, not {type(query).__name__}")
    record: dict[str, Any] = {"schema": SCHEMA, "timestamp": _timestamp(timestamp),
                              "query": query,
                              "retrieved": [_document(entry) for entry in retrieved]}
    if answer is not None:
        record["answer"] = str(answer)
    if user_feedback is not None:
        record["user_feedback"] = _feedback(user_feedback)
    if latency_s is not None:
        record["latency_s"] = float(latency_s)
    if session_id is not None:
        record["session_id"] = str(session_id)
    if metadata:
        record["metadata"] = dict(metadata)
    return record


def _timestamp(value: dt.datetime | str | None) -> str:
    if value is None:
        return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:  # a naive time is taken as UTC, as servers usually log
        value = value.replace(tzinfo=dt.UTC)
    return value.isoformat(timespec="milliseconds")


def _feedback(value: bool | float | int) -> bool | float | dict[str, int]:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not 1 <= value <= STAR_SCALE:
            raise ValueError(f"an integer user_feedback is a 1..{STAR_SCALE} star rating, "
                             f"not {value}")
        return {"rating": value, "scale": STAR_SCALE}
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"user_feedback must be in [0, 1], not {value}")
    return value


def _document(entry: Any) -> dict[str, Any]:
    score = None
    if isinstance(entry, tuple) and len(entry) == 2 and _is_number(entry[1]):
        entry, score = entry
    if isinstance(entry, str):
        document: dict[str, Any] = {"content": entry}
    elif isinstance(entry, Mapping):
        document = {"content": _first(entry.get, ("content", "text", "page_content"))}
        for key in ("id", "score", "metadata"):
            if entry.get(key) is not None:
                document[key] = entry[key]
    else:
        def attribute(name: str) -> Any:
            return getattr(entry, name, None)

        document = {"content": _first(attribute, ("content", "text", "page_content"))}
        for key, names in (("id", ("id", "doc_id")), ("score", ("score", "similarity")),
                           ("metadata", ("metadata",))):
            found = _first(attribute, names)
            if found is not None:
                document[key] = found
    if document["content"] is None:
        raise ValueError(f"a retrieved entry has no content: {type(entry).__name__}")
    document["content"] = str(document["content"])
    if score is not None:
        document["score"] = score
    if "score" in document:
        document["score"] = float(document["score"])
        if not math.isfinite(document["score"]):
            raise ValueError("a retrieved entry's score is not finite")
    if "id" in document:
        document["id"] = str(document["id"])
    return document


def _first(get: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        value = get(name)
        if value is not None:
            return value
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
