"""Case schemas (frozen dataclasses) and the loaders that read them from files."""

from __future__ import annotations

from pathlib import Path

from pytest_ragbench.cases.build import BuildResult, build_cases, duplicate_id_error
from pytest_ragbench.cases.loaders import read_case_file
from pytest_ragbench.cases.model import (
    Case,
    HybridCase,
    Memory,
    MemoryCase,
    RagasCase,
    SqlCase,
    Table,
    Turn,
    VectorCase,
)

__all__ = [
    "BuildResult",
    "Case",
    "HybridCase",
    "Memory",
    "MemoryCase",
    "RagasCase",
    "SqlCase",
    "Table",
    "Turn",
    "VectorCase",
    "load_file",
]


def load_file(path: str | Path) -> BuildResult:
    """Read and build every case of one file.

    A problem with the whole file (syntax error, duplicate id) raises
    :class:`~pytest_ragbench.errors.CaseError`; a problem with one record is
    returned in ``errors`` and the other cases are still built.
    """
    path = Path(path)
    result = build_cases(read_case_file(path))
    duplicate = duplicate_id_error(result.cases, path)
    if duplicate is not None:
        raise duplicate
    return result
