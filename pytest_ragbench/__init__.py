"""pytest-ragbench: evaluate RAG systems as an ordinary pytest suite.

The public API is the names of ``__all__``, importable from here::

    from pytest_ragbench import Answer, Context, CaseKind, ItemKind, bootstrap_ci

Each is imported on first access (PEP 562 ``__getattr__``), so ``import pytest_ragbench``,
which pytest does for every run once the plugin is installed, loads nothing more; the
modules they live in may move, these names stay.

PYTEST_DONT_REWRITE: this file holds no asserts. pytest >= 9.2 marks an editable
install's plugin package for assertion rewriting and warns when the package is already
imported (every in-process pytester run); the submodules are still rewritten.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it (a module itself when the name is one)
_PUBLIC = {
    # the system under test (README "Interfaces")
    **dict.fromkeys(("Answer", "Context", "Document", "Embedder", "Generation", "Generator",
                     "Judge", "MemoryHit", "MemoryStore", "Message", "PassageSystem",
                     "Retriever", "System", "Usage"), "pytest_ragbench.protocols"),
    # kinds (README "Adding a kind")
    **dict.fromkeys(("CaseKind", "ItemKind", "ItemRun", "Field", "Outcome", "RunContext"),
                    "pytest_ragbench.kinds"),
    "define_metric": "pytest_ragbench.metrics",
    "converters": "pytest_ragbench.cases.build",  # text, optional_text, number, ...
    # report sections (hook pytest_ragbench_report_sections)
    **dict.fromkeys(("ReportSection", "LeaderboardRow", "SectionCheck", "BandPlot", "BandPanel"),
                    "pytest_ragbench.results.sections"),
    "ResultsDocument": "pytest_ragbench.results.document",
    **dict.fromkeys(("MetricStats", "GateVerdict", "Comparison"),
                    "pytest_ragbench.results.entries"),
    # IR evaluation and statistics (README "Python API")
    **dict.fromkeys(("evaluate_run", "read_qrels", "read_run", "write_run"),
                    "pytest_ragbench.metrics"),
    **dict.fromkeys(("bootstrap_ci", "t_ci", "paired_test", "adjust_pvalues", "cohens_d",
                     "paired_power", "power_table", "ppi_mean_ci", "stratified_ppi_mean_ci",
                     "summarize", "proportion_half_width", "sample_size_for_half_width",
                     "Interval", "PairedTest", "PPIInterval", "Stratum"),
                    "pytest_ragbench.stats"),
    # production traffic (README "Production traffic")
    "RetrievalLog": "pytest_ragbench.monitor",
    # framework adapters: langchain, llama_index, haystack (each imports its framework)
    "adapters": "pytest_ragbench.adapters",
}
_MODULES = frozenset({"converters", "adapters"})

__all__ = [
    "Answer", "BandPanel", "BandPlot", "CaseKind", "Comparison", "Context", "Document",
    "Embedder", "Field", "GateVerdict", "Generation",
    "Generator", "Interval", "ItemKind", "ItemRun", "Judge", "LeaderboardRow", "MemoryHit",
    "MemoryStore", "Message", "MetricStats", "Outcome", "PPIInterval", "PairedTest",
    "PassageSystem", "ReportSection", "ResultsDocument", "RetrievalLog", "Retriever", "RunContext",
    "SectionCheck", "Stratum", "System",
    "Usage", "adapters", "adjust_pvalues", "bootstrap_ci", "cohens_d", "converters",
    "define_metric", "evaluate_run", "paired_power", "paired_test", "power_table",
    "ppi_mean_ci", "proportion_half_width", "read_qrels", "read_run",
    "sample_size_for_half_width", "stratified_ppi_mean_ci", "summarize", "t_ci", "write_run"
]


def __getattr__(name: str) -> Any:
    """Import a public name on access: always the object its module now holds."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ragbench' has no attribute {name!r}")
    found = importlib.import_module(module)
    return found if name in _MODULES else getattr(found, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from pytest_ragbench import adapters
    from pytest_ragbench.cases import build as converters
    from pytest_ragbench.kinds import CaseKind, Field, ItemKind, ItemRun, Outcome, RunContext
    from pytest_ragbench.metrics import (
        define_metric,
        evaluate_run,
        read_qrels,
        read_run,
        write_run,
    )
    from pytest_ragbench.protocols import (
        Answer,
        Context,
        Document,
        Embedder,
        Generation,
        Generator,
        Judge,
        MemoryHit,
        MemoryStore,
        Message,
        PassageSystem,
        Retriever,
        System,
        Usage,
    )
    from pytest_ragbench.results.document import ResultsDocument
    from pytest_ragbench.results.entries import Comparison, GateVerdict, MetricStats
    from pytest_ragbench.results.sections import (
        BandPanel,
        BandPlot,
        LeaderboardRow,
        ReportSection,
        SectionCheck,
    )
    from pytest_ragbench.stats import (
        Interval,
        PairedTest,
        PPIInterval,
        Stratum,
        adjust_pvalues,
        bootstrap_ci,
        cohens_d,
        paired_power,
        paired_test,
        power_table,
        ppi_mean_ci,
        proportion_half_width,
        sample_size_for_half_width,
        stratified_ppi_mean_ci,
        summarize,
        t_ci,
    )
