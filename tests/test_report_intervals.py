"""Honest intervals in the report: cells, pass rates, gates, clusters and accounting (issue 15)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_ragbench.cases.build import build_case
from pytest_ragbench.cases.raw import RawRecord
from pytest_ragbench.render import terminal
from tests.test_report_aggregate import build, record
from tests.toy_project import make_toy_project

METHODS = {"wilson", "clopper-pearson", "bca", "t"}


def _cells(document: dict) -> list[dict]:
    """Every metric and breakdown cell of a results document (per-system ones too)."""
    found = []
    for by_metric in document["metrics"].values():
        for entry in by_metric.values():
            found += [entry, *entry.get("systems", {}).values()]
    for fields in document["breakdowns"].values():
        for values in fields.values():
            for by_metric in values.values():
                for entry in by_metric.values():
                    found += [entry, *entry.get("systems", {}).values()]
    return found


def test_an_all_passing_session_reports_a_wilson_bound_below_one() -> None:
    records = [record(f"c{i:02d}", {"answered": 1.0, "semantic_similarity": 0.8},
                      thresholds={"answered": 1.0}) for i in range(38)]
    result = build(records, gate="ci-lower")
    answered = result["metrics"]["vector"]["answered"]
    assert answered["ci_method"] == "wilson"
    assert answered["ci_low"] == pytest.approx(0.9082, abs=1e-4) and answered["ci_high"] == 1.0
    assert answered["pass_rate"] == 1.0
    assert answered["pass_rate_ci_low"] == pytest.approx(0.9082, abs=1e-4)
    similarity = result["metrics"]["vector"]["semantic_similarity"]  # range [-1, 1], constant
    assert similarity["ci_method"] == "wilson" and similarity["ci_note"].startswith("no spread")
    assert similarity["ci_low"] < 0.8 < similarity["ci_high"]
    # The item threshold checked in aggregate: 38 of 38 is not proof of a rate of 1.
    (verdict,) = result["gates"]
    assert verdict["passed"] is False and verdict["method"] == "clopper-pearson"
    assert verdict["value"] == pytest.approx(0.9075, abs=1e-4)


def test_every_cell_has_a_method_and_width_unless_n_is_too_small() -> None:
    rng = random.Random(1)
    records = [record(f"c{i:02d}", {"token_f1": rng.random(), "exact_match": float(i % 3 == 0),
                                    "declined": 0.0, "latency_s": 0.5 + rng.random()},
                      fields={"category": "abc"[i % 3] if i else "solo"},
                      thresholds={"token_f1": 0.5}) for i in range(40)]
    result = build(records)
    cells = _cells(result)
    assert len(cells) == 4 * 5
    for cell in cells:
        if cell["n"] < 2:
            assert cell["ci_method"] is None and cell["ci_note"] == "n too small"
            assert cell["ci_low"] is None and cell["pass_rate_ci_low"] is None
        else:
            assert cell["ci_method"] in METHODS
            assert cell["ci_high"] > cell["ci_low"]
    overall = result["metrics"]["vector"]
    assert overall["token_f1"]["ci_method"] == "bca"
    assert overall["exact_match"]["ci_method"] == "wilson"
    assert result["breakdowns"]["vector"]["category"]["a"]["token_f1"]["ci_method"] == "t"
    assert 0 < overall["token_f1"]["pass_rate_ci_low"] < overall["token_f1"]["pass_rate"]
    # The terminal names each cell's method.
    rows = terminal.metrics_rows(result)
    assert rows[0][6] == "CI method"
    assert {row[1]: row[6] for row in rows[1:]} == {
        "declined": "Wilson", "exact_match": "Wilson", "latency_s": "BCa", "token_f1": "BCa"}
    lines = terminal.breakdown_lines(result)
    assert any(line.startswith("solo ") and "[n too small]" in line for line in lines)


def test_errored_items_count_as_unscored() -> None:
    records = [record(f"c{i}", {"token_f1": 0.1 * i}) for i in range(6)]
    records += [record("broken", {}, status="error", error="RuntimeError: boom"),
                record("crashed", {}, status="failed", error="KeyError: 'x'"),
                record("skipped", {}, status="skipped")]
    cell = build(records)["metrics"]["vector"]["token_f1"]
    assert (cell["n"], cell["n_unscored"]) == (6, 2)
    assert cell["unscored_reasons"] == {"item error": 2}


@pytest.mark.parametrize("mode", ["mean", "ci-lower"])
def test_a_gate_with_too_few_scored_items_is_not_checked(mode: str) -> None:
    """The issue's case: 1 scored item and 9 unscored must not pass a gate."""
    records = [record("c0", {"token_f1": 0.9})]
    records += [record(f"u{i}", {}, unscored={"token_f1": "no judge"}) for i in range(9)]
    result = build(records, gates={"vector.token_f1": 0.5}, gate=mode)
    (verdict,) = result["gates"]
    assert verdict["status"] == "n too small"
    line = terminal.gate_lines(result)[-1]
    if mode == "ci-lower":
        assert verdict["passed"] is False
        assert line == ("FAILED gate vector.token_f1 >= 0.5: not checked: n too small (1 scored, "
                        "ragbench_gate_min_n = 5; 9 of 10 items unscored)")
    else:
        assert verdict["passed"] is None and result["failures"] == []
        assert line.startswith("gate vector.token_f1 >= 0.5: not checked: n too small")


