"""The checks made before any item runs: system names, save name, gates, labels, baseline.

A mistake in any of them is a usage error (pytest exits 4) before the first item costs
anything; what they read is kept on the run for the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_ragbench.collect.files import display_path
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.kinds import registry
from pytest_ragbench.systems.fixtures import check_systems

if TYPE_CHECKING:
    from pytest_ragbench.run.session import RagbenchSession


class StartupChecks:
    """Reads and checks what the settings name; fills the run's gates, labels and baseline."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check system names, save name and gates, and load the baseline."""
        run, settings, config = self.run, self.run.settings, self.run.config
        try:
            if settings.systems:
                check_systems(config, settings.systems)
            if settings.save:
                from pytest_ragbench.results.runs import check_name

                check_name(settings.save)
            if settings.gates:
                from pytest_ragbench.results.gates import parse_gates

                run.gates = parse_gates(settings.gates)
            if settings.judge_labels:
                from pytest_ragbench.cases.labels import read_labels
                from pytest_ragbench.config.vocabulary import check_labels

                path = settings.judge_labels
                run.labels = read_labels(path, display_path(path, config))
                check_labels(run.labels, registry(config))
            if settings.compare:
                from pytest_ragbench.results import runs

                path = runs.resolve(settings.compare, settings.report_dir,
                                    config.invocation_params.dir)
                run.baseline = runs.load(path)
        except ConfigError as exc:
            raise pytest.UsageError(f"ragbench: {exc}") from None
