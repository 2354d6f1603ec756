"""``ragbench cache export | import | merge``: shards' caches moved and combined."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np

from pytest_ragbench.systems.cache import Caches, ResponseCache
from pytest_ragbench.systems.cache_transfer import add_entries, export_cache

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _vector(seed: int) -> bytes:
    return np.random.default_rng(seed).standard_normal(384).astype(np.float32).tobytes()


def _reply_key(question: str) -> str:
    return ResponseCache.key("smollm2", [{"role": "user", "content": question}],
                             {"temperature": 0})


def _shard_cache(folder: Path, texts: list[str], questions: dict[str, str]) -> Caches:
    caches = Caches.open(folder)
    caches.embeddings.put_many(MODEL, {t: _vector(len(t)) for t in texts})
    for question, answer in questions.items():
        caches.responses.put(_reply_key(question), {"text": answer})
    caches.corrections.put("nba", texts[0], texts[0].lower())
    return caches


def _ragbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench", "cache", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def _rows(folder: Path, store: str) -> int:
    conn = sqlite3.connect(folder / store)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
    finally:
        conn.close()


def test_export_then_import_makes_an_empty_cache_warm(tmp_path: Path) -> None:
    texts = ["Who won the 2016 title?", "How fast do the Pacers play?", "Lakers 2020"]
    _shard_cache(tmp_path / "shard1", texts, {"q1": "Cleveland", "q2": "fast"})
    counts = export_cache(tmp_path / "shard1", tmp_path / "shard1.cache")
    assert counts == {"embeddings.sqlite3": 3, "responses.sqlite3": 2, "spelling.sqlite3": 1}
    assert not (tmp_path / "shard1.cache.partial").exists()

    report = add_entries([tmp_path / "shard1.cache"], tmp_path / "fresh")
    assert {s: (n.read, n.added) for s, n in report.stores.items()} == {
        "embeddings.sqlite3": (3, 3), "responses.sqlite3": (2, 2), "spelling.sqlite3": (1, 1)}
    warm = Caches.open(tmp_path / "fresh")
    assert warm.embeddings.get_many(MODEL, texts) == {t: _vector(len(t)) for t in texts}
    assert warm.responses.get(_reply_key("q2")) == {"text": "fast"}
    assert warm.corrections.get("nba", texts[0]) == texts[0].lower()
    assert warm.embeddings.stats().misses == 0

    again = add_entries([tmp_path / "shard1.cache"], tmp_path / "fresh")
    assert sum(n.added for n in again.stores.values()) == 0
    assert again.stores["embeddings.sqlite3"].same == 3


def test_merge_keeps_every_answer_once_and_the_first_of_two_different_ones(
        tmp_path: Path) -> None:
    _shard_cache(tmp_path / "a", ["shared text", "only in a"], {"same": "x", "sampled": "one"})
    _shard_cache(tmp_path / "b", ["shared text", "only in b", "also b"],
                 {"same": "x", "sampled": "two", "new": "y"})
    report = add_entries([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    embeddings = report.stores["embeddings.sqlite3"]
    assert (embeddings.read, embeddings.added, embeddings.same) == (5, 4, 1)
    responses = report.stores["responses.sqlite3"]
    assert (responses.added, responses.same, responses.different) == (3, 1, 1)
    assert _rows(tmp_path / "merged", "embeddings.sqlite3") == 4
    assert _rows(tmp_path / "merged", "responses.sqlite3") == 3
    merged = Caches.open(tmp_path / "merged")
    assert merged.responses.get(_reply_key("sampled")) == {"text": "one"}  # a's, merged first
    assert "(the destination's kept)" in report.lines()[1]


def _import_into(args: tuple[str, str]) -> int:
    report = add_entries([Path(args[0])], Path(args[1]))
    return sum(n.added for n in report.stores.values())


def test_two_shards_importing_into_one_cache_at_once_add_each_entry_once(
        tmp_path: Path) -> None:
    texts = [f"passage {i}" for i in range(3000)]
    _shard_cache(tmp_path / "src", texts, {f"q{i}": str(i) for i in range(200)})
    export_cache(tmp_path / "src", tmp_path / "src.cache")
    target = tmp_path / "shared"
    Caches.open(target)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        added = pool.map(_import_into, [(str(tmp_path / "src.cache"), str(target))] * 2)
    assert sum(added) == 3000 + 200 + 1
    assert _rows(target, "embeddings.sqlite3") == 3000


def test_command_line_round_trip_and_errors_name_the_file(tmp_path: Path) -> None:
    _shard_cache(tmp_path / ".ragbench_cache", ["one text"], {"q": "a"})
    exported = _ragbench("export", "--cache=.ragbench_cache", "out.cache", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "exported 3 entries" in exported.stdout
    imported = _ragbench("import", "--cache=other", "out.cache", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "embeddings.sqlite3: 1 read, 1 added, 0 already present" in imported.stdout
    merged = _ragbench("merge", "--cache=third", ".ragbench_cache", "other", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    assert "responses.sqlite3: 2 read, 1 added, 1 already present" in merged.stdout

    (tmp_path / "notes.txt").write_text("not a cache\n")
    wrong = _ragbench("import", "--cache=other", "notes.txt", cwd=tmp_path)
    assert wrong.returncode == 2
    assert "notes.txt" in wrong.stderr and "Traceback" not in wrong.stderr
    sqlite3.connect(tmp_path / "plain.db").execute("CREATE TABLE t (x)").connection.close()
    foreign = _ragbench("import", "--cache=other", "plain.db", cwd=tmp_path)
    assert foreign.returncode == 2
    assert "not a pytest-ragbench cache file or export" in foreign.stderr
    missing = _ragbench("merge", "--cache=other", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere: no such cache folder" in missing.stderr
    itself = _ragbench("merge", "--cache=other", "other", cwd=tmp_path)
    assert itself.returncode == 2 and "into itself" in itself.stderr
