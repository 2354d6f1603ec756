"""Traffic statistics: windows, the stratified (design-weighted) estimator, drift with Holm."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_ragbench.stats.traffic import (
    Moments,
    allocate,
    drift,
    stratified_estimate,
    stratified_sample,
    welch,
    window_estimate,
    window_of,
)


def test_windows_are_utc_days_iso_weeks_and_months() -> None:
    moment = dt.datetime(2026, 12, 31, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))
    assert window_of(moment, "day") == "2027-01-01"  # 01:30 UTC
    assert window_of(moment, "week") == "2026-W53"
    assert window_of(moment, "month") == "2027-01"
    with pytest.raises(ValueError, match="unknown window"):
        window_of(moment, "year")  # type: ignore[arg-type]


def test_welch_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.7, 0.1, 40), rng.normal(0.65, 0.2, 55)
    delta, low, high, p = welch(Moments.of(a), Moments.of(b))
    reference = scipy_stats.ttest_ind(b, a, equal_var=False)
    assert p == pytest.approx(reference.pvalue, rel=1e-9)
    ci = reference.confidence_interval(0.95)
    assert (delta, low, high) == pytest.approx((b.mean() - a.mean(), ci.low, ci.high))


def test_allocation_is_proportional_with_two_per_window() -> None:
    assert allocate({"a": 100, "b": 300, "c": 3}, 40) == {"a": 10, "b": 28, "c": 2}
    assert sum(allocate({"a": 7, "b": 11, "c": 50}, 13).values()) == 13
    assert allocate({"a": 3, "b": 4}, 50) == {"a": 3, "b": 4}


def test_the_same_seed_draws_the_same_stratified_sample() -> None:
    windows = ["w1"] * 500 + ["w2"] * 1500
    first = stratified_sample(windows, 100, seed=7)
    assert first == stratified_sample(windows, 100, seed=7)
    assert first != stratified_sample(windows, 100, seed=8)
    assert sum(1 for i in first if windows[i] == "w1") in (25, 26)  # proportional


def test_the_design_weighted_estimate_covers_the_traffic_mean() -> None:
    """Seeded simulation: windows of unequal size and mean, a small stratified sample.

    The sample's plain mean is biased (windows are not sampled in proportion when the
    floor of two per window applies); the stratified estimate is not, its standard error
    matches the spread of the estimates, and its interval covers the true mean 95% of
    the time.
    """
    rng = np.random.default_rng(11)
    sizes = {"w1": 3000, "w2": 600, "w3": 80}
    population = {w: rng.beta(a, 2, size) for (w, size), a in zip(
        sizes.items(), (8, 3, 1), strict=True)}
    windows = [w for w, size in sizes.items() for _ in range(size)]
    values = np.concatenate([population[w] for w in sizes])
    truth = values.mean()
    estimates, ses, covered = [], [], 0
    for seed in range(400):
        chosen = stratified_sample(windows, 60, seed=seed)
        strata = [(Moments.of(values[i] for i in chosen if windows[i] == w), sizes[w])
                  for w in sizes]
        estimate = stratified_estimate(strata)
        estimates.append(estimate.mean)
        ses.append(estimate.se)
        covered += estimate.low <= truth <= estimate.high
        assert estimate.population == sum(sizes.values()) and estimate.n == 60
    assert np.mean(estimates) == pytest.approx(truth, abs=0.005)
    assert np.mean(ses) / np.std(estimates) == pytest.approx(1.0, abs=0.12)
    assert 0.92 <= covered / 400 <= 0.98


def test_a_window_sampled_whole_has_no_sampling_error_left() -> None:
    values = [0.2, 0.4, 0.9, 0.5]
    sampled = window_estimate(Moments.of(values), population=4)
    assert sampled.se == pytest.approx(np.std(values, ddof=1) / 2)  # the process view
    half = window_estimate(Moments.of(values[:2]), population=4)
    assert half.se == pytest.approx(np.sqrt(0.5 * np.var(values[:2], ddof=1) / 2))


DIRECTION = {"mean_similarity": 1, "no_results": -1, "latency_ms": -1, "user_feedback": 1,
             "retrieved_count": 0}


def _weeks(rng: np.random.Generator, drop: float) -> dict[str, dict[str, Moments]]:
    moments = {}
    for week in ("W1", "W2", "W3"):
        n = int(rng.integers(150, 250))
        shift = drop if week == "W3" else 0.0
        moments[week] = {
            "mean_similarity": Moments.of(rng.beta(7, 3, n) - shift),
            "no_results": Moments.of(rng.random(n) < 0.1 + shift),
            "latency_ms": Moments.of(rng.lognormal(6, 0.5, n)),
            "user_feedback": Moments.of(rng.random(n // 3) < 0.8 - shift),
            "retrieved_count": Moments.of(rng.integers(0, 6, n)),
        }
    return moments


def test_no_planted_change_flags_drift_in_at_most_5_percent_of_runs() -> None:
    runs, flagged_latest = 300, 0
    for seed in range(runs):
        changes = drift(["W1", "W2", "W3"], _weeks(np.random.default_rng(seed), 0.0),
                        DIRECTION)
        flagged_latest += any(c.significant for c in changes if c.after == "W3")
    assert flagged_latest / runs <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / runs)


def test_a_planted_drop_in_the_last_week_is_flagged_as_worse() -> None:
    changes = drift(["W1", "W2", "W3"], _weeks(np.random.default_rng(5), 0.12), DIRECTION)
    worse = {c.metric for c in changes if c.worse}
    assert {"mean_similarity", "no_results"} <= worse
    assert all(c.after == "W3" for c in changes if c.worse)
    similarity = next(c for c in changes if c.worse and c.metric == "mean_similarity")
    assert similarity.low < -0.12 * 0.5 and similarity.high < 0 and similarity.p_holm < 0.05
