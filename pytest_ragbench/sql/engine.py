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
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from pytest_ragbench.cases.model import Table
from pytest_ragbench.errors import RagbenchError
from pytest_ragbench.sql.guard import check_read_only

DEFAULT_TIMEOUT_S = 30.0
_DEADLINE = "ragbench_deadline"  # key in a connection's info: [monotonic deadline]
_TIMEOUT = "ragbench_timeout_s"
_PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between two looks at the clock


class DatabaseError(RagbenchError):
    """The database cannot be opened, or the query failed in it."""


class StatementTimeout(DatabaseError):
    """A statement ran past ``ragbench_sql_timeout`` and was stopped."""


_READ_ACTIONS = {
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_PRAGMA, sqlite3.SQLITE_RECURSIVE,
}


def _authorizer(action: int, arg1: Any, arg2: Any, db: Any, source: Any) -> int:
    if action == sqlite3.SQLITE_PRAGMA and arg2 is not None:  # PRAGMA name = value
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


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
        deadline = conn.info.get(_DEADLINE)
        if deadline is not None:
            deadline[0] = time.monotonic() + getattr(engine, _TIMEOUT)

    sa.event.listen(engine, "connect", on_connect)
    sa.event.listen(engine, "before_cursor_execute", on_execute)


def _watch_sqlite(connection: sqlite3.Connection, info: dict[str, Any]) -> None:
    """Abort the running statement once the deadline kept in ``info`` has passed."""
    deadline = info.setdefault(_DEADLINE, [math.inf])
    connection.set_progress_handler(lambda: time.monotonic() > deadline[0], _PROGRESS_STEPS)


class _ReadOnlyConnection(sqlite3.Connection):
    """A connection opened by :func:`open_read_only`: its authorizer is set once, at connect.

    (Setting an authorizer expires the connection's prepared statements, so it is not
    set again before every query on these.)
    """


def _sqlite_ro(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False,
                                 factory=_ReadOnlyConnection)
    connection.execute("PRAGMA query_only = ON")
    connection.set_authorizer(_authorizer)
    return connection


def _deny_writes(raw: Any) -> None:
    """Put the deny-writes authorizer on an SQLite connection not opened here (a user's engine)."""
    if isinstance(raw, sqlite3.Connection) and not isinstance(raw, _ReadOnlyConnection):
        raw.set_authorizer(_authorizer)


def run_query(engine: Engine, sql: str, timeout_s: float | None = None) -> Table:
    """Run one read-only statement and return its result set; writes are refused first.

    The statement (and connecting) is stopped after ``timeout_s`` seconds (default: the
    engine's bound from :func:`open_read_only`, else 30 s), raising :class:`StatementTimeout`.
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
            raw = connection.connection.driver_connection
            if isinstance(raw, sqlite3.Connection):
                _deny_writes(raw)
                if _DEADLINE not in connection.info:  # opened before the bound was set
                    _watch_sqlite(raw, connection.info)
            else:
                _server_bounds(connection, engine.dialect.name, timeout_s)
            phase = "running"
            started = time.monotonic()
            try:
                result = connection.exec_driver_sql(sql)
                columns = tuple(result.keys())
                rows = tuple(tuple(row) for row in result.fetchall())
            finally:
                deadline = connection.info.get(_DEADLINE)
                if deadline is not None:
                    deadline[0] = math.inf  # the rollback must not be stopped
                connection.rollback()
    except sa.exc.DBAPIError as exc:
        message = str(getattr(exc, "orig", exc)) or type(exc).__name__
        raise _failure(message, phase, time.monotonic() - started, timeout_s) from None
    except (sa.exc.SQLAlchemyError, OSError) as exc:  # a driver's socket timeout is an OSError
        message = str(exc) or type(exc).__name__
        raise _failure(message, phase, time.monotonic() - started, timeout_s) from None
    return Table(columns, rows)


def _run_sqlite(engine: Engine, sql: str, timeout_s: float) -> Table:
    """SQLite: the statement on the pooled DB-API connection, under the deny-writes authorizer.

    SQLAlchemy's result layer costs more than a one-row SQLite query itself, and
    ``sql_ground_truth`` runs one query per item, so the cursor is used directly; the
    deadline (checked by the connection's progress handler) is set here, as the
    ``before_cursor_execute`` event does for statements run through SQLAlchemy.
    """
    started = time.monotonic()
    try:
        connection = engine.raw_connection()
    except sa.exc.DBAPIError as exc:
        message = str(getattr(exc, "orig", exc)) or type(exc).__name__
        raise _failure(message, "connecting", time.monotonic() - started, timeout_s) from None
    try:
        raw = connection.driver_connection
        _deny_writes(raw)
        if _DEADLINE not in connection.info and isinstance(raw, sqlite3.Connection):
            _watch_sqlite(raw, connection.info)  # opened before the bound was set
        deadline = connection.info.get(_DEADLINE, [math.inf])
        started = time.monotonic()
        deadline[0] = started + timeout_s
        cursor = connection.cursor()
        try:
            cursor.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = tuple(tuple(row) for row in cursor.fetchall())
        finally:
            deadline[0] = math.inf  # the rollback must not be stopped
            cursor.close()
            connection.rollback()
    except sqlite3.Error as exc:
        message = str(exc) or type(exc).__name__
        raise _failure(message, "running", time.monotonic() - started, timeout_s) from None
    finally:
        connection.close()  # back to the pool
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
