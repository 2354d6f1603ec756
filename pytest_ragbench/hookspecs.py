"""Hooks that conftest.py files and plugins can implement to extend pytest-ragbench."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_ragbench_systems(config: pytest.Config) -> dict[str, Any] | None:
    """Return ``{name: factory}`` of extra systems for ``--ragbench-systems``.

    A factory is called with the ``pytest.FixtureRequest`` of the session and returns an
    object with ``answer(question, history=None)`` (see ``pytest_ragbench.system``).
    """
