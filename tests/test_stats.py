"""Statistics against scipy, a published worked example and a coverage simulation."""

from __future__ import annotations

import csv
import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_ragbench.metrics import Unscored
from pytest_ragbench.stats import core as stats
from tests.conftest import oracle_file

RNG = np.random.default_rng(20240611)
SKEWED = RNG.beta(2, 5, 300)
BINARY = (RNG.random(150) < 0.7).astype(float)


# ---------------------------------------------------------------- summaries and intervals


def test_summary_is_n_mean_and_sample_std() -> None:
    summary = stats.summarize(SKEWED)
    assert summary.n == 300
    assert summary.mean == pytest.approx(SKEWED.mean(), abs=1e-15)
    assert summary.std == pytest.approx(SKEWED.std(ddof=1), abs=1e-15)
    assert stats.summarize([0.4]) == stats.Summary(1, 0.4, 0.0)


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_ci_is_scipy_bootstrap_with_the_same_seed(method: str) -> None:
    ci = stats.bootstrap_ci(SKEWED, method=method, seed=11)  # type: ignore[arg-type]
    expected = sps.bootstrap((SKEWED,), np.mean, method=method, n_resamples=10_000,
                             rng=np.random.default_rng(11)).confidence_interval
    assert (ci.low, ci.high) == (pytest.approx(expected.low, abs=1e-12),
                                 pytest.approx(expected.high, abs=1e-12))
    assert ci.method == method and ci.n == 300 and ci.confidence == 0.95
    assert ci.low < ci.mean < ci.high


def test_bootstrap_ci_is_reproducible_and_seed_dependent() -> None:
    assert stats.bootstrap_ci(SKEWED, seed=3) == stats.bootstrap_ci(SKEWED, seed=3)
    assert stats.bootstrap_ci(SKEWED, seed=3) != stats.bootstrap_ci(SKEWED, seed=4)


def test_t_ci_matches_scipy_t_interval() -> None:
    ci = stats.t_ci(SKEWED, confidence=0.9)
    low, high = sps.t.interval(0.9, len(SKEWED) - 1, loc=SKEWED.mean(), scale=sps.sem(SKEWED))
    assert (ci.low, ci.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_degenerate_samples_give_point_intervals_not_nan() -> None:
    for ci in (stats.bootstrap_ci([0.5]), stats.bootstrap_ci([1.0] * 40), stats.t_ci([2.0] * 3),
               stats.batch_bootstrap_ci([[0.0] * 7])[0]):
        assert ci.low == ci.mean == ci.high
    nearly = stats.bootstrap_ci([0.0] * 199 + [1.0])
    assert all(math.isfinite(v) for v in (nearly.low, nearly.high))
    assert nearly.low <= nearly.mean <= nearly.high


def test_undefined_bca_falls_back_to_the_percentile_interval() -> None:
    """With 3 resamples that all exceed the estimate, z0 is infinite and BCa is NaN."""
    data = [0.0, 0.0, 0.0, 0.0, 1.0]
    single = stats.bootstrap_ci(data, n_resamples=3, seed=41)
    batch = stats.batch_bootstrap_ci([data], n_resamples=3, seed=41)[0]
    assert single.method == batch.method == "percentile"
    assert (single.low, single.high) == (batch.low, batch.high) == (0.4, 0.4)


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([0.1, float("nan")], "NaN or infinite value.*position 1"),
        ([0.1, Unscored("no judge configured")], "drop unscored values"),
        (["0.3", "high"], "plain numbers"),
        ([], "at least one value"),
        ([[0.1, 0.2]], "flat sequence"),
    ],
)
def test_unscored_and_nan_never_enter_a_mean(scores: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stats.bootstrap_ci(scores)


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError, match="confidence"):
        stats.bootstrap_ci(SKEWED, confidence=95)
    with pytest.raises(ValueError, match="method"):
        stats.bootstrap_ci(SKEWED, method="basic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cell 1 has no scores"):
        stats.batch_bootstrap_ci([[0.1, 0.2], []])


