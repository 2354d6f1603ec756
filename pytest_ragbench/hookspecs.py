"""Hooks that conftest.py files and plugins can implement to extend pytest-ragbench."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_ragbench_systems(config: pytest.Config) -> dict[str, Any] | None:
    """Return ``{name: factory}`` of extra systems for ``--ragbench-systems``.

    A factory is called once per session (per xdist worker) with the session-scoped
    ``pytest.FixtureRequest`` and returns an object with ``answer(question, history=None)``
    (see ``pytest_ragbench.system``); it may ask the request for fixtures
    (``request.getfixturevalue("ragbench_llm")``), and skip (``pytest.skip``) when it cannot
    run here. Names are letters, digits, ``_`` and ``.``; a name replaces the built-in
    system of that name (``dense``, ``bm25``, ``hybrid``, ``default``). The names given to
    ``--ragbench-systems`` are checked against these when the session starts, so implement
    the hook in a plugin or in a conftest.py at the rootdir (or in the folder pytest is
    started from), which pytest loads before the session starts.
    """
