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


@pytest.hookspec
def pytest_ragbench_report_sections(config: pytest.Config, document: Any) -> Any:
    """Return report sections to add: a ``ReportSection``, a list of them, or None.

    ``document`` is the session's :class:`~pytest_ragbench.results.document.ResultsDocument`
    (``document.records`` are the item records in node-id order, ``document.systems`` the
    systems, ``document.metrics`` and the rest as in results.json, each metric cell a
    ``MetricStats``, each gate a ``GateVerdict``, each comparison a ``Comparison``: typed
    entries that also read like their results.json objects, ``cell["mean"]``). A section
    (``pytest_ragbench.ReportSection``) has a ``key`` and JSON ``data`` (results.json
    holds ``data`` under ``key``), a ``title``, a ``table`` (rows, header first) and
    ``text`` lines, which the terminal summary and report.html print with the same number
    formatting as their own tables; ``files`` it writes into the report dir,
    ``leaderboard`` rows, ``alarms`` (lines that open the summary and the page),
    ``failures`` (lines that fail the session), ``checks`` (JUnit testcases) and ``plots``
    are optional. Called once, in the controller, at session end; a section that fails or
    is invalid is left out and named in a warning, the rest of the report stands. The
    built-in BEIR, RAGCSV, robustness and traffic sections come through this hook too
    (first). README section "Adding a kind" shows one.
    """
