"""The item kinds: which pytest items a case becomes and how each is evaluated.

This module is imported at collection time, so it holds only names; each kind's
evaluation code lives in its own module and is imported when an item runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VERIFICATION = "verification"
EVALUATION = "evaluation"
ANY_CASE_KIND = "*"  # an item kind made from cases of several kinds


@dataclass(frozen=True)
class ItemKind:
    """One kind of item: its node-name prefix, the case kind it reads and its runner."""

    name: str
    case_kind: str
    family: str
    fixtures: tuple[str, ...]
    runner: str  # "module:function", imported when the first item runs
    description: str

    def load_runner(self) -> Callable[..., Any]:
        """Import and return the function that evaluates one case."""
        name, _, function = self.runner.partition(":")
        module = sys.modules.get(name) or importlib.import_module(name)  # once per item
        runner: Callable[..., Any] = getattr(module, function)
        return runner


_SQL_FIXTURES = ("ragbench_config", "ragbench_db", "ragbench_databases")
_SYSTEM_FIXTURES = ("ragbench_config", "ragbench_system", "ragbench_embedder", "ragbench_judge")

ITEM_KINDS: dict[str, ItemKind] = {
    kind.name: kind
    for kind in (
        ItemKind("sql_ground_truth", "sql", VERIFICATION, _SQL_FIXTURES,
                 "pytest_ragbench.kinds.sql_ground_truth:run",
                 "the case's expected SQL returns its ground_truth_data"),
        ItemKind("hybrid_ground_truth", "hybrid", VERIFICATION, _SQL_FIXTURES,
                 "pytest_ragbench.kinds.hybrid_ground_truth:run",
                 "SQL data matches and the answer mentions its key entities"),
        ItemKind("sql", "sql", EVALUATION, (*_SQL_FIXTURES, "ragbench_system"),
                 "pytest_ragbench.kinds.sql:run", "the system answers an SQL question"),
        ItemKind("hybrid", "hybrid", EVALUATION, (*_SYSTEM_FIXTURES, "ragbench_db",
                                                  "ragbench_databases"),
                 "pytest_ragbench.kinds.hybrid:run", "the system answers with data and context"),
        ItemKind("vector", "vector", EVALUATION, _SYSTEM_FIXTURES,
                 "pytest_ragbench.kinds.vector:run", "retrieval and answer over documents"),
        ItemKind("memory", "memory", EVALUATION,
                 ("ragbench_config", "ragbench_memory", "ragbench_judge"),
                 "pytest_ragbench.kinds.memory:run", "conversational memory retrieval"),
        ItemKind("ragas", "ragas", EVALUATION, _SYSTEM_FIXTURES,
                 "pytest_ragbench.kinds.ragas:run", "RAGAS metrics on a NormalizedSample"),
        # The dataset's retriever comes from ragbench_beir_retriever_factory (or a named
        # system), asked for when the dataset is first run; see kinds/beir.py.
        ItemKind("beir", "beir", EVALUATION, ("ragbench_config",),
                 "pytest_ragbench.kinds.beir:run", "IR metrics on a BEIR query"),
        # ragbench_embedder only without a judge (semantic similarity): asked for then.
        ItemKind("ragcsv", "ragcsv", EVALUATION,
                 ("ragbench_config", "ragbench_llm", "ragbench_judge"),
                 "pytest_ragbench.kinds.ragcsv:run", "graded answer accuracy on a RAGCSV row"),
        # Any case kind of robust.collect.ROBUST_CASE_KINDS; made by robust.collect, not by
        # item_kinds_for. The system, embedder and retriever are looked up when needed.
        ItemKind("robust", ANY_CASE_KIND, EVALUATION, ("ragbench_config",),
                 "pytest_ragbench.kinds.robust:run",
                 "perturbed questions with metamorphic checks (--ragbench-robustness)"),
    )
}
MARKERS = tuple(ITEM_KINDS)


# Item kinds that are collected: every kind. Tests narrow it to run one kind in isolation
# (e.g. a toy kind registered in ITEM_KINDS).
AVAILABLE = frozenset(ITEM_KINDS)


def item_kinds_for(case_kind: str, evaluate: bool) -> list[ItemKind]:
    """The item kinds a case of ``case_kind`` becomes (evaluation ones only with --ragbench)."""
    return [k for k in ITEM_KINDS.values()
            if k.case_kind == case_kind and k.name in AVAILABLE
            and (evaluate or k.family == VERIFICATION)]
