from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_ragbench.systems.cache import (
    Caches,
    CacheWarning,
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


def _finished(caches: Caches) -> None:
    """Close a session's stores: no WAL files are left beside the databases."""
    for cache in (caches.responses, caches.embeddings, caches.corrections):
        assert cache.store is not None
        cache.store.close()


def test_a_corrupt_cache_file_is_moved_aside_with_one_warning(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    earlier = Caches.open(folder)
    earlier.responses.put("k", {"text": "kept"})
    _finished(earlier)
    (folder / "embeddings.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.warns(CacheWarning) as caught:
        caches = Caches.open(folder)
    assert len(caught) == 1
    aside = [p.name for p in folder.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].startswith("embeddings.sqlite3.corrupt-")
    assert str(caught[0].message) == (
        f"the cache file {folder / 'embeddings.sqlite3'} is corrupt (file is not a database): "
        f"moved aside to {aside[0]}, a new one is started")
    caches.embeddings.put_many("m", {"x": b"1"})  # a new file, written as before
    assert Caches.open(folder).embeddings.get_many("m", ["x"]) == {"x": b"1"}
    assert caches.responses.get("k") == {"text": "kept"}  # the other files are untouched


def test_a_corrupt_cache_file_that_cannot_be_moved_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    _finished(Caches.open(folder))
    (folder / "embeddings.sqlite3").write_bytes(b"this is not a database" * 100)
    found = _in_read_only_folder(folder, "caches.embeddings.get_many('m', ['x'])")
    assert found["value"] == {}
    assert found["warnings"] == [
        f"the cache file {folder / 'embeddings.sqlite3'} is corrupt (file is not a database) "
        f"and cannot be moved aside ([Errno 13] Permission denied: "
        f"'{folder / 'embeddings.sqlite3'}' -> '{folder / 'embeddings.sqlite3'}.corrupt-*'): "
        "it is not used this session",
        f"the cache {folder} cannot be written (attempt to write a readonly database): "
        "its entries are read, new ones are not stored"]


READ_ONLY_SCRIPT = """
import fnmatch, json, sys, warnings
from pathlib import Path
from pytest_ragbench.systems.cache import Caches
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    caches = Caches.open(Path(sys.argv[1]))
    value = eval(sys.argv[2])
    caches.responses.put("new", {"text": "not stored"})
    caches.embeddings.put_many("m", {"new": b"0"})
print(json.dumps({"value": value, "warnings": [str(w.message) for w in caught],
                  "index_dir": caches.index_dir and str(caches.index_dir),
                  "stats": caches.stats()}))
"""


def _in_read_only_folder(folder: Path, expression: str,
                         cache: Path | None = None) -> dict[str, Any]:
    """Evaluate ``expression`` on the caches of ``cache`` (default ``folder``) in a process
    that cannot write ``folder``."""
    import json
    import subprocess
    import sys

    from tests.helpers import as_user

    before = sorted(p.name for p in folder.iterdir())
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        done = subprocess.run(as_user([sys.executable, "-c", READ_ONLY_SCRIPT,
                                       str(cache or folder), expression]),
                              capture_output=True, text=True, timeout=120)
    finally:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing was written
    found: dict[str, Any] = json.loads(done.stdout)
    found["warnings"] = [_mask_time(w) for w in found["warnings"]]
    return found


def _mask_time(text: str) -> str:
    import re

    return re.sub(r"\.corrupt-[0-9-]+", ".corrupt-*", text)


def test_a_read_only_cache_is_read_and_not_written(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    warm = Caches.open(folder)
    warm.responses.put("k", {"text": "warm"})
    warm.embeddings.put_many("m", {"x": b"1234"})
    _finished(warm)
    found = _in_read_only_folder(
        folder, "[caches.responses.get('k'), caches.embeddings.get_many('m', ['x'])['x'].hex()]")
    assert found["value"] == [{"text": "warm"}, b"1234".hex()]  # the warm entries are used
    assert found["warnings"] == [f"the cache {folder} cannot be written (attempt to write a "
                                 "readonly database): its entries are read, new ones are not "
                                 "stored"]
    assert found["index_dir"] is None  # indexes are built in memory
    assert found["stats"]["responses"]["writes"] == found["stats"]["embeddings"]["writes"] == 0


def test_a_cache_folder_that_cannot_be_made_is_kept_in_memory(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    found = _in_read_only_folder(parent, "caches.responses.persistent", parent / "cache")
    assert found["value"] is False
    assert found["warnings"] == [
        f"the cache {parent / 'cache'} cannot be created ([Errno 13] Permission denied: "
        f"'{parent / 'cache'}'): caching in memory for this session only"]


FULL_DISK_SCRIPT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
""" + READ_ONLY_SCRIPT


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stands in for a full disk")
def test_a_full_disk_is_read_and_not_written(tmp_path: Path) -> None:
    """No byte may be written to any file (RLIMIT_FSIZE 0): SQLite says "disk I/O error"."""
    import json
    import subprocess

    folder = tmp_path / "cache"
    warm = Caches.open(folder)
    warm.responses.put("k", {"text": "warm"})
    _finished(warm)
    done = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(folder),
                           "caches.responses.get('k')"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["value"] == {"text": "warm"}
    assert found["warnings"] == [f"the cache {folder} cannot be written (disk I/O error): "
                                 "its entries are read, new ones are not stored"]
    assert Caches.open(folder).responses.get("new") is None


def test_a_write_that_fails_later_stops_the_writes_with_one_warning(tmp_path: Path) -> None:
    caches = Caches.open(tmp_path / "cache")
    store = caches.responses.store
    assert store is not None
    store.close()
    (tmp_path / "cache" / "responses.sqlite3").unlink()  # gone under the session's feet
    (tmp_path / "cache" / "responses.sqlite3").mkdir()  # and nothing can take its place
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            caches.responses.put(f"k{i}", {"text": str(i)})
    assert [w.category for w in caught] == [CacheWarning]
    assert str(caught[0].message).startswith(f"the cache {tmp_path / 'cache'} cannot be "
                                             "written (unable to open database file)")
    assert caches.responses.get("k2") == {"text": "2"}  # still answered from memory
    assert caches.responses.stats().writes == 0


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
