"""Open databases read-only through SQLAlchemy and run one verified query, within a time bound.

SQLite files are opened with ``mode=ro`` and a deny-writes authorizer; other
engines run the query inside a transaction that is always rolled back (and marked
READ ONLY where the dialect supports it). Imported only when a SQL case runs.

Every statement is bounded by ini ``ragbench_sql_timeout`` (seconds): SQLite through a
progress handler that aborts the statement past its deadline (installed by SQLAlchemy's
``connect`` event, the deadline set by ``before_cursor_execute``); PostgreSQL and MySQL
through the server's statement timeout, set on each new connection, and the driver's
connect (and, where it has one, read) timeout, so a server that accepts the connection and
never answers fails the item too. A statement stopped this way fails its item only,
with the time it ran.

SQLite statements are also bounded in what they may touch and the memory they may take,
since a case file's SQL runs inside the pytest process: the authorizer refuses functions
that can crash the process or reach outside the database (:data:`DENIED_FUNCTIONS`), a
single value may hold at most :data:`MAX_VALUE_BYTES` (SQLite's length limit: a
``randomblob(400000000)`` fails at once instead of allocating it), the progress handler
stops a statement whose SQLite heap grows by more than :data:`MEMORY_BUDGET_BYTES`, and
a result set larger than that is not read further.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from pytest_ragbench.cases.model import Table
from pytest_ragbench.errors import RagbenchError
from pytest_ragbench.sql.guard import PRAGMAS_WITH_ARGUMENT, check_read_only

DEFAULT_TIMEOUT_S = 30.0
MAX_VALUE_BYTES = 64 * 2**20  # one string or blob a statement builds or reads
MEMORY_BUDGET_BYTES = 256 * 2**20  # SQLite heap growth of one statement; its result set
# SQL functions no statement may call, and why: the reason is the item's error.
DENIED_FUNCTIONS = {
    "fts3_tokenizer": "it registers an FTS3 tokenizer from a raw pointer "
                      "(a bad one crashes the process)",
    "load_extension": "it loads native code into the process",
    "readfile": "it reads files outside the database",
    "writefile": "it writes files",
    "edit": "it starts an editor",
    "rtreenode": "it decodes raw r-tree node blobs (a debugging function)",
}
# Table-valued functions of SQLite's shell extensions that list or read files.
DENIED_TABLES = {"fsdir": "it reads the file system", "zipfile": "it reads files"}
_BOUNDS = "ragbench_bounds"  # key in a connection's info: its _Bounds
_TIMEOUT = "ragbench_timeout_s"
_PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between two looks at the clock
_FETCH_BATCH = 256


class DatabaseError(RagbenchError):
    """The database cannot be opened, or the query failed in it."""


class StatementTimeout(DatabaseError):
    """A statement ran past ``ragbench_sql_timeout`` and was stopped."""


class StatementTooLarge(DatabaseError):
    """A statement took more memory than :data:`MEMORY_BUDGET_BYTES`, or built too long a value."""


_READ_ACTIONS = {
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_PRAGMA, sqlite3.SQLITE_RECURSIVE,
}

_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}


class _Authorizer:
    """SQLite's authorizer callback: reading only; it remembers why it last refused."""

    def __init__(self) -> None:
        self.refusal: str | None = None

    def __call__(self, action: int, arg1: Any, arg2: Any, db: Any, source: Any) -> int:
        refusal = _refusal(action, arg1, arg2)
        if refusal is None:
            return sqlite3.SQLITE_OK
        self.refusal = refusal
        return sqlite3.SQLITE_DENY


def _refusal(action: int, arg1: Any, arg2: Any) -> str | None:
    """Why the action is refused, or None when it only reads."""
    if action == sqlite3.SQLITE_UPDATE and str(arg1).lower() in _SCHEMA_TABLES:
        return None  # asked while SQLite connects a virtual table (FTS, json_each, pragma_*)
    if action not in _READ_ACTIONS:
        return "the statement would change the database or the connection (read-only)"
    if action == sqlite3.SQLITE_FUNCTION:
        name = str(arg2 or "").lower()
        if name in DENIED_FUNCTIONS:
            return f"the SQL function {name}() is not allowed: {DENIED_FUNCTIONS[name]}"
    elif action == sqlite3.SQLITE_READ:
        table = str(arg1 or "").lower()
        if table in DENIED_TABLES:
            return f"the table-valued function {table} is not allowed: {DENIED_TABLES[table]}"
    elif action == sqlite3.SQLITE_PRAGMA and arg2 is not None \
            and str(arg1).lower() not in PRAGMAS_WITH_ARGUMENT:  # PRAGMA name = value
        return f"PRAGMA {arg1} with a value is not allowed (it would change the connection)"
    return None


