"""A Qdrant server that refuses, hangs or answers 5xx: clear errors, bounded time, nothing cached.

The faulty server is the project's loopback server (pytest_ragbench/testing.py),
which answers any path with the queued fault; a refused connection is a port nobody
listens on.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("qdrant_client", reason="needs the extra 'qdrant'")

from pytest_ragbench.systems.protocols import Document
from pytest_ragbench.systems.qdrant.connection import (
    API_KEY_ENV,
    QdrantConnection,
    QdrantError,
    QdrantLocation,
)
from pytest_ragbench.systems.qdrant.memory import QdrantMemoryStore
from pytest_ragbench.systems.qdrant.retriever import QdrantRetriever
from pytest_ragbench.testing import LoopbackServer

SECRET = "qdrant-secret-key-7f3a"
DOCS = [Document("a", "Alpha text."), Document("b", "Beta text.")]


class CountingEmbedder:
    """Counts texts asked for: a dead server must cost no embedding."""

    model_id = "counting"

    def __init__(self) -> None:
        self.asked = 0

    def embed(self, texts: list[str]) -> object:
        import numpy as np

        self.asked += len(texts)
        return np.ones((len(texts), 4), dtype=np.float32) / 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def connect(url: str, *, timeout_s: float = 1.0, retries: int = 2) -> QdrantConnection:
    return QdrantConnection(QdrantLocation(url=url, timeout_s=timeout_s, retries=retries),
                            backoff_base_s=0.05, backoff_max_s=0.2)


def _base(server: LoopbackServer) -> str:
    return server.url.removesuffix("/v1")


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_a_refused_connection_is_retried_then_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    url = f"http://127.0.0.1:{free_port()}"
    connection = connect(url)
    embedder = CountingEmbedder()
    retriever = QdrantRetriever(embedder, connection)  # type: ignore[arg-type]
    retriever.encoder.documents(["warm up: import bm25s before the clock starts"])
    started = time.monotonic()
    with pytest.raises(QdrantError) as failure:
        retriever.index(DOCS)
    assert time.monotonic() - started < 5
    message = str(failure.value)
    assert message.startswith(f"Qdrant at {url}: checking collection 'ragbench_")
    assert "failed after 3 attempts: cannot connect (" in message
    assert message.endswith("(timeout 1 s per call, 2 retries)")
    assert connection.attempts == 3 and embedder.asked == 0 and retriever.ensured is None
    assert SECRET not in message + repr(connection) + repr(retriever) + retriever.describe()


def test_a_hanging_server_times_out_within_the_limit(server: LoopbackServer) -> None:
    server.fail(*["hang"] * 3)
    connection = connect(_base(server), timeout_s=1.0, retries=1)
    started = time.monotonic()
    with pytest.raises(QdrantError, match=r"failed after 2 attempts: no answer within 1 s "
                                          r"\(ReadTimeout\)"):
        connection.call("listing collections", lambda c: c.get_collections())
    elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 2 * 1.0 + 0.2 + 2.0  # two timed-out attempts and one backoff
    assert len(server.requests) == 2


def test_5xx_answers_are_retried_and_the_server_error_is_shown(server: LoopbackServer) -> None:
    server.fail(*["500"] * 3)
    with pytest.raises(QdrantError) as failure:
        connect(_base(server)).call("searching", lambda c: c.get_collections())
    assert str(failure.value).startswith(f"Qdrant at {_base(server)}: searching failed after "
                                         "3 attempts: HTTP 500 Internal Server Error: "
                                         "scripted 500")
    assert len(server.requests) == 3


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_a_4xx_answer_is_not_retried(server: LoopbackServer,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    server.fail("401")
    with pytest.raises(QdrantError) as failure:
        connect(_base(server)).call("listing collections", lambda c: c.get_collections())
    assert "listing collections failed: HTTP 401 Unauthorized: scripted 401" in str(failure.value)
    assert len(server.requests) == 1 and SECRET not in str(failure.value)


def test_a_memory_store_on_a_dead_server_embeds_nothing() -> None:
    embedder = CountingEmbedder()
    store = QdrantMemoryStore(embedder, connect(f"http://127.0.0.1:{free_port()}",  # type: ignore[arg-type]
                                                retries=0))
    store.add_interaction("user", "remember the milk")
    with pytest.raises(QdrantError, match="cannot connect"):
        store.search_memories("milk")
    assert embedder.asked == 0


PROJECT = {
    "test_cases/beir/tiny/corpus.jsonl": "\n".join(json.dumps(
        {"_id": f"d{i}", "title": "", "text": text}) for i, text in enumerate(
        ["Lakers won the title.", "Paris has the Eiffel Tower.", "Python is a language."])),
    "test_cases/beir/tiny/queries.jsonl": "\n".join(json.dumps(q) for q in (
        {"_id": "q1", "text": "Who won the title?"}, {"_id": "q2", "text": "Eiffel Tower"})),
    "test_cases/beir/tiny/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td1\t1\n",
    "test_cases/memory.yaml": """
kind: memory
cases:
  - id: milk
    query: what should I buy
    setup: [{role: user, content: "Remember to buy milk."}]
    expected: [0]
""",
}


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
@pytest.mark.parametrize("fault", ["refused", "500"])
def test_each_item_fails_with_the_error_and_nothing_is_cached(
        pytester: pytest.Pytester, server: LoopbackServer, fault: str) -> None:
    for name, text in PROJECT.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if fault == "500":
        server.fail(*["500"] * 200)
        url = _base(server)
    else:
        url = f"http://127.0.0.1:{free_port()}"
    cache = pytester.path / "cache"
    result = pytester.runpytest_subprocess(
        "--ragbench", "-p", "no:cacheprovider", f"--ragbench-qdrant-url={url}",
        f"--ragbench-cache={cache}")
    result.assert_outcomes(failed=3)
    reason = "HTTP 500 Internal Server Error" if fault == "500" else "cannot connect"
    message = (f"Qdrant at {url}: checking collection 'ragbench_*' failed after 5 attempts: "
               f"{reason}* (timeout 60 s per call, 4 retries)")
    result.stdout.fnmatch_lines(["*_ beir: tiny/q1 _*", message,
                                 "case: test_cases/beir/tiny/qrels/test.tsv:2",
                                 "*_ beir: tiny/q2 _*", message,
                                 "*_ memory: milk _*",
                                 message.replace("ragbench_", "ragbench_memory_"),
                                 "case: test_cases/memory.yaml:4"])
    assert "Traceback" not in result.stdout.str()
    if fault == "500":  # the BEIR dataset asked once (5 attempts), the memory item once
        assert len(server.requests) == 10
    for store in ("embeddings.sqlite3", "responses.sqlite3"):
        assert _rows(cache / store) == 0, store


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as connection:
        tables = [r[0] for r in connection.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")]
        return sum(connection.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in tables)
