"""The results document's typed entries: metric cells, gate verdicts and comparisons."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.results import document, entries, gates
from pytest_ragbench.results.records import ItemRecord


def _records(system: str, shift: float) -> list[ItemRecord]:
    rng = random.Random(7)
    return [ItemRecord(nodeid=f"cases.yaml::vector[{system}-c{i:02d}]", kind="vector",
                       case_kind="vector", case_id=f"c{i:02d}", file="cases.yaml", line=1,
                       status="passed", system=system,
                       metrics={"semantic_similarity": min(1.0, rng.random() + shift),
                                "source_hit@3": float(rng.random() < 0.5 + shift)},
                       thresholds={"semantic_similarity": 0.5})
            for i in range(30)]


def _fields(entry: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(entry)]


@pytest.fixture(scope="module")
def typed() -> document.ResultsDocument:
    """Two systems, a gate on each and the comparison between them."""
    config = RagbenchConfig(rootpath=Path("."), systems=("a", "b"),
                            gates={"vector": {"semantic_similarity": 0.4}})
    return document.assemble(_records("a", 0.0) + _records("b", 0.3), config,
                             run={"id": "r"}, components={},
                             gate_list=gates.parse_gates(config.gates))


def test_the_sections_hold_typed_entries(typed: document.ResultsDocument) -> None:
    cell = typed.metrics["vector"]["semantic_similarity"]
    assert isinstance(cell, entries.MetricStats)
    assert cell.systems is not None and set(cell.systems) == {"a", "b"}
    assert all(isinstance(c, entries.MetricStats) and c.systems is None
               for c in cell.systems.values())
    assert [type(g) for g in typed.gates] == [entries.GateVerdict] * 2
    assert [g.system for g in typed.gates] == ["a", "b"]
    compared = typed.comparisons["a_vs_b"]["vector"]
    assert {type(c) for c in compared.values()} == {entries.Comparison}
    assert compared["semantic_similarity"].delta < 0 and compared["semantic_similarity"].worse


def test_an_entry_reads_like_its_json_object(typed: document.ResultsDocument) -> None:
    cell = typed.metrics["vector"]["semantic_similarity"].systems["a"]  # type: ignore[index]
    assert cell["mean"] == cell.mean and cell.get("n") == 30
    # an optional field that is None is no key at all, as in results.json
    assert "systems" not in cell and cell.get("systems") is None
    with pytest.raises(KeyError):
        cell["systems"]
    for not_a_key in ("no such key", "to_dict", "OPTIONAL"):  # methods are no keys either
        with pytest.raises(KeyError):
            cell[not_a_key]
    assert list(cell) == list(cell.to_dict()) == \
        [f for f in _fields(entries.MetricStats) if f != "systems"]
    pooled = typed.metrics["vector"]["semantic_similarity"].to_dict()
    assert list(pooled)[-1] == "systems" and type(pooled["systems"]["b"]) is dict


def test_results_json_is_the_entries_serialised(typed: document.ResultsDocument) -> None:
    data = json.loads(json.dumps(typed.to_dict(), allow_nan=False))
    gate = data["gates"][0]
    assert gate == json.loads(json.dumps(typed.gates[0].to_dict()))
    assert entries.GateVerdict.from_dict(gate) == typed.gates[0]
    pooled = data["metrics"]["vector"]["semantic_similarity"]
    assert entries.MetricStats.from_dict(pooled).to_dict() == pooled
    comparison = data["comparisons"]["a_vs_b"]["vector"]["source_hit@3"]
    assert comparison["test"] == "mcnemar" and "discordant" in comparison
    assert "discordant" not in data["comparisons"]["a_vs_b"]["vector"]["semantic_similarity"]


def test_a_sequential_decision_adds_its_key(typed: document.ResultsDocument) -> None:
    verdict = typed.gates[0]
    assert "sequential" not in verdict
    decided = gates.with_sequential(verdict, {
        "status": "missed", "cs_low": 0.1, "cs_high": 0.3, "method": "betting CS",
        "decided_after": 12, "n": 12, "alpha": 0.05, "mean": 0.2})
    # higher is better: the sequence's lower bound is what was checked
    assert decided.passed is False and decided.value == 0.1 and decided is not verdict
    assert list(decided.to_dict())[-1] == "sequential" and decided["sequential"]["n"] == 12
    assert verdict.passed is True  # the entry it was made from is unchanged


@pytest.mark.parametrize(("definition", "entry"), [("cell", entries.MetricStats),
                                                   ("gate", entries.GateVerdict),
                                                   ("comparison", entries.Comparison)])
def test_the_schema_names_only_fields_of_the_entry(definition: str, entry: Any) -> None:
    schema = json.loads(document.schema_text())["$defs"][definition]
    assert set(schema["properties"]) | set(schema["required"]) <= set(_fields(entry))
