"""The built-in kinds' report sections (robustness, RAGCSV, BEIR), through the public hook.

Registered when the plugin is loaded, like :mod:`pytest_ragbench.kinds`; the kinds'
report modules are imported when the hook is called, at session end. Each section is
always returned (with empty data when the run had none of the kind's items), so
results.json always has its key.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_ragbench_report_sections(config: pytest.Config, document: Any) -> list[Any]:
    """The built-in sections, before any plugin's."""
    return builtin_sections(document)


def builtin_sections(document: Any) -> list[Any]:
    """The three built-in sections of ``document`` (a ResultsDocument)."""
    from pytest_ragbench.kinds.beir import report as beir
    from pytest_ragbench.kinds.ragcsv import report as ragcsv
    from pytest_ragbench.kinds.robust import report as robustness

    records, systems = document.records, document.systems
    return [robustness.report_section(records, systems),
            ragcsv.report_section(records, systems),
            beir.report_section(records, (document.run or {}).get("id"))]
