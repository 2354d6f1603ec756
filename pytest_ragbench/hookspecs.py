"""Hooks that conftest.py files and plugins can implement to extend pytest-ragbench."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


@pytest.hookspec
def pytest_ragbench_systems(config: pytest.Config) -> dict[str, Any] | None:
    """Return ``{name: factory}`` of extra systems for ``--ragbench-systems``.

    A factory is called once per session (per xdist worker) with the session-scoped
    ``pytest.FixtureRequest`` and returns an object with ``answer(question, history=None)``
    (see ``pytest_ragbench.systems``); it may ask the request for fixtures
    (``request.getfixturevalue("ragbench_llm")``), and skip (``pytest.skip``) when it cannot
    run here. Names are letters, digits, ``_`` and ``.``; a name replaces the built-in
    system of that name (``dense``, ``bm25``, ``hybrid``, ``default``). The names given to
    ``--ragbench-systems`` are checked against these when the session starts, so implement
    the hook in a plugin or in a conftest.py at the rootdir (or in the folder pytest is
    started from), which pytest loads before the session starts.
    """


@pytest.hookspec
def pytest_ragbench_item_kinds(config: pytest.Config) -> Sequence[Any] | None:
    """Return the case kinds and item kinds to add: ``CaseKind`` and ``ItemKind`` objects.

    Both are in :mod:`pytest_ragbench.kinds`. A ``CaseKind`` is what a case file's
    ``kind:`` may name (its fields, required or optional, with converters); an ``ItemKind``
    makes ``<name>[<id>]`` items of a case kind: its runner, the metrics it records (a
    ``MetricSpec`` registers a new one) and its default thresholds. The built-in kinds come
    through this hook too; a kind of the same name as a built-in one replaces it, and two
    plugins adding one name is a usage error. Called once per session (and per xdist
    worker) when the plugin is configured, so implement it in a plugin or in a
    conftest.py at the rootdir (or in the folder pytest is started from). README section
    "Adding a kind" shows a complete one.
    """
