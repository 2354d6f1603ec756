"""Persistent caches for embeddings and model responses, safe for concurrent processes.

Each cache is one SQLite file in the cache directory, in WAL mode with a long busy
timeout, so that several pytest-xdist workers can read and write at once. Keys are
SHA-256 hashes of the model id and the input; API keys and URLs never take part.
Without a cache directory (``--ragbench-no-cache``) the caches live in memory for
the session only and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.redact import scrub_data

BUSY_TIMEOUT_S = 60.0
_SQL_BATCH = 500
_MEMORY_LIMIT = 50_000  # entries kept in the in-process layer (~75 MB of MiniLM vectors)


class CacheWarning(UserWarning):
    """The persistent cache could not be written; the run goes on without it."""


@dataclass(frozen=True)
class CacheStats:
    """Lookups answered from the cache (hits) or not (misses), and entries written."""

    hits: int = 0
    misses: int = 0
    writes: int = 0

    def to_dict(self) -> dict[str, int]:
        """Return a JSON-safe dict."""
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}


def stable_hash(*parts: Any) -> str:
    """Return the SHA-256 hex digest of the canonical JSON of ``parts``."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                         default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def prepare_cache_dir(path: Path) -> Path:
    """Create the cache directory, marked so that git and backup tools ignore it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        gitignore = path / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# created by pytest-ragbench\n*\n", encoding="utf-8")
        tag = path / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n"
                           "# pytest-ragbench cache (embeddings, indexes, model replies)\n",
                           encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot create cache directory {path}: {exc}") from None
    return path


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteStore:
    """A key → bytes table in one SQLite file; one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._warned = False
        self._connect()  # fail early, with the path, if the file is unusable

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                conn = self._open_connection()
                break
            except sqlite3.OperationalError as exc:
                # Switching a new file to WAL takes an exclusive lock that SQLite does not
                # wait for: processes opening the same fresh cache at once see "locked".
                if not _is_lock_error(exc) or time.monotonic() > deadline:
                    raise self._unusable(exc) from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                raise self._unusable(exc) from None
        self._local.conn = conn
        return conn

    def _open_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS entries "
                         "(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
        except BaseException:
            conn.close()
            raise
        return conn

    def _unusable(self, exc: sqlite3.DatabaseError) -> ConfigError:
        return ConfigError(f"cannot open cache file {self.path}: {exc} "
                           "(delete it or use --ragbench-no-cache)")

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the stored values of those ``keys`` that are present."""
        conn = self._connect()
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), _SQL_BATCH):
            batch = list(keys[i:i + _SQL_BATCH])
            marks = ",".join("?" * len(batch))
            rows = conn.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", batch)
            found.update((key, bytes(value)) for key, value in rows)
        return found

    def put_many(self, items: Mapping[str, bytes]) -> int:
        """Store entries in one transaction; returns how many were written (0 on failure)."""
        if not items:
            return 0
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)",
                                 list(items.items()))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(f"could not write the cache {self.path}: {exc}; "
                              "going on without caching these entries", CacheWarning,
                              stacklevel=3)
            return 0
        return len(items)

    def count(self) -> int:
        """Return the number of stored entries."""
        return int(self._connect().execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class _CountingCache:
    """An in-process dict in front of an optional :class:`SqliteStore`, with counters."""

    def __init__(self, store: SqliteStore | None) -> None:
        self.store = store
        self._memory: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._hits = self._misses = self._writes = 0

    @property
    def persistent(self) -> bool:
        """Return whether entries survive the session."""
        return self.store is not None

    def _get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        with self._lock:
            found = {k: self._memory[k] for k in keys if k in self._memory}
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.store is not None:
            stored = self.store.get_many(missing)
            found.update(stored)
            self._remember(stored)
        with self._lock:
            hits = sum(1 for k in keys if k in found)
            self._hits += hits
            self._misses += len(keys) - hits
        return found

    def _put_many(self, items: Mapping[str, bytes]) -> None:
        self._remember(items)
        written = self.store.put_many(items) if self.store is not None else len(items)
        with self._lock:
            self._writes += written

    def _remember(self, items: Mapping[str, bytes]) -> None:
        with self._lock:
            if len(self._memory) + len(items) > _MEMORY_LIMIT:
                self._memory.clear()
            self._memory.update(items)

    def stats(self) -> CacheStats:
        """Return hit/miss/write counts of this process."""
        with self._lock:
            return CacheStats(self._hits, self._misses, self._writes)


class EmbeddingCache(_CountingCache):
    """Vectors keyed by model id and a hash of the text."""

    @staticmethod
    def key(model_id: str, text: str) -> str:
        """Return the cache key of ``text`` embedded by ``model_id``."""
        return stable_hash("embedding", model_id, text)

    def get_many(self, model_id: str, texts: Sequence[str]) -> dict[str, bytes]:
        """Return ``{text: float32 bytes}`` for the texts already embedded."""
        keys = [self.key(model_id, t) for t in texts]
        found = self._get_many(keys)
        return {t: found[k] for t, k in zip(texts, keys, strict=True) if k in found}

    def put_many(self, model_id: str, vectors: Mapping[str, bytes]) -> None:
        """Store ``{text: float32 bytes}``."""
        self._put_many({self.key(model_id, t): v for t, v in vectors.items()})


class ResponseCache(_CountingCache):
    """Model replies keyed by model, messages and parameters (never by URL or API key)."""

    @staticmethod
    def key(model: str, messages: Iterable[Mapping[str, Any]], params: Mapping[str, Any]) -> str:
        """Return the cache key of one chat call."""
        return stable_hash("chat", model, [dict(m) for m in messages], dict(params))

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the cached reply, or None."""
        raw = self._get_many([key]).get(key)
        if raw is None:
            return None
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store a successful reply, secrets masked (redact.py): never written to the file."""
        value = scrub_data(dict(value))
        self._put_many({key: json.dumps(value, ensure_ascii=False).encode("utf-8")})


class CorrectionCache(_CountingCache):
    """Spelling corrections of texts, keyed by the speller's vocabulary and the text."""

    @staticmethod
    def key(speller: str, text: str) -> str:
        """Return the cache key of ``text`` corrected by the speller named ``speller``."""
        return stable_hash("spelling", speller, text)

    def get(self, speller: str, text: str) -> str | None:
        """Return the cached correction, or None."""
        key = self.key(speller, text)
        raw = self._get_many([key]).get(key)
        return None if raw is None else raw.decode("utf-8", errors="replace")

    def put(self, speller: str, text: str, corrected: str) -> None:
        """Store a correction."""
        self._put_many({self.key(speller, text): corrected.encode("utf-8")})


@dataclass(frozen=True)
class Caches:
    """The caches of one session: embeddings, replies, corrections and the index folder."""

    embeddings: EmbeddingCache
    responses: ResponseCache
    index_dir: Path | None
    corrections: CorrectionCache

    @classmethod
    def open(cls, cache_dir: Path | None) -> Caches:
        """Open the caches under ``cache_dir``, or in-memory ones when it is None."""
        if cache_dir is None:
            return cls(EmbeddingCache(None), ResponseCache(None), None, CorrectionCache(None))
        prepare_cache_dir(cache_dir)
        index_dir = cache_dir / "indexes"
        index_dir.mkdir(exist_ok=True)
        return cls(EmbeddingCache(SqliteStore(cache_dir / "embeddings.sqlite3")),
                   ResponseCache(SqliteStore(cache_dir / "responses.sqlite3")), index_dir,
                   CorrectionCache(SqliteStore(cache_dir / "spelling.sqlite3")))

    def stats(self) -> dict[str, dict[str, int]]:
        """Return the counters of both caches."""
        return {"embeddings": self.embeddings.stats().to_dict(),
                "responses": self.responses.stats().to_dict()}
