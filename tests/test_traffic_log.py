"""The app-side logger (pytest_ragbench.monitor) and the traffic JSONL reader."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import threading
import tracemalloc
import warnings
from pathlib import Path

import pytest

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.traffic import Interaction, hash_user, read_traffic
from pytest_ragbench.monitor import RetrievalLog


class _Doc:
    """Shaped like a LangChain Document: page_content, metadata, id."""

    def __init__(self, text: str, score: float) -> None:
        self.page_content = text
        self.metadata = {"source": "kb"}
        self.id = "d-" + text[:3]
        self.score = score


def _read(path: Path) -> tuple[list[Interaction], list[CaseError]]:
    found, errors = [], []
    for entry in read_traffic(path):
        (errors if isinstance(entry, CaseError) else found).append(entry)
    return found, errors


def test_logged_interactions_read_back_with_every_field(tmp_path: Path) -> None:
    log = RetrievalLog(tmp_path / "app.traffic.jsonl")
    when = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
    assert log.log_retrieval("reset password?", [{"content": "Go to settings", "score": 0.8},
                                                 ("Use the link", 0.6), _Doc("Admins", 0.4)],
                             answer="Open settings.", user_feedback=True, latency_s=0.25,
                             session_id="s1", metadata={"route": "faq"}, timestamp=when)
    assert log.log_retrieval("opening hours", [], user_feedback=4,
                             timestamp="2026-11-03T10:00:00")
    assert log.log_retrieval("refund", ["plain passage"], user_feedback=0.3)
    (first, second, third), errors = _read(tmp_path / "app.traffic.jsonl")
    assert errors == []
    assert first.timestamp == when and first.query == "reset password?"
    assert [r.score for r in first.retrieved] == [0.8, 0.6, 0.4]
    assert first.retrieved[2].content == "Admins" and first.retrieved[2].id == "d-Adm"
    assert first.answer == "Open settings." and first.user_feedback == 1.0
    assert first.latency_ms == pytest.approx(250.0) and first.session_id == "s1"
    assert first.metadata == {"route": "faq"}
    assert second.retrieved == () and second.user_feedback == pytest.approx(0.75)
    assert second.timestamp.tzinfo is not None  # a naive time is read as UTC
    assert third.user_feedback == pytest.approx(0.3) and third.scores == []
    assert [i.number for i in (first, second, third)] == [1, 2, 3]


def test_a_failed_write_never_raises_is_counted_and_warned_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = RetrievalLog(blocker / "cannot" / "app.traffic.jsonl")  # a file as a folder
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = [log.log_retrieval("q", []), log.log_retrieval("q", []),
                   log.log_retrieval("q", [{"nothing": 1}])]  # the last has no content
    assert written == [False, False, False]
    assert log.failures == 3
    assert [str(w.message) for w in caught if "could not be logged" in str(w.message)] \
        == [str(caught[0].message)]


def _write_many(path: str, worker: int, count: int) -> None:
    log = RetrievalLog(path)
    for i in range(count):
        log.log_retrieval(f"worker {worker} query {i} " + "x" * 2000, ["passage " * 200])


def test_concurrent_threads_and_processes_write_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "app.traffic.jsonl"
    threads = [threading.Thread(target=_write_many, args=(str(path), w, 50)) for w in range(4)]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_many, args=(str(path), 10 + w, 50))
                 for w in range(2)]
    for worker in [*threads, *processes]:
        worker.start()
    for worker in [*threads, *processes]:
        worker.join(timeout=120)
    found, errors = _read(path)
    assert errors == []
    assert len(found) == 300
    assert {i.query.split(" query")[0] for i in found} == {
        f"worker {w}" for w in (0, 1, 2, 3, 10, 11)}


def test_rotation_by_size_keeps_every_line(tmp_path: Path) -> None:
    path = tmp_path / "app.traffic.jsonl"
    log = RetrievalLog(path, max_bytes=2000)
    for i in range(30):
        assert log.log_retrieval(f"query {i}", ["p" * 100])
    files = sorted(tmp_path.glob("*.traffic.jsonl"))
    assert len(files) > 2
    assert all(f.stat().st_size <= 2000 for f in files)
    queries = sorted(int(i.query.split()[1]) for f in files for i in _read(f)[0])
    assert queries == list(range(30))


def test_rotation_by_day_names_the_utc_day(tmp_path: Path) -> None:
    log = RetrievalLog(tmp_path / "app.traffic.jsonl", rotate="day")
    before = dt.datetime.now(dt.UTC).date().isoformat()
    log.log_retrieval("q", [])
    after = dt.datetime.now(dt.UTC).date().isoformat()  # the day may turn
    names = [p.name for p in tmp_path.glob("*.traffic.jsonl")]
    assert names in ([f"app-{before}.traffic.jsonl"], [f"app-{after}.traffic.jsonl"])


def test_a_bad_line_is_one_error_naming_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "x.traffic.jsonl"
    good = {"timestamp": "2026-11-02T09:00:00Z", "query": "q", "retrieved": []}
    lines = [good, {**good, "query": None}, "not json", {**good, "timestamp": "Monday"},
             {**good, "retrieved": [{"content": "c", "score": "high"}]},
             {**good, "user_feedback": 7}, {**good, "user_id": "alice@example.com"}]
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
                    + "\n\n")
    found, errors = _read(path)
    assert [(e.line, e.field) for e in errors] == [
        (2, "query"), (3, None), (4, "timestamp"), (5, "retrieved"), (6, "user_feedback")]
    assert all(e.file == str(path) for e in errors)
    assert "required field is missing" in str(errors[0])
    assert [i.line for i in found] == [1, 7]
    assert found[1].user == hash_user("alice@example.com") != "alice@example.com"
    assert "alice" not in repr(found[1])


def test_reading_100000_lines_streams_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.traffic.jsonl"
    line = json.dumps({"timestamp": "2026-11-02T09:00:00Z", "query": "q " * 10,
                       "retrieved": [{"content": "passage " * 10, "score": 0.5}] * 3,
                       "answer": "a " * 20}) + "\n"
    with path.open("w") as handle:
        handle.writelines([line] * 100_000)
    assert path.stat().st_size > 30 * 1024 * 1024  # far more than the bound below
    tracemalloc.start()
    try:
        count = sum(1 for entry in read_traffic(path) if isinstance(entry, Interaction))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 100_000
    assert peak < 5 * 1024 * 1024
