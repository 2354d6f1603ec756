"""Every import between the package's modules points down, and lazy ones say why."""

from __future__ import annotations

import re
from pathlib import Path

from tests.import_graph import ImportGraph

ROOT = Path(__file__).resolve().parents[1]
# plugin.py, what pytest imports to load it, and the built-in hooks pytest_addhooks registers
PLUGIN_LOAD = ("pytest_ragbench.plugin", "pytest_ragbench.config.options", "pytest_ragbench.config",
               "pytest_ragbench.kinds.report_sections")


def test_no_import_cycle() -> None:
    """No two modules import each other, directly or round a circle, even inside functions."""
    assert ImportGraph.read(ROOT).cycles() == []


def plugin_tier(graph: ImportGraph) -> set[str]:
    """plugin.py's import policy (its docstring): the modules whose imports it governs.

    What pytest loads for the plugin, the modules the plugin's hooks import inside them,
    and what all of those import at module level.
    """
    hooks = {t for found in graph.lazy if found.module == "pytest_ragbench.plugin"
             for t in found.targets}
    return set().union(*(graph.closure(m) for m in (*PLUGIN_LOAD, *hooks)))


def test_function_level_imports_say_why() -> None:
    """An import inside a function follows plugin.py's import policy, or says why.

    In the plugin tier function-level imports keep the package out of a plain pytest run
    by policy, with no comment; elsewhere one loads a heavy library or its ``# lazy:``
    comment gives the reason.
    """
    graph = ImportGraph.read(ROOT)
    load_path = plugin_tier(graph)
    unexplained = [
        f"{found.module}:{found.line} -> {', '.join(found.targets)}"
        for found in graph.lazy
        if found.module not in load_path and not found.has_reason
        and not any(graph.heavy(target) for target in found.targets)]
    assert unexplained == []


def test_the_plugin_tier_loads_no_heavy_library_and_needs_no_lazy_comment() -> None:
    """The policy's modules import nothing heavy at module level; no comment repeats it."""
    graph = ImportGraph.read(ROOT)
    tier = plugin_tier(graph)
    assert {m: graph.heavy(m) for m in sorted(tier) if graph.heavy(m)} == {}
    repeated = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "pytest_ragbench").rglob("*.py")
                for n, line in enumerate(path.read_text().splitlines(), 1)
                if "# lazy: kept out of a plain pytest run" in line]
    assert repeated == []


def test_plugin_load_path_loads_no_heavy_library() -> None:
    """What pytest imports to load the plugin pulls in no heavy library at module level."""
    graph = ImportGraph.read(ROOT)
    assert {m: graph.heavy(m) for m in PLUGIN_LOAD if graph.heavy(m)} == {}


def test_no_comment_cites_an_issue_number() -> None:
    """Comments and docstrings give reasons and README sections, not tracker numbers."""
    cited = [f"{path.relative_to(ROOT)}:{n}"
             for path in (ROOT / "pytest_ragbench").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bissue #?\d+", line, re.IGNORECASE)]
    assert cited == []
