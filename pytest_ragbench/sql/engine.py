"""Open databases read-only through SQLAlchemy and run one verified query.

SQLite files are opened with ``mode=ro`` and a deny-writes authorizer; other
engines run the query inside a transaction that is always rolled back (and marked
READ ONLY where the dialect supports it). Imported only when a SQL case runs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from pytest_ragbench.cases.model import Table
from pytest_ragbench.errors import RagbenchError
from pytest_ragbench.sql.guard import check_read_only


class DatabaseError(RagbenchError):
    """The database cannot be opened, or the query failed in it."""


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


def open_read_only(url: str) -> Engine:
    """Create an engine that cannot write (SQLite) or whose work is always rolled back."""
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
            engine = sa.create_engine(parsed, pool_pre_ping=True)
        except Exception as exc:  # missing driver, bad options
            raise DatabaseError(f"cannot create engine for {parsed!r}: {exc}") from None
    return engine


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


def run_query(engine: Engine, sql: str) -> Table:
    """Run one read-only statement and return its result set; writes are refused first."""
    check_read_only(sql)
    if engine.dialect.name == "sqlite":
        return _run_sqlite(engine, sql)
    try:
        with engine.connect() as connection:
            if engine.dialect.name in ("postgresql", "mysql", "mariadb", "oracle"):
                connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            try:
                result = connection.exec_driver_sql(sql)
                columns = tuple(result.keys())
                rows = tuple(tuple(row) for row in result.fetchall())
            finally:
                connection.rollback()
    except sa.exc.DBAPIError as exc:
        message = str(getattr(exc, "orig", exc)) or type(exc).__name__
        raise DatabaseError(message) from None
    except sa.exc.SQLAlchemyError as exc:
        raise DatabaseError(str(exc)) from None
    return Table(columns, rows)


def _run_sqlite(engine: Engine, sql: str) -> Table:
    """SQLite: the statement on the pooled DB-API connection, under the deny-writes authorizer.

    SQLAlchemy's result layer costs more than a one-row SQLite query itself, and
    ``sql_ground_truth`` runs one query per item, so the cursor is used directly.
    """
    try:
        connection = engine.raw_connection()
    except sa.exc.DBAPIError as exc:
        raise DatabaseError(str(getattr(exc, "orig", exc)) or type(exc).__name__) from None
    try:
        _deny_writes(connection.driver_connection)
        cursor = connection.cursor()
        try:
            cursor.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = tuple(tuple(row) for row in cursor.fetchall())
        finally:
            cursor.close()
            connection.rollback()
    except sqlite3.Error as exc:
        raise DatabaseError(str(exc) or type(exc).__name__) from None
    finally:
        connection.close()  # back to the pool
    return Table(columns, rows)
