from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.system.cache import (
    Caches,
    EmbeddingCache,
    ResponseCache,
    SqliteStore,
    stable_hash,
)


def test_store_round_trip_and_counts(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.sqlite3")
    assert store.put_many({"a": b"1", "b": b"2"}) == 2
    assert store.get_many(["a", "b", "zz"]) == {"a": b"1", "b": b"2"}
    assert store.count() == 2
    mode = sqlite3.connect(tmp_path / "c.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_embedding_cache_hits_misses_and_model_separation(tmp_path: Path) -> None:
    caches = Caches.open(tmp_path / "cache")
    vector = np.arange(4, dtype=np.float32).tobytes()
    assert caches.embeddings.get_many("model-a", ["x", "y"]) == {}
    caches.embeddings.put_many("model-a", {"x": vector})
    assert caches.embeddings.get_many("model-a", ["x", "y"]) == {"x": vector}
    assert caches.embeddings.get_many("model-b", ["x"]) == {}
    assert caches.embeddings.stats().to_dict() == {"hits": 1, "misses": 4, "writes": 1}
    # a second process-level cache on the same directory reads what the first wrote
    again = Caches.open(tmp_path / "cache")
    assert again.embeddings.get_many("model-a", ["x"]) == {"x": vector}
    assert again.embeddings.stats().hits == 1


def test_cache_dir_is_marked_and_memory_mode_writes_nothing(tmp_path: Path) -> None:
    Caches.open(tmp_path / "cache")
    assert (tmp_path / "cache" / ".gitignore").read_text().strip().endswith("*")
    assert (tmp_path / "cache" / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f59")
    memory = Caches.open(None)
    memory.responses.put("k", {"text": "t"})
    assert memory.responses.get("k") == {"text": "t"}
    assert memory.index_dir is None
    assert not memory.responses.persistent


def test_response_key_depends_on_model_messages_and_params_only() -> None:
    messages = [{"role": "user", "content": "hi"}]
    base = ResponseCache.key("m", messages, {"temperature": 0})
    assert base == ResponseCache.key("m", [{"content": "hi", "role": "user"}], {"temperature": 0})
    assert base != ResponseCache.key("m2", messages, {"temperature": 0})
    assert base != ResponseCache.key("m", messages, {"temperature": 0.5})
    assert base != ResponseCache.key("m", [{"role": "user", "content": "hi!"}], {"temperature": 0})
    assert EmbeddingCache.key("m", "x") != EmbeddingCache.key("m", "y")
    assert stable_hash({"b": 1, "a": 2}) == stable_hash({"a": 2, "b": 1})


def test_unusable_cache_file_is_a_clear_config_error(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"embeddings\.sqlite3"):
        SqliteStore(path)


def _writer(path: str, worker: int, rounds: int, barrier: Any) -> None:
    barrier.wait(60)  # all workers create the cache files and write at the same moment
    caches = Caches.open(Path(path))
    for r in range(rounds):
        # every worker writes its own keys and a shared key per round, in small batches
        batch = {f"w{worker}-r{r}-{i}": f"{worker}:{r}:{i}".encode() for i in range(5)}
        caches.embeddings.store.put_many(batch)  # type: ignore[union-attr]
        caches.responses.put(f"shared-{r}", {"text": f"round {r}"})
        assert caches.embeddings.store.get_many(list(batch)) == batch  # type: ignore[union-attr]


def test_several_processes_write_at_once(tmp_path: Path) -> None:
    workers, rounds = 4, 100
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path / "cache"), w, rounds, barrier))
             for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    caches = Caches.open(tmp_path / "cache")
    store = caches.embeddings.store
    assert store is not None and store.count() == workers * rounds * 5
    keys = [f"w{w}-r{r}-{i}" for w in range(workers) for r in range(rounds) for i in range(5)]
    values = store.get_many(keys)
    assert all(values[k] == ":".join(k[1:].replace("-r", "-").split("-")).encode()
               for k in keys)
    assert all(caches.responses.get(f"shared-{r}") == {"text": f"round {r}"}
               for r in range(rounds))


def _opener(path: str, barrier: Any) -> None:
    barrier.wait(60)
    Caches.open(Path(path))  # raises (exit code 1) if the fresh file is "locked"


def test_processes_opening_a_fresh_cache_at_once_all_succeed(tmp_path: Path) -> None:
    # Switching a new file to WAL takes a lock SQLite does not wait for; before the retry,
    # 7 of 30 such rounds of 6 processes had one fail with "database is locked".
    ctx = multiprocessing.get_context("spawn")
    for trial in range(5):
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_opener, args=(str(tmp_path / f"c{trial}"), barrier))
                 for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * 6