# ---------------------------------------------------------------- batched bootstrap


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_batch_of_one_cell_equals_scipy_bootstrap_exactly(method: str) -> None:
    """Same seed, same index draws: the batched path reproduces scipy to float precision."""
    ours = stats.batch_bootstrap_ci([SKEWED], method=method, seed=5)[0]  # type: ignore[arg-type]
    expected = sps.bootstrap((SKEWED,), np.mean, method=method, n_resamples=10_000,
                             rng=np.random.default_rng(5)).confidence_interval
    assert ours.low == pytest.approx(expected.low, abs=1e-12)
    assert ours.high == pytest.approx(expected.high, abs=1e-12)


def test_batch_matches_scipy_within_monte_carlo_error() -> None:
    """Cells of mixed sizes and shapes vs scipy run cell by cell with other seeds.

    With 10,000 resamples an endpoint's Monte-Carlo standard error is about 0.7% of
    the interval width, so two independent runs differ by about 1%; 5% is 5 SE. Means of
    discrete data live on a lattice (steps of gap / n), so an endpoint may also move by
    a lattice step or two between runs.
    """
    rng = np.random.default_rng(1)
    cells = [rng.beta(0.5, 0.5, 120), rng.random(120), (rng.random(300) < 0.2) * 1.0,
             rng.exponential(1.0, 60), rng.normal(0.0, 1.0, 300), rng.random(45)]
    ours = stats.batch_bootstrap_ci(cells, seed=9)
    for i, (cell, interval) in enumerate(zip(cells, ours, strict=True)):
        ref = sps.bootstrap((cell,), np.mean, n_resamples=10_000,
                            rng=np.random.default_rng(100 + i)).confidence_interval
        width = ref.high - ref.low
        step = np.diff(np.unique(cell)).min() / len(cell)
        allowed = 0.05 * width + 2 * step
        assert interval.mean == pytest.approx(cell.mean(), abs=1e-12)
        assert abs(interval.low - ref.low) < allowed, i
        assert abs(interval.high - ref.high) < allowed, i
        assert interval.n == len(cell)


def test_bca_math_equals_scipy_on_scipys_own_resamples() -> None:
    """Feed scipy's bootstrap distribution to our vectorised BCa: identical interval."""
    result = sps.bootstrap((SKEWED,), np.mean, n_resamples=4_000, confidence_level=0.9,
                           rng=np.random.default_rng(2))
    interval = stats._intervals(SKEWED[:, None], result.bootstrap_distribution[None, :],
                                0.9, "bca")[0]
    assert interval.low == pytest.approx(result.confidence_interval.low, abs=1e-12)
    assert interval.high == pytest.approx(result.confidence_interval.high, abs=1e-12)


def test_bootstrap_ci_of_bernoulli_mean_covers_the_truth_about_95_percent() -> None:
    rng = np.random.default_rng(2024)
    samples = (rng.random((400, 200)) < 0.7).astype(float)
    intervals = stats.batch_bootstrap_ci(list(samples), seed=1)
    covered = sum(ci.low <= 0.7 <= ci.high for ci in intervals)
    assert 0.92 <= covered / 400 <= 0.98


# ---------------------------------------------------------------- paired tests


def _sakai(name: str) -> np.ndarray:
    with oracle_file("elinor", "sakai-book", name).open() as handle:
        return np.array([float(row["ndcg@5"]) for row in csv.DictReader(handle)])


def test_paired_t_test_reproduces_sakais_worked_example() -> None:
    expected = json.loads(oracle_file("elinor", "sakai-book", "expected_stats.json")
                          .read_text())["paired_t_test_X_minus_Y"]
    result = stats.paired_test(_sakai("X.csv"), _sakai("Y.csv"), test="t")
    assert result.n == expected["n"] == 20
    assert round(result.diff_mean, 3) == round(expected["mean_diff"], 3)
    assert round(result.statistic, 3) == expected["t_stat"]
    assert round(result.p_value, 3) == expected["p_value_two_sided"]
    assert round(result.effect_size, 3) == expected["effect_size_mean_over_sd"]
    assert round(result.diff_ci_high - result.diff_mean, 4) == expected["margin_of_error_95"]
    assert result.diff_mean - result.diff_ci_low == pytest.approx(
        result.diff_ci_high - result.diff_mean, abs=1e-12)


