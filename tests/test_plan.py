"""``--ragbench-plan`` and ini ``ragbench_prices``: what deciding the gates takes, and costs.

The plan's claim is checked by seeded simulation: planned from a pilot drawn from a known
distribution, fresh runs of the planned size decide the gate in about 80% of cases, and
runs of half that size in clearly fewer.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pytest_ragbench.config.prices import Price, parse_prices
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.results import plan
from pytest_ragbench.stats import intervals
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

FRESH_RUNS = 300


def decided_share(draw, n: int, bound: float, mode: str, low: float, high: float,
                  seed: int) -> float:
    """The share of fresh runs of ``n`` items whose gate interval excludes the bound."""
    rng = np.random.default_rng(seed)
    cells = [intervals.CellData(list(draw(rng, n)), None, low, high)
             for _ in range(FRESH_RUNS)]
    decided = 0
    for found in intervals.cell_intervals(cells, 0.95, n_resamples=1000, seed=1):
        bottom, top = (found.gate_low, found.gate_high) if mode == "ci-lower" \
            else (found.low, found.high)
        decided += bottom > bound or top < bound
    return decided / FRESH_RUNS


@pytest.mark.parametrize(("name", "draw", "bound", "mode"), [
    ("0/1 at 0.85, ci-lower", lambda rng, n: (rng.random(n) < 0.85).astype(float), 0.75,
     "ci-lower"),
    ("beta(5, 3) scores, mean", lambda rng, n: rng.beta(5, 3, n), 0.58, "mean"),
    ("beta(5, 3) scores, ci-lower", lambda rng, n: rng.beta(5, 3, n), 0.70, "ci-lower"),
])
def test_the_planned_size_decides_the_gate_in_about_80_percent_of_runs(
        name: str, draw, bound: float, mode: str) -> None:
    # A large pilot, so that its mean and spread are those of the distribution: the plan
    # is then checked alone (a small pilot's error moves the plan as it moves any estimate).
    pilot = list(draw(np.random.default_rng(11), 20_000))
    items, method, _ = plan.items_to_decide(pilot, bound, mode, False, 0.0, 1.0)
    assert method == ("binomial" if name.startswith("0/1") else "simulated")
    assert items is not None
    at_plan = decided_share(draw, items, bound, mode, 0.0, 1.0, seed=21)
    at_half = decided_share(draw, max(2, items // 2), bound, mode, 0.0, 1.0, seed=22)
    assert 0.68 <= at_plan <= 0.92, (name, items, at_plan)
    assert at_half < at_plan - 0.15, (name, items, at_half, at_plan)


def test_a_mean_at_the_bound_cannot_be_decided_and_a_constant_needs_the_interval() -> None:
    assert plan.items_to_decide([0.5, 0.7], 0.6, "mean", False)[0] is None
    # Every item passed: no spread, so only the interval's own width decides (Wilson).
    items, method, expect = plan.items_to_decide([1.0] * 20, 0.9, "mean", False, 0.0, 1.0)
    assert expect == "pass" and method == "binomial"
    def lower(n: int) -> float:
        return intervals.cell_interval([1.0] * n, low=0.0, high=1.0).low

    assert lower(items) > 0.9 >= lower(items - 1)  # the smallest n that excludes the bound


def test_prices_parse_and_name_the_bad_line() -> None:
    prices = parse_prices(["gpt-4o-mini = {input = 0.15, output = 0.60}", "",
                           '"Qwen/Qwen2.5-7B" = {input = 0.2, output = 0.4}'])
    assert prices == {"gpt-4o-mini": Price(0.15, 0.6), "Qwen/Qwen2.5-7B": Price(0.2, 0.4)}
    assert prices["gpt-4o-mini"].cost(1_000_000, 500_000) == pytest.approx(0.45)
    with pytest.raises(ConfigError, match=r"line 2 .*input must be a price >= 0"):
        parse_prices(["a = {input = 1, output = 1}", "b = {input = -1, output = 1}"])
    with pytest.raises(ConfigError, match=r"line 1 .*give exactly input and output"):
        parse_prices(["a = {input = 1}"])
    with pytest.raises(ConfigError, match=r"line 1 .*expected 'model = "):
        parse_prices(["a = 1 2"])


PRICED_INI = """[pytest]
ragbench_llm_model = toy-llm
ragbench_prices =
    toy-llm = {input = 2.0, output = 10.0}
