"""The report's ``judge`` section (unscored limit, self-consistency) and inconclusive items."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.metrics.registry import Unscored
from pytest_ragbench.metrics.repeated import (
    JudgeSettings,
    combine,
    inconclusive,
    interval,
    sample_sd,
)
from pytest_ragbench.results import judging
from pytest_ragbench.results.records import ItemRecord

NO_STATEMENTS = "the judge found no statements in the answer (faithfulness undefined)"


def record(case: str, value: float | None, samples: list[Any], *, reason: str = "",
           threshold: float | None = None, kind: str = "ragas",
           metric: str = "faithfulness", **judge: Any) -> ItemRecord:
    return ItemRecord(
        nodeid=f"f::{kind}[{case}]", kind=kind, case_kind=kind, case_id=case, file="f",
        line=1, status="passed", metrics={} if value is None else {metric: value},
        unscored={metric: reason} if value is None else {},
        thresholds={} if threshold is None else {metric: threshold},
        judge={"metrics": [metric], "samples": {metric: samples},
               "n_samples": len(samples), **judge})


def settings(**kw: Any) -> RagbenchConfig:
    from pathlib import Path

    return RagbenchConfig(rootpath=Path("."), **kw)


def test_more_unscored_than_the_limit_is_one_failing_line() -> None:
    records = [record("a", 0.5, [0.5]),
               record("b", None, [NO_STATEMENTS], reason=NO_STATEMENTS),
               record("c", None, ["x"], reason="judge call to model 'm': reply is not one JSON "
                                               "object: 'Sure! {\"a\": 1}'"),
               record("d", None, ["y"], reason="judge call to model 'm': reply is not one JSON "
                                               "object: 'I cannot.'"),
               record("e", 1.0, [1.0])]
    part = judging.section(records, settings())
    entry = part["metrics"]["ragas"]["faithfulness"]
    assert (entry["n_items"], entry["n_scored"], entry["n_unscored"]) == (5, 2, 3)
    assert entry["unscored_share"] == pytest.approx(0.6) and entry["over_limit"]
    # the two refused replies count as one reason, their quotes folded
    assert entry["top_reason"] == "judge call to model 'm': reply is not one JSON object: '…'"
    assert entry["top_reason_count"] == 2
    assert entry["reasons"] == {entry["top_reason"]: 2, NO_STATEMENTS: 1}
    assert part["failures"] == [
        "judged metric ragas.faithfulness: 3/5 items unscored (60.0%), more than "
        "--ragbench-max-unscored 0.2; most common (2): judge call to model 'm': reply is not "
        "one JSON object: 'Sure! {\"a\": 1}'"]
    assert judging.section(records, settings(max_unscored=0.6))["failures"] == []


def test_items_the_judge_was_not_asked_about_do_not_count() -> None:
    asked = record("a", 0.5, [0.5])
    not_asked = ItemRecord(nodeid="f::ragas[b]", kind="ragas", case_kind="ragas",
                           case_id="b", file="f", line=1, status="passed",
                           unscored={"faithfulness": "no judge configured"})
    part = judging.section([asked, not_asked], settings())
    assert part["metrics"]["ragas"]["faithfulness"]["n_items"] == 1
    assert judging.section([not_asked], settings()) == {
        "max_unscored": 0.2, "samples": 1, "temperature": 0.0, "inconclusive_policy": "pass",
        "metrics": {}, "failures": []}


def test_self_consistency_from_the_samples() -> None:
    records = [record("a", 0.5, [0.4, 0.5, 0.6], threshold=0.45),  # flips at 0.45
               record("b", 0.9, [0.9, 0.9, 0.9], threshold=0.45),  # steady
               record("c", 0.2, [0.1, 0.3, "the judge failed"], threshold=0.45),
               record("d", 0.7, [0.7])]  # one scored sample: no spread to measure
    part = judging.section(records, settings(judge_samples=3))
    entry = part["metrics"]["ragas"]["faithfulness"]
    assert entry["n_sd_items"] == 3
    assert entry["within_item_sd"] == pytest.approx((0.1 + 0 + 0.1414213562) / 3)
    assert entry["verdict_flip_share"] == pytest.approx(1 / 3) and entry["n_verdict_items"] == 3
    assert part["temperature"] == 0.7 and part["samples"] == 3


def test_a_gate_stands_in_for_a_missing_item_threshold() -> None:
    records = [record("a", 0.5, [0.4, 0.6]), record("b", 0.9, [0.85, 0.95])]
    gates = {"ragas.faithfulness": 0.5, "ragas.faithfulness[category=x]": 0.9}
    entry = judging.section(records, settings(gates=gates))["metrics"]["ragas"]["faithfulness"]
    assert entry["verdict_flip_share"] == 0.5 and entry["n_verdict_items"] == 2


def test_the_terminal_block() -> None:
    records = [record("a", 0.5, [0.4, 0.6], inconclusive={"faithfulness": "..."}),
               record("b", None, ["z", "z"], reason="z")]
    document = {"judge": judging.section(records, settings(judge_samples=2))}
    lines = judging.lines(document)
    assert lines[0] == ("judged metrics (unscored limit 0.2; 2 samples per item at "
                        "temperature 0.7, inconclusive items pass):")
    assert lines[1].split() == ["judged", "metric", "items", "scored", "unscored", "share",
                                "samples", "within-item", "sd", "verdict", "flips",
                                "inconclusive", "most", "common", "reason"]
    assert lines[2].split() == ["ragas.faithfulness", "2", "1", "1", "50.0%", "2", "0.141",
                                "-", "1", "z"]
    assert judging.lines({"judge": {"metrics": {}}}) == []
    json.dumps(document)  # JSON-safe


@pytest.mark.parametrize(("samples", "threshold", "expected"), [
    ([0.7, 0.75, 0.8], 0.75, True),  # the threshold sits in the middle
    ([0.9, 0.95, 1.0], 0.75, False),  # clearly above
    ([0.1, 0.12, 0.14], 0.75, False),  # clearly below
    ([0.75, 0.75, 0.75], 0.75, False),  # no spread: the samples agree
    ([0.7, 0.8], 0.75, False),  # two samples asked: too few for a verdict
    ([0.7, 0.8, "failed"], 0.75, True),  # three asked, two scored
])
def test_inconclusive_needs_three_samples_and_the_threshold_inside(
        samples: list[Any], threshold: float, expected: bool) -> None:
    judge = {"samples": {"accuracy": samples}, "n_samples": len(samples)}
    found = inconclusive(judge, {"accuracy": threshold})
    assert bool(found) is expected
    if expected:
        low, high = interval([float(v) for v in samples if not isinstance(v, str)])
        assert found["accuracy"].startswith(
            f"accuracy: inconclusive, threshold >= {threshold:g} lies inside the judge "
            f"interval [{low:.4g}, {high:.4g}]")


def test_the_interval_is_the_t_interval() -> None:
    from scipy import stats

    values = [70.0, 75.0, 80.0]
    low, high = interval(values)
    expected = stats.t.interval(0.95, 2, loc=75, scale=stats.sem(values))
    assert (low, high) == pytest.approx(expected)
    assert sample_sd(values) == 5.0 and sample_sd([1.0]) == 0.0


def test_combining_samples() -> None:
    assert combine([0.5, Unscored("x"), 1.0]) == 0.75
    assert combine([Unscored("a"), Unscored("b"), Unscored("a")]) == Unscored("a (2 of 3 samples)")
    assert combine([Unscored("a")]) == Unscored("a")
    assert JudgeSettings.from_config(settings(judge_samples=3)) == JudgeSettings(3, 0.7)
    assert JudgeSettings.from_config(settings(judge_samples=3, judge_temperature=0.2)) == (
        JudgeSettings(3, 0.2))
    assert JudgeSettings.from_config(None) == JudgeSettings(1, 0.0)


@pytest.mark.parametrize(("flags", "message"), [
    (("--ragbench-max-unscored", "1.5"), "--ragbench-max-unscored must be a share from 0 to 1"),
    (("--ragbench-judge-samples", "0"), "--ragbench-judge-samples must be at least 1"),
    (("--ragbench-judge-temperature", "hot"), "--ragbench-judge-temperature must be a number"),
    (("--ragbench-inconclusive", "maybe"), "--ragbench-inconclusive must be 'pass' or 'fail'"),
])
def test_bad_option_values_are_clear_errors(pytester: pytest.Pytester, flags: tuple[str, ...],
                                            message: str) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--ragbench", "-p", "no:cacheprovider", *flags)
    assert result.ret != pytest.ExitCode.OK
    assert message in result.stderr.str() + result.stdout.str()


def test_options_from_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nragbench_max_unscored = 0.5\nragbench_judge_samples = 3\n"
                     "ragbench_inconclusive = fail\n")
    pytester.makeconftest("""
        def test_settings(ragbench_config):
            assert ragbench_config.max_unscored == 0.5
            assert ragbench_config.judge_samples == 3
            assert ragbench_config.judge_temperature is None
            assert ragbench_config.inconclusive == "fail"
    """)
    pytester.makepyfile(test_x="from conftest import test_settings  # noqa: F401\n")
    result = pytester.runpytest("--ragbench", "-p", "no:cacheprovider", "test_x.py")
    result.assert_outcomes(passed=1)