def test_t_and_wilcoxon_equal_scipy() -> None:
    x, y = _sakai("X.csv"), _sakai("Z.csv")
    t = stats.paired_test(x, y, test="t")
    ref = sps.ttest_rel(x, y)
    assert (t.statistic, t.p_value) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue))
    w = stats.paired_test(x, y, test="wilcoxon")
    ref_w = sps.wilcoxon(x, y)
    assert (w.statistic, w.p_value) == (pytest.approx(ref_w.statistic),
                                        pytest.approx(ref_w.pvalue))
    assert w.effect_size == pytest.approx((x - y).mean() / (x - y).std(ddof=1))


def test_randomization_test_is_exact_for_small_n() -> None:
    """Enumerate all 2^10 sign flips by hand and compare the two-sided p-value."""
    rng = np.random.default_rng(4)
    a = rng.random(10)
    b = a - rng.normal(0.15, 0.2, 10)
    diffs = a - b
    observed = diffs.mean()
    null = np.array([(diffs * signs).mean()
                     for signs in itertools.product([1, -1], repeat=10)])
    tol = 1e-12
    p_greater = np.mean(null >= observed - tol)
    p_less = np.mean(null <= observed + tol)
    result = stats.paired_test(a, b, test="randomization")
    assert result.statistic == pytest.approx(observed)
    assert result.p_value == pytest.approx(min(1.0, 2 * min(p_greater, p_less)))


def test_randomization_test_with_resampling_matches_scipy() -> None:
    x, y = SKEWED[:100], SKEWED[100:200]
    ours = stats.paired_test(x, y, n_resamples=5_000, seed=8)
    ref = sps.permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis),
                               permutation_type="samples", n_resamples=5_000,
                               vectorized=True, rng=np.random.default_rng(8))
    assert ours.p_value == pytest.approx(ref.pvalue)
    ci = stats.bootstrap_ci(x - y, n_resamples=5_000, seed=8)
    assert (ours.diff_ci_low, ours.diff_ci_high) == (ci.low, ci.high)


def test_exact_mcnemar_on_discordant_pairs() -> None:
    a = np.array([1] * 30 + [1] * 12 + [0] * 3 + [0] * 15, dtype=float)
    b = np.array([1] * 30 + [0] * 12 + [1] * 3 + [0] * 15, dtype=float)
    result = stats.paired_test(a, b, test="mcnemar")
    # Two-sided exact binomial: 2 * P(X <= 3 | n=15, p=1/2).
    assert result.p_value == pytest.approx(2 * sps.binom.cdf(3, 15, 0.5))
    assert result.statistic == 3.0
    assert result.diff_mean == pytest.approx(9 / 60)
    with pytest.raises(ValueError, match="pass/fail"):
        stats.paired_test([0.5, 1.0], [1.0, 0.0], test="mcnemar")


@pytest.mark.parametrize("test", ["randomization", "t", "wilcoxon", "mcnemar"])
def test_identical_samples_show_no_difference(test: str) -> None:
    result = stats.paired_test(BINARY, BINARY.copy(), test=test)  # type: ignore[arg-type]
    assert result.p_value == 1.0
    assert result.statistic == 0.0
    assert result.effect_size == 0.0
    assert result.diff_mean == result.diff_ci_low == result.diff_ci_high == 0.0


@pytest.mark.parametrize("test", ["randomization", "wilcoxon", "mcnemar"])
def test_tiny_and_constant_samples_are_defined(test: str) -> None:
    for a, b in [([], []), ([1.0], [0.0]), ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])]:
        result = stats.paired_test(a, b, test=test)  # type: ignore[arg-type]
        values = [result.statistic, result.p_value, result.effect_size, result.diff_mean,
                  result.diff_ci_low, result.diff_ci_high]
        assert not any(math.isnan(v) for v in values), (a, b, result)
        assert 0.0 <= result.p_value <= 1.0
    constant = stats.paired_test([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], test=test)  # type: ignore[arg-type]
    assert constant.effect_size == math.inf
    assert constant.to_dict()["effect_size"] == "inf"