def test_gate_min_n_and_the_unscored_note() -> None:
    rng = random.Random(2)
    records = [record(f"c{i}", {"token_f1": 0.7 + 0.1 * rng.random()}) for i in range(4)]
    records += [record(f"u{i}", {}, unscored={"token_f1": "no judge"}) for i in range(5)]
    lenient = build(records, gates={"vector.token_f1": 0.1}, gate="ci-lower", gate_min_n=3)
    (verdict,) = lenient["gates"]
    assert verdict["passed"] is True and verdict["method"] == "t+betting"
    line = terminal.gate_lines(lenient)[0]
    assert line.startswith("gate vector.token_f1 >= 0.1: passed (95% CI lower bound ")
    assert line.endswith(" t, n=4; 5 of 9 items unscored)")
    assert build(records, gates={"vector.token_f1": 0.1}, gate="ci-lower")["gates"][0][
        "passed"] is False  # the default ragbench_gate_min_n = 5


def test_the_pooled_cell_of_several_systems_resamples_cases() -> None:
    rng = random.Random(3)
    records = []
    for i in range(12):
        base = rng.random()
        records += [record(f"c{i:02d}", {"token_f1": min(1.0, base + 0.01 * s)}, system=name)
                    for s, name in enumerate(("a", "b", "c"))]
    result = build(records, systems=("a", "b", "c"))
    pooled = result["metrics"]["vector"]["token_f1"]
    assert pooled["n"] == 36 and pooled["n_clusters"] == 12 and pooled["ci_method"] == "t"
    assert pooled["systems"]["a"]["n_clusters"] is None
    # 12 cases, not 36 independent items: as wide as one system's interval, give or take.
    one = pooled["systems"]["a"]
    assert pooled["ci_high"] - pooled["ci_low"] > 0.8 * (one["ci_high"] - one["ci_low"])


def test_the_cluster_of_a_case() -> None:
    raw = RawRecord({"id": "a", "kind": "vector", "question": "q?", "ground_truth": "x",
                     "cluster": "conv-1", "source": "handbook.pdf"}, 3)
    case = build_case(raw, Path("cases.yaml"))
    assert case.cluster == "conv-1" and case.cluster_value() == "conv-1"
    assert case.cluster_value("source") == "handbook.pdf"
    assert case.cluster_value("category") is None


def test_ragbench_cluster_by_resamples_by_that_field(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 30, ini="[pytest]\nragbench_cluster_by = doc_type\n")
    result = project.runpytest("--ragbench")
    result.assert_outcomes(passed=30)
    data = project.results()
    cell = data["metrics"]["toy"]["token_f1"]
    assert cell["n"] == 30 and cell["n_clusters"] == 2  # pdf and html: t with 1 df
    assert cell["ci_method"] == "t"
    assert data["config"]["cluster_by"] == "doc_type"
    result.stdout.fnmatch_lines(["toy * token_f1 * 30 * t, 2 clusters *"])
