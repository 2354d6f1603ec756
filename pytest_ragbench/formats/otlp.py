"""Interactions read from OpenTelemetry traces in OTLP/JSON (``*.otlp.jsonl``).

The file holds one ``ExportTraceServiceRequest`` per line, as the OpenTelemetry
collector's file exporter writes it (``resourceSpans[].scopeSpans[].spans[]``; ids in hex
or base64, both are only compared). Spans follow the OpenInference semantic conventions
(``openinference.span.kind``, ``input.value``, ``output.value``, ``session.id``,
``user.id``, ``metadata``, and on RETRIEVER spans
``retrieval.documents.<i>.document.{id,content,score,metadata}``).

One trace is one interaction: its root span (no parent) gives the time, the latency, the
query (``input.value``; from a JSON input its ``question``/``query``/``input`` member) and
the answer (``output.value``, likewise); its RETRIEVER spans, in start order, give the
retrieved passages (a score missing from a document is read from its metadata's
``score``, where LangChain retrievers keep it). User feedback is a ``user_feedback``
attribute on the root span or a member of its ``metadata`` JSON (what
``openinference.instrumentation.using_metadata`` sets).

Children end, and are exported, before their root: a trace is complete when its root
span is read, so only the traces still open are held in memory. A trace missing its
query or its RETRIEVER span, or whose root never comes, is one error naming the line and
the field.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.traffic import (
    Interaction,
    Retrieved,
    feedback_value,
    hash_user,
    retrieved_entry,
)

OTLP_SUFFIX = ".otlp.jsonl"
_DOCUMENT = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|score|metadata)$")
_QUERY_KEYS = ("question", "query", "input", "text")
_ANSWER_KEYS = ("answer", "output", "text", "content", "result")


@dataclass
class _Span:
    span_id: str
    parent: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    line: int


@dataclass
class _Trace:
    spans: list[_Span] = field(default_factory=list)


def _value(value: Mapping[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])  # a string in OTLP/JSON (64-bit)
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return _attributes(value["kvlistValue"].get("values", []))
    return None


def _attributes(entries: Any) -> dict[str, Any]:
    return {entry["key"]: _value(entry.get("value", {})) for entry in entries or ()}


def _spans(request: Mapping[str, Any], line: int) -> Iterator[tuple[str, _Span]]:
    for resource in request.get("resourceSpans") or ():
        for scope in resource.get("scopeSpans") or ():
            for span in scope.get("spans") or ():
                yield str(span["traceId"]), _Span(
                    span_id=str(span.get("spanId", "")),
                    parent=str(span.get("parentSpanId") or ""),
                    start_ns=int(span.get("startTimeUnixNano") or 0),
                    end_ns=int(span.get("endTimeUnixNano") or 0),
                    attributes=_attributes(span.get("attributes")), line=line)


def read_otlp(path: str | Path, shown: str | None = None
              ) -> Iterator[Interaction | CaseError]:
    """Each trace of an OTLP/JSON file as an interaction, or the error that stops it."""
    shown = shown or str(path)
    open_traces: dict[str, _Trace] = {}
    number = 0
    try:
        handle = Path(path).open(encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as exc:
        raise CaseError(f"cannot read: {exc.strerror or exc}", file=shown) from None
    with handle:
        for line_number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                spans = list(_spans(json.loads(text), line_number))
            except (json.JSONDecodeError, AttributeError, KeyError, TypeError,
                    ValueError) as exc:
                yield CaseError(f"not an OTLP/JSON ExportTraceServiceRequest: {exc}",
                                file=shown, line=line_number)
                continue
            for trace_id, span in spans:
                trace = open_traces.setdefault(trace_id, _Trace())
                trace.spans.append(span)
                if not span.parent:
                    del open_traces[trace_id]
                    number += 1
                    yield _interaction(trace, span, number, shown)
    for trace in open_traces.values():
        first = min(span.line for span in trace.spans)
        yield CaseError(f"{len(trace.spans)} span(s) of a trace whose root span never came "
                        "(no span without a parent)", file=shown, line=first,
                        field="parentSpanId")


def _interaction(trace: _Trace, root: _Span, number: int, shown: str
                 ) -> Interaction | CaseError:
    def error(message: str, field: str) -> CaseError:
        return CaseError(message, file=shown, line=root.line, field=field)

    spans = sorted(trace.spans, key=lambda s: s.start_ns)
    retrievers = [s for s in spans
                  if s.attributes.get("openinference.span.kind") == "RETRIEVER"]
    if not retrievers:
        return error("the trace has no RETRIEVER span: nothing was retrieved to evaluate",
                     "retrieval.documents")
    attributes = root.attributes
    query = _text(attributes.get("input.value"), _QUERY_KEYS) or _text(
        retrievers[0].attributes.get("input.value"), _QUERY_KEYS)
    if not query:
        return error("the root span (and its RETRIEVER span) has no text input",
                     "input.value")
    try:
        retrieved = tuple(doc for span in retrievers for doc in _documents(span))
    except ValueError as exc:
        return error(str(exc), "retrieval.documents")
    metadata = _json_object(attributes.get("metadata"))
    try:
        feedback = feedback_value(attributes.get("user_feedback",
                                                 metadata.get("user_feedback")))
    except ValueError as exc:
        return error(str(exc), "user_feedback")
    latency = (root.end_ns - root.start_ns) / 1e6 if root.end_ns >= root.start_ns > 0 else None
    session = attributes.get("session.id")
    return Interaction(
        number=number, line=root.line,
        timestamp=dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.UTC),
        query=query, retrieved=retrieved,
        answer=_text(attributes.get("output.value"), _ANSWER_KEYS),
        user_feedback=feedback, latency_ms=latency,
        session_id=None if session is None else str(session),
        user=hash_user(attributes.get("user.id")),
        metadata={k: v for k, v in metadata.items() if k != "user_feedback"})


def _documents(span: _Span) -> list[Retrieved]:
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        match = _DOCUMENT.match(key)
        if match:
            by_index.setdefault(int(match[1]), {})[match[2]] = value
    documents = []
    for index in sorted(by_index):
        entry = by_index[index]
        if isinstance(entry.get("metadata"), str):
            entry["metadata"] = _json_object(entry["metadata"])
        documents.append(retrieved_entry(entry, f"retrieval.documents.{index}.document"))
    return documents


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _text(value: Any, keys: tuple[str, ...]) -> str | None:
    """A span's input or output as text: plain text, or a known member of a JSON object."""
    if not isinstance(value, str) or not value.strip():
        return None
    stripped = value.strip()
    if stripped[0] in "{[\"":
        try:
            parsed = json.loads(stripped)
        except json.JSONDecodeError:
            return value
        if isinstance(parsed, str):
            return parsed
        if isinstance(parsed, dict):
            for key in keys:
                if isinstance(parsed.get(key), str) and parsed[key].strip():
                    return str(parsed[key])
        return None
    return value
