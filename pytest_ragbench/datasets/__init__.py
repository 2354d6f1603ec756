"""Benchmark datasets: adapters, stratified sampling, exports and the ``ragbench dataset`` CLI.

Imported only when the dataset feature is used (the pytest plugin does not import it).
"""

from __future__ import annotations

from pytest_ragbench.datasets.sample import NormalizedSample

__all__ = ["NormalizedSample"]
