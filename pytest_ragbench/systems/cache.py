"""Persistent caches for embeddings and model responses, safe for concurrent processes.

Each cache is one SQLite file in the cache directory, in WAL mode with a long busy
timeout, so that several pytest-xdist workers can read and write at once. Keys are
SHA-256 hashes of the model id and the input; API keys and URLs never take part.
Without a cache directory (``--ragbench-no-cache``) the caches live in memory for
the session only and nothing is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import tempfile
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
# The store files of a cache folder: embeddings, model replies, spelling corrections.
STORE_FILES = ("embeddings.sqlite3", "responses.sqlite3", "spelling.sqlite3")


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
    """Create the cache directory, marked so that git and backup tools ignore it.

    A folder that exists but cannot be written is used as it is (read-only, see
    :class:`SqliteStore`); one that cannot be created raises :class:`OSError`.
    """
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # a read-only folder is still read
        gitignore = path / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# created by pytest-ragbench\n*\n", encoding="utf-8")
        tag = path / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n"
                           "# pytest-ragbench cache (embeddings, indexes, model replies)\n",
                           encoding="utf-8")
    return path


def writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried, not guessed from its mode bits)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "encrypted" in text


class Notice:
    """Warns once about one cache folder, however many of its files meet the same trouble."""

    def __init__(self) -> None:
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def once(self, topic: str, message: str) -> None:
        """Issue a :class:`CacheWarning` with ``message`` unless ``topic`` was warned about."""
        with self._lock:
            if topic in self._said:
                return
            self._said.add(topic)
        warnings.warn(message, CacheWarning, stacklevel=3)


def open_read_only(path: Path) -> sqlite3.Connection | None:
    """A cache file opened read-only (as immutable where its WAL index cannot be created).

    None when it cannot be read as a cache file (no ``entries`` table).
    """
    location = path.resolve().as_posix()
    for query in ("mode=ro", "immutable=1"):
        conn = None
        try:
            conn = sqlite3.connect(f"file:{location}?{query}", uri=True,
                                   check_same_thread=False)
            conn.execute("SELECT COUNT(*) FROM entries").fetchone()
            return conn
        except sqlite3.DatabaseError:
            if conn is not None:
                conn.close()
    return None


class SqliteStore:
    """A key → bytes table in one SQLite file; one connection per thread.

    A cache that cannot be written is still read: the file is opened read-only (or as
    immutable, when SQLite's WAL index cannot be made beside it) and writes are skipped,
    with one :class:`CacheWarning`. A write that fails (a full disk) skips the later
    writes as well. A file that is not an SQLite database is moved aside
    (``<name>.corrupt-<time>``) and a new one started; where that fails too, the store
    is off (every lookup a miss). Only a lock held past :data:`BUSY_TIMEOUT_S` raises.
    """

    def __init__(self, path: Path, notice: Notice | None = None) -> None:
        self.path = Path(path)
        self.notice = notice or Notice()
        self._local = threading.local()
        self.read_only = False
        self.off = False
        self._connect()  # find out now (once) whether the file can be written, read or neither

    @property
    def writes(self) -> bool:
        """Whether new entries are stored."""
        return not (self.read_only or self.off)

    def _connect(self) -> sqlite3.Connection | None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None or self.off:
            return conn
        conn = self._open_read_only() if self.read_only else self._open_writable()
        self._local.conn = conn
        return conn

    def _open_writable(self) -> sqlite3.Connection | None:
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        moved = False
        while True:
            try:
                return self._open_connection()
            except sqlite3.OperationalError as exc:
                # Switching a new file to WAL takes an exclusive lock that SQLite does not
                # wait for: processes opening the same fresh cache at once see "locked".
                if _is_lock_error(exc) and time.monotonic() <= deadline:
                    time.sleep(0.05)
                    continue
                if _is_lock_error(exc):
                    raise ConfigError(f"cannot open cache file {self.path}: {exc} "
                                      "(use --ragbench-no-cache)") from None
                return self._fall_back(exc)
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc) or moved:
                    return self._fall_back(exc)
                moved = True
                if not self._move_aside(exc):
                    return None

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

    def _fall_back(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection | None:
        """The file cannot be opened for writing: read it if it can be, else turn the store off."""
        self.read_only = True
        conn = self._open_read_only() if self.path.is_file() else None
        if conn is None:
            self.off = True
        folder = self.path.parent
        what = "its entries are read, new ones are not stored" if conn is not None \
            else "it is not used this session"
        self.notice.once("writes", f"the cache {folder} cannot be written ({exc}): {what}")
        return conn

    def _open_read_only(self) -> sqlite3.Connection | None:
        """The file opened read-only; as immutable where its WAL index cannot be created."""
        return open_read_only(self.path)

    def _move_aside(self, exc: sqlite3.DatabaseError) -> bool:
        """Rename a corrupt file (and its WAL files) so that a new one is started."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            self.path.rename(aside)
        except FileNotFoundError:
            return True  # another process moved it already
        except OSError as error:
            self.off = self.read_only = True
            self.notice.once(f"corrupt {self.path}",
                             f"the cache file {self.path} is corrupt ({exc}) and cannot be "
                             f"moved aside ({error}): it is not used this session")
            return False
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                self.path.with_name(self.path.name + suffix).unlink()
        self.notice.once(f"corrupt {self.path}",
                         f"the cache file {self.path} is corrupt ({exc}): moved aside to "
                         f"{aside.name}, a new one is started")
        return True

    def _failed(self, action: str, exc: sqlite3.DatabaseError) -> None:
        """A read or write that failed: warned about once, and no more writes."""
        self.read_only = True
        if action == "write":
            self.notice.once("writes", f"the cache {self.path.parent} cannot be written "
                                       f"({exc}): its entries are read, new ones are not stored")
        else:
            self.notice.once(f"read {self.path}", f"could not read the cache {self.path} "
                                                  f"({exc}): its entries are taken as missing")

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the stored values of those ``keys`` that are present."""
        conn = self._connect()
        found: dict[str, bytes] = {}
        if conn is None:
            return found
        try:
            for i in range(0, len(keys), _SQL_BATCH):
                batch = list(keys[i:i + _SQL_BATCH])
                marks = ",".join("?" * len(batch))
                rows = conn.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})",
                                    batch)
                found.update((key, bytes(value)) for key, value in rows)
        except sqlite3.DatabaseError as exc:  # a disk error, or corruption met while reading
            self._failed("read", exc)
        return found

    def put_many(self, items: Mapping[str, bytes]) -> int:
        """Store entries in one transaction; returns how many were written (0 on failure)."""
        if not items or not self.writes:
            return 0
        conn = self._connect()
        if conn is None or not self.writes:
            return 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)",
                                 list(items.items()))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.DatabaseError):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if _is_lock_error(exc):  # busy past the timeout: these entries only
                self.notice.once(f"locked {self.path}",
                                 f"could not write the cache {self.path}: {exc}; "
                                 "going on without caching these entries")
                return 0
            self._failed("write", exc)
            return 0
        except sqlite3.DatabaseError as exc:
            self._failed("write", exc)
            return 0
        return len(items)

    def put_new(self, items: Mapping[str, bytes]) -> int:
        """Store the entries whose keys are absent; returns how many were added.

        An entry already present keeps its value, whoever wrote it meanwhile.
        """
        if not items:
            return 0
        conn = self._connect()
        if conn is None or not self.writes:
            raise ConfigError(f"the cache file {self.path} cannot be written")
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.executemany("INSERT OR IGNORE INTO entries (key, value) VALUES (?, ?)",
                                      list(items.items()))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.DatabaseError):
                conn.execute("ROLLBACK")
            raise
        return int(cursor.rowcount)

    def count(self) -> int:
        """Return the number of stored entries."""
        conn = self._connect()
        return 0 if conn is None else int(conn.execute("SELECT COUNT(*) FROM entries")
                                          .fetchone()[0])

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
        """Open the caches under ``cache_dir``, or in-memory ones when it is None.

        A folder that cannot be written is read (the warm entries are used) and nothing
        new is stored, with one :class:`CacheWarning`; indexes are then built in memory.
        A folder that cannot be created at all leaves in-memory caches, with the warning.
        """
        if cache_dir is None:
            return cls(EmbeddingCache(None), ResponseCache(None), None, CorrectionCache(None))
        notice = Notice()
        try:
            prepare_cache_dir(cache_dir)
        except OSError as exc:
            notice.once("writes", f"the cache {cache_dir} cannot be created ({exc}): "
                                  "caching in memory for this session only")
            return cls.open(None)
        indexes = cache_dir / "indexes"
        with contextlib.suppress(OSError):
            indexes.mkdir(exist_ok=True)
        # indexes are written beside their lock files: none in a folder that cannot be written
        index_dir = indexes if writable(cache_dir) and writable(indexes) else None
        embeddings, responses, spelling = (SqliteStore(cache_dir / name, notice)
                                           for name in STORE_FILES)
        return cls(EmbeddingCache(embeddings), ResponseCache(responses), index_dir,
                   CorrectionCache(spelling))

    def stats(self) -> dict[str, dict[str, int]]:
        """Return the counters of both caches."""
        return {"embeddings": self.embeddings.stats().to_dict(),
                "responses": self.responses.stats().to_dict()}
