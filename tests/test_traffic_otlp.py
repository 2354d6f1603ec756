"""Interactions read from OTLP/JSON spans made by the real OpenInference instrumentation."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.otlp import read_otlp
from pytest_ragbench.formats.traffic import Interaction, hash_user

pytest.importorskip("openinference.instrumentation.langchain")
traffic_app = pytest.importorskip("tests.traffic_app")

MONDAY = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)


def _read(path: Path) -> tuple[list[Interaction], list[CaseError]]:
    found, errors = [], []
    for entry in read_otlp(path):
        (errors if isinstance(entry, CaseError) else found).append(entry)
    return found, errors


def test_traces_of_an_instrumented_chain_read_as_interactions(
        tmp_path: Path) -> None:
    path = tmp_path / "app.otlp.jsonl"
    with traffic_app.traced_app(path) as app:
        app.ask("Where is the Louvre?", [("The Louvre is in Paris.", 0.82),
                                         ("Paris is in France.", 0.41)],
                "In Paris.", MONDAY, user="alice", feedback=True)
        app.ask("Opening hours?", [], "I don't know.", MONDAY + dt.timedelta(hours=3),
                user="bob")
    lines = path.read_text().splitlines()
    assert len(lines) > 2  # one request per finished span, as the SDK exported them
    assert all("resourceSpans" in json.loads(line) for line in lines)
    (first, second), errors = _read(path)
    assert errors == []
    assert first.query == "Where is the Louvre?" and first.answer == "In Paris."
    assert [(r.content, r.score, r.id) for r in first.retrieved] == [
        ("The Louvre is in Paris.", 0.82, "kb-0"), ("Paris is in France.", 0.41, "kb-1")]
    assert abs(first.timestamp - MONDAY) < dt.timedelta(seconds=5)
    assert first.user_feedback == 1.0 and first.session_id == "session-alice"
    assert first.user == hash_user("alice")
    assert first.latency_ms is not None and first.latency_ms > 0
    assert second.retrieved == () and second.user_feedback is None
    assert second.timestamp - first.timestamp > dt.timedelta(hours=2)
    assert (first.number, second.number) == (1, 2)
    assert first.line < second.line  # the root span's line


def test_a_trace_missing_a_required_part_is_one_error_the_rest_are_read(
        tmp_path: Path) -> None:
    path = tmp_path / "app.otlp.jsonl"
    with traffic_app.traced_app(path) as app:
        for hour in range(3):
            app.ask(f"question {hour}", [("passage", 0.7)], "answer",
                    MONDAY + dt.timedelta(hours=hour), user="carol")
    requests = [json.loads(line) for line in path.read_text().splitlines()]

    def spans(request: dict) -> list[dict]:
        return request["resourceSpans"][0]["scopeSpans"][0]["spans"]

    roots = [i for i, r in enumerate(requests) if "parentSpanId" not in spans(r)[0]]
    assert len(roots) == 3
    # the second trace's spans lose their input, the third's retriever span its kind
    for index in range(roots[0] + 1, roots[1] + 1):
        span = spans(requests[index])[0]
        span["attributes"] = [a for a in span["attributes"] if a["key"] != "input.value"]
    third = range(roots[1] + 1, roots[2])
    for index in third:
        for attribute in spans(requests[index])[0]["attributes"]:
            if attribute["value"].get("stringValue") == "RETRIEVER":
                attribute["value"]["stringValue"] = "CHAIN"
    lines = [json.dumps(r) for r in requests]
    lines.insert(1, "{not json")
    path.write_text("\n".join(lines) + "\n")
    found, errors = _read(path)
    assert [i.query for i in found] == ["question 0"]
    assert [(e.line, e.field) for e in errors] == [
        (2, None), (roots[1] + 2, "input.value"), (roots[2] + 2, "retrieval.documents")]
    assert all(e.file == str(path) for e in errors)
