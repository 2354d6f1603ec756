"""Repository conftest: builds the bundled NBA example database when it is missing.

The database is never committed; it is built reproducibly from the CSV files in
``test_cases/data`` with the SQLAlchemy models in ``test_cases/data/build_nba_db.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
BUILDER = ROOT / "test_cases" / "data" / "build_nba_db.py"
DATABASE = ROOT / "test_cases" / "data" / "nba_stats.db"


def ensure_nba_database() -> Path:
    """Build ``test_cases/data/nba_stats.db`` from its CSV files unless it exists."""
    if DATABASE.is_file():
        return DATABASE
    spec = importlib.util.spec_from_file_location("build_nba_db", BUILDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.ensure_database(DATABASE))


def pytest_configure(config: pytest.Config) -> None:
    """Make sure the example database exists before any case runs (xdist-safe)."""
    ensure_nba_database()
