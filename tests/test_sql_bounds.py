"""What a case's SQL may touch in SQLite, and the time and memory one statement may take.

The SQL of a case file runs inside the pytest process: a function that crashes SQLite
crashes the session, and a statement that allocates gigabytes takes the machine with it.
Each bound is shown by a statement that would cross it, run through the plugin's own
read-only engine (and a user's engine of their own).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from pytest_ragbench.sql import engine as sql_engine
from pytest_ragbench.sql.engine import (
    DENIED_FUNCTIONS,
    DatabaseError,
    StatementTimeout,
    StatementTooLarge,
    open_read_only,
    run_query,
)
from pytest_ragbench.sql.guard import UnsafeSqlError

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A table, an FTS3 and an FTS5 table."""
    path = tmp_path / "docs.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE teams (name TEXT, city TEXT);
            INSERT INTO teams VALUES ('Lakers', 'Los Angeles'), ('Celtics', 'Boston');
            CREATE VIRTUAL TABLE docs USING fts3(body);
            INSERT INTO docs VALUES ('hello world'), ('goodbye');
            CREATE VIRTUAL TABLE notes USING fts5(body);
            INSERT INTO notes VALUES ('hello there');
        """)
    return path


@pytest.fixture
def engine(database: Path) -> sa.Engine:
    found = open_read_only(f"sqlite:///{database}", timeout_s=10)
    yield found
    found.dispose()


@pytest.mark.parametrize("call", [
    "fts3_tokenizer('simple', X'4141414141414141')",
    "fts3_tokenizer('simple')",  # reads a pointer out of the process
    '"fts3_tokenizer"(\'simple\')',  # a quoted name is the same function
    "FTS3_TOKENIZER('simple')",
    "load_extension('/tmp/x.so')",
])
def test_functions_that_crash_or_load_code_are_refused_by_name(engine: sa.Engine,
                                                               call: str) -> None:
    name = call.strip('"').split("(")[0].strip('"').lower()
    with pytest.raises(DatabaseError) as caught:
        run_query(engine, f"SELECT {call} AS x")
    assert str(caught.value) == f"the SQL function {name}() is not allowed: " \
                                f"{DENIED_FUNCTIONS[name]}"


def test_a_refused_tokenizer_leaves_the_connection_whole(engine: sa.Engine) -> None:
    """The repro: a bogus tokenizer, then a MATCH on the same pooled connection (rc 139)."""
    for _ in range(3):
        with pytest.raises(DatabaseError, match="fts3_tokenizer"):
            run_query(engine, "SELECT fts3_tokenizer('simple', X'4141414141414141')")
        found = run_query(engine, "SELECT body FROM docs WHERE docs MATCH 'hello'")
        assert found.rows == (("hello world",),)


@pytest.mark.parametrize(("sql", "rows"), [
    ("SELECT body FROM notes WHERE notes MATCH 'hello'", (("hello there",),)),
    ("SELECT value FROM json_each('[1, 2]')", ((1,), (2,))),
    ("PRAGMA table_info(teams)", None),
    ("SELECT name FROM pragma_table_info('teams')", (("name",), ("city",))),
    ("SELECT * FROM pragma_user_version", ((0,),)),
    ("SELECT count(*) FROM dbstat", None),
    ("SELECT length(hex(randomblob(1000)))", ((2000,),)),
])
def test_reading_virtual_tables_and_pragmas_is_allowed(engine: sa.Engine, sql: str,
                                                       rows: tuple[tuple[object, ...], ...] | None
                                                       ) -> None:
    found = run_query(engine, sql)
    assert found.rows if rows is None else found.rows == rows


@pytest.mark.parametrize("sql", ["PRAGMA user_version = 5", "PRAGMA query_only(0)",
                                 "PRAGMA writable_schema = 1", "ATTACH 'x.db' AS x"])
def test_past_the_statement_guard_the_connection_still_refuses_to_change(
        engine: sa.Engine, sql: str) -> None:
    with pytest.raises(UnsafeSqlError):
        run_query(engine, sql)  # the first lock
    connection = engine.raw_connection()  # the second: the connection's own authorizer
    try:
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            connection.driver_connection.execute(sql)
    finally:
        connection.close()


@pytest.mark.parametrize("sql", [
    "SELECT length(hex(randomblob(400000000)))",
    "SELECT length(zeroblob(400000000))",
    f"{ENDLESS}SELECT length(replace(hex(zeroblob(1000000)), '0', hex(zeroblob(100)))) "
    "FROM r LIMIT 1",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 100) "
    "SELECT length(group_concat(hex(zeroblob(1000000)))) FROM r",
])
def test_a_value_over_the_length_limit_is_refused_at_once(engine: sa.Engine, sql: str) -> None:
    started = time.monotonic()
    with pytest.raises(StatementTooLarge) as caught:
        run_query(engine, sql)
    assert time.monotonic() - started < 2.0  # 23 s and 1.99 GB for randomblob before
    assert str(caught.value) == "string or blob too big: one value may hold at most 64 MiB"


def test_the_heap_bound_stops_a_statement_that_grows_in_memory(
        engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """json_group_array grows its buffer row by row below the length limit of one value."""
    if sql_engine._heap_counter() is None:
        assert sys.platform != "linux", "sqlite3_memory_used not found in _sqlite3"
        pytest.skip("this build of Python does not export sqlite3_memory_used")
    monkeypatch.setattr(sql_engine, "MEMORY_BUDGET_BYTES", 16 * 2**20)
    started = time.monotonic()
    with pytest.raises(StatementTooLarge, match="its SQLite memory grew by more than 16 MiB"):
        run_query(engine, f"{ENDLESS}SELECT length(json_group_array(n)) FROM r", timeout_s=60)
    assert time.monotonic() - started < 30  # stopped by the memory bound, not the time bound
    assert run_query(engine, "SELECT 1").rows == ((1,),)  # the connection is still usable


def test_a_result_set_over_the_budget_is_not_read_further(
        engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_engine, "MEMORY_BUDGET_BYTES", 2**20)
    with pytest.raises(StatementTooLarge, match=r"the result set is larger than 1 MiB "
                                                r"\(\d+ rows read\)"):
        run_query(engine, f"{ENDLESS}SELECT printf('%.200c', 'x') FROM r LIMIT 100000")
    assert len(run_query(engine, f"{ENDLESS}SELECT n FROM r LIMIT 1000").rows) == 1000


def test_the_time_bound_still_holds(engine: sa.Engine) -> None:
    started = time.monotonic()
    with pytest.raises(StatementTimeout, match=r"stopped after 0\.[5-9]"):
        run_query(engine, f"{ENDLESS}SELECT count(*) FROM r", timeout_s=0.5)
    assert time.monotonic() - started < 5


def test_a_users_own_engine_gets_the_bounds_for_the_statement_only(database: Path) -> None:
    users = sa.create_engine(f"sqlite:///{database}")
    with pytest.raises(DatabaseError, match="fts3_tokenizer"):
        run_query(users, "SELECT fts3_tokenizer('simple', X'4141414141414141')")
    with pytest.raises(StatementTooLarge):
        run_query(users, "SELECT zeroblob(100000000)")
    with users.connect() as connection:  # their limit is theirs again afterwards
        raw = connection.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        assert raw.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == 1_000_000_000
    users.dispose()


PEAK = """
import json, sys, time
from pytest_ragbench.sql.engine import DatabaseError, open_read_only, run_query
engine = open_read_only(f"sqlite:///{sys.argv[1]}", timeout_s=5)
started = time.monotonic()
try:
    run_query(engine, sys.argv[2])
    outcome = "ran"
except DatabaseError as exc:
    outcome = str(exc)
# VmHWM, not ru_maxrss: ru_maxrss keeps the forking parent's peak across exec
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"outcome": outcome, "seconds": time.monotonic() - started,
                  "peak_mb": peak_kb / 1024}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/status is Linux only")
def test_the_process_stays_small_under_the_blob_of_the_report(database: Path) -> None:
    """The audit's statement, in a fresh interpreter whose peak memory is its own."""
    sql = "SELECT length(hex(randomblob(400000000)))"
    done = subprocess.run([sys.executable, "-c", PEAK, str(database), sql],
                          capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(done.stdout)
    assert found["outcome"].startswith("string or blob too big")
    assert found["seconds"] < 1.0 and found["peak_mb"] < 300  # 23 s and 1.99 GB before