@functools.cache
def _heap_counter() -> Callable[[], int] | None:
    """``sqlite3_memory_used()`` of the SQLite library Python's sqlite3 runs on, if reachable.

    Read through ctypes from the ``_sqlite3`` extension (which links or embeds SQLite),
    else from the system's library; None where neither exports it (no heap bound then:
    the value length limit and the result-set bound still hold).
    """
    import _sqlite3
    import ctypes
    import ctypes.util

    def libraries() -> Iterator[str | None]:
        yield getattr(_sqlite3, "__file__", None)
        yield ctypes.util.find_library("sqlite3")  # runs ldconfig: only when needed

    for name in libraries():
        if not name:
            continue
        try:
            function = ctypes.CDLL(name).sqlite3_memory_used
        except (OSError, AttributeError):
            continue
        function.restype, function.argtypes = ctypes.c_int64, []
        return function
    return None


class _Bounds:
    """The time and SQLite heap one statement on a connection may use: its progress handler."""

    def __init__(self) -> None:
        self.deadline = math.inf
        self.heap_ceiling = math.inf
        self.stopped: str | None = None  # "time" or "memory" once it stopped a statement
        self._heap = _heap_counter()

    def start(self, timeout_s: float) -> None:
        """Bound the statement that starts now."""
        self.stopped = None
        self.deadline = time.monotonic() + timeout_s
        if self._heap is not None:
            self.heap_ceiling = self._heap() + MEMORY_BUDGET_BYTES

    def finish(self) -> None:
        """No bound (the rollback after a statement must not be stopped)."""
        self.deadline = self.heap_ceiling = math.inf

    def __call__(self) -> int:
        if time.monotonic() > self.deadline:
            self.stopped = "time"
            return 1
        if self._heap is not None and self._heap() > self.heap_ceiling:
            self.stopped = "memory"
            return 1
        return 0


def sqlite_path(url: str) -> Path | None:
    """Return the file of a file-backed SQLite URL, else None."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def open_read_only(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Engine:
    """Create an engine that cannot write (SQLite) or whose work is always rolled back.

    Each statement on it is stopped after ``timeout_s`` seconds (see the module doc).
    """
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise DatabaseError(f"invalid database URL {url!r}: {exc}") from None
    path = sqlite_path(url)
    if path is not None:
        if not path.is_file():
            raise DatabaseError(f"database file not found: {path}")
        uri = f"file:{path.resolve().as_posix()}?mode=ro"
        # pooled: opening a connection costs more than a one-row query (sql_ground_truth)
        engine = sa.create_engine("sqlite+pysqlite://", creator=lambda: _sqlite_ro(uri),
                                  poolclass=sa.pool.QueuePool)
    else:
        try:
            engine = sa.create_engine(parsed, pool_pre_ping=True,
                                      connect_args=_connect_args(parsed, timeout_s))
        except Exception as exc:  # missing driver, bad options
            raise DatabaseError(f"cannot create engine for {parsed!r}: {exc}") from None
    bound_statements(engine, timeout_s)
    return engine


def _connect_args(url: sa.URL, timeout_s: float) -> dict[str, Any]:
    """The driver's own timeouts: connecting, and reading a reply where it has one."""
    seconds = max(1, math.ceil(timeout_s))
    driver = url.get_driver_name()
    if url.get_backend_name() == "postgresql":
        if driver == "pg8000":  # a socket timeout: connecting and every read
            return {"timeout": seconds}
        if driver in ("psycopg", "psycopg2", "psycopg2cffi"):
            return {"connect_timeout": seconds}
    if url.get_backend_name() in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb"):
        return {"connect_timeout": seconds, "read_timeout": seconds}
    return {}


