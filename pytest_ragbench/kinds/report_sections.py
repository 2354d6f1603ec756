"""The built-in kinds' report sections (robustness, RAGCSV, BEIR, traffic), through the hook.

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
    return builtin_sections(document, config)


def builtin_sections(document: Any, config: pytest.Config | None = None) -> list[Any]:
    """The built-in sections of ``document`` (a ResultsDocument).

    The traffic section needs the session's settings (windows, triggers, what fails the
    session): its failure lines (``--ragbench-fail-on drift`` / ``critical``) are the
    section's failures, its raised triggers its alarms, each trigger and drift one of its
    checks.
    """
    from pytest_ragbench.kinds.beir import report as beir
    from pytest_ragbench.kinds.ragcsv import report as ragcsv
    from pytest_ragbench.kinds.robust import report as robustness

    records, systems = document.records, document.systems
    found = [robustness.report_section(records, systems),
             ragcsv.report_section(records, systems),
             beir.report_section(records, (document.run or {}).get("id"))]
    if config is not None:
        from pytest_ragbench.config.settings import get_config
        from pytest_ragbench.kinds.traffic import report as traffic

        found.append(traffic.report_section(records, get_config(config)))
    return found