def test_t_test_of_constant_differences() -> None:
    """A constant zero difference: p = 1; a constant non-zero one: p undefined, never 0."""
    assert stats.paired_test([0.3, 0.5], [0.3, 0.5], test="t").p_value == 1.0
    for a, b in [([1.0], [0.0]), ([1.0, 1.0], [0.0, 0.0]), ([0.7, 0.9, 0.2], [0.6, 0.8, 0.1])]:
        result = stats.paired_test(a, b, test="t")
        assert math.isnan(result.p_value), (a, b)
        assert result.to_dict()["p_value"] is None
        assert result.effect_size == math.inf  # 0.1 with float noise is still constant
    # Two different differences: a t-test with one degree of freedom, p in (0, 1).
    assert 0 < stats.paired_test([1.0, 2.0], [0.0, 0.5], test="t").p_value < 1


def test_cohens_d_treats_float_noise_as_no_spread() -> None:
    noisy = [0.1 + 0.2 - 0.3 + 0.1, 0.1, 0.1]  # 0.1 give or take 1e-17
    assert stats.cohens_d(noisy) == math.inf
    assert stats.cohens_d([0.1, 0.2, 0.3]) == pytest.approx(0.2 / 0.1)


def test_paired_inputs_must_pair_up() -> None:
    with pytest.raises(ValueError, match="differ in length: 2 vs 3"):
        stats.paired_test([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="unknown paired test"):
        stats.paired_test([1.0], [1.0], test="anova")  # type: ignore[arg-type]


# ---------------------------------------------------------------- corrections


def test_holm_and_bonferroni_by_hand() -> None:
    raw = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.06 (monotone).
    assert stats.adjust_pvalues(raw) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.adjust_pvalues(raw, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert stats.adjust_pvalues([0.5, 0.9], "bonferroni") == [1.0, 1.0]
    assert stats.adjust_pvalues([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.adjust_pvalues([1.5])
    with pytest.raises(ValueError, match="unknown correction"):
        stats.adjust_pvalues([0.1], "fdr")  # type: ignore[arg-type]


# ---------------------------------------------------------------- power and sample size


def test_paired_power_matches_the_textbook_sample_size() -> None:
    """Cohen / G*Power: d = 0.2, alpha = .05 two-sided needs n = 199 pairs for 80% power."""
    assert stats.paired_power(198, 0.2) < 0.80 <= stats.paired_power(199, 0.2)
    # d = 0.5 needs 34 pairs.
    assert stats.paired_power(33, 0.5) < 0.80 <= stats.paired_power(34, 0.5)


def test_normal_power_is_the_seeds_formula() -> None:
    n, d = 120, 0.3
    seed = sps.norm.cdf(d * math.sqrt(n) - sps.norm.ppf(0.975))
    normal = stats.paired_power(n, d, method="normal")
    assert normal == pytest.approx(seed, abs=1e-3)  # plus the negligible lower tail
    assert stats.paired_power(n, d) < normal
    assert stats.paired_power(1, 0.5) == 0.0


def test_power_table_has_the_seeds_effect_sizes() -> None:
    table = stats.power_table(800)
    assert list(table) == ["d=0.2", "d=0.3", "d=0.5"]
    assert table["d=0.2"] < table["d=0.3"] < table["d=0.5"] <= 1.0
    assert table["d=0.2"] > 0.99


def test_800_samples_give_about_3_5_points_near_one_half() -> None:
    half = stats.proportion_half_width(800)
    assert round(100 * half, 1) == 3.5
    assert stats.sample_size_for_half_width(0.035) == 784 <= 800
    for n in (50, 200, 800, 1000):
        assert stats.sample_size_for_half_width(stats.proportion_half_width(n)) == n
    assert stats.proportion_half_width(500) > 0.04  # ±4.4% at 500 samples