def bound_statements(engine: Engine, timeout_s: float) -> None:
    """Stop every statement on ``engine`` after ``timeout_s`` seconds (again: a new bound)."""
    known = getattr(engine, _TIMEOUT, None)
    setattr(engine, _TIMEOUT, timeout_s)
    if known is not None:
        return

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            _watch_sqlite(dbapi_connection, record.info)

    def on_execute(conn: Any, *_: Any) -> None:
        bounds = conn.info.get(_BOUNDS)
        if bounds is not None:
            bounds.start(getattr(engine, _TIMEOUT))

    sa.event.listen(engine, "connect", on_connect)
    sa.event.listen(engine, "before_cursor_execute", on_execute)


def _watch_sqlite(connection: sqlite3.Connection, info: dict[str, Any]) -> _Bounds:
    """Abort the running statement past the bounds kept in ``info`` (set per statement)."""
    bounds: _Bounds = info.setdefault(_BOUNDS, _Bounds())
    connection.set_progress_handler(bounds, _PROGRESS_STEPS)
    return bounds


class _ReadOnlyConnection(sqlite3.Connection):
    """A connection opened by :func:`open_read_only`: its authorizer is set once, at connect.

    (Setting an authorizer expires the connection's prepared statements, so it is not
    set again before every query on these.)
    """

    authorizer: _Authorizer


def _sqlite_ro(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False,
                                 factory=_ReadOnlyConnection)
    connection.execute("PRAGMA query_only = ON")
    connection.authorizer = _Authorizer()
    connection.set_authorizer(connection.authorizer)
    return connection


def _deny_writes(raw: sqlite3.Connection) -> _Authorizer:
    """The read-only authorizer of an SQLite connection, put on one not opened here."""
    if isinstance(raw, _ReadOnlyConnection):
        raw.authorizer.refusal = None
        return raw.authorizer
    authorizer = _Authorizer()  # a user's engine: set before each of its statements
    raw.set_authorizer(authorizer)
    return authorizer


@contextlib.contextmanager
def _guarded(raw: sqlite3.Connection, info: dict[str, Any],
             timeout_s: float) -> Iterator[None]:
    """Run one statement on an SQLite connection under the authorizer, limits and bounds.

    Errors come out as :class:`DatabaseError` naming what was refused or exceeded.
    """
    authorizer = _deny_writes(raw)
    bounds = info.get(_BOUNDS) or _watch_sqlite(raw, info)  # opened before the bound was set
    length = raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    bounds.start(timeout_s)
    started = time.monotonic()
    try:
        yield
    except sqlite3.Error as exc:
        message = str(exc) or type(exc).__name__
        if authorizer.refusal and "not authorized" in message:
            raise DatabaseError(authorizer.refusal) from None
        if bounds.stopped == "memory" or "too big" in message:
            raise _too_large(message) from None
        raise _failure(message, "running", time.monotonic() - started, timeout_s) from None
    finally:
        bounds.finish()
        raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length)


def _too_large(message: str) -> StatementTooLarge:
    if "too big" in message:
        return StatementTooLarge(f"{message}: one value may hold at most "
                                 f"{MAX_VALUE_BYTES // 2**20} MiB")
    return StatementTooLarge(f"the statement was stopped: its SQLite memory grew by more "
                             f"than {MEMORY_BUDGET_BYTES // 2**20} MiB")