"""
GATES = '[tool.ragbench.gates]\n"toy.token_f1" = 0.72\n"toy.exact_match" = 0.2\n'


@pytest.fixture
def pilot(pytester: pytest.Pytester) -> RagbenchProject:
    """A toy pilot of 20 cases with two gates, its generator priced."""
    project = make_toy_project(pytester, 20, pyproject=GATES, ini=PRICED_INI)
    project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    return project


def test_every_run_gives_tokens_and_cost_per_role(pilot: RagbenchProject) -> None:
    results = pilot.results()
    row = results["usage"]["generator"]
    expected = (row["prompt_tokens"] * 2.0 + row["completion_tokens"] * 10.0) / 1e6
    assert row["cost"]["model"] == "toy-llm"
    assert row["cost"]["usd"] == pytest.approx(expected)
    assert row["cost"]["paid_usd"] == pytest.approx(
        expected * (row["calls"] - row["cache_hits"]) / row["calls"])
    assert "cost" not in results["usage"].get("system", {})  # its model has no price
    again = pilot.run("--ragbench", "-p", "no:cacheprovider", "-q")
    again.stdout.fnmatch_lines(["model usage * cost (paid)",
                                f"generator * ${expected:,.4f} (*)"])


def test_the_plan_reads_the_last_run_and_asks_nothing(pilot: RagbenchProject) -> None:
    before = (pilot.report_dir() / "results.json").read_bytes()
    result = pilot.run("--ragbench-plan", "--ragbench-gate=ci-lower", "-p", "no:cacheprovider")
    assert result.ret == 0
    output = result.stdout.str()
    assert (pilot.report_dir() / "results.json").read_bytes() == before  # nothing written
    assert "passed" not in output and "collected" not in output  # no session ran
    rows = {m[0]: m for m in re.findall(
        r"^(toy\.\w+) +(ci-lower) +([\d.]+) +(\d+) +([\d.]+) +(pass|miss) +(\d+) +"
        r"(binomial|simulated|normal approximation)", output,
        re.M)}
    assert set(rows) == {"toy.token_f1", "toy.exact_match"}
    document = pilot.results()
    for name, metric in (("toy.token_f1", "token_f1"), ("toy.exact_match", "exact_match")):
        values = [i["metrics"][metric] for i in document["items"] if i["kind"] == "toy"]
        expected = plan.items_to_decide(values, float(rows[name][2]), "ci-lower", False,
                                        0.0, 1.0)[0]
        assert int(rows[name][6]) == expected and rows[name][3] == "20"
    # The run that decides both: the larger need, one generator call per toy item.
    needed = max(int(r[6]) for r in rows.values())
    per_item = plan.per_item_usage(document, "toy", None)["generator"]
    line = next(x for x in output.splitlines() if x.startswith("generator "))
    calls, prompt, _, cost = line.split()[1:5]
    assert int(calls) == needed
    assert int(prompt) == round(per_item["prompt_tokens"] * needed)
    dollars = (per_item["prompt_tokens"] * 2 + per_item["completion_tokens"] * 10) * needed
    assert cost == f"${dollars / 1e6:,.4f}"


def test_the_plan_gives_items_for_a_target_width(pilot: RagbenchProject) -> None:
    pilot.ini(PRICED_INI + "ragbench_target_width = 0.05\n")
    result = pilot.run("--ragbench-plan", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*items for width*", "toy.token_f1 *",
                                 "items for width: the median 95% CI half-width at most 0.05"])
    values = [i["metrics"]["token_f1"] for i in pilot.results()["items"]]
    width = plan.items_for_width(values, 0.05, 0.0, 1.0)
    assert width is not None and width > 20
    found = intervals.cell_interval(list(np.resize(values, width)), low=0.0, high=1.0)
    assert (found.high - found.low) / 2 <= 0.06  # the pilot's scores repeated: about 0.05


def test_without_a_run_or_with_a_bad_price_the_plan_is_a_clear_error(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 4, pyproject=GATES)
    result = project.run("--ragbench-plan", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: ragbench: --ragbench-plan: no run to plan from:*"])
    project.ini("[pytest]\nragbench_prices =\n    toy-llm = {input = 1}\n")
    bad = project.run("--ragbench", "-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "ragbench_prices line 1" in bad.stderr.str() + bad.stdout.str()
    saved = project.run("--ragbench-plan", "--ragbench-compare=nosuch", "-p",
                        "no:cacheprovider")
    assert saved.ret == pytest.ExitCode.USAGE_ERROR


def test_labels_for_a_calibrated_gate_scale_with_its_standard_error() -> None:
    gate = {"gate": "x.m", "kind": "x", "metric": "faithfulness", "bound": 0.7,
            "direction": "higher", "ppi": {"n_labeled": 50, "ppi_mean": 0.8,
                                           "ppi_ci_low": 0.7, "ppi_ci_high": 0.9}}
    labels, have = plan._labels(gate, False)
    se = 0.1 / 1.959964
    assert have == 50
    assert labels == pytest.approx(50 * (se * (1.959964 + 0.841621) / 0.1) ** 2, abs=1)
    assert json.dumps(plan.GatePlan("g", "k", None, "mean", 1.0, None, 0, "pass", 2,
                                    "simulated").to_dict())
