"""Adapters: each turns one kind of source into :class:`NormalizedSample` records.

Every adapter module has ``NAME``, ``OPTIONS`` (option → help text) and
``adapt_source(path, options) -> AdaptResult``; modules are imported when first used.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pytest_ragbench.datasets.sources.base import AdaptResult

ADAPTERS = {
    "tables": "T2-RAGBench / FinQA / TAT-QA table QA (JSON, JSONL)",
    "code": "SWE-QA-Bench folders, CodeRepoQA issues, code snippet QA (JSON, JSONL)",
    "beir": "BEIR folders (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)",
    "ragcsv": "RAGCSV files",
    "qa": "plain question/answer records (CSV with header, JSON, JSONL)",
    "cases": "the project's own case files (YAML, JSON, JSONL, *_test_cases.py)",
}

__all__ = ["ADAPTERS", "AdaptResult", "get_adapter"]


def get_adapter(name: str) -> ModuleType:
    """The adapter module called ``name``; ``KeyError`` names the known ones."""
    if name not in ADAPTERS:
        raise KeyError(f"unknown adapter {name!r} (known: {', '.join(ADAPTERS)})")
    return importlib.import_module(f"pytest_ragbench.datasets.sources.{name}")