def _fetch_rows(fetchmany: Callable[[int], Sequence[Any]]) -> tuple[tuple[Any, ...], ...]:
    """Every row of a result, read in batches; a result over the memory budget is refused."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while batch := fetchmany(_FETCH_BATCH):
        for row in batch:
            values = tuple(row)
            rows.append(values)
            size += 64 + sum(len(v) if isinstance(v, str | bytes) else 16 for v in values)
        if size > MEMORY_BUDGET_BYTES:
            raise StatementTooLarge(f"the result set is larger than "
                                    f"{MEMORY_BUDGET_BYTES // 2**20} MiB "
                                    f"({len(rows)} rows read): not read further")
    return tuple(rows)


def run_query(engine: Engine, sql: str, timeout_s: float | None = None) -> Table:
    """Run one read-only statement and return its result set; writes are refused first.

    The statement (and connecting) is stopped after ``timeout_s`` seconds (default: the
    engine's bound from :func:`open_read_only`, else 30 s), raising :class:`StatementTimeout`;
    on SQLite also past its memory bounds (:class:`StatementTooLarge`, see the module doc).
    """
    check_read_only(sql)
    if timeout_s is None:
        timeout_s = getattr(engine, _TIMEOUT, None) or DEFAULT_TIMEOUT_S
    bound_statements(engine, timeout_s)  # an engine of the user's own gets the bound too
    if engine.dialect.name == "sqlite" and engine.driver == "pysqlite":
        return _run_sqlite(engine, sql, timeout_s)
    started = time.monotonic()
    phase = "connecting"
    try:
        with engine.connect() as connection:
            _server_bounds(connection, engine.dialect.name, timeout_s)
            phase = "running"
            started = time.monotonic()
            try:
                result = connection.exec_driver_sql(sql)
                columns = tuple(result.keys())
                rows = _fetch_rows(result.fetchmany)
            finally:
                connection.rollback()
    except sa.exc.DBAPIError as exc:
        message = str(getattr(exc, "orig", exc)) or type(exc).__name__
        raise _failure(message, phase, time.monotonic() - started, timeout_s) from None
    except (sa.exc.SQLAlchemyError, OSError) as exc:  # a driver's socket timeout is an OSError
        message = str(exc) or type(exc).__name__
        raise _failure(message, phase, time.monotonic() - started, timeout_s) from None
    return Table(columns, rows)


def _run_sqlite(engine: Engine, sql: str, timeout_s: float) -> Table:
    """SQLite: the statement on the pooled DB-API connection, under the read-only authorizer.

    SQLAlchemy's result layer costs more than a one-row SQLite query itself, and
    ``sql_ground_truth`` runs one query per item, so the cursor is used directly, with
    the bounds (:func:`_guarded`) that the ``before_cursor_execute`` event sets for
    statements run through SQLAlchemy.
    """
    started = time.monotonic()
    try:
        connection = engine.raw_connection()
    except sa.exc.DBAPIError as exc:
        message = str(getattr(exc, "orig", exc)) or type(exc).__name__
        raise _failure(message, "connecting", time.monotonic() - started, timeout_s) from None
    try:
        raw = connection.driver_connection
        if not isinstance(raw, sqlite3.Connection):
            raise DatabaseError(f"the pysqlite engine gave a {type(raw).__name__} connection")
        with _guarded(raw, connection.info, timeout_s):
            cursor = raw.cursor()
            try:
                cursor.execute(sql)
                columns = tuple(d[0] for d in cursor.description or ())
                rows = _fetch_rows(cursor.fetchmany)
            finally:
                cursor.close()
        raw.rollback()
    finally:
        connection.close()  # back to the pool (which rolls back what is still open)
    return Table(columns, rows)


def _server_bounds(connection: Any, dialect: str, timeout_s: float) -> None:
    """Read only, and the server's own statement timeout, for this transaction."""
    milliseconds = max(1, round(timeout_s * 1000))
    if dialect == "postgresql":
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
        connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
    elif dialect in ("mysql", "mariadb"):
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
        variable = f"max_statement_time = {timeout_s:g}" if dialect == "mariadb" \
            else f"max_execution_time = {milliseconds}"
        # an older server refuses it: the driver's read timeout still bounds the wait
        with contextlib.suppress(sa.exc.DBAPIError):
            connection.exec_driver_sql(f"SET SESSION {variable}")
    elif dialect == "oracle":
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")


_TIMEOUT_WORDS = ("interrupted", "statement timeout", "canceling statement",
                  "maximum statement execution time", "timed out", "timeout")


def _failure(message: str, phase: str, elapsed: float, timeout_s: float) -> DatabaseError:
    """A timeout (named with the time it took) or the database's own error."""
    timed_out = elapsed >= 0.9 * timeout_s or any(w in message.lower() for w in _TIMEOUT_WORDS)
    if not timed_out:
        return DatabaseError(message)
    first = message.strip().splitlines()[0][:200] if message.strip() else ""
    what = "could not connect" if phase == "connecting" else "the statement was stopped"
    return StatementTimeout(f"{what} after {elapsed:.1f} s: ini ragbench_sql_timeout is "
                            f"{timeout_s:g} s ({first})")
