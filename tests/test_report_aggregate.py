"""The report's numbers, from records built directly (no pytest session)."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.kinds.ragcsv import report as ragcsv_report
from pytest_ragbench.kinds.report_sections import builtin_sections
from pytest_ragbench.render import terminal
from pytest_ragbench.results import document, gates
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.results.runs import Baseline
from pytest_ragbench.stats import core as stats
from tests.conftest import oracle_file
from tests.project import entry_problems, schema_problems


def record(case_id: str, metrics: dict[str, float], *, kind: str = "vector",
           system: str | None = None, status: str = "passed", **extra: Any) -> ItemRecord:
    label = f"{system}-{case_id}" if system else case_id
    return ItemRecord(nodeid=f"cases.yaml::{kind}[{label}]", kind=kind, case_kind=kind,
                      case_id=case_id, file="cases.yaml", line=1, status=status,
                      system=system, metrics=metrics, **extra)


def build(records: list[ItemRecord], baseline: list[ItemRecord] | None = None,
          **settings: Any) -> dict[str, Any]:
    config = RagbenchConfig(rootpath=Path("."), **settings)
    gate_list = gates.parse_gates(config.gates) if config.gates else []
    old = Baseline("0001_base", Path("base.json"), baseline, {}) if baseline is not None \
        else None
    result = document.build(records, config, run={"id": "r", "time": "t"}, components={},
                            baseline=old, gate_list=gate_list,
                            report_sections=builtin_sections)
    assert schema_problems(result) == []  # every document built here follows the schema
    assert entry_problems(result) == []  # and holds the typed entries' objects
    return result


def test_metric_cell_counts_mean_std_and_bca_interval() -> None:
    rng = random.Random(3)
    values = [rng.random() for _ in range(40)]
    records = [record(f"c{i:02d}", {"semantic_similarity": v}) for i, v in enumerate(values)]
    records += [record("u1", {}, unscored={"semantic_similarity": "empty answer"}),
                record("u2", {}, unscored={"semantic_similarity": "empty answer"}),
                record("u3", {}, unscored={"semantic_similarity": "no embedder"})]
    cell = build(records)["metrics"]["vector"]["semantic_similarity"]
    assert cell["n"] == 40 and cell["n_unscored"] == 3
    assert cell["unscored_reasons"] == {"empty answer": 2, "no embedder": 1}
    assert cell["mean"] == pytest.approx(np.mean(values))
    assert cell["std"] == pytest.approx(np.std(values, ddof=1))
    # The same definition as scipy's BCa bootstrap (different draws: within Monte-Carlo error).
    ordered = [v for _, v in sorted((f"c{i:02d}", v) for i, v in enumerate(values))]
    reference = scipy_stats.bootstrap((np.array(ordered),), np.mean, method="BCa",
                                      n_resamples=10_000, rng=np.random.default_rng(1))
    assert cell["ci_low"] == pytest.approx(reference.confidence_interval.low, abs=0.01)
    assert cell["ci_high"] == pytest.approx(reference.confidence_interval.high, abs=0.01)
    assert cell["ci_low"] < cell["mean"] < cell["ci_high"]
    assert cell["threshold"] is None and cell["pass_rate"] is None


def test_numbers_do_not_depend_on_record_order() -> None:
    rng = random.Random(5)
    records = [record(f"c{i:03d}", {"token_f1": rng.random(), "exact_match": float(i % 3 == 0)},
                      fields={"category": "ab"[i % 2]}) for i in range(60)]
    first = build(records)
    shuffled = list(records)
    random.Random(9).shuffle(shuffled)
    again = build(shuffled)
    assert first["metrics"] == again["metrics"]
    assert first["breakdowns"] == again["breakdowns"]


def test_threshold_and_pass_rate_follow_each_items_own_threshold() -> None:
    records = [record("a", {"token_f1": 0.9}, thresholds={"token_f1": 0.5}),
               record("b", {"token_f1": 0.4}, thresholds={"token_f1": 0.5}),
               record("c", {"token_f1": 0.4}, thresholds={"token_f1": 0.3}),  # case override
               record("d", {"token_f1": 0.1}),                               # thresholds: {}
               record("e", {"latency_s": 2.0}, thresholds={"latency_s": 1.5}),
               record("f", {"latency_s": 1.0}, thresholds={"latency_s": 1.5})]
    metrics = build(records)["metrics"]["vector"]
    assert metrics["token_f1"]["threshold"] == 0.5
    assert metrics["token_f1"]["pass_rate"] == pytest.approx(2 / 3)
    assert metrics["latency_s"]["direction"] == "lower"
    assert metrics["latency_s"]["pass_rate"] == pytest.approx(0.5)


def test_breakdowns_by_the_configured_fields_only() -> None:
    records = [record(f"c{i}", {"token_f1": i / 10},
                      fields={"category": "xy"[i % 2], "difficulty": None if i == 0 else "hard",
                              "doc_type": "pdf"}) for i in range(10)]
    result = build(records, breakdown=("category", "difficulty"))
    breakdowns = result["breakdowns"]["vector"]
    assert set(breakdowns) == {"category", "difficulty"}
    assert breakdowns["category"]["x"]["token_f1"]["n"] == 5
    assert breakdowns["category"]["y"]["token_f1"]["mean"] == pytest.approx(0.5)
    assert breakdowns["difficulty"]["hard"]["token_f1"]["n"] == 9  # None is not a value
    # The terminal shows only fields with two or more values.
    titles = [title for title, _ in terminal.breakdown_tables(result)]
    assert len(titles) == 1 and titles[0].startswith("vector by category (mean [95% CI] method")


def test_usage_totals_cache_rate_and_latency_percentiles() -> None:
    latencies = [0.1, 0.2, 0.3, 0.4, 1.0, 2.0]
    records = [
        record("a", {}, usage={"generator": {"calls": 2, "prompt_tokens": 100,
                                             "completion_tokens": 20, "cache_hits": 1,
                                             "latency_s": latencies[:3]},
                               "judge": {"calls": 1, "latency_s": 0.5}}),
        record("b", {}, usage={"generator": {"calls": 3, "prompt_tokens": 50,
                                             "completion_tokens": 10, "cache_hits": 0,
                                             "latency_s": latencies[3:]}}),
        record("c", {}, usage={"calls": 4, "cache_hits": 4}),  # flat form: role "model"
    ]
    usage = build(records)["usage"]
    generator = usage["generator"]
    assert (generator["calls"], generator["prompt_tokens"], generator["completion_tokens"]) \
        == (5, 150, 30)
    assert generator["cache_hit_rate"] == pytest.approx(0.2)
    assert generator["latency_p50_s"] == pytest.approx(np.percentile(latencies, 50))
    assert generator["latency_p95_s"] == pytest.approx(np.percentile(latencies, 95))
    assert usage["judge"]["latency_p50_s"] == pytest.approx(0.5)
    assert usage["model"]["cache_hit_rate"] == 1.0 and usage["model"]["latency_p50_s"] is None


def test_ragcsv_blocks_use_the_ragcsv_quantiles_and_exact_format() -> None:
    accuracy = [100.0, 10.0, 75.0, 55.0]
    times = [702.4, 234.0, 3012.0, 623.0]
    records = [record(f"r{i}", {"accuracy": a, "total_time_ms": t}, kind="ragcsv",
                      thresholds={"accuracy": 75.0})
               for i, (a, t) in enumerate(zip(accuracy, times, strict=True))]
    lines = ragcsv_report.lines(build(records)["ragcsv"])
    # sorted[n * p / 100], the RAGCSV quantiles: with n=4, p25 -> sorted[1], p75 -> sorted[3].
    assert lines == [
        "=== RAGCSV Eval Accuracy (n=4) ===",
        "  min:  10.0%", "  p25:  55.0%", "  p50:  75.0%", "  p75:  100.0%", "  p90:  100.0%",
        "  p99:  100.0%", "  max:  100.0%", "  avg:  60.0%", "  pass (>=75%): 2/4",
        "",
        "=== RAGCSV Eval Total Time (n=4) ===",
        "  min:  234ms", "  p25:  623ms", "  p50:  702ms", "  p75:  3012ms", "  p90:  3012ms",
        "  p99:  3012ms", "  max:  3012ms", "  avg:  1143ms",
    ]


def test_ragcsv_quantiles_on_a_hundred_values() -> None:
    quantiles = ragcsv_report.ragcsv_quantiles([float(v) for v in range(100, 0, -1)])
    assert quantiles == {"min": 1.0, "p25": 26.0, "p50": 51.0, "p75": 76.0, "p90": 91.0,
                         "p99": 100.0, "max": 100.0, "avg": 50.5}


def _sakai(name: str) -> dict[str, float]:
    path = oracle_file("elinor", "sakai-book", f"{name}.csv")
    with path.open() as handle:
        return {row["query_id"]: float(row["ndcg@5"]) for row in csv.DictReader(handle)}


def test_system_comparisons_match_the_sakai_book_example() -> None:
    systems = {name: _sakai(name) for name in "XYZ"}
    records = [record(qid, {"nDCG@5": value}, system=name)
               for name, topics in systems.items() for qid, value in topics.items()]
    result = build(records, systems=("X", "Y", "Z"))
    assert list(result["comparisons"]) == ["X_vs_Y", "X_vs_Z", "Y_vs_Z"]
    x_vs_y = result["comparisons"]["X_vs_Y"]["vector"]["nDCG@5"]
    # Sakai (2015) Table 5.1 as asserted by elinor: mean difference 0.0750, ES 0.473.
    assert x_vs_y["n"] == 20 and x_vs_y["test"] == "randomization"
    assert x_vs_y["delta"] == pytest.approx(0.0750, abs=1e-4)
    assert x_vs_y["effect_size"] == pytest.approx(0.473, abs=1e-3)
    assert x_vs_y["ci_low"] < 0.075 < x_vs_y["ci_high"]
    raw = [result["comparisons"][n]["vector"]["nDCG@5"]["p_value"]
           for n in ("X_vs_Y", "X_vs_Z", "Y_vs_Z")]
    holm = [result["comparisons"][n]["vector"]["nDCG@5"]["p_holm"]
            for n in ("X_vs_Y", "X_vs_Z", "Y_vs_Z")]
    order = sorted(range(3), key=lambda i: raw[i])
    expected, running = [0.0] * 3, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[i]))
        expected[i] = running
    assert holm == pytest.approx(expected)
    # Power of the test used (randomization, as a paired t) at Holm's alpha / 3.
    power = result["power_analysis"]["vector"]
    assert (power["n"], power["test"], power["family"]) == (20, "randomization", 3)
    assert power["alpha"] == pytest.approx(0.05 / 3)
    for name, value in stats.power_table(20, alpha=0.05 / 3).items():
        assert power[name] == pytest.approx(value)
    # Per-system statistics sit beside the pooled ones.
    assert result["metrics"]["vector"]["nDCG@5"]["systems"]["X"]["n"] == 20


def test_baseline_pairs_by_case_and_picks_the_test_that_fits() -> None:
    rng = random.Random(11)
    before = [record(f"c{i:02d}", {"token_f1": 0.5 + rng.random() / 2, "match": 1.0,
                                   "total_time_ms": 500.0}) for i in range(30)]
    after = [record(r.case_id, {"token_f1": r.metrics["token_f1"] - 0.2,
                                "match": float(i % 2), "total_time_ms": 900.0 + i})
             for i, r in enumerate(before[:28])]
    after.append(record("new", {"token_f1": 1.0}))
    result = build(after, baseline=before)
    assert result["baseline"]["paired"] == 28
    assert (result["baseline"]["only_current"], result["baseline"]["only_baseline"]) == (1, 2)
    found = result["comparisons"]["current_vs_baseline"]["vector"]
    assert found["token_f1"]["test"] == "randomization"
    assert found["match"]["test"] == "mcnemar"
    assert found["token_f1"]["delta"] == pytest.approx(-0.2)
    assert found["token_f1"]["worse"] and found["match"]["worse"]
    assert found["total_time_ms"]["worse"]  # slower is worse for a timing...
    regressed = {c["metric"] for c in result["regressions"]}
    assert regressed == {"token_f1", "match"}  # ...but timings never fail a session
    assert result["failures"] == []  # --ragbench-fail-on not given
    failing = build(after, baseline=before, fail_on="regression")["failures"]
    assert len(failing) == 2 and all(line.startswith("regression vector.") for line in failing)
    assert "worse than baseline 0001_base" in failing[0] and "Holm" in failing[0]


def test_unchanged_run_has_no_regression() -> None:
    rng = random.Random(2)
    run = [record(f"c{i:02d}", {"token_f1": rng.random()}) for i in range(30)]
    result = build(run, baseline=run, fail_on="regression")
    comparison = result["comparisons"]["current_vs_baseline"]["vector"]["token_f1"]
    assert comparison["delta"] == 0 and comparison["p_value"] == 1.0
    assert result["failures"] == []


@pytest.mark.parametrize(("table", "expected"), [
    ({"vector.semantic_similarity": 0.6},
     [("vector", "semantic_similarity", (), 0.6)]),
    ({"ragcsv.accuracy[category=x]": 70},
     [("ragcsv", "accuracy", (("category", "x"),), 70.0)]),
    ({"ragcsv": {"accuracy[category=x, difficulty=hard]": 70}},
     [("ragcsv", "accuracy", (("category", "x"), ("difficulty", "hard")), 70.0)]),
    ({"beir.nDCG@10[system=bm25]": 0.3}, [("beir", "nDCG@10", (("system", "bm25"),), 0.3)]),
])
def test_gate_keys(table: dict[str, Any], expected: list[tuple[Any, ...]]) -> None:
    parsed = [(g.kind, g.metric, g.where, g.bound) for g in gates.parse_gates(table)]
    assert parsed == expected


@pytest.mark.parametrize("table", [{"semantic_similarity": 0.6}, {"vector.x[category]": 1},
                                   {"vector.x": "high"}])
def test_bad_gate_keys_are_named(table: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"gate|must be a number"):
        gates.parse_gates(table)


def test_gates_on_mean_and_on_the_pessimistic_ci_bound() -> None:
    rng = random.Random(4)
    records = [record(f"c{i:02d}", {"token_f1": 0.6 + rng.random() * 0.2,
                                    "latency_s": 1.0 + rng.random()},
                      fields={"category": "xy"[i % 2]}) for i in range(30)]
    plain = build(records)["metrics"]["vector"]
    f1, latency = plain["token_f1"], plain["latency_s"]
    between = (f1["ci_low"] + f1["mean"]) / 2
    slow = (latency["ci_high"] + latency["mean"]) / 2
    table = {"vector.token_f1": between, "vector.latency_s": slow,
             "vector.token_f1[category=x]": 0.0, "vector.nothing": 1.0}
    on_mean = build(records, gates=table)
    assert [v["passed"] for v in on_mean["gates"]] == [True, None, True, True]
    assert on_mean["failures"] == []
    on_bound = build(records, gates=table, gate="ci-lower")
    verdicts = {v["gate"]: v for v in on_bound["gates"]}
    assert verdicts["vector.token_f1"]["passed"] is False
    # The gate bound: the more pessimistic of the cell's interval and the betting bound.
    assert verdicts["vector.token_f1"]["value"] == f1["ci_gate_low"] <= f1["ci_low"]
    assert verdicts["vector.latency_s"]["passed"] is False  # upper bound for a timing
    assert verdicts["vector.latency_s"]["value"] == latency["ci_gate_high"] == latency["ci_high"]
    assert verdicts["vector.nothing"]["passed"] is None
    line = next(f for f in on_bound["failures"] if "token_f1 >=" in f)
    assert line.startswith(f"gate vector.token_f1 >= {between:g}: MISSED (95% CI lower bound")
    assert "n=30" in line and "95% CI [" in line


def test_ci_lower_applies_item_thresholds_in_aggregate() -> None:
    records = [record(f"c{i}", {"match": float(i != 0)}, kind="sql_ground_truth",
                      thresholds={"match": 1.0}) for i in range(8)]
    on_bound = build(records, gate="ci-lower")
    (verdict,) = on_bound["gates"]
    assert verdict["source"] == "threshold" and verdict["passed"] is False
    assert on_bound["failures"][0].startswith("threshold sql_ground_truth.match >= 1: MISSED")
    assert build(records)["gates"] == []  # on the mean, thresholds stay per item


def test_gates_apply_to_each_system() -> None:
    records = [record(f"c{i}", {"token_f1": 0.9 if s == "good" else 0.2}, system=s)
               for s in ("good", "bad") for i in range(5)]
    result = build(records, systems=("good", "bad"), gates={"vector.token_f1": 0.5})
    assert [(v["system"], v["passed"]) for v in result["gates"]] == [("good", True),
                                                                     ("bad", False)]
    assert result["failures"][0].startswith("gate vector.token_f1 [system=bad] >= 0.5: MISSED")


def test_results_document_has_the_spec_keys_and_no_nan() -> None:
    records = [record("a", {"token_f1": math.nan}), record("b", {"token_f1": 0.5}),
               record("lost", {}, status="lost")]
    result = build(records)
    for key in ("schema_version", "run", "config", "metrics", "breakdowns", "comparisons",
                "items"):
        assert key in result
    cell = result["metrics"]["vector"]["token_f1"]
    assert {"n", "n_unscored", "mean", "ci_low", "ci_high", "std", "threshold",
            "pass_rate"} <= set(cell)
    # The lost item counts as unscored too; one value has no interval.
    assert (cell["n"], cell["n_unscored"]) == (1, 2)
    assert cell["unscored_reasons"] == {"item lost (its worker crashed)": 1,
                                        "not a finite number": 1}
    assert cell["ci_low"] is cell["ci_high"] is cell["ci_95"] is cell["ci_method"] is None
    assert cell["ci_note"] == "n too small"
    assert result["counts"]["vector"]["all"]["lost"] == 1
