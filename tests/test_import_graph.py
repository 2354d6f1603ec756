"""Every import between the package's modules points down, and lazy ones say why."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import ImportGraph

ROOT = Path(__file__).resolve().parents[1]
# plugin.py, what pytest imports to load it, and the built-in hooks pytest_addhooks registers
PLUGIN_LOAD = ("pytest_ragbench.plugin", "pytest_ragbench.config.options", "pytest_ragbench.config",
               "pytest_ragbench.kinds.report_sections")


def test_no_import_cycle() -> None:
    """No two modules import each other, directly or round a circle, even inside functions."""
    assert ImportGraph.read(ROOT).cycles() == []


def test_function_level_imports_say_why() -> None:
    """An import inside a function loads a heavy library, or its ``# lazy:`` comment says why.

    On the plugin-load path (plugin.py, options.py, config.py and what they import at module
    level) function-level imports keep the package out of a plain pytest run by design.
    """
    graph = ImportGraph.read(ROOT)
    load_path = set().union(*(graph.closure(m) for m in PLUGIN_LOAD))
    unexplained = [
        f"{found.module}:{found.line} -> {', '.join(found.targets)}"
        for found in graph.lazy
        if found.module not in load_path and not found.has_reason
        and not any(graph.heavy(target) for target in found.targets)]
    assert unexplained == []


def test_plugin_load_path_loads_no_heavy_library() -> None:
    """What pytest imports to load the plugin pulls in no heavy library at module level."""
    graph = ImportGraph.read(ROOT)
    assert {m: graph.heavy(m) for m in PLUGIN_LOAD if graph.heavy(m)} == {}
