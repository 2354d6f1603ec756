"""Fixtures for settings and databases (the system fixtures live in ``systems/fixtures.py``).

Override any of them in a conftest.py; ``ragbench_db`` returning your own SQLAlchemy
engine is enough to verify cases against your database.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig, get_config
from pytest_ragbench.errors import ConfigError


def settings_fixture(config: pytest.Config) -> types.ModuleType:
    """A plugin whose ``ragbench_config`` fixture returns ``config``'s settings.

    Every item uses ``ragbench_config``. pytest 9 builds a new FixtureDef for ``request``
    (with an ``inspect.signature`` call) each time an item uses a fixture that takes it,
    even a session-scoped one whose value is cached; this one closes over the config instead.
    """
    plugin = types.ModuleType("pytest_ragbench.settings")

    @pytest.fixture(scope="session")
    def ragbench_config() -> RagbenchConfig:
        """The session's resolved settings (flags, ini keys, ragbench.toml)."""
        return get_config(config)

    plugin.ragbench_config = ragbench_config  # type: ignore[attr-defined]
    return plugin


class DatabaseUnavailable:
    """Stands in for an engine that could not be created; using it reports why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"DatabaseUnavailable({self.reason!r})"


@pytest.fixture(scope="session")
def ragbench_db(ragbench_config: RagbenchConfig) -> Iterator[Any]:
    """The default database as a read-only SQLAlchemy engine (None when not configured)."""
    if not ragbench_config.db_url:
        yield None
        return
    # lazy: loads sqlalchemy
    from pytest_ragbench.sql.engine import DatabaseError, open_read_only

    try:
        engine = open_read_only(ragbench_config.db_url, ragbench_config.sql_timeout_s)
    except DatabaseError as exc:
        yield DatabaseUnavailable(str(exc))
        return
    yield engine
    engine.dispose()


class Databases:
    """Read-only engines for the named databases of ini ``ragbench_dbs``, opened on first use."""

    def __init__(self, config: RagbenchConfig, default: Any) -> None:
        self._config = config
        self._default = default
        self._engines: dict[str, Any] = {}

    def engine(self, name: str | None = None) -> Any:
        """The engine for ``name`` (the default database when None); raises DatabaseError."""
        # lazy: loads sqlalchemy
        from pytest_ragbench.sql.engine import DatabaseError, open_read_only

        if name is None:
            engine = self._default
            if engine is None:
                raise DatabaseError("no database configured: set the ini key ragbench_db_url "
                                    "or pass --ragbench-db-url")
        else:
            if name not in self._engines:
                try:
                    url = self._config.database_url(name)
                except ConfigError as exc:
                    raise DatabaseError(str(exc)) from None
                try:
                    self._engines[name] = open_read_only(url or "",
                                                         self._config.sql_timeout_s)
                except DatabaseError as exc:
                    self._engines[name] = DatabaseUnavailable(str(exc))
            engine = self._engines[name]
        if isinstance(engine, DatabaseUnavailable):
            raise DatabaseError(engine.reason)
        return engine

    def close(self) -> None:
        """Dispose of the engines opened here."""
        for engine in self._engines.values():
            if hasattr(engine, "dispose"):
                engine.dispose()


@pytest.fixture(scope="session")
def ragbench_databases(ragbench_config: RagbenchConfig, ragbench_db: Any) -> Iterator[Databases]:
    """Default and named databases, for cases that set ``db:``."""
    databases = Databases(ragbench_config, ragbench_db)
    yield databases
    databases.close()
